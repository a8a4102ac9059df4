"""lprofile against the program's own measure of where its time goes.

testprogs/lua/profile.lua runs f1, f2 and f5, whose work is in the ratio
1:2:5, and records the CPU seconds each took (os.clock); or it alternates
CPU work with a blocking read of an io.popen pipe and records the time of
each; or it spends its time in a loop of system calls that keeps it on a
CPU (os.clock), in the interpreter and in a JIT-compiled loop.  The
profile's shares must come within 3 points of those.  The
folded stacks name the lines LuaJIT gives (debug.getinfo), and ljgdb's
flame graph of them (python3 -m ljgdb.commands.flamegraph) has a box for
each of their paths, with its count.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from support.flamesvg import check_flame_graph
from support.stop import (LUA_DIR, ROOT, Stop, chunk_display, profile_frame,
                          profile_function)
from test_profout_consumers import pprof, top_rows

# Profiles of 2 to 15 seconds on every build.
pytestmark = pytest.mark.slow

PROG = os.path.join(LUA_DIR, "profile.lua")
CHUNK = chunk_display("@" + PROG)
BAD = ["lprofile --hz 0", "lprofile --seconds x", "lprofile --bogus", "lprofile extra"]
JSON = "lprofile --seconds 4 --hz 200 --json"


def records(stop, clock="cpu"):
    """({part: CPU seconds} (clock "cpu") or {part: wall seconds} ("wall"),
    {name: line}) from the program's file."""
    times = {}
    for r in stop.expected:
        if r[0] == "time" and r[1].startswith("wall ") == (clock == "wall"):
            times[r[1].split()[-1]] = float(r[2])
    lines = {r[1]: int(r[2]) for r in stop.expected if r[0] == "line"}
    return times, lines


def names_of(stop):
    """{function: (namewhat, name)}: how the program's measured loop calls
    it, as its debug.getinfo says."""
    return {r[1]: (r[2], r[3]) for r in stop.expected if r[0] == "name"}


def label(stop, lines, name):
    """The top table's name of the program's function `name`."""
    return profile_function("%s:%d" % (CHUNK, lines[name]), names_of(stop)[name])


def top_table(text):
    """{function: (self %, total %)} and the number of thread stacks."""
    head = re.search(r"^lprofile: (\d+) samples in [\d.]+ s .*, (\d+) thread stacks with Lua "
                     r"kept;", text, re.M)
    assert head, text
    rows = {}
    for m in re.finditer(r"^ *([\d.]+)% +([\d.]+)%  (.+)$", text, re.M):
        rows[m.group(3)] = (float(m.group(1)), float(m.group(2)))
    return rows, int(head.group(2))


def folded(path):
    out = {}
    with open(path) as f:
        for line in f:
            stack, n = line.rstrip("\n").rsplit(" ", 1)
            out[stack] = int(n)
    return out


_stops = {}


def busy(variant, mode, tmp):
    key = (variant, mode)
    if key not in _stops:
        fold = os.path.join(tmp, "busy.folded")
        # 3000 samples: a share's sampling error is under a point.
        cmd = "lprofile --seconds 15 --hz 200 --top 1000 --folded %s --pprof %s" % (
            fold, os.path.join(tmp, "busy.pb.gz"))
        stop = Stop(variant, "profile.lua", [cmd] + BAD + [JSON], tmp, args=["busy-" + mode])
        _stops[key] = (stop, cmd, fold)
    return _stops[key]


