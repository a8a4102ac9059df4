#!/usr/bin/env python3
"""Writes the figures of docs/internals.md: runs testprogs/lua/tour.lua
(two stops), frag.lua (lheap) and jit_traces.lua (lmcode) in the GC64 and
X64 builds of upstream 2.1 under gdb with ljgdb, and prints the Markdown
of every command's output (every figure of the tour is real output of
this run).

  python3 docs/tour.py > /tmp/figures.md
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import (LOADER, LUA_DIR, cut_outputs, manifest, read_expected, run_gdb,  # noqa: E402
                          wrap_commands)

VARIANTS = ("r21-gc64", "r21-x64")
STOP1 = ["lgcstat"] + ["lval --raw L %d" % i for i in range(1, 14)] + ["lgcstat --save SNAP"]
STOP2 = ["lgcstat --diff SNAP --top 3"]


def run(variant, work):
    m = manifest()[variant]
    snap = os.path.join(work, "snap")
    one = [c.replace("SNAP", snap) for c in STOP1]
    two = [c.replace("SNAP", snap) for c in STOP2]
    exp = os.path.join(work, "expected.txt")
    args = ["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run"] + \
        wrap_commands(one) + ["-ex", "continue"] + wrap_commands(two, len(one)) + \
        ["-ex", "continue", "-ex", "kill", "--args", m["host"], os.path.join(LUA_DIR, "tour.lua"), exp]
    text = run_gdb(args, cwd=work, env={"LUA_PATH": os.path.join(m["src"], "?.lua") + ";;"})
    outs = dict(cut_outputs(text, one + two))
    return {c: outs.get(c.replace("SNAP", snap)) for c in STOP1 + STOP2}, \
        {r[0]: r[1:] for r in read_expected(exp)}, snap


# One stop each: (program, its arguments after the expected file, commands,
# the function to break on, the variants).  oom.lua fills an X64 heap (2 GB)
# and its core is read by the core reader too.
SINGLE = (("frag.lua", [], ["lheap"], "ljgdb_break", VARIANTS),
          ("jit_traces.lua", ["main"], ["lmcode"], "ljgdb_break", VARIANTS),
          ("popen.lua", [], ["lbt full"], "popen", VARIANTS[:1]),
          ("oom.lua", [], ["lgcstat --top 3", "gcore CORE"], "ljgdb_break", VARIANTS[1:]))


def one_stop(variant, program, args, commands, stop_at, work):
    m = manifest()[variant]
    exp = os.path.join(work, "expected-" + program)
    core = os.path.join(work, "core-" + program)
    commands = [c.replace("CORE", core) for c in commands]
    cmd = ["-ex", "source " + LOADER, "-ex", "break " + stop_at, "-ex", "run"] + \
        wrap_commands(commands) + ["-ex", "kill", "--args", m["host"],
                                   os.path.join(LUA_DIR, program), exp] + args
    text = run_gdb(cmd, cwd=work, env={"LUA_PATH": os.path.join(m["src"], "?.lua") + ";;"})
    outs = {c.replace(core, "CORE"): t for c, t in cut_outputs(text, commands)}
    if os.path.exists(core):
        p = subprocess.run([sys.executable, "-m", "ljgdb", core, m["host"], "lgcstat"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        outs["reader lgcstat"] = p.stdout.decode()
        os.unlink(core)
    if os.path.exists(exp):
        outs["expected " + program] = open(exp).read()
    return outs


def _objects(text):
    """(object bytes, g->gc.total) from lgcstat's text."""
    obj = int(re.search(r"^objects\s+\d+\s+(\d+)", text, re.M).group(1))
    total = int(re.search(r"g->gc.total: (\d+) bytes", text).group(1))
    return obj, total


def main():
    res = {}
    for v in VARIANTS:
        with tempfile.TemporaryDirectory(prefix="ljgdb-tour-") as work:
            outs, exp, snap = run(v, work)
            for program, args, commands, stop_at, variants in SINGLE:
                if v in variants:
                    outs.update(one_stop(v, program, args, commands, stop_at, work))
            # (the checkout's own directory left out: paths read as from its root)
            res[v] = {c: (t or "(no output)").replace(snap, "snap").replace(ROOT + "/", "")
                      .rstrip("\n") for c, t in outs.items()}

    def b(v, c):
        return "```\n(gdb) %s\n%s\n```\n" % (c.replace("SNAP", "snap"), res[v][c])
    g, x = VARIANTS
    og, tg = _objects(res[g]["lgcstat"])
    ox, tx = _objects(res[x]["lgcstat"])
    diff = "lgcstat --diff SNAP --top 3"
    sys.stdout.write(TOUR.format(
        gc64_objects=og, x64_objects=ox, percent=round(100.0 * (og - ox) / ox),
        gc64_total=tg, x64_total=tx,
        fig_lgcstat=b(g, "lgcstat") + "\n" + b(x, "lgcstat"),
        fig_raw="\n".join(b(v, "lval --raw L %d" % i) for i in range(1, 14) for v in (g, x)),
        fig_popen=b(g, "lbt full"),
        fig_oom=b(x, "lgcstat --top 3") + "\n```\n$ python3 -m ljgdb core lgcstat\n%s\n```\n"
        % res[x]["reader lgcstat"].rstrip("\n"),
        oom_made=res[x]["expected oom.lua"].split("\t")[1],
        oom_error=res[x]["expected oom.lua"].split("\t")[2].strip(),
        fig_diff=b(g, diff) + "\n" + b(x, diff),
        fig_lheap=b(g, "lheap") + "\n" + b(x, "lheap"),
        fig_lmcode=b(g, "lmcode")))


