"""The core reader (python3 -m ljgdb CORE ..., no gdb) against gdb with
ljgdb on the same cores: every command's output must be the same, on every
variant, at a C call (gcore) and at random moments of a spinning VM
(kernel cores: interpreter, traces, GC, coroutines).

gdb's output is the reference here: the other tests hold gdb's output to
LuaJIT's own view; this one holds the second backend (gdb_ext.backends.coretarget,
coredump, framevars) to the first.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from support import moments
from support.stop import (ALL_VARIANTS, ARM64_VARIANTS, LOADER, NOJIT_VARIANTS, ROOT, Stop, cut_outputs,
                          qemu_target, run_gdb, stripped_with_profile, sysroot_args, without_frame_names,
                          wrap_commands)

CORERUN = os.path.join(ROOT, "tests", "support", "corerun.py")
# Commands that take no address: the same text on any core.
PLAIN = ["linfo", "lstates", "lbt", "lbt full", "lbt --all", "lbt --all --group", "lbt --folded",
         "lthreads", "lgcstat", "lgcstat --top 5", "lgcstat --by-chunk", "ltrace", "lmcode",
         "lbt L=8", "ltab", "linfo extra", "lval (GCtab *)0", "lgcstat --top x",
         "linfo --json", "lbt full --json", "lthreads --json", "lgcstat --json",
         "lstates --json", "ltrace --json", "lmcode --json", "lbt --all --group --json",
         "lbc values.lua:0 --all", "lbc --json nosuch.lua:3", "lheap", "lheap --json",
         "lir 1 --no-mcode", "lir 1 --no-mcode --json", "lstr", "lstr --json"]


def core_reader(core, binary, commands, env=None, build=None):
    """[(output, error line or None)] of each command in the core reader
    (an arm64 build's core with its libraries under build's sysroot)."""
    p = subprocess.run([sys.executable, CORERUN, core, binary] + sysroot_args(build),
                       input=json.dumps(commands).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600,
                       env=dict(os.environ, **(env or {})))
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    return json.loads(p.stdout)


def gdb_on_core(core, binary, commands, cwd, env=None, build=None):
    """gdb's output of each command on the core (gdb-multiarch and the
    build's sysroot for an arm64 build)."""
    if build and build.get("arch") == "arm64":
        text = run_gdb(qemu_target(build) + ["-ex", "core-file " + core, "-ex", "source " + LOADER]
                       + wrap_commands(commands), cwd=cwd, env=env, gdb="gdb-multiarch")
    else:
        text = run_gdb(["-ex", "source " + LOADER, "-ex", "core-file " + core] +
                       wrap_commands(commands) + [binary], cwd=cwd, env=env)
    return [out for _, out in cut_outputs(text, commands)]


def differs(core_out, gdb_out, cmd, who="core reader"):
    """None when the core reader (or `who`: lldb) printed what gdb printed,
    else a text showing both.  gdb prints a failing command's error line
    where its output would be (batch mode writes it to the same stream)."""
    out, err = core_out
    mine = (out or "") + (err + "\n" if err else "")
    if gdb_out is not None and mine.rstrip("\n") == gdb_out.rstrip("\n"):
        return None
    return "%s:\n--- gdb:\n%s\n--- %s:\n%s" % (cmd, gdb_out, who, mine)


def _value_commands(stop):
    """Commands with addresses from this run: its L (gdb's value of the C
    variable), every stack slot, the table of slot 9."""
    L = int(stop.out("live", "print/x (unsigned long)L").split("= ", 1)[1], 16)
    table = next(int(r[3].rsplit(" ", 1)[1], 16) for r in stop.expected
                 if r[0] == "slot" and r[2] == "table")
    Ls = "(lua_State *)0x%x" % L
    cmds = ["lval %s %d" % (Ls, i) for i in range(1, 23)]
    cmds += ["lval --raw %s 2" % Ls, "lval --json %s 17" % Ls, "ltab (GCtab *)0x%x --depth 2" % table,
             "ltab 0x%x --limit 2" % table, "lval 0x%x" % table, "lval (GCtab *)0x%x" % table,
             "ltab --json (GCtab *)0x%x --depth 2" % table, "lbt L=%s" % Ls,
             "lbt full L=0x%x" % L, "linfo G=0x8", "lval %s 99" % Ls,
             "lgcpath (GCtab *)0x%x" % table, "lgcref 0x%x" % table,
             "lgcpath --json %s" % Ls, "lgcref --json (GCtab *)0x%x" % table,
             "lgcstat --retained --top 5", "lgcstat --retained --json 0x%x" % table]
    return cmds


