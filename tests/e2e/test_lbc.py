"""lbc against LuaJIT's own listings: testprogs/lua/bc.lua loads every test
program and every file of luacheck (Debian's lua-check: a real program no
one here wrote) without running them, plus chunks of other names, a
function with constants of every kind and one whose loop the JIT has
compiled, and dumps each with jit.bc.dump(f, out, true) in the process;
`lbc --all` of each must print the same, live and from the core.  The
loaded files must also list as `luajit -bl FILE` (the variant's luajit)
lists them."""
import glob
import json
import os
import subprocess

import pytest

from support.stop import BOTH_ARCHES, LUA_DIR, Stop, addr_of, driver_command

# (Less vendor/sha1/lua53_ops.lua: Lua 5.3's bitwise operators, which
# luacheck loads only on Lua 5.3.)
LUACHECK = sorted(p for p in glob.glob("/usr/share/lua/5.1/luacheck/**/*.lua", recursive=True)
                  if not p.endswith("/lua53_ops.lua"))
FILES = sorted(glob.glob(os.path.join(LUA_DIR, "*.lua"))) + LUACHECK

DRIVER = r'''
import json, os
out = {}
for line in open(os.path.join(os.path.dirname(os.path.abspath(%r)), "expected.txt")):
    r = line.rstrip("\n").split("\t")
    if r[0] != "dump":
        continue
    a = r[2].rsplit(" ", 1)[1]
    try:
        out[r[1]] = gdb.execute("lbc --all " + a, to_string=True)
    except gdb.error as e:
        out[r[1]] = "error: %%s" %% e
# A chunk's name alone: its main function.
out["values.lua alone"] = gdb.execute("lbc --all values.lua", to_string=True)
bad = {}
for cmd in ("lbc", "lbc 0x8", "lbc nosuch.lua:5", "lbc ljgdb_break", "lbc (GCtab *)0",
            "lbc nosuch.lua"):
    try:
        bad[cmd] = gdb.execute(cmd, to_string=True)
    except gdb.error as e:
        bad[cmd] = "error: " + str(e)
out["bad input"] = bad
print("@@LBC@@" + json.dumps(out))
'''


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    assert LUACHECK, "lua-check is not installed (testprogs/install-deps.sh installs it)"
    work = str(tmp_path_factory.mktemp("lbc-" + request.param))
    return Stop(request.param, "bc.lua", [driver_command(work, DRIVER)], work,
                args=FILES)


def lua_text(data):
    """LuaJIT's listing (bytes) as lbc writes it: a byte above 127 as \\ddd,
    lbc's one documented difference (its lines stay ASCII)."""
    return "".join("\\%03d" % b if b > 127 else chr(b) for b in data)


def results(stop, mode):
    text = stop.out(mode, stop.commands[0])
    return json.loads(text.split("@@LBC@@", 1)[1].strip().splitlines()[0])


def dumps(stop):
    assert [r for r in stop.expected if r[0] == "unloadable"] == []
    return {r[1]: (addr_of(r[2]), r[3]) for r in stop.expected if r[0] == "dump"}


@pytest.mark.parametrize("mode", ("live", "core"))
def test_lbc_is_what_jit_bc_dumps(stop, mode):
    want = dumps(stop)
    assert set(want) >= set(FILES) | {"=name", "long", "short", "consts", "hot"}
    got = results(stop, mode)
    bad = [name for name, (_, path) in want.items()
           if got[name] + "\n" != lua_text(open(path, "rb").read())]
    assert not bad, (len(bad), bad[:5], got[bad[0]][:2000])
    # The listings hold what they are meant to.
    consts = open(want["consts"][1]).read()
    assert "TSETM" in consts and "; inf" in consts and '"~' in consts, consts
    if stop.build.get("jit", True):
        assert "JFORL" in open(want["hot"][1]).read()


def test_lbc_is_what_luajit_bl_lists(stop):
    """The loaded, never run, files against `luajit -bl FILE`."""
    got = results(stop, "live")
    env = dict(os.environ, LUA_PATH=os.path.join(stop.build["src"], "?.lua") + ";;")
    lines = 0
    for path in FILES:
        p = subprocess.run(stop.build.get("runner", []) + [stop.build["luajit"], "-bl", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        want = lua_text(p.stdout)
        assert got[path] + "\n" == want, (path, got[path][:1500])
        if path == os.path.join(LUA_DIR, "values.lua"):
            assert got["values.lua alone"] + "\n" == want, got["values.lua alone"][:1500]
        lines += want.count("\n")
    assert lines > 10000


def test_lbc_bad_input_is_one_line(stop):
    bad = results(stop, "live")["bad input"]
    want = {
        "lbc": "error: lbc: missing function. Usage: ",
        "lbc 0x8": "error: lbc: no GC object at 0x8",
        "lbc nosuch.lua:5": "error: lbc: no prototype is defined at nosuch.lua:5",
        "lbc ljgdb_break": "error: lbc: 'ljgdb_break' is not a pointer or an address",
        "lbc (GCtab *)0": "error: lbc: no GC object at 0x0",
        "lbc nosuch.lua": "error: lbc: no chunk named nosuch.lua is loaded",
    }
    for cmd, start in want.items():
        assert bad[cmd].startswith(start) and "\n" not in bad[cmd].strip(), (cmd, bad[cmd])
