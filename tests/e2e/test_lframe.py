"""lframe, lup, ldown, llocals, lprint and llist against LuaJIT's own view:
testprogs/lua/frames.lua records every level of its stack with
debug.getinfo, debug.getlocal and debug.getupvalue, then stops on the same
line (in ljgdb_stop, frame #0).  Each answer must be what LuaJIT said (the
source file's own lines for llist), live and from the core in gdb; the
core reader gives gdb's text on the core, command for command; --frame N
starts the core reader at frame N; gdb forgets the selection when the
program runs on."""
import os
import re
import subprocess
import sys

import pytest

from support.stop import (BOTH_ARCHES, LOADER, LUA_DIR, ROOT, Stop, chunk_display, frame_place, manifest,
                          read_expected, run_gdb, sysroot_args, value_regex)
from test_corereader import core_reader, differs, gdb_on_core
from test_live import Waiting, assert_left_alone, live

PROG = os.path.join(LUA_DIR, "frames.lua")
# In this order, in one session: each command moves from the selection the
# one before left.
CMDS = ["lframe", "lframe 1", 'print $lua_local("x")', 'print $lua_local("nosuch")',
        "print $lua_frame_line(2)", "print $lua_frame_line()", "llocals", "lprint x",
        "lprint a", "lprint shared",
        "lprint counter", "lprint nosuch", "llist 5", "lup", "llocals", "lup 2", "lup",
        "ldown 3", "lframe 9", "lprint 1x", "llist 0", "lup -1", "lframe --json",
        "lframe 0", "lprint x", "llist", "lframe 2 --json"]
MODES = ("live", "core")


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("lframe-" + request.param))
    return Stop(request.param, "frames.lua", CMDS, work)


def luajit_view(stop):
    """{level: {"text", "locals": [(name, type, shown)], "upvalues": [...]}}."""
    levels = {}
    for r in stop.expected:
        if r[0] == "frame":
            levels[int(r[1])] = {"text": "%s:%s" % (chunk_display(r[3]), r[4]), "line": int(r[4]),
                                 "locals": [], "upvalues": []}
        elif r[0] in ("local", "upvalue"):
            levels[int(r[1])][r[0] + "s"].append((r[2], r[3], r[4]))
    return levels


def frame_line(level, view):
    return "#%-3d %s" % (level, view[level]["text"])


def check_locals(text, level, view):
    lines = text.split("\n")
    assert frame_place(lines[0]) == frame_line(level, view), text
    want = [(n, t, s) for n, t, s in view[level]["locals"]]
    want += [("upvalue " + n, t, s) for n, t, s in view[level]["upvalues"]]
    got = [ln.strip() for ln in lines[1:]]
    assert len(got) == len(want), (got, want)
    for line, (name, typ, shown) in zip(got, want):
        rx = re.escape(name) + " = " + value_regex(typ, shown) + "$"
        assert re.match(rx, line), (line, typ, shown)


