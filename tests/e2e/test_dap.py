"""python3 -m ljgdb dap (commands/hosts/dap.py) driven as an editor drives
it, over the Debug Adapter Protocol, on gcore cores of bt.lua: threads,
frames, scopes and variables against what the program recorded with
debug.getinfo, debug.getlocal and pairs() before it stopped."""
import re

import pytest

from support.dapclient import DapClient
from support.stop import Stop, lua_quote, unhex, value_regex
from test_lbt import ffnames, recorded

VARIANTS = ("r21-gc64", "r20-x64")
_stops = {}


def stop(variant, scenario, tmp_path_factory):
    key = (variant, scenario)
    if key not in _stops:
        _stops[key] = Stop(variant, "bt.lua", ["lbt"],
                           str(tmp_path_factory.mktemp("dap-%s-%s" % key)), args=[scenario])
    return _stops[key]


def session(st):
    c = DapClient()
    caps = c.ok("initialize", adapterID="ljgdb", linesStartAt1=True, columnsStartAt1=True)
    assert caps["supportsConfigurationDoneRequest"] and not caps["supportsSetVariable"]
    c.ok("launch", core=st.core, program=st.build["host"])
    c.ok("configurationDone")
    assert c.event("initialized") is not None      # (sent after launch's response)
    return c


def lua_frames(st, c, tid):
    frames = c.ok("stackTrace", threadId=tid)["stackFrames"]
    return frames, [f for f in frames if f.get("presentationHint") != "subtle"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_frames_and_locals(variant, tmp_path_factory):
    """bt.lua nest: the running thread's frames are the levels debug.getinfo
    recorded (file, line), C and builtin frames subtle; the innermost Lua
    frame's Locals are debug.getlocal's names and values, its Upvalues
    debug.getupvalue's."""
    st = stop(variant, "nest", tmp_path_factory)
    c = session(st)
    try:
        threads = c.ok("threads")["threads"]
        stopped = c.event("stopped")        # (sent after configurationDone's response)
        assert stopped["body"]["reason"] == "exception" and stopped["body"]["allThreadsStopped"]
        assert stopped["body"]["threadId"] == threads[0]["id"]
        assert threads[0]["name"].startswith("main thread 0x"), threads
        frames, lua = lua_frames(st, c, threads[0]["id"])
        recs = [r for r in recorded(st, "main") if r["what"] != "C"]
        assert frames[0]["name"] == "C:ljgdb_stop" and frames[0]["presentationHint"] == "subtle"
        assert [(f["source"]["path"], f["line"]) for f in lua] == \
            [(r["source"][1:], int(r["line"])) for r in recs]
        scopes = c.ok("scopes", frameId=lua[0]["id"])["scopes"]
        assert [s["name"] for s in scopes] == ["Locals", "Upvalues"]
        ff = ffnames(st)
        got = c.ok("variables", variablesReference=scopes[0]["variablesReference"])["variables"]
        want = recs[0]["locals"]
        assert [v["name"] for v in got] == [n for n, _, _ in want]
        for v, (n, t, s) in zip(got, want):
            assert re.match(value_regex(t, s, ff) + "$", v["value"]), (n, v, t, s)
        ups = c.ok("variables", variablesReference=scopes[1]["variablesReference"])["variables"]
        assert [(v["name"]) for v in ups] == [n for n, _, _ in recs[0]["upvals"]]
        for v, (n, t, s) in zip(ups, recs[0]["upvals"]):
            assert re.match(value_regex(t, s, ff) + "$", v["value"]), (n, v, t, s)
        # The debug console runs ljgdb's commands.
        out = c.ok("evaluate", expression="lbt", context="repl")["result"]
        assert out.startswith("Lua backtrace of (lua_State *)0x"), out
        bad = c.request("evaluate", expression="lbogus", context="repl")
        assert not bad["success"] and bad["message"].startswith("'lbogus' is not an ljgdb command")
        assert "Traceback" not in bad["message"]
    finally:
        assert c.close() == 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_tables_three_levels_deep(variant, tmp_path_factory):
    """bt.lua tables: `deep` expanded in the editor's variables view three
    levels down (deep, deep.list, deep.list[3]) gives, at each level, the
    entries pairs() gave the program, with the counts of its array and hash
    parts; hovering `deep` gives its value and reference."""
    st = stop(variant, "tables", tmp_path_factory)
    entries = {}
    for r in st.expected:
        if r[0] == "entry":
            entries.setdefault(r[1], []).append(r[2:6])
    c = session(st)
    try:
        tid = c.ok("threads")["threads"][0]["id"]
        _, lua = lua_frames(st, c, tid)
        scopes = c.ok("scopes", frameId=lua[0]["id"])["scopes"]
        loc = c.ok("variables", variablesReference=scopes[0]["variablesReference"])["variables"]
        var = [v for v in loc if v["name"] == "deep"][0]
        hover = c.ok("evaluate", expression="deep", context="hover", frameId=lua[0]["id"])
        assert hover["result"] == var["value"] and hover["variablesReference"] > 0
        path = "deep"
        for step, counts in ((("string", "hex:" + b"list".hex()), (0, 3)),
                             (("number", "3"), (3, 0)), (None, (0, 2))):
            want = entries[path]
            assert (var["indexedVariables"], var["namedVariables"]) == counts, (path, var)
            got = c.ok("variables", variablesReference=var["variablesReference"])["variables"]
            assert sorted(v["name"] for v in got) == sorted(view_name(kt, ks) for kt, ks, _, _ in want)
            for v in got:
                kt, ks, t, s = [w for w in want if view_name(w[0], w[1]) == v["name"]][0]
                assert re.match(value_regex(t, s) + "$", v["value"]), (path, v, t, s)
            if step is not None:
                var = [v for v in got if v["name"] == view_name(*step)][0]
                path += "/" + step[1]
    finally:
        assert c.close() == 0


def view_name(kt, ks):
    """A key as the variables view names it (as ltab writes it in a table
    constructor), from the program's record of it (type, enc's text)."""
    if kt == "string":
        s = unhex(ks)
        return s.decode() if re.match(rb"^[A-Za-z_][A-Za-z_0-9]*$", s) else "[%s]" % lua_quote(s)
    return "[%s]" % ks


def test_refusals(tmp_path):
    """A launch without a core, of a file that is none, and a request the
    server does not do: one line each, no traceback, the session goes on."""
    c = DapClient()
    try:
        c.ok("initialize", adapterID="ljgdb")
        r = c.request("launch")
        assert not r["success"] and r["message"].startswith("launch needs \"core\"")
        r = c.request("launch", core=str(tmp_path / "nothing"))
        assert not r["success"] and "does not exist" in r["message"]
        notcore = tmp_path / "text"
        notcore.write_text("not a core\n")
        r = c.request("launch", core=str(notcore))
        assert not r["success"] and "\n" not in r["message"] and "Traceback" not in r["message"]
        r = c.request("next", threadId=1)
        assert not r["success"] and "does not do 'next'" in r["message"]
        r = c.request("threads")
        assert not r["success"] and r["message"] == "no core yet: launch one first"
    finally:
        assert c.close() == 0
