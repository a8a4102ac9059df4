"""Bad input, corrupt memory and the wrong target: one clear line, never a
Python traceback, never a change to the process.

- Every command in each environment where something is missing (no
  program; a program without LuaJIT, loaded or started; a LuaJIT program
  not running; a binary without debug info; a core of another binary; a
  truncated core; a process that is running) prints one line that names
  what is missing, and gdb answers the next command.
- Bad arguments give the usage line (and gdb's own message without a double
  period); expressions that would assign or call a function are refused.
- Read-only: the writable memory and the registers of a stopped process
  hash the same before and after every command has run.
- Ctrl-C during a long lgcstat ends it at once with one line, and gdb
  answers the next command.
- Corrupt memory: the corruption fuzzer (bench/fuzz_corrupt.py), a small
  fixed-seed run, must end with no traceback and no hang.  The engine's
  bounds on synthetic memory (cycles with a corrupt gc.total, a cycle in a
  string chain, sizes past g->gc.total, reads that are too large) are in
  tests/unit/test_bounds.py.
"""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import termios
import time

import pytest

import ljgdb  # noqa: F401
from support.stop import LOADER, LUA_DIR, ROOT, cut_outputs, manifest, run_gdb, wrap_commands

sys.path.insert(0, os.path.join(ROOT, "bench"))     # fuzz_corrupt
from ljgdb.gdb_ext.backends import corefile  # noqa: E402

GC64, X64 = "r21-gc64", "r21-x64"
# Every command, with typical arguments.
COMMANDS = ["linfo", "lval L 1", "ltab L->base", "lbt full", "lbt --all", "lthreads",
            "lgcstat --top 3", "lmcode", "ltrace", "ltrace 1"]
AFTER = "print 1+1"


def host(variant=GC64):
    return manifest()[variant]["host"]


def run(pre=(), program=(), commands=COMMANDS, timeout=120, env=None):
    """Outputs [(command, text)] of commands (then AFTER) in one gdb, after
    the gdb commands `pre`; `program` is gdb's positional arguments (a file,
    or --args and a command line); env: more environment variables."""
    cmds = list(commands) + [AFTER]
    text = run_gdb(["-ex", "source " + LOADER] + list(pre) + wrap_commands(cmds) + list(program),
                   timeout=timeout, env=env)
    assert "Traceback" not in text and "Python Exception" not in text, text
    outs = cut_outputs(text, cmds)
    assert outs[-1][1] is not None and outs[-1][1].strip() == "$1 = 2", text
    return outs[:-1], text


def assert_one_line(outs, *needles):
    for cmd, out in outs:
        assert out is not None, cmd
        lines = [ln for ln in out.splitlines() if ln.strip()]
        assert len(lines) == 1, (cmd, out)
        name = cmd.split()[0]
        assert lines[0].startswith(name + ": "), (cmd, out)
        assert "internal error" not in lines[0], (cmd, out)
        for n in needles:
            assert n in lines[0], (cmd, n, out)


@pytest.fixture(scope="module")
def cores(tmp_path_factory):
    """A core of fuzz.lua for GC64 and X64 (gcore at ljgdb_break)."""
    d = tmp_path_factory.mktemp("hardening-cores")
    out = {}
    for v in (GC64, X64):
        core = str(d / ("%s.core" % v))
        run_gdb(["-ex", "break ljgdb_break", "-ex", "run", "-ex", "gcore " + core,
                 "-ex", "kill", "--args", host(v), os.path.join(LUA_DIR, "fuzz.lua"),
                 str(d / ("%s.expected" % v))])
        assert os.path.exists(core), v
        out[v] = core
    return out


# --------------------------------------------------------------------------
# Something missing: one line that says what and what to do

def test_no_program():
    outs, _ = run()
    assert_one_line(outs, "no program loaded", "gdb PROG CORE")


def test_program_without_luajit():
    outs, _ = run(program=["/bin/true"])
    assert_one_line(outs, "no LuaJIT in", "'run' or 'starti'")


def test_running_program_without_luajit():
    outs, _ = run(["-ex", "starti"], ["/bin/true"])
    assert_one_line(outs, "no LuaJIT in", "load a program that runs LuaJIT")


def test_luajit_program_not_running():
    outs, _ = run(program=[host()])
    assert_one_line(outs, "no process or core file", "core-file FILE")


