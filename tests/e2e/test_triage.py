"""python3 -m ljgdb triage on kernel cores of testprogs/lua/crash.lua:
three crash sites (a NULL read in two functions, SIGSEGV; ffi.C.abort(),
SIGABRT), each core written by the kernel as the program died.  The
program recorded, with debug.getinfo, the Lua frames of the line it
crashed on; the kernel's exit status gives the signal; gdb names the
innermost C frame.  Some cores are compressed as systemd-coredump stores
them (zstd, under its file name), or with lz4 and xz, by the real tools.
The groups' counts, signatures and times must be those; `lbt --json` in
gdb gives the same signature; what is not a core gets one line."""
import json
import os
import re
import random
import shutil
import signal as signals
import subprocess
import sys
import time

import pytest

from support import moments
from support.stop import LOADER, LUA_DIR, ROOT, chunk_display, manifest, read_expected, run_gdb

PROGRAM = os.path.join(LUA_DIR, "crash.lua")
# (site, how many cores, the signal it dies of, where: in LuaJIT's own code
# (the FFI's conversion reads the NULL pointer) or in the C library the
# Lua code called through the FFI (abort))
SITES = (("read_a", 3, "SIGSEGV", "vm"), ("read_b", 2, "SIGSEGV", "vm"),
         ("abort", 1, "SIGABRT", "libc"))
# systemd-coredump's name for a core: core.COMM.UID.BOOT_ID.PID.USEC.zst
SYSTEMD = "core.host.0.0123456789abcdef0123456789abcdef.4242.1764142800000000.zst"