@pytest.mark.parametrize("mode", MODES)
def test_frames_as_luajit_sees_them(stop, mode):
    view = luajit_view(stop)

    def out(cmd, nth=0):
        return frame_place(stop.out(mode, cmd, nth).rstrip("\n"))

    last = max(view)
    assert out("lframe") == "#0   C:ljgdb_stop"
    assert out("lframe 1") == frame_line(1, view)
    check_locals(out("llocals"), 1, view)
    # The convenience functions (gdb's): lval's text, the lines as numbers.
    xs = [s for n, t, s in view[1]["locals"] if n == "x"]
    assert re.match(r'^\$\d+ = "%s"$' % xs[1], out('print $lua_local("x")'))
    assert re.match(r'^\$\d+ = "nil"$', out('print $lua_local("nosuch")'))
    assert re.match(r"^\$\d+ = %d$" % view[2]["line"], out("print $lua_frame_line(2)"))
    assert re.match(r"^\$\d+ = %d$" % view[1]["line"], out("print $lua_frame_line()"))
    # The x declared last (the second of the two LuaJIT lists), a, an
    # upvalue, a global, a name nothing holds.
    xs = [s for n, t, s in view[1]["locals"] if n == "x"]
    assert len(xs) == 2
    where = "#1 %s" % view[1]["text"]
    assert out("lprint x", 0) == "x = %s (local of %s)" % (xs[1], where)
    a = [s for n, t, s in view[1]["locals"] if n == "a"][0]
    assert out("lprint a") == "a = %s (local of %s)" % (a, where)
    shared = out("lprint shared").split("\n")
    typ, shown = [(t, s) for n, t, s in view[1]["upvalues"] if n == "shared"][0]
    assert re.match("shared = " + value_regex(typ, shown) + re.escape(" (upvalue of %s)" % where)
                    + "$", shared[0]), shared
    assert shared[2:] == ["{", "  [1] = 10,", "  [2] = 20,", '  name = "alpha",', "}"], shared
    counter = [r[3] for r in stop.expected if r[:2] == ["global", "counter"]][0]
    assert out("lprint counter") == "counter = %s (global of %s)" % (counter, where)
    assert re.match(re.escape("nosuch = nil (global of %s; not a field of the environment "
                              "table (GCtab *)0x" % where) + "[0-9a-f]+\\)$",
                    out("lprint nosuch")), out("lprint nosuch")
    # llist 5: the file's own lines around the frame's line.
    with open(PROG) as f:
        src = f.read().split("\n")
    line = view[1]["line"]
    listing = out("llist 5").split("\n")
    assert listing[0] == "%s (%s)" % (view[1]["text"], PROG)
    assert listing[1:] == ["%-5d%s %s" % (n, ">" if n == line else " ", src[n - 1])
                           for n in range(line - 2, line + 3)]
    # Moving out and in.
    assert out("lup", 0) == frame_line(2, view)
    check_locals(out("llocals", 1), 2, view)
    assert out("lup 2") == frame_line(last, view) and last == 4
    assert out("lup", 1) == "lup: no frame out from #4: the frames are #0 to #4, #4 is selected"
    assert out("ldown 3") == frame_line(1, view)
    # Bad input: one line each, the selection kept.
    assert out("lframe 9").startswith("lframe: no frame #9: (lua_State *)0x")
    assert out("lframe 9").endswith(" has frames #0 to #4")
    assert out("lprint 1x") == ("lprint: '1x' is not a Lua name. Usage: lprint NAME [--depth N] "
                                "[L=<lua_State *>]")
    assert out("llist 0").startswith("llist: N is a number of lines: at least 1. Usage: llist")
    assert out("lup -1").startswith("lup: N counts frames: at least 0. Usage: lup")
    assert '"level": 1' in out("lframe --json")
    # Frame 0 is the C function: no variables, no source.
    assert out("lframe 0") == "#0   C:ljgdb_stop"
    assert out("lprint x", 1) == "lprint: frame #0 is a C function: it has no named variables"
    assert out("llist") == "llist: frame #0 (C:ljgdb_stop) is not a Lua function: no source to list"