@pytest.mark.parametrize("variant", ALL_VARIANTS + NOJIT_VARIANTS + ARM64_VARIANTS)
def test_same_as_gdb_at_a_c_call(variant, tmp_path):
    stop = Stop(variant, "values.lua", ["print/x (unsigned long)L"], str(tmp_path))
    cmds = PLAIN + _value_commands(stop)
    want = gdb_on_core(stop.core, stop.build["host"], cmds, str(tmp_path), build=stop.build)
    got = core_reader(stop.core, stop.build["host"], cmds, build=stop.build)
    assert len(want) == len(got) == len(cmds)
    bad = [d for d in map(differs, got, want, cmds) if d]
    assert not bad, "\n".join(bad)


# Kernel cores at random moments (SIGABRT into a spinning VM): shapes that
# stop in the interpreter, in traces, in the GC and across coroutines.
MOMENT_SHAPES = ("interp", "jit", "gc", "coswitch", "jitcall", "alloc")
MOMENT_COMMANDS = ["lbt", "lbt full", "linfo", "lthreads", "lgcstat", "lstates", "ltrace",
                   "lbt --json", "lgcstat --retained --top 3"]


def kernel_cores(variant, tmp_path, seed):
    """(shape, i, the program's records, gdb's outputs of MOMENT_COMMANDS,
    core, build) of two kernel cores at random moments of each shape
    (skips where the kernel writes no core here)."""
    if moments.kernel_cores_possible():
        pytest.skip(moments.kernel_cores_possible())
    build = moments.manifest()[variant]
    for k, shape in enumerate(MOMENT_SHAPES):
        work = str(tmp_path / shape)
        results = moments.sample(variant, shape, "abort", 2, seed + k, work,
                                 commands=MOMENT_COMMANDS)
        for i, (records, _, outs) in enumerate(results):
            yield shape, i, records, outs, os.path.join(work, "c%d" % i, "core"), build


@pytest.mark.slow      # random moments, a kernel core each
@pytest.mark.parametrize("variant", ("r21-gc64", "r20-x64", "or-x64") + ARM64_VARIANTS)
def test_same_as_gdb_on_kernel_cores(variant, tmp_path):
    """(arm64: qemu's cores of the guest, tests/support/moments.py)"""
    compared, bad, notes = 0, [], 0
    for shape, i, _, outs, core, build in kernel_cores(variant, tmp_path, 1000):
        got = core_reader(core, build["host"], MOMENT_COMMANDS, env=moments._env(build),
                          build=build)
        for cmd, g, c in zip(MOMENT_COMMANDS, outs, got):
            # (The moments' gdb driver marks an error line "gdb error: ".
            # It runs each command with to_string=True, and gdb drops
            # what a command wrote before it failed, such as lgcstat's
            # partial counts at a moment the string table is being
            # rebuilt: there, the error lines are compared.)
            if g.startswith("gdb error: ") and c[1]:
                c = ["", c[1]]
            g = re.sub(r"^gdb error: ", "", g, flags=re.M)
            if cmd == "linfo":
                # The reader says where a thread's frames end early (gdb
                # guesses on): in a trace, at once.
                note = re.search(r"^C frames: +(.*)\n", c[0] or "", re.M)
                if re.search(r"^VM state: +TRACE", g, re.M):
                    assert note and re.search(r"no unwind information for 0x[0-9a-f]+ \(not "
                                              r"in a mapped ELF file\)", note.group(1)), c[0]
                    notes += 1
                if note:
                    c = [c[0].replace(note.group(0), ""), c[1]]
            if cmd in ("lstates", "linfo"):
                g, c = without_frame_names(g), [without_frame_names(c[0] or ""), c[1]]
            if cmd.startswith("lgcstat --retained"):
                # Inside the GC as anywhere: every object reached or
                # not, once; or, at a moment the heap cannot be walked
                # (a string chain being rewritten), one line saying why.
                assert "the objects' bytes (exact)" in g or (
                    g.startswith("lgcstat: ") and len(g.strip().splitlines()) == 1), g
            bad.append(differs(c, g, "%s (%s, %s core %d)" % (cmd, variant, shape, i)))
            compared += 1
    assert not any(bad), "\n".join(d for d in bad if d)
    assert notes, "no core of the jit shape stopped in a trace"
    assert compared == len(MOMENT_SHAPES) * 2 * len(MOMENT_COMMANDS)


# --- the command line ------------------------------------------------------

def _cli(args, cwd=ROOT):
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=cwd, timeout=300)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.fixture(scope="module")
def nest_core(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("nest"))
    stop = Stop("r21-gc64", "bt.lua", ["lbt"], tmp, args=["nest"])
    return stop


def test_cli_prints_what_gdb_prints(nest_core):
    """python3 -m ljgdb CORE BINARY lbt from the checkout's root, and with
    the binary left out (the core names it)."""
    code, out, err = _cli([nest_core.core, nest_core.build["host"], "lbt"])
    assert code == 0 and err == "", err
    assert out.rstrip("\n") == nest_core.out("core", "lbt").rstrip("\n")
    code, out2, err = _cli([nest_core.core, "lbt"])
    assert code == 0 and out2 == out, err