def test_binary_without_debug_info(cores, tmp_path):
    """No DWARF and no layout profile at all (LJGDB_PROFILES=none: the
    library reads this 2.1.ROLLING build by memory fit,
    test_profile_library.test_stripped_rolling_build_by_memory_fit): one
    line a command, saying what to install or rebuild."""
    stripped = str(tmp_path / "host-stripped")
    shutil.copy(host(), stripped)
    subprocess.run(["strip", "-g", stripped], check=True)
    outs, _ = run(["-ex", "core-file " + cores[GC64]], [stripped], env={"LJGDB_PROFILES": "none"})
    assert_one_line(outs, "without debug info", "CCDEBUG=-g", "dbgsym")


def build_id(path):
    """The GNU build-id of an ELF file, as readelf prints it."""
    out = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE, check=True).stdout
    return re.search(rb"Build ID: ([0-9a-f]+)", out).group(1).decode()


def test_core_of_another_binary(cores):
    outs, _ = run(["-ex", "core-file " + cores[GC64]], [host(X64)])
    assert_one_line(outs, "the core file does not match the binary " + host(X64),
                    "gdb loaded it with build-id " + build_id(host(X64)),
                    "the core holds build-id " + build_id(host(GC64)),
                    "the core's process: " + host(GC64) + " ",
                    "'set ljgdb check-build-id off'")
    # At the user's risk: the commands read the core with the wrong binary.
    outs, _ = run(["-ex", "set ljgdb check-build-id off", "-ex", "core-file " + cores[GC64]],
                  [host(X64)], commands=["linfo"])
    assert "does not match" not in outs[0][1]


