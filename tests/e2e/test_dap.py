"""python3 -m ljgdb dap (commands/hosts/dap.py) driven as an editor drives
it, over the Debug Adapter Protocol, on gcore cores of bt.lua: threads,
frames, scopes and variables against what the program recorded with
debug.getinfo, debug.getlocal and pairs() before it stopped."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from support.dapclient import DapClient
from support.host import proc_state
from support.stop import CACHE, ROOT, Stop, addr_of, lua_quote, unhex, value_regex
from test_lbt import ffnames, recorded
from test_live import Waiting, assert_left_alone
from test_live_readonly import assert_unchanged, snapshot

VARIANTS = ("r21-gc64", "r20-x64")
NODE_MODULES = os.path.join(CACHE, "npm", "node_modules")
SESSION_JS = os.path.join(ROOT, "tests", "dap_session.js")
_stops = {}


def stop(variant, scenario, tmp_path_factory):
    key = (variant, scenario)
    if key not in _stops:
        _stops[key] = Stop(variant, "bt.lua", ["lbt"],
                           str(tmp_path_factory.mktemp("dap-%s-%s" % key)), args=[scenario],
                           stop_on="SIGSEGV" if scenario == "crash" else "break")
    return _stops[key]


def session(st):
    c = DapClient()
    caps = c.ok("initialize", adapterID="ljgdb", linesStartAt1=True, columnsStartAt1=True)
    assert caps["supportsConfigurationDoneRequest"] and not caps["supportsSetVariable"]
    c.ok("launch", core=st.core, program=st.build["host"])
    c.ok("configurationDone")
    assert c.event("initialized") is not None      # (sent after launch's response)
    return c


def attached(prog):
    """A client attached to prog (test_live.Waiting), configured; prog is
    stopped if that fails."""
    c = DapClient()
    try:
        c.ok("initialize", adapterID="ljgdb")
        c.ok("attach", pid=prog.pid)
        c.ok("configurationDone")
    except BaseException:
        c.close()
        prog.stop()
        raise
    return c


def lua_frames(st, c, tid):
    frames = c.ok("stackTrace", threadId=tid)["stackFrames"]
    return frames, [f for f in frames if "source" in f]


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
        # After the Lua frames, under a label, the OS thread's machine
        # frames: the host's C functions the program called, innermost first.
        label = [i for i, f in enumerate(frames) if f.get("presentationHint") == "label"]
        assert len(label) == 1 and frames[label[0]]["name"] == "C frames of the OS thread"
        machine = [f["name"] for f in frames[label[0] + 1:]]
        assert machine[:2] == ["ljgdb_break", "ljgdb_stop"], machine
        assert "main" in machine
        assert c.ok("scopes", frameId=frames[label[0] + 1]["id"])["scopes"] == []
        assert c.ok("stackTrace", threadId=threads[0]["id"])["totalFrames"] == len(frames)
        page = c.ok("stackTrace", threadId=threads[0]["id"], startFrame=1, levels=2)["stackFrames"]
        assert [f["name"] for f in page] == [f["name"] for f in frames[1:3]]
        assert [(f["source"]["path"], f["line"]) for f in lua] == \
            [(r["source"][1:], int(r["line"])) for r in recs]
        scopes = c.ok("scopes", frameId=lua[0]["id"])["scopes"]
        varargs = [x for x in recs[0]["locals"] if x[0].startswith("(*vararg ")]
        assert [s["name"] for s in scopes] == \
            ["Locals"] + ["Varargs"] * bool(varargs) + ["Upvalues", "Globals"]
        ff = ffnames(st)
        for scope, want in zip(scopes, ([x for x in recs[0]["locals"] if x not in varargs], varargs)):
            got = c.ok("variables", variablesReference=scope["variablesReference"])["variables"]
            assert [v["name"] for v in got] == [n for n, _, _ in want]
            for v, (n, t, s) in zip(got, want):
                assert re.match(value_regex(t, s, ff) + "$", v["value"]), (n, v, t, s)
        scopes = [sc for sc in scopes if sc["name"] != "Varargs"]
        ups = c.ok("variables", variablesReference=scopes[1]["variablesReference"])["variables"]
        assert [(v["name"]) for v in ups] == [n for n, _, _ in recs[0]["upvals"]]
        for v, (n, t, s) in zip(ups, recs[0]["upvals"]):
            assert re.match(value_regex(t, s, ff) + "$", v["value"]), (n, v, t, s)
        # Globals: the function's environment, bt.lua's global function
        # obj_index among LuaJIT's own; a name Lua would read as a global.
        glob = c.ok("variables", variablesReference=scopes[2]["variablesReference"])["variables"]
        names = {v["name"]: v["value"] for v in glob}
        assert re.match(r"function: \(GCfuncL \*\)0x[0-9a-f]+ .*bt\.lua:\d+$", names["obj_index"])
        assert re.match(r"function: \(GCfuncC \*\)0x[0-9a-f]+ \[builtin#print\]$", names["print"])
        assert scopes[2]["namedVariables"] == len(glob) and scopes[2]["indexedVariables"] == 0
        hover = c.ok("evaluate", expression="obj_index", context="hover", frameId=lua[0]["id"])
        assert hover["result"] == names["obj_index"]
        hover = c.ok("evaluate", expression="no_such_global", context="watch", frameId=lua[0]["id"])
        assert hover["result"] == "nil"
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
    entries = table_entries(st)
    c = session(st)
    try:
        tid = c.ok("threads")["threads"][0]["id"]
        _, lua = lua_frames(st, c, tid)
        scopes = c.ok("scopes", frameId=lua[0]["id"])["scopes"]
        loc = c.ok("variables", variablesReference=scopes[0]["variablesReference"])["variables"]
        var = [v for v in loc if v["name"] == "deep"][0]
        hover = c.ok("evaluate", expression="deep", context="hover", frameId=lua[0]["id"])
        assert hover["result"] == var["value"] and hover["variablesReference"] > 0
        # A watch on the table by its address, as lval takes it.
        addr = re.search(r"0x[0-9a-f]+", var["value"]).group(0)
        watch = c.ok("evaluate", expression="(GCtab *)" + addr, context="watch")
        assert watch["result"] == var["value"] and watch["type"] == "table"
        got = c.ok("variables", variablesReference=watch["variablesReference"])["variables"]
        check_level(got, entries["deep"], "deep")
        bad = c.request("evaluate", expression="(GCtab *)zz", context="watch")
        assert not bad["success"] and bad["message"].startswith("lval: ") and "\n" not in bad["message"]
        path = "deep"
        for step, counts in ((("string", "hex:" + b"list".hex()), (0, 3)),
                             (("number", "3"), (3, 0)), (None, (0, 2))):
            assert (var["indexedVariables"], var["namedVariables"]) == counts, (path, var)
            got = c.ok("variables", variablesReference=var["variablesReference"])["variables"]
            check_level(got, entries[path], path)
            if step is not None:
                var = [v for v in got if v["name"] == view_name(*step)][0]
                path += "/" + step[1]
    finally:
        assert c.close() == 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_functions_userdata_cdata_expand(variant, tmp_path_factory):
    """bt.lua tables: a Lua closure expands into its prototype (defined
    where debug.getinfo says) and its upvalues as debug.getupvalue gives
    them; coroutine.wrap's C closure into its one upvalue, the coroutine; a
    userdata into its metatable, the one getmetatable gave; a cdata into
    lval's lines of it."""
    st = stop(variant, "tables", tmp_path_factory)
    info = {r[1]: (r[2], int(r[3])) for r in st.expected if r[0] == "fn"}
    ups = {}
    for r in st.expected:
        if r[0] == "fnup":
            ups.setdefault(r[1], []).append((r[3], r[4], r[5]))
    c = session(st)
    try:
        tid = c.ok("threads")["threads"][0]["id"]
        _, lua = lua_frames(st, c, tid)
        scopes = c.ok("scopes", frameId=lua[0]["id"])["scopes"]
        loc = {v["name"]: v for v in
               c.ok("variables", variablesReference=scopes[0]["variablesReference"])["variables"]}
        got = c.ok("variables", variablesReference=loc["bump"]["variablesReference"])["variables"]
        assert info["bump"][0] == "Lua"
        assert re.match(r"^\(GCproto \*\)0x[0-9a-f]+ .*bt\.lua:%d$" % info["bump"][1],
                        got[0]["value"]) and got[0]["name"] == "[prototype]", got[0]
        assert [v["name"] for v in got[1:]] == [n for n, _, _ in ups["bump"]]
        for v, (n, t, s) in zip(got[1:], ups["bump"]):
            assert re.match(value_regex(t, s) + "$", v["value"]), (n, v, t, s)
        assert info["wrapped"][0] == "C"
        got = c.ok("variables", variablesReference=loc["wrapped"]["variablesReference"])["variables"]
        assert [v["name"] for v in got] == ["[%d]" % (i + 1) for i in range(len(ups["wrapped"]))]
        for v, (n, t, s) in zip(got, ups["wrapped"]):
            assert n == "" and re.match(value_regex(t, s) + "$", v["value"]), (n, v, t, s)
        # A userdata: its metatable (the one getmetatable gave), expandable.
        mt, ctype, *elements = [r[1:] for r in st.expected if r[0] == "ud"][0]
        got = {v["name"]: v for v in
               c.ok("variables", variablesReference=loc["ud"]["variablesReference"])["variables"]}
        assert got["[metatable]"]["value"] == "table: (GCtab *)0x%x" % addr_of(mt)
        inner = c.ok("variables", variablesReference=got["[metatable]"]["variablesReference"])
        assert [v["name"] for v in inner["variables"]] == ["__index"]
        # A cdata: its type as ffi.typeof names it, its elements.
        got = {v["name"]: v["value"] for v in
               c.ok("variables", variablesReference=loc["cd"]["variablesReference"])["variables"]}
        assert "ctype<%s>" % got["[type]"] == ctype
        assert got["[value]"] == "{%s}" % ", ".join(elements)
    finally:
        assert c.close() == 0