def crash(build, site, work):
    """Run the program to its crash in work with cores on: (its signal's
    name, the Lua frames it recorded as lbt prints them, the core)."""
    os.makedirs(work)
    exp = os.path.join(work, "expected.txt")
    p = subprocess.run(["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh", build["host"],
                        PROGRAM, exp, site], cwd=work, env=dict(os.environ, **moments._env(build)),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    assert p.returncode < 0, p.returncode
    rec = [r for r in read_expected(exp) if r[0] == "frames"][0][1:]
    frames = ["%s:%s" % (chunk_display(rec[i]), rec[i + 1]) for i in range(0, len(rec), 2)]
    core = os.path.join(work, "core")
    assert os.path.exists(core), os.listdir(work)
    return {6: "SIGABRT", 11: "SIGSEGV"}[-p.returncode], frames, core


def triage(args):
    p = subprocess.run([sys.executable, "-m", "ljgdb", "triage"] + args, cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def gdb_view(build, core):
    """(gdb's name of the core's innermost frame, lbt --json's signature
    in gdb)."""
    out = run_gdb(["-ex", "source " + LOADER, "-ex",
                   "python print('@@F0 %s' % gdb.newest_frame().name())",
                   "-ex", "echo @@LBT\\n", "-ex", "lbt --json", build["host"], core])
    f0 = re.search(r"^@@F0 (\S+)$", out, re.M).group(1)
    doc = json.loads(out.split("@@LBT\n", 1)[1])
    return f0, doc["signature"]


@pytest.mark.parametrize("variant", ["r21-gc64", "or-x64"])
def test_cores_grouped_by_signature(variant, tmp_path):
    why = moments.kernel_cores_possible()
    if why:
        pytest.skip(why)
    for tool in ("zstd", "lz4", "xz"):
        if shutil.which(tool) is None:
            pytest.skip("no %s program (testprogs/install-deps.sh installs it)" % tool)
    build = manifest()[variant]
    store = tmp_path / "store"
    truth = {}
    for site, n, _, _ in SITES:
        for i in range(n):
            sig, frames, core = crash(build, site, str(tmp_path / "runs" / ("%s-%d" % (site, i))))
            truth.setdefault(site, []).append((sig, frames, core))
    os.makedirs(str(store / "plain"))
    # Plain cores, one of each site; the others compressed by the real tools.
    for site, cores in truth.items():
        shutil.copy(cores[0][2], str(store / "plain" / ("core." + site)))
    (store / "plain" / "README").write_text("not a core\n")
    zst = str(store / SYSTEMD)
    subprocess.run(["zstd", "-q", truth["read_b"][1][2], "-o", zst], check=True)
    subprocess.run(["lz4", "-q", truth["read_a"][1][2], str(store / "a1.lz4")], check=True)
    with open(str(store / "a2.xz"), "wb") as f:
        subprocess.run(["xz", "-c", truth["read_a"][2][2]], stdout=f, check=True)
    junk = str(tmp_path / "junk")
    with open(junk, "w") as f:
        f.write("no core\n")

    code, out, err = triage(["--json", str(store), junk])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cores"] == 7 and doc["skipped"] == 1, doc
    assert doc["unreadable"] == [{"path": junk, "error": "neither an ELF core nor a zstd, lz4 or "
                                                         "xz file"}]
    assert [g["count"] for g in doc["groups"]] == [3, 2, 1]
    by_count = {g["count"]: g for g in doc["groups"]}
    for site, n, signal, where in SITES:
        g = by_count[n]
        sig, frames, core = truth[site][0]
        assert sig == signal
        s = g["signature"]
        assert s["signal"] == signal, s
        f0, gdb_sig = gdb_view(build, core)
        if where == "vm":
            # gdb's innermost frame is LuaJIT's own C: folded out.
            assert s["c_frame"] is None and f0.startswith("lj_"), (s, f0)
        else:
            # (glibc's internal alias named as its function: __GI_kill as kill)
            assert s["c_frame"] == re.sub(r"^__GI_", "", f0), (s, f0)
        # The Lua frames: the innermost ones the program recorded, after
        # the builtin (ffi's __index or __call) the crash is inside.
        lua = [t for t in s["lua"] if not t.startswith("[")]
        assert lua == frames[:len(lua)] and len(lua) >= 2, (s["lua"], frames)
        assert s == gdb_sig, (s, gdb_sig)
        for line in frames:
            assert line in g["backtrace"], (line, g["backtrace"])
        assert g["programs"] == {build["host"]: n}
    # systemd's name carries the time (microseconds): the first of its group.
    assert by_count[2]["first"] == "2025-11-26 07:40:00 UTC", by_count[2]
    # The text says the same, one group a block.
    code, text, _ = triage([str(store)])
    assert code == 0
    assert text.split("\n")[0] == \
        "6 cores: 3 signatures, 0 unreadable; 1 other file passed over"
    for i, g in enumerate(doc["groups"], 1):
        assert "#%d  %d core%s  %s" % (i, g["count"], "" if g["count"] == 1 else "s",
                                       g["signature"]["key"]) in text.split("\n")


def test_bad_input(tmp_path):
    big = str(tmp_path / "big.xz")
    import lzma
    with lzma.open(big, "wb") as f:
        f.write(b"\x7fELF" + b"\0" * 12 + b"\x04\x00" + b"\0" * 5000)
    code, out, err = triage(["--max-size", "1000", big])
    assert code == 1
    assert out.strip().split("\n")[-1] == ("unreadable: %s: it unpacks to more than 1000 bytes "
                                           "(the limit: --max-size)" % big)
    for args, line in ((["--max-size", "x", big], "--max-size takes a number of bytes, not 'x'"),
                       ([], "name the cores, or the directories that hold them"),
                       (["--frames"], "'--frames' is not an option of triage"),
                       ([str(tmp_path / "none")], "'%s' does not exist" % (tmp_path / "none"))):
        code, out, err = triage(args)
        assert code == 2 and err.startswith("ljgdb triage: %s; usage: " % line), err
        assert "\n" not in err.rstrip("\n") and "Traceback" not in err


def test_stripped_crash_in_the_vm(tmp_path, monkeypatch):
    """A stripped build (the release built with -O3, its layout from the
    library) crashes inside a function of its own that no symbol names:
    code of the file that holds LuaJIT, so the VM's (the unstripped file's
    symbol table, nm, names an lj_ function there, where gdb names it with
    the unstripped file): the signature has no C frame, the same from the
    core reader (triage), gdb and lldb on the stripped file.  (A nameless
    frame in another file is named by file and address: test_signature.)"""
    why = moments.kernel_cores_possible()
    if why:
        pytest.skip(why)
    build = manifest()["r21-O3"]
    stripped = str(tmp_path / "host")
    subprocess.run(["strip", "-o", stripped, build["host"]], check=True)
    monkeypatch.setenv("LJGDB_PROFILES", "")        # (gdb, lldb and triage inherit it)
    sig, frames, core = crash(dict(build, host=stripped), "read_a", str(tmp_path / "run"))
    code, out, err = triage(["--json", core])
    assert code == 0, err
    (g,) = json.loads(out)["groups"]
    s = g["signature"]
    assert s["c_frame"] is None and s["signal"] == sig, s
    assert s["key"].startswith("%s in the VM | " % sig), s
    # The function there, by the unstripped file (the same build-id).
    f0, _ = gdb_view(build, core)
    nm = subprocess.run(["nm", build["host"]], stdout=subprocess.PIPE,
                        check=True).stdout.decode()
    assert f0.startswith("lj_") and [ln for ln in nm.splitlines() if ln.endswith(" " + f0)], f0
    # gdb on the stripped file, and lldb where there is one.
    _, gdb_sig = gdb_view(dict(build, host=stripped), core)
    assert gdb_sig == s, (gdb_sig, s)
    from test_lldb import lldb_binary, lldb_commands
    if lldb_binary() is not None:
        (text, error), = lldb_commands("%s --core %s" % (stripped, core), ["lbt --json"],
                                       str(tmp_path))
        assert error is None, error
        assert json.loads(text)["signature"] == s, text


WATCHDOG = os.path.join(LUA_DIR, "watchdog.lua")


def watchdog_core(build, jit, delay, work):
    """watchdog.lua (jit "on" or "off") killed with SIGABRT `delay` s after
    it is ready, in work with cores on: (the Lua frames it recorded, as
    lbt prints them, the core)."""
    os.makedirs(work)
    exp = os.path.join(work, "expected.txt")
    p = subprocess.Popen(["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh", build["host"],
                          WATCHDOG, exp, jit], cwd=work,
                         env=dict(os.environ, **moments._env(build)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(exp) and any(r == ["ready"] for r in read_expected(exp)):
                break
            time.sleep(0.02)
        time.sleep(delay)
        p.send_signal(signals.SIGABRT)
        assert p.wait(60) == -signals.SIGABRT
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    frames = ["%s:%s" % (chunk_display(r[1]), r[2]) for r in read_expected(exp)
              if r[0] == "frame"]
    core = os.path.join(work, "core")
    assert os.path.exists(core), os.listdir(work)
    return frames, core


@pytest.mark.parametrize("variant", ["r21-gc64", "deb-x64"])
def test_one_site_killed_anywhere_is_one_group(variant, tmp_path):
    """A watchdog's SIGABRT at random moments of one busy Lua site, in the
    interpreter (jit off) and in a trace (jit on), with the collector and
    string interning running from it: the cores' innermost machine frames
    differ (gdb names a bytecode handler, the collector's or the
    allocator's functions, or nothing in a trace's code), and triage makes
    one group of them, whose signature has no C frame ("the VM") and the
    Lua frames the program recorded."""
    why = moments.kernel_cores_possible()
    if why:
        pytest.skip(why)
    build = manifest()[variant]
    rnd = random.Random(4242)
    store = tmp_path / "store"
    os.makedirs(str(store))
    truth, firsts = set(), set()
    n = 0
    for jit in ("off", "on"):
        for i in range(5):
            frames, core = watchdog_core(build, jit, rnd.uniform(0.05, 0.4),
                                         str(tmp_path / "runs" / ("%s-%d" % (jit, i))))
            truth.add(tuple(frames[:3]))
            shutil.copy(core, str(store / ("core.%d" % n)))
            n += 1
            out = run_gdb(["-ex", "python print('@@F0 %s' % gdb.newest_frame().name())",
                           build["host"], core])
            firsts.add(re.search(r"^@@F0 (\S+)$", out, re.M).group(1))
    assert len(truth) == 1, truth
    assert len(firsts) >= 2, firsts
    code, out, err = triage(["--json", str(store)])
    assert code == 0, err
    doc = json.loads(out)
    assert [g["count"] for g in doc["groups"]] == [n], (firsts, doc["groups"])
    s = doc["groups"][0]["signature"]
    assert s["signal"] == "SIGABRT" and s["c_frame"] is None and \
        tuple(s["lua"]) == truth.pop(), s
    assert s["key"].startswith("SIGABRT in the VM | "), s
