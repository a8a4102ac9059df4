"""lthreads and lbt --all over many coroutines (testprogs/lua/many.lua):
the fast scanner (gdb_ext/stack/threadscan.py) against what the program
recorded with coroutine.status and debug.getinfo, --group's counts against
the program's own, and lbt --all's block of a sample of threads of every
kind against lbt L= of that thread (the Backtracer's full rules), live and
on the core; and the heap graph over those threads in C as in Python."""
import re

import pytest

from support.cpaths import reader
from support.stop import BOTH_ARCHES, Stop, chunk_display, traceback_name

N = 2000


def shapes(expected):
    out = {}
    for r in expected:
        if r[0] == "shape":
            out[r[1]] = {"count": int(r[2]), "status": r[3], "frames": []}
    for r in expected:
        if r[0] == "frame":
            out[r[1]]["frames"].append("%s:%s" % (chunk_display(r[3]), r[4]))
            out[r[1]].setdefault("lines", []).append("#%-3s %s:%s: in %s" % (
                r[2], chunk_display(r[3]), r[4], traceback_name(r[5], r[6], r[7], r[3], r[8])))
    return out


def blocks(text):
    """lbt --all's text as {lua_State address: its block of lines}."""
    out = {}
    for block in text.strip().split("\n\n"):
        lines = block.splitlines()
        m = re.match(r"Lua backtrace of \(lua_State \*\)(0x[0-9a-f]+)", lines[0])
        if m:
            out[int(m.group(1), 16)] = lines
    return out


# Run inside gdb: every thread's block of lbt --all (the fast scanner) must
# equal lbt L=<thread> (the Backtracer), for a sample of each kind of block.
COMPARE = r"""
import re
text = gdb.execute("lbt --all", to_string=True)
kinds = {}
for block in text.strip().split("\n\n"):
    lines = block.splitlines()
    m = re.match(r"Lua backtrace of \(lua_State \*\)(0x[0-9a-f]+) \([^,]+, (\w+)", lines[0])
    if m:
        kinds.setdefault((m.group(2), len(lines)), []).append((m.group(1), lines))
n = 0
for v in kinds.values():
    for L, lines in (v[0], v[len(v) // 2], v[-1]):
        other = gdb.execute("lbt L=" + L, to_string=True).strip().splitlines()
        n += 1
        if other != lines:
            print("MISMATCH %s: %r != %r" % (L, lines, other))
print("COMPARED %d" % n)
# The scan's C code (threadc) took the threads after the first ones; the
# Python scan alone gives the same text.
import os
from ljgdb.gdb_ext.stack import threadc
print("THREADC %s" % (threadc.load()[0] is not None))
c_text = [gdb.execute(c, to_string=True) for c in ("lthreads", "lbt --all")]
os.environ["LJGDB_THREADSCAN"] = "python"
try:
    py_text = [gdb.execute(c, to_string=True) for c in ("lthreads", "lbt --all")]
finally:
    del os.environ["LJGDB_THREADSCAN"]
print("SCANS %s" % ("SAME" if c_text == py_text else "DIFFER"))
"""


@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_many_coroutines(variant, tmp_path):
    script = str(tmp_path / "compare.py")
    with open(script, "w") as f:
        f.write(COMPARE)
    cmds = ["lthreads --group", "lbt --all --group", "lbt --all", "lthreads",
            "python exec(open(%r).read())" % script, "lbt --all --folded"]
    s = Stop(variant, "many.lua", cmds, str(tmp_path), args=[str(N)])
    want = shapes(s.expected)
    assert sum(v["count"] for v in want.values()) == N
    for mode in ("live", "core"):
        grouped = s.out(mode, "lthreads --group").splitlines()
        for name, w in want.items():
            # The innermost yield is a fast function; the recorded frames
            # are the Lua ones below it.
            frames = " < ".join(["[builtin#coroutine.yield]"] + w["frames"]) if w["frames"] \
                else "(no Lua frames)"
            line = [ln for ln in grouped if re.match(r"\s*\d+  %s\s+%s  \(e\.g\. "
                                                     % (w["status"], re.escape(frames)), ln)]
            assert len(line) == 1, (mode, name, w, grouped)
            assert int(line[0].split()[0]) == w["count"], (mode, line)
        text = s.out(mode, "lbt --all --group")
        for name, w in want.items():
            if w["frames"]:
                head = [ln for ln in text.splitlines()
                        if ln.startswith("%d threads (%s): " % (w["count"], w["status"]))]
                assert head, (mode, name, text)
                # The group's frames, each named as debug.getinfo names it
                # (the scanner's names: its lines are the Backtracer's,
                # COMPARE below).
                block = text.split(head[0] + "\n", 1)[1].split("\n\n", 1)[0].splitlines()
                assert block[1:] == w["lines"], (mode, name, block, w["lines"])
        # Folded: each shape's stack, outermost first, with its count.
        folded = s.out(mode, "lbt --all --folded").splitlines()
        for name, w in want.items():
            if w["frames"]:
                line = ";".join(w["frames"][::-1] + ["[builtin#coroutine.yield]"])
                assert "%s %d" % (line, w["count"]) in folded, (mode, name, folded)
        all_blocks = blocks(s.out(mode, "lbt --all"))
        assert len(all_blocks) >= N, (mode, len(all_blocks))
        rows = [ln.split() for ln in s.out(mode, "lthreads").splitlines() if ln.startswith("0x")]
        assert len(rows) == len(all_blocks)
    if variant == "r21-gc64":
        # The core reader: threadc with every long read refused (one request
        # at a time then) prints what the Python scan prints.
        outs = {how: reader(s, how, "LJGDB_THREADSCAN", "lthreads") for how in ("python", "runs unreadable")}
        assert outs["python"] == outs["runs unreadable"], outs
        assert len([ln for ln in outs["python"].splitlines() if ln.startswith("0x")]) == \
            len(all_blocks)
        # The heap graph over many threads: their stacks' references read
        # in C (graphc.c, LJ_FR2) give what Heap._thread gives in Python.
        th = [ln.split()[0] for ln in outs["python"].splitlines() if ln.startswith("0x")]
        for args in (["lgcstat", "--retained", "--json"], ["lgcpath", th[len(th) // 2]]):
            got = {how: reader(s, how, "LJGDB_HEAPGRAPH", *args)
                   for how in ("C", "python", "pages copied")}
            assert len(set(got.values())) == 1, (args, got)
    for mode in ("live", "core"):
        out = s.out(mode, "python exec(open(%r).read())" % script)
        assert "MISMATCH" not in out and re.search(r"COMPARED \d\d", out), (mode, out[-3000:])
        assert "THREADC True" in out and "SCANS SAME" in out, (mode, out[-3000:])