@pytest.mark.serial
# GC64 JIT-compiled and X64 interpreted (record's test_busy_shares covers
# the sampler's axes more widely; lprofile reads through gdb).
@pytest.mark.parametrize("variant,mode", [("r21-gc64", "jit"), ("deb-x64", "interp")])
def test_busy_shares(variant, mode, tmp_path):
    """f1, f2, f5 in the ratio the program measured (1:2:5 of its CPU time),
    within 3 points, interpreted and JIT-compiled, in lprofile's table and
    in go tool pprof's reading of --pprof's file; the folded stacks are the
    Lua frames LuaJIT names, and add up to the samples."""
    stop, cmd, fold = busy(variant, mode, str(tmp_path))
    text = stop.out("live", cmd)
    rows, nstacks = top_table(text)
    times, lines = records(stop)
    total = sum(times.values())
    pp = top_rows(pprof(os.path.join(os.path.dirname(fold), "busy.pb.gz"),
                        "-top", "-sample_index=samples")[0])
    labels = {name: label(stop, lines, name) for name in ("f1", "f2", "f5")}
    for lb in labels.values():
        assert lb in rows, (lb, text)
    # Shares among the three functions' samples: the program's clock covers
    # their calls only, not the loop between them (where os.clock's system
    # calls draw more than their share of the samples on a busy machine).
    # (pprof names a function by its name alone: these have none.)
    assert not any(names_of(stop)[name][0] for name in labels), names_of(stop)
    ours = sum(rows[lb][1] for lb in labels.values())
    theirs = sum(int(pp[lb][1]) for lb in labels.values())
    for name, lb in labels.items():
        want = 100.0 * times[name] / total
        got = 100.0 * rows[lb][1] / ours
        assert abs(got - want) <= 3.0, (name, got, want, text)
        assert abs(100.0 * int(pp[lb][1]) / theirs - want) <= 3.0, (name, pp, want)
    stacks = folded(fold)
    assert sum(stacks.values()) == nstacks
    assert nstacks >= 2000, text
    # The stack of f5's work, innermost frames last: f5's call of spin,
    # spin's loop, each named as the program calls it.
    names = names_of(stop)
    tail = "%s;%s" % (profile_frame("%s:%d" % (CHUNK, lines["f5"]), names["f5"]),
                      profile_frame("%s:%d" % (CHUNK, lines["spin"]), names["spin"]))
    assert any(s.endswith(tail) for s in stacks), list(stacks)[:5]
    # The flame graph of the folded file: one box a path of its stacks, with
    # the samples through it.
    svg = subprocess.run([sys.executable, "-m", "ljgdb.commands.flamegraph", "--title", "busy", fold],
                         cwd=ROOT, stdout=subprocess.PIPE, check=True).stdout
    _, paths = check_flame_graph(svg, stacks, "busy")
    assert any(p[-2:] == tuple(tail.split(";")) for p in paths), list(paths)[:5]


@pytest.mark.serial
@pytest.mark.parametrize("variant", ["r21-gc64", "deb-x64"])
def test_syscall_shares(variant, tmp_path):
    """A thread busy inside a system call is on a CPU: sysc() (a loop of
    os.clock, each a clock_gettime system call), interp() (interpreted)
    and jitted() (JIT-compiled) each within 3 points of the share of wall
    time the program measured; every thread sample is kept but for a
    handful (the process is always on a CPU).  (Wall time, not CPU time:
    the stops come at moments of the wall clock, and under gdb's stops
    the parts' wall shares stray from their CPU shares by up to 3 points
    on a 2-CPU machine, sysc's above, jitted's below: docs/benchmarks.md.)"""
    fold = os.path.join(str(tmp_path), "sys.folded")
    cmd = "lprofile --seconds 15 --hz 200 --top 1000 --folded %s" % fold
    stop = Stop(variant, "profile.lua", [cmd, "lprofile --seconds 2 --hz 200 --json"],
                str(tmp_path), args=["syscall"])
    text = stop.out("live", cmd)
    rows, nstacks = top_table(text)
    times, lines = records(stop, "wall")
    total = sum(times.values())
    for name in ("sysc", "interp", "jitted"):
        lb = label(stop, lines, name)
        want = 100.0 * times[name] / total
        assert lb in rows and abs(rows[lb][1] - want) <= 3.0, (name, want, text)
    assert 100.0 * times["sysc"] / total >= 20, times      # (a real share to find)
    assert nstacks >= 2000 and sum(folded(fold).values()) == nstacks, text
    doc = json.loads(stop.out("live", "lprofile --seconds 2 --hz 200 --json"))
    assert doc["thread_stacks"] + sum(doc["dropped"].values()) == doc["samples"], doc["dropped"]
    assert doc["dropped"]["off-CPU"] + doc["dropped"]["no Lua"] <= doc["samples"] // 100, doc


def test_bad_input(tmp_path):
    """Bad options get one line; on a core, lprofile says why it cannot.
    (A stop of its own: busy()'s, with its 15 s profile, is the serial
    tests', made again in their process.)"""
    cmd = "lprofile --seconds 0.5 --hz 50"
    stop = Stop("r21-gc64", "profile.lua", BAD + [cmd], str(tmp_path), args=["busy-jit"])
    for mode in ("live", "core"):
        for c in BAD:
            out = stop.out(mode, c).strip()
            assert out.startswith("lprofile: ") and "Usage: lprofile" in out, out
            assert len(out.splitlines()) == 1 and "Traceback" not in out
    assert "--hz must be between" in stop.out("live", "lprofile --hz 0")
    core = stop.out("core", cmd).strip()
    assert core.startswith("lprofile: a core file is one moment"), core


