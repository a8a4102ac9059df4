"""lbt at random moments of a spinning VM, against the stack the Lua
program recorded (tests/support/moments.py; testprogs/lua/moments.lua).

A fixed-seed subset of what bench/bench_moments.py runs by the thousand:
on every JIT variant, each way of stopping (attaching gdb, SIGINT under
gdb, SIGABRT and the kernel's core; on arm64 under qemu, SIGINT and
SIGABRT to qemu) over a rotation of the stack shapes.
No moment may be wrong (a frame that differs without a warning); almost
all must be exact.  lthreads must show the running thread where lbt does.
"""
import re

import pytest

from support.stop import (ALL_VARIANTS, ARM64_VARIANTS, BOTH_ARCHES, LOADER, manifest, read_expected,
                          run_gdb)
from support import moments

N = 3           # moments per (variant, way, shape)
SHAPES_PER = {"attach": 5, "sigint": 4, "abort": 3}


def shapes_for(variant, way):
    """A rotation of the shapes, so that each variant and way sees a
    different few and the whole matrix sees them all."""
    k = SHAPES_PER[way]
    start = (BOTH_ARCHES.index(variant) * 7 + moments.WAYS.index(way) * 5) % len(moments.SHAPES)
    return [moments.SHAPES[(start + i) % len(moments.SHAPES)] for i in range(k)]


@pytest.mark.slow      # 5 to 15 s per build and way
@pytest.mark.parametrize("variant,way", [(v, w) for v in ALL_VARIANTS for w in moments.WAYS]
                         + [(v, w) for v in ARM64_VARIANTS for w in moments.ARM64_WAYS])
def test_random_moments(variant, way, tmp_path):
    if way == "abort" and moments.kernel_cores_possible():
        pytest.skip(moments.kernel_cores_possible())
    outcomes = []
    for shape in shapes_for(variant, way):
        res = moments.sample(variant, shape, way, N, 11, str(tmp_path / shape),
                             commands=("lbt", "lthreads"))
        for records, info, (lbt, lthreads) in res:
            verdict, why = moments.judge(records, lbt)
            outcomes.append((shape, verdict, why, info["frame0"], lbt))
            assert verdict != "wrong", (shape, info, why, lbt)
            check_lthreads(records, lbt, lthreads)
    exact = sum(1 for o in outcomes if o[1] == "exact")
    assert exact >= 0.8 * len(outcomes), [o for o in outcomes if o[1] != "exact"]


# Instruction sweep: stopped once in the loop, then every machine
# instruction it executes (`stepi`), in deterministic loops: (shape, steps).
SWEEPS = (("interp", 120), ("luacall", 900), ("calls", 900), ("error", 600), ("jitside", 200))


@pytest.mark.slow      # about 20 s per build
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_instruction_sweep(variant, tmp_path):
    """Every instruction of the loops' bytecode handlers, fast functions,
    VM routines and the C helpers they call: lbt is exact or honest at
    each one, never wrong."""
    for shape, steps in SWEEPS:
        res = moments.sample(variant, shape, "sweep", steps, 1, str(tmp_path / shape))
        verdicts = [moments.judge(records, outs[0]) for records, _, outs in res]
        wrong = [(info, v, outs[0]) for (records, info, outs), v in zip(res, verdicts)
                 if v[0] == "wrong"]
        assert not wrong, wrong[:3]
        exact = sum(1 for v in verdicts if v[0] == "exact")
        # The sweep starts at a random moment.  Once (a cold CI run, deb-x64
        # `calls`) a stretch of 73 moments was honest where gdb's unwinder
        # did not recover a register of an outer VM frame: never wrong, but
        # not exact.  Exactness over thousands of moments is measured by
        # bench/bench_moments.py (README); here a stretch like that may not
        # fail the suite, a trend must.
        assert exact >= 0.90 * len(verdicts), (shape, [v for v in verdicts if v[0] != "exact"][:5])
        # The sweep went through VM code and more than one place.
        assert len({info["pc"] for _, info, _ in res}) > 10