def test_cli_bad_input_is_one_line(nest_core, tmp_path):
    notcore = str(tmp_path / "text")
    with open(notcore, "w") as f:
        f.write("not a core\n")
    cases = [
        ([notcore, "lbt"], r"is not an ELF file"),
        (["--thread", "x", nest_core.core, "lbt"], r"--thread takes a thread's number"),
        ([str(tmp_path / "missing"), "lbt"], r"does not exist"),
        ([nest_core.core, "lfoo"], r"'lfoo' is neither a command .* nor a file"),
        ([nest_core.core, nest_core.build["host"], "lfoo"], r"'lfoo' is not a command"),
        ([nest_core.core, "lval", "L->base"], r"takes an address"),
        ([nest_core.core, "lbt", "--bogus"], r"unknown option '--bogus'"),
        (["--set", "max-string=x", nest_core.core, "lbt"], r"--set max-string takes a number"),
    ]
    for args, want in cases:
        code, out, err = _cli(args)
        assert code == 1, (args, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (args, err)
        assert re.search(want, err), (args, err)


def test_cli_refuses_a_core_of_another_binary(nest_core):
    """The binary given is not the one that wrote the core (another build):
    one line naming both build-ids; --set check-build-id=off reads anyway."""
    other = moments.manifest()["r21-x64"]["host"]
    code, out, err = _cli([nest_core.core, other, "lbt"])
    assert code == 1 and out == "", out
    assert re.match(r"lbt: the core file does not match %s: it has build-id [0-9a-f]+, the core "
                    r"holds build-id [0-9a-f]+ in its place" % re.escape(other), err), err
    assert len(err.strip().splitlines()) == 1


# --- stripped binaries: the layout from a profile, as gdb takes it ----------

@pytest.mark.parametrize("variant", ["r21-gc64", "r20-x64", "or-arm64"])
def test_stripped_core_through_a_profile(variant, tmp_path):
    stripped, profs = stripped_with_profile(moments.manifest()[variant]["host"], variant,
                                            str(tmp_path))
    cmds = ["lbt", "lbt full", "lthreads", "lgcstat", "ltrace", "linfo", "lstates"]
    env = {"LJGDB_PROFILES": profs}
    stop = Stop(variant, "bt.lua", cmds, str(tmp_path / "run"), args=["nest"], env=env,
                host=stripped)
    assert "layout profile %s.json" % variant in stop.out("core", "linfo")
    got = core_reader(stop.core, stripped, cmds, env=env, build=stop.build)
    bad = [d for d in map(differs, got, [stop.out("core", c) for c in cmds], cmds) if d]
    assert not bad, "\n".join(bad)
    # No profile: one line that says what is missing.
    out, err = core_reader(stop.core, stripped, ["lbt"], env={"LJGDB_PROFILES": "none"},
                           build=stop.build)[0]
    assert out == "" and err.startswith("lbt: LuaJIT is in %s (it has the symbol " % stripped), err
    assert "layout profile of this build (build-id " in err and "\n" not in err, err


def test_arm64_core_without_its_sysroot(tmp_path):
    """An arm64 core (qemu's, of a crash inside libc) read without
    --sysroot: the libraries it names are not found, the frames end at the
    first pc in them, and linfo says which files and what to give; the
    Lua state is still found (by the memory search) and lbt prints what gdb
    prints with the sysroot."""
    stop = Stop("or-arm64", "bt.lua", ["lbt"], str(tmp_path), args=["crash"], stop_on="SIGSEGV")
    (lbt, _), (linfo, _) = core_reader(stop.core, stop.build["host"], ["lbt", "linfo"])
    assert lbt.rstrip("\n") == stop.out("core", "lbt").rstrip("\n")
    note = re.search(r"^C frames: +(.*)$", linfo, re.M).group(1)
    assert re.search(r"\(not in a mapped ELF file; not found: [^)]*/lib/libc\.so\.6", note), note
    assert note.endswith("give --sysroot DIR (before CORE) when they are under another root"), note
    assert "memory search" in linfo


def test_arm64_core_with_a_library_of_another_machine(tmp_path):
    """An arm64 core read with a --sysroot whose libc is this machine's
    x86-64 one: that file is not read as the core's libc (its code and
    unwind information would be another machine's); the frames end at the
    first pc in libc and linfo names the file as built for another
    machine."""
    stop = Stop("or-arm64", "bt.lua", ["lbt"], str(tmp_path), args=["crash"], stop_on="SIGSEGV")
    host_libc = subprocess.run(["gcc", "-print-file-name=libc.so.6"], stdout=subprocess.PIPE,
                               universal_newlines=True).stdout.strip()
    assert os.path.isabs(host_libc) and open(host_libc, "rb").read(4) == b"\x7fELF", host_libc
    root = tmp_path / "wrongroot"
    (root / "lib").mkdir(parents=True)
    os.symlink(os.path.realpath(host_libc), str(root / "lib" / "libc.so.6"))
    (lbt, _), (linfo, _) = core_reader(stop.core, stop.build["host"], ["lbt", "linfo"],
                                       build={"sysroot": str(root)})
    assert lbt.rstrip("\n") == stop.out("core", "lbt").rstrip("\n")
    note = re.search(r"^C frames: +(.*)$", linfo, re.M).group(1)
    assert "%s (built for another machine)" % (root / "lib" / "libc.so.6") in note, note


# --- the crash collector (examples/lua-core-collector.sh) ------------------

def test_crash_collector_writes_the_lua_backtrace(tmp_path):
    """A kernel core of a program killed by SIGSEGV inside Lua code's C call,
    piped to the collector as the kernel pipes it (core_pattern '|...'):
    the collector keeps the core and writes lbt full, lthreads and linfo,
    whose frames are the ones the Lua program recorded."""
    if moments.kernel_cores_possible():
        pytest.skip(moments.kernel_cores_possible())
    build = moments.manifest()["r21-gc64"]
    work = str(tmp_path)
    expected = os.path.join(work, "expected.txt")
    p = subprocess.run(["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh", build["host"],
                        os.path.join(moments.LUA_DIR, "bt.lua"), expected, "crash"], cwd=work,
                       env=dict(os.environ, **moments._env(build)), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
    assert p.returncode == -11, p.returncode
    core = os.path.join(work, "core")
    assert os.path.exists(core)
    dest = os.path.join(work, "crashes")
    with open(core, "rb") as f:
        c = subprocess.run(["sh", os.path.join(ROOT, "examples", "lua-core-collector.sh"), "4242",
                            "host", "1700000000"], stdin=f, timeout=300,
                           env=dict(os.environ, LJGDB_CORE_DIR=dest))
    assert c.returncode == 0
    kept = os.path.join(dest, "core.host.4242.1700000000")
    with open(kept, "rb") as a, open(core, "rb") as b:
        assert a.read() == b.read()
    with open(kept + ".lua.txt") as f:
        report = f.read()
    from support.stop import read_expected, chunk_display, frame_place
    recs = [r for r in read_expected(expected) if r[0] == "main" and r[1] == "frame"]
    assert recs, read_expected(expected)
    lines = re.findall(r"^#\d+ +(\S+)$", frame_place(report.split("== lthreads")[0]), re.M)
    want = ["%s:%s" % (chunk_display(r[4]), r[5]) for r in recs if r[3] in ("Lua", "main")]
    assert [x for x in lines if not x.startswith(("C:", "["))] == want, report
    assert "== lthreads" in report and "== linfo" in report and "Traceback" not in report


def test_thread_option_reads_the_thread_gdb_numbers_so(tmp_path):
    """--thread N is gdb's `thread N` on the core: a core of two OS threads
    (one stopped in C with no Lua state, the main one waiting with its VM
    idle); each command reads the chosen thread's frames, as gdb does."""
    env = {"LJGDB_IDLE": "1"}
    stop = Stop("r21-gc64", "idle.lua", [], str(tmp_path), env=env)
    host = stop.build["host"]
    cmds = ["lstates", "linfo", "lbt"]
    for n in (1, 2):
        want = gdb_on_core(stop.core, host, ["thread %d" % n] + cmds, str(tmp_path), env=env)[1:]
        p = subprocess.run([sys.executable, CORERUN, stop.core, host, "--thread", str(n)],
                           input=json.dumps(cmds).encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        assert p.returncode == 0, p.stderr.decode()
        got = json.loads(p.stdout)
        # glibc's futex wait is reached by a tail call: gdb adds a frame for
        # the caller (from call-site records), the reader does not, so the
        # frame numbers differ (see without_frame_names).
        for c, g, cmd in zip(got, want, cmds):
            if n == 2 and cmd == "lstates":
                assert re.search(r"frame #\d+ main: L; memory search", c[0]), c[0]
            assert not differs([without_frame_names(c[0] or ""), c[1]], without_frame_names(g),
                               cmd), differs(c, g, cmd)
    # The main thread's C frames name its (idle) state: not only the memory.
    assert re.search(r"frame #\d+ main: L", want[0]), want[0]
    code, out, err = _cli(["--thread", "3", stop.core, "lbt"])
    assert code == 1 and err.strip() == "lbt: the core has 2 threads: --thread takes 1 to 2", err