@pytest.mark.serial
@pytest.mark.parametrize("variant", ["r21-gc64"])
def test_off_cpu_pipe(variant, tmp_path):
    """--off-cpu: the blocking read of a popen pipe counts, under the Lua
    line that called f:read, within 5 points of the share of its time the
    program spent there; the CPU work within 5 points too.  Without --off-cpu no stack
    ends in a system call."""
    fold_off = os.path.join(str(tmp_path), "off.folded")
    fold_on = os.path.join(str(tmp_path), "on.folded")
    # 3000 samples: a share's sampling error is about 0.9 points.
    off = "lprofile --seconds 30 --hz 100 --off-cpu --top 1000 --folded %s" % fold_off
    on = "lprofile --seconds 4 --hz 100 --folded %s" % fold_on
    stop = Stop(variant, "profile.lua", [off, on], str(tmp_path), args=["pipe"])
    text = stop.out("live", off)
    rows, nstacks = top_table(text)
    times, lines = records(stop)
    total = sum(times.values())
    # Measured (bench-like runs of this test, 60 to 150 Hz): the blocked read
    # comes out 0.5 to 2.7 points above its share of the wall time and the
    # work as much below, a shift not explained yet (see the README); with
    # the sampling error (0.9 points) the bound is 5 points here (a CI run
    # had the work 4.07 below), 3 in the busy loops.
    assert abs(rows["read"][0] - 100.0 * times["read"] / total) <= 5.0, (rows["read"], times, text)
    work = label(stop, lines, "work")
    assert abs(rows[work][1] - 100.0 * times["work"] / total) <= 5.0, (rows[work], times, text)
    stacks = folded(fold_off)
    reads = [s for s in stacks if s.endswith(";read")]
    assert reads and all(";[builtin#io.method.read];" in s for s in reads), reads
    assert all(re.search(r";%s:\d+;\[builtin#io.method.read\];" % re.escape(CHUNK), s)
               for s in reads), reads
    for s in folded(fold_on):
        assert not s.endswith((";read", ";wait4", ";pipe2")), s
    # Without --off-cpu, the samples the blocked read took are counted as
    # not kept, off-CPU: their share of all samples is the read's share of
    # the wall time.
    on_text = stop.out("live", on)
    m = re.search(r"^lprofile: (\d+) samples .*, (\d+) thread stacks with Lua kept;", on_text, re.M)
    off_cpu = re.search(r"^lprofile: not kept: .*?(\d+) thread samples were off-CPU", on_text, re.M)
    assert m and off_cpu, on_text
    samples, kept, sleeping = int(m.group(1)), int(m.group(2)), int(off_cpu.group(1))
    # A sample that lands while a trace exits (VM state EXIT: the frames are
    # being restored from a snapshot) has no stack to read, and is counted
    # so: seen once in 405 samples in a CI run, and once in five runs here.
    bad = re.search(r"(\d+) thread samples had a stack that could not be read", on_text)
    unreadable = int(bad.group(1)) if bad else 0
    assert kept + sleeping + unreadable == samples and unreadable <= 0.02 * samples, on_text
    assert abs(100.0 * sleeping / samples - 100.0 * times["read"] / total) <= 10.0, (on_text, times)


@pytest.mark.serial
def test_json(tmp_path):
    """lprofile --json: the stacks add up to the thread stacks, the top
    list's shares are its counts, and f5's share is the program's within 6
    points (4 s of samples)."""
    stop, cmd, _ = busy("r21-gc64", "jit", str(tmp_path))
    doc = json.loads(stop.out("live", JSON))
    n = doc["thread_stacks"]
    assert n >= 400 and sum(s["count"] for s in doc["stacks"]) == n
    times, lines = records(stop)
    rows = {r["function"]: r for r in doc["top"]}
    f5 = rows[label(stop, lines, "f5")]
    assert f5["total_percent"] == pytest.approx(100.0 * f5["total"] / n)
    assert abs(f5["total_percent"] - 100.0 * times["f5"] / sum(times.values())) <= 6.0
    assert json.loads(stop.out("core", JSON).splitlines()[0])["error"].startswith(
        "lprofile: a core file is one moment")


def test_refused_over_a_remote_stub(tmp_path):
    """Over qemu-user's gdb stub the process id gdb has (1) is none of this
    machine's: lprofile says so in one line and signals nothing; the stop
    is as it was (lbt after it is the core's)."""
    stop = Stop("r21-arm64", "bt.lua", ["lprofile --seconds 1", "lbt"], str(tmp_path),
                args=["nest"])
    out = stop.out("live", "lprofile --seconds 1").strip()
    assert out.startswith("lprofile: over a remote stub (qemu-user, gdbserver) the process id "
                          "gdb has is none of this machine's") and len(out.splitlines()) == 1, out
    assert stop.out("live", "lbt") == stop.out("core", "lbt")
    assert "#0   C:ljgdb_stop" in stop.out("live", "lbt")