def test_truncated_core(cores, tmp_path):
    # gcore writes its notes last: gdb refuses the cut file.
    half = str(tmp_path / "half.core")
    with open(cores[GC64], "rb") as f:
        data = f.read()
    with open(half, "wb") as f:
        f.write(data[:len(data) // 2])
    outs, text = run(["-ex", "core-file " + half], [host()])
    assert "not a core dump" in text
    assert_one_line(outs, "no process or core file")


def test_truncated_kernel_core(tmp_path):
    """A core the kernel wrote (notes first): gdb loads half of it, memory
    past the cut is missing, and every command's last line says the core is
    cut."""
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    if pattern.startswith("|") or "/" in pattern:
        pytest.skip("core_pattern %r: the kernel does not write cores here" % pattern)
    d = str(tmp_path)
    subprocess.run(["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh", host(),
                    os.path.join(LUA_DIR, "bt.lua"), os.path.join(d, "expected"), "crash"],
                   cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = [f for f in os.listdir(d) if f.startswith(pattern.split("%")[0] or "core")]
    if not found:
        pytest.skip("no kernel core written (ulimit or core_pattern)")
    full = os.path.join(d, found[0])
    with open(full, "rb") as f:
        data = f.read()
    half = os.path.join(d, "half.core")
    with open(half, "wb") as f:
        f.write(data[:len(data) // 2])
    assert corefile.truncation(half) == (len(data) // 2, len(data))
    outs, text = run(["-ex", "core-file " + half], [host()])
    # A command fails in one line, or (the memory search finds the VM in
    # the half that is there) ends with the same note.
    for cmd, out in outs:
        lines = [line for line in out.splitlines() if line.strip()]
        assert lines[-1].startswith(cmd.split()[0] + ": "), (cmd, out)
        assert "the core file is truncated (%d of its %d bytes)" % (
            len(data) // 2, len(data)) in lines[-1], (cmd, out)


def test_running_process(tmp_path):
    """A process that runs while gdb looks (non-stop mode, run &)."""
    outs, text = run(["-ex", "set non-stop on", "-ex", "run &", "-ex", "shell sleep 1"],
                     ["--args", host(), os.path.join(LUA_DIR, "spin.lua"),
                      str(tmp_path / "expected"), "20"])
    assert_one_line(outs, "selected thread is running", "'interrupt'")


# --------------------------------------------------------------------------
# A live stop: bad arguments, and nothing changes in the process

HASH_PY = r'''
import hashlib
import gdb

def ljgdb_test_hash():
    inf = gdb.selected_inferior()
    h = hashlib.sha256()
    n = 0
    with open("/proc/%d/maps" % inf.pid) as f:
        maps = f.read().splitlines()
    for line in maps:
        fields = line.split()
        if "w" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
            continue
        lo, hi = [int(x, 16) for x in fields[0].split("-")]
        try:
            h.update(inf.read_memory(lo, hi - lo).tobytes())
            n += hi - lo
        except gdb.MemoryError:
            h.update(b"unreadable %x" % lo)
    frame = gdb.newest_frame()
    for r in frame.architecture().registers():
        try:
            h.update(("%s=%s;" % (r.name, frame.read_register(r))).encode())
        except gdb.error:
            pass
    sel = gdb.selected_frame().level()
    print("@@HASH %s %d bytes, selected frame %d" % (h.hexdigest(), n, sel))
'''

BAD_ARGS = [
    ("lbt --bogus", "unknown option '--bogus'"),
    ("lval nosuchsymbol", "cannot evaluate expression 'nosuchsymbol': No symbol \"nosuchsymbol\" "
                          "in current context. Usage: lval"),
    ("ltab (int *)L", "'(int *)L' is a pointer to int, expected a GCtab * or TValue *. Usage: ltab"),
    ("lval (int *)L", "expected a TValue *, a GC object pointer or an address. Usage: lval"),
    ("lgcstat --top many", "--top needs a number, not 'many'. Usage: lgcstat"),
    ("lthreads extra", "unexpected argument 'extra'. Usage: lthreads"),
    ("lbt --group", "--group folds the threads of --all: use lbt --all --group. Usage: lbt"),
    ("lbt full --all --group", "--group folds frames, not locals: use it without full. "
                               "Usage: lbt"),
    ("lstates L=x", "lstates takes no arguments: it lists every Lua state. Usage: lstates"),
    ("lmcode nosuch+1", "cannot evaluate address 'nosuch+1'"),
    ("ltrace notanumber", "'notanumber' is not a trace number. Usage: ltrace"),
    ("lval ljgdb_break_count = 5", "assigns, and ljgdb never changes the process. Usage: lval"),
    ("ltab L->base++", "increments or decrements, and ljgdb never changes the process"),
    ("lval ljgdb_break(L, 0)", "Cannot call functions in the program: may-call-functions is "
                               "off. Usage: lval"),
    ("lbt L=nosuch", "cannot evaluate L 'nosuch'"),
    ("ltab L->base --depth 100000", "--depth must be at most 100. Usage: ltab"),
]
GOOD = ["linfo", "lval L 1", "lval --raw L->base", "ltab L->base --depth 3", "lbt full",
        "lbt full --all", "lthreads", "lgcstat --top 5 --by-chunk", "lmcode", "lmcode $pc",
        "ltrace", "ltrace 1", "ltrace 2"]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    d = tmp_path_factory.mktemp("hardening-live")
    script = str(d / "hash.py")
    with open(script, "w") as f:
        f.write(HASH_PY)
    cmds = (["python ljgdb_test_hash()"] + GOOD + [c for c, _ in BAD_ARGS] +
            ["python ljgdb_test_hash()", "show may-call-functions", "show may-write-memory",
             AFTER])
    text = run_gdb(["-ex", "source " + LOADER, "-ex", "source " + script,
                    "-ex", "break ljgdb_break", "-ex", "run"] + wrap_commands(cmds) +
                   ["-ex", "kill", "--args", host(), os.path.join(LUA_DIR, "fuzz.lua"),
                    str(d / "expected")])
    return dict(cut_outputs(text, cmds)), text


def test_bad_arguments_give_the_usage_line(live):
    outs, text = live
    assert "Traceback" not in text
    for cmd, want in BAD_ARGS:
        out = outs[cmd]
        assert out is not None, (cmd, text[-3000:])
        lines = out.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], (cmd, out)
        assert ".." not in lines[0], (cmd, out)
    assert outs[AFTER].strip() == "$1 = 2"


def test_commands_never_change_the_process(live):
    outs, text = live
    for cmd in GOOD:
        assert outs[cmd] and "internal error" not in outs[cmd], (cmd, outs[cmd])
    hashes = [outs["python ljgdb_test_hash()"]]
    found = re.findall(r"@@HASH (\w+) (\d+) bytes, selected frame (\d+)", text)
    assert len(found) == 2, text[-3000:]
    assert int(found[0][1]) > 100000, found        # the heap and stacks were hashed
    assert found[0] == found[1], "memory, registers or frame changed: %s" % (found,)
    assert hashes
    assert "call functions in the program is on" in outs["show may-call-functions"]
    assert "write into target memory is on" in outs["show may-write-memory"]


# --------------------------------------------------------------------------
# Ctrl-C

def _ctty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_ctrl_c_stops_a_long_walk(tmp_path):
    """gdb on a terminal (a pty that is its controlling terminal): Ctrl-C
    during lgcstat on a heap of 3 million objects."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        ["gdb", "-nx", "-nh", "-q", "-ex", "set pagination off", "-ex", "set confirm off",
         "-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
         "--args", host(), os.path.join(LUA_DIR, "heap.lua"), str(tmp_path / "expected"),
         "3000000"],
        stdin=slave, stdout=slave, stderr=slave, preexec_fn=_ctty, cwd=str(tmp_path),
        env=dict(os.environ, TERM="dumb", LC_ALL="C"))
    os.close(slave)
    buf = [b""]

    def read_until(pat, timeout):
        end = time.time() + timeout
        while pat not in buf[0] and time.time() < end:
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    buf[0] += os.read(master, 65536)
                except OSError:
                    break
        return pat in buf[0]

    try:
        assert read_until(b"Breakpoint 1, ljgdb_break", 180), buf[0][-2000:]
        assert read_until(b"(gdb) ", 30)
        buf[0] = b""
        os.write(master, b"lgcstat\n")
        time.sleep(0.3)
        t0 = time.time()
        os.write(master, b"\x03")
        assert read_until(b"lgcstat: interrupted (Ctrl-C)", 30), buf[0][-2000:]
        took = time.time() - t0
        assert b"sum:" not in buf[0]                  # the walk did not finish
        assert b"Traceback" not in buf[0]
        assert took < 2.0, took
        assert read_until(b"(gdb) ", 10)
        buf[0] = b""
        os.write(master, b"print 1+1\n")
        assert read_until(b"$1 = 2", 10), buf[0]
        os.write(master, b"kill\nquit\n")
        p.wait(20)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
        os.close(master)


# --------------------------------------------------------------------------
# Corrupt memory: the fuzzer, a small fixed-seed run

@pytest.mark.parametrize("variant", [GC64, X64])
def test_fuzzer_small_run(variant, tmp_path):
    from fuzz_corrupt import fuzz_variant
    counts, failures = fuzz_variant(variant, 20, 1, 10, 180, str(tmp_path), jobs=1)
    assert counts["failure"] == 0 and counts["hang"] == 0, failures[:3]
    from fuzz_corrupt import COMMANDS as FUZZ_COMMANDS
    assert counts["runs"] == 20 * len(FUZZ_COMMANDS)
    assert counts["clean"] > 0 and counts["result"] > 0, counts


def test_fuzzer_trace_code_past_the_address_space(tmp_path):
    """Trial 215 of seed 2 (300 trials): a trace's mcode pointer all ones;
    lir once ended in an OverflowError from gdb's disassembler."""
    from fuzz_corrupt import fuzz_variant
    counts, failures = fuzz_variant("r21-gc64", 300, 2, 10, 180, str(tmp_path), only=[215])
    assert counts["trials"] == 1 and counts["failure"] == 0, failures


def test_help_and_settings_listed():
    """help ljgdb lists every command in one line each; show ljgdb lists
    every setting with its value."""
    outs, _ = run(["-ex", "set ljgdb max-string 7"], commands=["help ljgdb", "show ljgdb"])
    helptext, show = outs[0][1], outs[1][1]
    for name in ("linfo", "lval", "ltab", "lbt", "lthreads", "lgcstat", "lmcode", "ltrace",
                 "lstates"):
        assert re.search(r"^  %s\s+\S" % name, helptext, re.M), helptext
    for name in ("max-string", "max-entries", "heap-cache", "check-build-id", "debug",
                 "source-path"):
        assert re.search(r"^%s:  " % name, show, re.M), show
    assert re.search(r"^max-string:  7 ", show, re.M), show


def test_completion_of_arguments():
    """TAB completes each command's own words, and gdb's expressions after."""
    cmds = ["complete lbt --", "complete lbt f", "complete lgcstat --t", "complete lthreads --g",
            "complete lbt --all --f", "complete lval ljgdb_brea"]
    outs, _ = run(commands=cmds, program=[host()])
    got = dict(outs)
    assert got["complete lbt --"].split("\n")[:3] == ["lbt --all", "lbt --folded", "lbt --group"]
    assert got["complete lbt f"].strip() == "lbt full"
    assert got["complete lgcstat --t"].strip() == "lgcstat --top"
    assert got["complete lthreads --g"].strip() == "lthreads --group"
    assert got["complete lbt --all --f"].strip() == "lbt --all --folded"
    assert "lval ljgdb_break" in got["complete lval ljgdb_brea"].splitlines()