def table_entries(st):
    """{path: [(key type, key, value type, value)]} that bt.lua tables recorded."""
    entries = {}
    for r in st.expected:
        if r[0] == "entry":
            entries.setdefault(r[1], []).append(r[2:6])
    return entries


def check_level(got, want, path):
    assert sorted(v["name"] for v in got) == sorted(view_name(kt, ks) for kt, ks, _, _ in want), path
    for v in got:
        kt, ks, t, s = [w for w in want if view_name(w[0], w[1]) == v["name"]][0]
        assert re.match(value_regex(t, s) + "$", v["value"]), (path, v, t, s)


def vscode_session(args):
    """What tests/dap_session.js printed (VS Code's DebugClient against
    `dap --port 0`) with these arguments after the port."""
    if not os.path.exists(os.path.join(NODE_MODULES, "@vscode", "debugadapter-testsupport")):
        pytest.fail("VS Code's DAP test client is missing from %s: testprogs/install-deps.sh "
                    "installs the npm package @vscode/debugadapter-testsupport" % NODE_MODULES)
    node = shutil.which("node") or shutil.which("nodejs")
    assert node, "no node: testprogs/install-deps.sh installs Debian's nodejs"
    srv = subprocess.Popen([sys.executable, "-m", "ljgdb", "dap", "--port", "0"], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = srv.stderr.readline().decode()
        m = re.match(r"ljgdb dap: listening on 127\.0\.0\.1:(\d+)$", line.strip())
        assert m, line
        p = subprocess.run([node, SESSION_JS, m.group(1)] + [str(a) for a in args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                           env=dict(os.environ, NODE_PATH=NODE_MODULES))
        assert p.returncode == 0, p.stderr.decode()[-2000:]
        lines = p.stdout.decode().splitlines()
        assert lines[-1] == "disconnected", lines[-1:]
        assert srv.wait(30) == 0
        return json.loads(lines[-2])
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


@pytest.mark.parametrize("variant", VARIANTS)
def test_vscode_test_client(variant, tmp_path_factory):
    """VS Code's own DAP test client (@vscode/debugadapter-testsupport's
    DebugClient, on Node) connected to `dap --port 0`: the stopped event,
    the threads, the frames debug.getinfo recorded, and `deep` expanded
    three levels down as pairs() listed it; the debug console's lbt."""
    st = stop(variant, "tables", tmp_path_factory)
    got = vscode_session(["launch", st.core, st.build["host"], "deep/list/[3]", "lbt"])
    assert got["stopped"]["threadId"] == got["threads"][0]["id"]
    recs = [r for r in recorded(st, "main") if r["what"] != "C"]
    lua = [f for f in got["frames"] if "source" in f]
    assert [(f["source"]["path"], f["line"]) for f in lua] == \
        [(r["source"][1:], int(r["line"])) for r in recs]
    assert [s["name"] for s in got["scopes"]] == ["Locals", "Upvalues", "Globals"]   # (no varargs)
    assert [v["name"] for v in got["levels"][0]] == [n for n, _, _ in recs[0]["locals"]]
    entries = table_entries(st)
    for level, path in zip(got["levels"][1:], ("deep", "deep/hex:" + b"list".hex(),
                                               "deep/hex:" + b"list".hex() + "/3")):
        check_level(level, entries[path], path)
    assert got["repl"].startswith("Lua backtrace of (lua_State *)0x"), got["repl"]


def test_vscode_test_client_source_and_attach(tmp_path_factory, tmp_path):
    """The same client: a chunk loaded from a string gives its bytecode
    listing as the frame's source (bt.lua strchunk); and attached to
    wait.lua, the frames it recorded at its read, the process left alone
    after the session and reading on."""
    st = stop("r21-gc64", "strchunk", tmp_path_factory)
    _, name, first, last = [r for r in st.expected if r[0] == "strchunk"][0]
    got = vscode_session(["launch", st.core, st.build["host"], "", "linfo"])
    assert got["source"].splitlines()[0] == "-- BYTECODE -- %s:%s-%s" % (name[1:], first, last)
    prog = Waiting("r21-gc64", tmp_path)
    try:
        got = vscode_session(["attach", prog.pid, "-", "", "lbt"])
        assert got["stopped"]["reason"] == "pause"
        want = prog.frames()
        lua = [f for f in got["frames"] if "source" in f]
        assert [(f["source"]["path"], f["line"]) for f in lua[:len(want)]] == \
            [(source, line) for _, source, line in want]
        prog.wait_blocked()
        assert_left_alone(prog.pid)
        prog.quit()
    finally:
        prog.stop()


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
        r = c.request("attach", pid="x")
        assert not r["success"] and r["message"].startswith("attach needs \"pid\"")
        r = c.request("attach", pid=2 ** 22 + 1)
        assert not r["success"] and r["message"].startswith("attach: ") and "\n" not in r["message"]
        r = c.request("stackTrace", threadId=1, startFrame="x")
        assert not r["success"] and "\n" not in r["message"] and "Traceback" not in r["message"]
        # A process without LuaJIT: refused, and let go at once.
        other = subprocess.Popen(["sleep", "60"])
        try:
            deadline = time.time() + 10
            while proc_state(other.pid) != "S" and time.time() < deadline:
                time.sleep(0.01)            # (until it sleeps in its nanosleep)
            r = c.request("attach", pid=other.pid)
            assert not r["success"] and r["message"].startswith("attach: ") and \
                "\n" not in r["message"], r
            assert_left_alone(other.pid)
        finally:
            other.kill()
            other.wait()
    finally:
        assert c.close() == 0


def test_attach_pause_continue(tmp_path):
    """attach to wait.lua blocked in its read: held while the session looks
    (the frames are the ones debug.getinfo recorded at the read), let go on
    `continue` (it reads a line and comes back to its read), held again on
    `pause`, let go on `disconnect`: never traced or stopped after, no
    signal left pending, and it ends by itself when told."""
    prog = Waiting("r21-gc64", tmp_path)
    c = attached(prog)
    try:
        for round in range(2):
            threads = c.ok("threads")["threads"]
            stopped = [e for e in c.events if e["event"] == "stopped"][-1]
            assert stopped["body"]["reason"] == "pause" and \
                stopped["body"]["threadId"] == threads[0]["id"]
            assert proc_state(prog.pid) == "t"          # held by ptrace
            _, lua = lua_frames(None, c, threads[0]["id"])
            want = prog.frames()
            assert [(f["source"]["path"], f["line"]) for f in lua[:len(want)]] == \
                [(source, line) for _, source, line in want]
            assert c.ok("continue", threadId=threads[0]["id"])["allThreadsContinued"]
            prog.wait_blocked()             # (back in its read: runnable a moment first)
            assert_left_alone(prog.pid)
            r = c.request("threads")
            assert not r["success"] and r["message"] == "process %d runs: pause it first" % prog.pid
            prog.send("line%d" % round)
            prog.wait_blocked()
            c.ok("pause", threadId=threads[0]["id"])
        assert c.close() == 0
        prog.wait_blocked()
        assert_left_alone(prog.pid)
        prog.quit()
    finally:
        c.close()
        prog.stop()


@pytest.mark.parametrize("variant", VARIANTS)
def test_chunk_without_a_file(variant, tmp_path_factory):
    """bt.lua strchunk: a frame of a chunk loaded from a string has a
    sourceReference, and its source is the function's bytecode listing,
    headed as luajit -bl heads it with the chunk's name and the lines
    debug.getinfo gave."""
    st = stop(variant, "strchunk", tmp_path_factory)
    _, name, first, last = [r for r in st.expected if r[0] == "strchunk"][0]
    recs = [r for r in recorded(st, "main") if r["what"] != "C"]
    c = session(st)
    try:
        tid = c.ok("threads")["threads"][0]["id"]
        _, lua = lua_frames(st, c, tid)
        top = lua[0]
        assert (top["source"]["name"], top["line"]) == (name, int(recs[0]["line"]))
        assert "path" not in top["source"]
        src = c.ok("source", sourceReference=top["source"]["sourceReference"],
                   source=top["source"])
        assert src["content"].splitlines()[0] == "-- BYTECODE -- %s:%s-%s" % (name[1:], first, last)
    finally:
        assert c.close() == 0


def test_many_coroutines_grouped(tmp_path):
    """many.lua 2000 (more coroutines than the server lists one by one):
    the main thread first, then a DAP thread a group of coroutines that
    read the same, with the counts and statuses the program recorded for
    its shapes, and each group's stack the Lua frames debug.getinfo gave
    one coroutine of that shape."""
    st = Stop("r21-gc64", "many.lua", ["lbt"], str(tmp_path), args=["2000"])
    shapes = {r[1]: (int(r[2]), r[3]) for r in st.expected if r[0] == "shape"}
    frames = {}
    for r in st.expected:
        if r[0] == "frame":
            frames.setdefault(r[1], []).append((r[3][1:], int(r[4])))
    c = session(st)
    try:
        threads = c.ok("threads")["threads"]
        assert threads[0]["name"].startswith("main thread 0x") and "(running)" in threads[0]["name"]
        groups = []
        for t in threads[1:]:
            m = re.match(r"^(\d+) coroutines? \((\w+)\): .* \(e\.g\. 0x[0-9a-f]+\)$", t["name"])
            if m is None:
                assert t["name"].startswith("VM thread g->vmthref 0x"), t["name"]
                continue
            lua = [f for f in c.ok("stackTrace", threadId=t["id"])["stackFrames"]
                   if "source" in f]
            groups.append((int(m.group(1)), m.group(2),
                           [(f["source"]["path"], f["line"]) for f in lua]))
        # (coroutine.status says "suspended" for one not started yet, as
        # the scan does; the frames of such a one are none)
        assert sorted(groups) == sorted((n, status, frames.get(shape, []))
                                        for shape, (n, status) in shapes.items())
    finally:
        assert c.close() == 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_core_of_a_crash(variant, tmp_path_factory):
    """bt.lua crash (a SIGSEGV in a C function called through the FFI): the
    stopped event names the signal, and the Lua frames are the ones the
    program recorded before it crashed."""
    st = stop(variant, "crash", tmp_path_factory)
    c = session(st)
    try:
        threads = c.ok("threads")["threads"]
        stopped = c.event("stopped")["body"]
        assert stopped["reason"] == "exception" and stopped["description"].startswith("SIGSEGV ")
        _, lua = lua_frames(st, c, threads[0]["id"])
        recs = [r for r in recorded(st, "main") if r["what"] != "C"]
        assert [(f["source"]["path"], f["line"]) for f in lua] == \
            [(r["source"][1:], int(r["line"])) for r in recs]
    finally:
        assert c.close() == 0


def test_attached_process_unchanged(tmp_path):
    """A whole attached session (every thread, every frame's scopes and
    variables, a table expanded, commands in the debug console, continue
    and pause) changes nothing in the process: its writable memory and
    its threads' system call registers hash the same after (the read-only
    check of test_live_readonly, whose note on rseq applies), and it reads
    on."""
    prog = Waiting("r21-gc64", tmp_path, env={"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})
    before = snapshot(prog.pid)
    c = attached(prog)
    try:
        for round in range(2):
            for t in c.ok("threads")["threads"]:
                for f in c.ok("stackTrace", threadId=t["id"])["stackFrames"]:
                    for sc in c.ok("scopes", frameId=f["id"])["scopes"]:
                        for v in c.ok("variables", variablesReference=sc["variablesReference"])["variables"]:
                            if v["variablesReference"]:
                                c.ok("variables", variablesReference=v["variablesReference"])
            for cmd in ("lbt --all", "lgcstat", "lthreads", "linfo"):
                c.ok("evaluate", expression=cmd, context="repl")
            c.ok("continue", threadId=1)
            c.ok("pause", threadId=1)
        assert c.close() == 0
        prog.wait_blocked()
        assert_unchanged(prog, before)
    finally:
        c.close()
        prog.stop()


def test_every_vm_of_the_process(tmp_path):
    """The test host with LJGDB_STATES=3 makes two more Lua states before
    bt.lua runs (each with 10 coroutines made by coroutine.create and never
    started, then idle): the threads list the stopped VM's first, then each
    other VM's main thread and its 10 coroutines, named by their
    global_State, suspended; their stacks read (none has Lua frames)."""
    st = Stop("r21-gc64", "bt.lua", ["lbt"], str(tmp_path), args=["nest"],
              env={"LJGDB_STATES": "3"})
    c = session(st)
    try:
        threads = c.ok("threads")["threads"]
        assert threads[0]["name"].startswith("main thread 0x") and "(running)" in threads[0]["name"]
        others = {}
        for t in threads:
            m = re.match(r"^\[G (0x[0-9a-f]+)\] (.*)$", t["name"])
            if m:
                others.setdefault(m.group(1), []).append((t["id"], m.group(2)))
        assert len(others) == 2, threads
        for G, ts in others.items():
            names = [n for _, n in ts]
            assert names[0].startswith("main thread 0x") and "(idle)" in names[0], names
            coros = [n for n in names if n.startswith("coroutine ")]
            assert len(coros) == 10 and all("(suspended)" in n for n in coros), names
            for tid, _ in ts:
                lua = [f for f in c.ok("stackTrace", threadId=tid)["stackFrames"] if "source" in f]
                assert lua == []
    finally:
        assert c.close() == 0