def test_core_reader_as_gdb(stop):
    """The core reader, the same commands in one process, gdb's text on the
    core; --frame 2 on the real command line starts at frame 2."""
    m = manifest()[stop.variant]
    cmds = [c for c in CMDS if not c.startswith("print ")]         # (gdb's own)
    got = core_reader(stop.core, m["host"], cmds, build=m)
    seen = {}
    for cmd, res in zip(cmds, got):
        nth = seen.get(cmd, 0)
        seen[cmd] = nth + 1
        d = differs(res, stop.out("core", cmd, nth), cmd)
        assert d is None, d
    p = subprocess.run([sys.executable, "-m", "ljgdb", "--frame", "2"] + sysroot_args(m) +
                       [stop.core, m["host"], "llocals"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    check_locals(p.stdout.decode().rstrip("\n"), 2, luajit_view(stop))
    p = subprocess.run([sys.executable, "-m", "ljgdb", "--frame", "x", stop.core, "llocals"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
    assert p.returncode == 1 and "--frame takes a Lua frame's number" in p.stderr.decode()
    assert "Traceback" not in p.stderr.decode()


def test_selection_forgotten_when_the_program_runs(tmp_path):
    """frames.lua stops a second time, in its main chunk: after `continue`,
    lframe is frame 0 again, not the #3 selected at the first stop (the
    second stop has frames #0 and #1 only), and lup goes to the main chunk
    at the line LuaJIT gave.  Its third stop is in a chunk loaded from a
    string: llist says there is no file, lprint still reads its local."""
    m = manifest()["r21-gc64"]
    expected = str(tmp_path / "expected.txt")
    text = run_gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                    "-ex", "lframe 3", "-ex", "continue", "-ex", "lframe", "-ex", "lup",
                    "-ex", "continue", "-ex", "lup", "-ex", "llist", "-ex", "lprint s",
                    "-ex", "kill", "--args", m["host"], PROG, expected], cwd=str(tmp_path))
    assert text.count("Breakpoint 1, ") == 3, text
    first, after, third = text.split("Breakpoint 1, ")[1:]
    # The third stop: in a chunk loaded from a string, no file to list.
    chunk = [r[1] for r in read_expected(expected) if r[0] == "string"][0]
    frame = '[string "%s"]:1' % chunk
    assert "#1   %s\n" % frame in frame_place(third), third
    assert "llist: frame #1 (%s): the chunk \"%s\" was loaded from a string, not a file" % (
        frame, chunk) in third, third
    assert "s = \"from a string\" (local of #1 %s)" % frame in third, third
    assert [ln for ln in first.split("\n") if ln.startswith("#")][0].startswith("#3   "), first
    top = [r for r in read_expected(expected) if r[0] == "top"][0]
    lines = [frame_place(ln) for ln in after.split("\n") if ln.startswith("#")]
    assert lines == ["#0   C:ljgdb_stop", "#1   %s:%s" % (chunk_display(top[1]), top[2])], after


def test_live_process(tmp_path):
    """python3 -m ljgdb --pid: lframe N and --frame N on a running program
    blocked in a read (wait.lua, as test_live uses it), at the levels and
    lines it recorded with debug.getinfo; the process is left running."""
    prog = Waiting("r21-gc64", tmp_path)
    try:
        frames = prog.frames()
        assert len(frames) >= 2, frames
        for level, source, line in frames[:2]:
            status, out, err = live(prog.pid, ["lframe", str(level)])
            assert status == 0 and frame_place(out) == "#%-3d %s:%d\n" % (level, source, line), \
                (out, err)
            status, out, err = live(prog.pid, ["lframe"], options=["--frame", str(level)])
            assert status == 0 and frame_place(out) == "#%-3d %s:%d\n" % (level, source, line), \
                (out, err)
        assert_left_alone(prog.pid)
    finally:
        prog.stop()


def test_llist_source_path(tmp_path):
    """A chunk named relative to where the program started: from another
    directory llist says the file is not there and how to name where to
    look; with set ljgdb source-path (a missing directory first) it lists
    the file's own lines."""
    m = manifest()["r21-gc64"]
    rel = os.path.relpath(PROG, ROOT)
    text = run_gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                    "-ex", "lframe 1", "-ex", "cd " + str(tmp_path), "-ex", "llist 3",
                    "-ex", "set ljgdb source-path %s:%s" % (tmp_path / "none", ROOT),
                    "-ex", "llist 3", "-ex", "kill",
                    "--args", m["host"], rel, str(tmp_path / "expected.txt")], cwd=ROOT)
    line = [int(r[4]) for r in read_expected(str(tmp_path / "expected.txt"))
            if r[:2] == ["frame", "1"]][0]
    assert "llist: frame #1 (%s:%d): no file %s (name where to look: set ljgdb source-path " \
        "DIR[:DIR...])" % (rel, line, rel) in text, text
    with open(PROG) as f:
        src = f.read().split("\n")
    want = "%s:%d (%s)\n" % (rel, line, os.path.join(ROOT, rel)) + "\n".join(
        "%-5d%s %s" % (n, ">" if n == line else " ", src[n - 1]) for n in range(line - 1, line + 2))
    assert want in text, text


def test_selection_forgotten_with_another_core(stop, tmp_path):
    """Loading a core again (another program or core) forgets the frame
    selected on the one before: lframe is frame 0 again."""
    m = manifest()[stop.variant]
    cmds = ["lframe 2", "core-file " + stop.core, "lframe"]
    outs = gdb_on_core(stop.core, m["host"], cmds, str(tmp_path), build=m)
    assert outs[0].startswith("#2   ") and outs[2].strip() == "#0   C:ljgdb_stop", outs
