"""lbt and dump through the live backend (--pid, no gdb) at random moments
of a spinning VM, judged against the stack the Lua program recorded
(tests/support/moments.py, the pid way; testprogs/lua/moments.lua).

A fixed-seed subset of `python3 bench/bench_moments.py --ways pid`: at each
moment `python3 -m ljgdb --pid PID lbt` and `python3 -m ljgdb dump --pid PID`
run against the program while it runs, and both are judged as lbt under gdb
is.  No moment may be wrong; almost all must be exact (the threshold of
test_moments.py).  The program must run on after every moment.
"""
import pytest

from support import moments

N = 3           # moments per (variant, shape)
SHAPES = ("interp", "calls", "luacall", "vararg", "ffasm", "grow", "error", "coswitch", "jitside",
          "alloc", "parse")
PER_VARIANT = 5


def shapes_for(variant):
    """A rotation of SHAPES: each variant sees a different few."""
    start = {"r21-gc64": 0, "deb-x64": PER_VARIANT}[variant]
    return [SHAPES[(start + i) % len(SHAPES)] for i in range(PER_VARIANT)]


@pytest.mark.slow      # about 15 s per build
@pytest.mark.parametrize("variant", ["r21-gc64", "deb-x64"])
def test_random_moments_pid(variant, tmp_path):
    outcomes = []
    for shape in shapes_for(variant):
        res = moments.sample(variant, shape, "pid", N, 11, str(tmp_path / shape))
        assert len(res) == N
        for records, info, outs in res:
            assert len(outs) == len(moments.LIVE_COMMANDS)
            for cmd, out in zip(moments.LIVE_COMMANDS, outs):
                verdict, why = moments.judge(records, out)
                outcomes.append((shape, cmd, verdict, why, info["frame0"], out))
                assert verdict != "wrong", (shape, cmd, info, why, out)
    exact = sum(1 for o in outcomes if o[2] == "exact")
    assert exact >= 0.8 * len(outcomes), [o for o in outcomes if o[2] != "exact"]


def test_dump_section():
    """dump's section of the one thread with a header is lbt's text; no
    header, or two, leave the whole text (a warning to the judge)."""
    lbt = ("Lua backtrace of (lua_State *)0x1 (main thread, running)\n"
           "#0   a.lua:3\n#1   a.lua:9\n")
    text = 'Thread 12 "host (x)" (R: running)\n' + lbt + "\n2 other threads run no Lua: 13 14\n"
    state, section = moments.dump_section(text)
    assert state == "R" and moments.parse_lbt(section) == moments.parse_lbt(lbt)
    assert moments.dump_section('Thread 12 "h" (S: sleeping)\n' + lbt) == ("S", lbt)
    none = "no thread of process 12 runs Lua code now (no frame names a lua_State); ...\n"
    assert moments.dump_section(none) == ("?", none)
    records = [["frame", "0", "Lua", "@a.lua", "3", "function: 0x1"],
               ["frame", "1", "main", "@a.lua", "9", "function: 0x2"]]
    assert moments.judge(records, moments.dump_section(text)[1])[0] == "exact"
    assert moments.judge(records, none)[0] == "honest"
    assert moments.judge(records, lbt + "Traceback (most recent call last):\n")[0] == "wrong"