TOUR = """# A tour of LuaJIT's insides, in ljgdb's output

Each figure here is real output of ljgdb on a real LuaJIT, made by
`python3 docs/tour.py > docs/internals.md`: it runs test programs in the
GC64 and the X64 build of upstream LuaJIT 2.1 under gdb and writes this
page. `testprogs/lua/tour.lua` stops twice: first with values of every kind
on the stack and the collector stopped after a full collection, then after
making 1000 coroutines of one empty function.

## The same program under GC64 and X64

GC64 makes every GC reference 64 bits wide: each header that holds
references grows (`GCtab` from 32 to 64 bytes, `lua_State` from 64 to 96,
`GCfuncL` from 24 to 48), and so does every slot of the string table and
of `J->trace`. For this small program the objects take {gc64_objects} bytes
in GC64 against {x64_objects} in X64 ({percent}% more), and `g->gc.total`
is {gc64_total} against {x64_total}. Strings grow least (4 bytes of
header); closures and prototypes most.

{fig_lgcstat}
## One TValue, two layouts

The values `tour.lua` passes to its stop (nil, true, 42, 0.5, a string, a
table, a Lua function, a built-in, false, a coroutine, a userdata, a light
userdata, a cdata), bit for bit. A TValue is 8 bytes in both. In X64 the type tag is the high 32 bits and a
GC object's address the low 32 (so the heap lives below 4 GB, the old 2 GB
limit); in GC64 the tag is the top 17 bits and the address the low 47. A
number is a double in both, recognised by a tag below `LJ_TISNUM`; `nil` in
GC64 is all ones.

{fig_raw}
## What a coroutine costs

`lgcstat --save` at the first stop and `--diff` at the second: the 1000
coroutines are 1000 `lua_State`s, each with its own stack, and nothing
else (the function is shared; the traces are the JIT compiling the loop
that made them). A coroutine with an empty stack costs 480 bytes in GC64
and 424 in X64: the `lua_State` (96 or 64 bytes) and a stack of
`LJ_STACK_START` (40) + `LJ_STACK_EXTRA` (8 with GC64's two-slot frames,
5 without) slots of 8 bytes: 96 + 48 * 8 = 480, 64 + 45 * 8 = 424
(R lj_state.c, lj_def.h). PUC Lua 5.4's published figure for a coroutine
is about 1.1 kB.

{fig_diff}
## The allocator after a fragmenting workload

`testprogs/lua/frag.lua` makes 2000 empty tables one after the other and
drops every other one: the dropped tables' chunks lie between kept ones and
cannot merge, so about 1000 free chunks of a table's chunk size (its
`GCtab` plus the 8-byte chunk header: 72 bytes in GC64, 40 in X64) sit in
the small bins. The top chunk and the designated victim (the chunk last
split) hold the rest of the free space.

{fig_lheap}
## Machine code areas and the jump range

`testprogs/lua/jit_traces.lua` forces 4 KB mcode areas: each area lists
its traces, its distance from the VM's exit handler, and whether it lies in
the window upstream 2.1 keeps all areas in (J->mcmin..J->mcmax, half the
x86-64 jump range around the exit handler, so that every trace can jump to
it).

{fig_lmcode}
## An X64 heap at its 2 GB limit

`testprogs/lua/oom.lua` keeps strings of 1 MB in a table until LuaJIT says
no: in the X64 build it made {oom_made} of them before `{oom_error}`. Every
GC object of an X64 build lives below 4 GB (a GCRef is 32 bits), and
LuaJIT's allocator keeps its memory below 2 GB. `lgcstat` stopped there,
then the core reader on the core gdb wrote: the strings are the heap.

{fig_oom}
## A frame in a fast function: io.popen

`testprogs/lua/popen.lua` calls `io.popen` from a Lua function; `tour.py`
breaks on the C library's `popen`, called by LuaJIT's built-in. The Lua
stack shows the built-in (a fast function, by its name in LuaJIT's own
`jit.vmdef`) above the Lua frame that called it.

{fig_popen}"""


if __name__ == "__main__":
    main()