def test_lbt_while_base_holds_an_argument(tmp_path):
    """The dual-number interpreter sends the `calls` loop's mixed
    arithmetic (BC_ADDVV of a double and an integer, checked in gdb) to
    lj_vmeta_arith_vv, which stores L->base and then passes
    lj_meta_arith's arguments in BASE's register (rdx) up to the call: at
    the call, lbt reads L->base and is exact (the store is found in the
    handler's code, 32 bytes in)."""
    build = manifest()["r21-dualnum"]
    dis = run_gdb(["-ex", "disassemble lj_vmeta_arith_vv", build["host"]])
    call = re.search(r"<\+(\d+)>:\s+call\s+\S+ <lj_meta_arith>", dis)
    assert call, dis
    expected = str(tmp_path / "expected.txt")
    out = run_gdb(["-ex", "source " + LOADER,
                   "-ex", "break *(lj_vmeta_arith_vv+%s)" % call.group(1), "-ex", "ignore 1 20",
                   "-ex", "run", "-ex", "echo @@LBT@@\\n", "-ex", "lbt", "-ex", "kill",
                   "--args", build["host"], moments.PROGRAM, expected, "calls"],
                  env=moments._env(build), cwd=str(tmp_path))
    assert "@@LBT@@" in out, out
    lbt = out.split("@@LBT@@\n", 1)[1]
    lbt = lbt[:lbt.index("[Inferior")] if "[Inferior" in lbt else lbt
    verdict, why = moments.judge(read_expected(expected), lbt)
    assert verdict == "exact", (why, lbt)


EXIT_INTERP_SCRIPT = """
python
import re
dis = gdb.execute("disassemble lj_vm_exit_interp", to_string=True)
offs = []
for line in dis.splitlines():
    m = re.match(r"\\s*0x[0-9a-f]+ <\\+(\\d+)>:\\s+(.*)", line)
    if not m:
        continue
    if re.match(r"movl\\s+\\$0xffffffff,", m.group(2)):
        break
    offs.append(int(m.group(1)))
print("@@OFFSETS@@ %s" % offs)
for off in offs:
    gdb.execute("break *(lj_vm_exit_interp+%d)" % off, to_string=True)
for _ in range(HITS):
    gdb.execute("continue", to_string=True)
    print("@@MOMENT@@ %s" % gdb.parse_and_eval("$pc"))
    gdb.execute("lbt")
end
"""


@pytest.mark.parametrize("variant", ("r21-gc64", "r20-x64", "deb-x64", "or-x64"))
def test_lbt_where_a_trace_returns_to_the_interpreter(variant, tmp_path):
    """lj_vm_exit_interp, before it stores the interpreter's state
    (g->vmstate ~LJ_VMST_INTERP): a trace that ends in the interpreter
    jumps there with g->vmstate still naming the trace, the exit handler
    jumps in after restoring a snapshot in state EXIT.  BASE and PC are in
    their registers then, so at every instruction up to the store lbt
    gives the frames debug.getinfo recorded (moments.lua `jitexit`: its
    loop is on one line), not "not known"; the record sampler counted such
    a sample as unreadable."""
    build = manifest()[variant]
    expected = str(tmp_path / "expected.txt")
    script = tmp_path / "exit_interp.gdb"
    script.write_text(EXIT_INTERP_SCRIPT.replace("HITS", "200"))
    # Past record_stack: the loop's C function is being called.
    out = run_gdb(["-ex", "source " + LOADER, "-ex", "break lj_cf_os_time", "-ex", "run",
                   "-ex", "delete", "-ex", "source " + str(script), "-ex", "kill",
                   "--args", build["host"], moments.PROGRAM, expected, "jitexit"],
                  env=moments._env(build), cwd=str(tmp_path))
    offs = re.search(r"@@OFFSETS@@ \[([\d, ]+)\]", out)
    assert offs and len(offs.group(1).split(",")) >= 3, out[-3000:]
    moments_seen = out.split("@@MOMENT@@ ")[1:]
    assert len(moments_seen) == 200, out[-3000:]
    records = read_expected(expected)
    states = set()
    for text in moments_seen:
        pc, lbt = text.split("\n", 1)
        lbt = lbt[:lbt.index("[Inferior")] if "[Inferior" in lbt else lbt
        # (gdb prints the next stop's line itself, not into the string)
        lbt = "\n".join(x for x in lbt.splitlines() if not re.match(r"Breakpoint \d+, ", x))
        verdict, why = moments.judge(records, lbt)
        assert verdict == "exact", (pc, why, lbt)
        states.add(re.search(r"VM state: (\w+)", lbt).group(1))
    # Both ways in were seen: from a trace's end (2.1 stitches around the C
    # call) and from the exit handler.
    assert "EXIT" in states and (variant == "r20-x64" or "TRACE" in states), states


