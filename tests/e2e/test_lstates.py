"""The VM found wherever the process stands: an idle VM seen from an OS
thread whose frames name no Lua state (the memory search), several VMs in
one process (lstates, G=), live and from a core.  The host records each
state's main lua_State and g->gc.total (from lua_gc) itself."""
import json
import re

import pytest

from support.stop import BOTH_ARCHES, Stop, addr_of


def records(stop, kind):
    return [r[1:] for r in stop.expected if r[0] == kind]


def rows(text):
    return [line.split() for line in text.splitlines() if line.startswith("0x")]


@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_idle_vm_from_a_thread_outside_lua(variant, tmp_path):
    cmds = ["linfo", "lbt", "lthreads", "lstates", "lgcstat"]
    s = Stop(variant, "idle.lua", cmds, str(tmp_path), env={"LJGDB_IDLE": "1"})
    (L, total), = records(s, "state")
    L = int(L, 16)
    for mode in ("live", "core"):
        linfo = s.out(mode, "linfo")
        if mode == "live" and s.build.get("arch") == "arm64":
            # qemu-user's gdb stub gives no memory map to search: said, in
            # one line, by every command.
            for cmd in cmds:
                out = s.out(mode, cmd).strip()
                if cmd == "lstates":       # an empty table, then the line
                    out = out.splitlines()[-1]
                assert "the memory map of this process is not known here, so it cannot be " \
                       "searched for a Lua state" in out and "\n" not in out, (cmd, out)
            continue
        assert "memory search" in linfo, linfo
        assert re.search(r"main lua_State:\s+\(lua_State \*\)0x%x\n" % L, linfo), linfo
        lbt = s.out(mode, "lbt").splitlines()
        assert lbt == ["Lua backtrace of (lua_State *)0x%x (main thread, idle)" % L,
                       "(no Lua frames)"], lbt
        lthreads = s.out(mode, "lthreads")
        for co, status in records(s, "coroutine"):
            assert re.search(r"^0x%x\s+%s\s" % (addr_of(co), status), lthreads, re.M), lthreads
        assert re.search(r"^0x%x\s+idle\s" % L, lthreads, re.M), lthreads
        got = rows(s.out(mode, "lstates"))
        assert len(got) == 1, got
        G, mainL, running, gctotal, vmstate = got[0][:5]
        assert (int(mainL, 16), running, int(gctotal), vmstate) == (L, "idle", int(total), "C")
        assert "memory search" in s.out(mode, "lstates")
        assert "g->gc.total: %s bytes (exact)" % total in s.out(mode, "lgcstat")


@pytest.mark.parametrize("variant", ("r21-gc64", "r21-x64", "r20-x64", "or-gc64"))
def test_several_vms_in_one_process(variant, tmp_path):
    # Expressions with spaces, as one writes them in gdb.
    g_of = "G=((char *) ljgdb_states[%d] + (long) &((GG_State *) 0)->g)"
    cmds = ["lstates", "linfo", "lgcstat " + g_of % 2, "lbt " + g_of % 1,
            "lbt L=(lua_State *) ljgdb_states[2]", "lbt G=ljgdb_states[1]", "lstates --json"]
    s = Stop(variant, "idle.lua", cmds, str(tmp_path), env={"LJGDB_IDLE": "1", "LJGDB_STATES": "3"})
    states = [(int(L, 16), int(total)) for L, total in records(s, "state")]
    assert len(states) == 3
    for mode in ("live", "core"):
        got = rows(s.out(mode, "lstates"))
        assert sorted((int(r[1], 16), int(r[3])) for r in got) == sorted(states), got
        assert all(r[2] == "idle" for r in got)
        doc = json.loads(s.out(mode, "lstates --json"))
        assert sorted((int(d["main_L"], 16), d["gc_total"]) for d in doc["states"]) == \
            sorted(states)
        assert all(d["idle"] and d["vmstate"] == "C" for d in doc["states"])
        linfo = s.out(mode, "linfo")
        assert "3 LuaJIT states" in linfo and "G=<address>" in linfo, linfo
        assert all("0x%x" % int(r[0], 16) in linfo for r in got)
        # The host lists ljgdb_states[0], [1], [2] in that order.
        L2, total2 = states[2]
        assert "g->gc.total: %d bytes (exact)" % total2 in s.out(mode, "lgcstat " + g_of % 2)
        assert s.out(mode, "lbt " + g_of % 1).startswith(
            "Lua backtrace of (lua_State *)0x%x (main thread, idle)" % states[1][0])
        assert s.out(mode, "lbt L=(lua_State *) ljgdb_states[2]").startswith(
            "Lua backtrace of (lua_State *)0x%x (main thread, idle)" % L2)
        # A lua_State where a global_State belongs: one line that says so.
        bad = s.out(mode, "lbt G=ljgdb_states[1]")
        assert bad.startswith("lbt: ") and "global_State" in bad and len(bad.splitlines()) == 1, bad