def check_lthreads(records, lbt, lthreads):
    """The running thread's `where` in lthreads is lbt's innermost Lua
    frame (or '?' with the reason when lbt could not know it)."""
    m = re.match(r"Lua backtrace of \(lua_State \*\)(0x[0-9a-f]+) \(.*, running\)", lbt)
    if not m:
        return
    row = [line for line in lthreads.splitlines() if line.startswith(m.group(1) + " ")]
    assert len(row) == 1, lthreads
    assert " running " in row[0], row
    _, frames, warnings = moments.parse_lbt(lbt)
    lua = [f for f in frames if re.match(r".*:\d+$", f) and not f.startswith("[")]
    if lua and not warnings:
        assert re.search(r"\s%s( \(|$)" % re.escape(lua[0]), row[0]), (row[0], lua[0])
    elif warnings:
        assert re.search(r"\s\? \(", row[0]) or (lua and lua[0] in row[0]), (row[0], warnings)


def test_judge_counts_a_wrong_frame_as_wrong():
    """The judge itself: a frame that differs without a warning is wrong,
    the same with a warning line is honest only if what is shown is right."""
    records = [["ffname", "5", "select"], ["frame", "0", "Lua", "@a.lua", "3", "function: 0x1"],
               ["frame", "1", "main", "@a.lua", "9", "function: 0x2"],
               ["allow", "c", "builtin#5", "1"]]
    head = "Lua backtrace of (lua_State *)0x1 (main thread, running)\n"
    assert moments.judge(records, head + "#0   a.lua:3\n#1   a.lua:9")[0] == "exact"
    assert moments.judge(records, head + "#0   [builtin#select]\n#1   a.lua:3\n#2   a.lua:9")[0] \
        == "exact"
    assert moments.judge(records, head + "#0   a.lua:4\n#1   a.lua:9")[0] == "wrong"
    assert moments.judge(records, head + "#0   a.lua:3\n#1   a.lua:3\n#2   a.lua:9")[0] == "wrong"
    assert moments.judge(records, head + "#0   a.lua:3")[0] == "wrong"
    assert moments.judge(records, head + "#1   a.lua:9\nlbt: not known")[0] == "honest"
    assert moments.judge(records, head + "#0   a.lua:3\nlbt: walk stopped")[0] == "honest"
    assert moments.judge(records, head + "#0   a.lua:5\nlbt: walk stopped")[0] == "wrong"
    assert moments.judge(records, head + "lbt: not known")[0] == "honest"


def test_judge_checks_names_where_recorded():
    """Records with debug.getinfo's namewhat, name and linedefined (as
    moments.lua writes them): an exact stack must also name each Lua frame
    as Lua's traceback does."""
    records = [["frame", "0", "Lua", "@a.lua", "3", "function: 0x1", "upvalue", "spin", "2"],
               ["frame", "1", "Lua", "@a.lua", "7", "function: 0x2", "", "", "6"],
               ["frame", "2", "main", "@a.lua", "9", "function: 0x3", "", "", "0"]]
    head = "Lua backtrace of (lua_State *)0x1 (main thread, running)\n"
    good = "#0   a.lua:3: in upvalue 'spin'\n#1   a.lua:7: in function <a.lua:6>\n" \
        "#2   a.lua:9: in main chunk"
    assert moments.judge(records, head + good)[0] == "exact"
    assert moments.judge(records, head + good.replace("upvalue 'spin'", "local 'spin'"))[0] == \
        "wrong"
    assert moments.judge(records, head + good.replace("<a.lua:6>", "<a.lua:7>"))[0] == "wrong"
