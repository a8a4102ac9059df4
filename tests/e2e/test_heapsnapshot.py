"""lgcstat --save FILE --format heapsnapshot: the Lua heap as a V8 heap
snapshot, read by a real consumer, memlab (@memlab/core: its parser and its
own dominator tree, through tests/memlab_read.js).  On testprogs/lua/leak.lua's
stop, live in gdb, from the core in gdb and in the core reader (python3 -m
ljgdb CORE BINARY): memlab's retained size of each probe is the bytes the
collector freed when the program dropped it, and what lgcstat --retained says
of it on the same stop; the nodes' self sizes add up to lgcstat's bytes of
the objects, per type; edges are named as lgcref names references (a local,
an upvalue, a table's key and index), a weak table's entry is a weak edge, a
table is named by its metatable's __name."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from support.stop import BOTH_ARCHES, CACHE, ROOT, Stop, addr_of, driver_command, manifest, sysroot_args

MEMLAB_JS = os.path.join(ROOT, "tests", "memlab_read.js")
NODE_MODULES = os.path.join(CACHE, "npm", "node_modules")

# Runs inside gdb, live and on the core: the snapshot (a file per mode),
# lgcstat's per-type bytes, lgcstat --retained of each probe, bad input.
DRIVER = r'''
import json, os
work = os.path.dirname(os.path.abspath(%r))
mode = "core" if "core dump file" in gdb.execute("info target", to_string=True) else "live"
exp = os.path.join(work, "expected.txt")
out = {"mode": mode}
path = os.path.join(work, mode + ".heapsnapshot")
out["save"] = json.loads(gdb.execute("lgcstat --save %%s --format heapsnapshot --json" %% path,
                                     to_string=True))
out["text"] = gdb.execute("lgcstat --save %%s --format heapsnapshot" %% path, to_string=True)
out["stat"] = json.loads(gdb.execute("lgcstat --json", to_string=True))
out["retained"] = {}
for line in open(exp):
    r = line.rstrip("\n").split("\t")
    if r[0] == "retained":
        a = r[2].rsplit(" ", 1)[1]
        out["retained"][r[1]] = json.loads(gdb.execute("lgcstat --retained --json %%s" %% a,
                                                       to_string=True))["object"]
bad = {}
for cmd in ("lgcstat --save %%s --format xml" %% path, "lgcstat --format heapsnapshot",
            "lgcstat --retained --format heapsnapshot"):
    try:
        bad[cmd] = gdb.execute(cmd, to_string=True)
    except gdb.error as e:
        bad[cmd] = "error: " + str(e)
out["bad"] = bad
print("@@HEAPSNAP@@" + json.dumps(out))
'''

# The probes of leak.lua's "retained" records, as memlab_read.js selects
# them: the edge names from the root along the path the program built.
PROBES = {"cache": "_G/cache/sessions", "closure": "_G/callbacks/2", "coroutine": "_G/worker",
          "weak": "_G/keeper/only", "registry": "registry/hook"}
# lgcstat's types as V8 node types.
V8_TYPE = {"table": "object", "thread": "object", "function": "closure", "string": "string",
           "prototype": "code", "trace": "code", "userdata": "native", "cdata": "native",
           "upvalue": "hidden"}


def memlab(path, selections):
    if not os.path.exists(os.path.join(NODE_MODULES, "@memlab", "core", "package.json")):
        pytest.fail("memlab is missing from %s: testprogs/install-deps.sh installs the npm "
                    "package @memlab/core" % NODE_MODULES)
    node = shutil.which("node") or shutil.which("nodejs")
    assert node, "no node: testprogs/install-deps.sh installs Debian's nodejs"
    p = subprocess.run([node, MEMLAB_JS, path] + list(selections), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300,
                       env=dict(os.environ, NODE_PATH=NODE_MODULES))
    text = p.stdout.decode("utf-8", "replace")
    assert p.returncode == 0 and "@@MEMLAB@@" in text, (p.returncode, text[-2000:],
                                                        p.stderr.decode()[-2000:])
    return json.loads(text.split("@@MEMLAB@@", 1)[1].splitlines()[0])


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp(request.param))
    st = Stop(request.param, "leak.lua", [driver_command(work, DRIVER)], work)
    st.work = work
    return st


def gdb_results(stop, mode):
    text = stop.out(mode, stop.commands[0])
    assert "@@HEAPSNAP@@" in text, text[-3000:]
    return json.loads(text.split("@@HEAPSNAP@@", 1)[1].strip().splitlines()[0])


def reader(stop, args):
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + sysroot_args(stop.build) +
                       [stop.core, stop.build["host"]] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=ROOT, timeout=600)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def reader_results(stop):
    """What the core reader says of the core (as the driver's)."""
    path = os.path.join(stop.work, "reader.heapsnapshot")
    rc, out, err = reader(stop, ["lgcstat", "--save", path, "--format", "heapsnapshot",
                                 "--json"])
    assert rc == 0, (out, err)
    rc2, stat, err2 = reader(stop, ["lgcstat", "--json"])
    assert rc2 == 0, err2
    return {"mode": "reader", "save": json.loads(out), "stat": json.loads(stat)}


def _check(stop, res, want_retained):
    save = res["save"]
    assert os.path.exists(save["file"]), save
    got = memlab(save["file"], list(PROBES.values()) + [
        "_G/worker/held", "_G/callbacks/2/big", "_G/callbacks/2/big/value",
        "_G/weakcache/[1]", "_G/named", "name=ljgdb.Probe"])
    sel = got["selected"]
    # memlab parsed every node and edge written.
    assert (got["nodes"], got["edges"]) == (save["nodes"], save["edges"]), (got, save)
    # Each probe's retained size in memlab's dominator tree is what the
    # collector freed when the program dropped it.
    for name, path in PROBES.items():
        (node,) = sel[path]
        assert node["retained"] == want_retained[name], (name, node, want_retained)
    # The self sizes add up to lgcstat's objects' bytes, type by type.
    stat = res["stat"]
    assert got["self_size"] == stat["object_bytes"] == save["self_size"], (got, stat)
    per_type = {}
    for t in stat["types"]:
        per_type[V8_TYPE[t["type"]]] = per_type.get(V8_TYPE[t["type"]], 0) + t["bytes"]
    assert {k: v for k, v in got["types"].items() if v} == \
        {k: v for k, v in per_type.items() if v}, (got["types"], per_type)
    # Names: a Lua function by chunk:line, a local, an upvalue (its upvalue
    # object, which holds the value), a table by its metatable's __name, a
    # weak table's entry as a weak edge to the object keeper.only holds.
    assert sel["_G/callbacks/2"][0]["type"] == "closure"
    leak_lua = os.path.join(ROOT, "testprogs", "lua", "leak.lua:")
    assert sel["_G/callbacks/2"][0]["name"].startswith(leak_lua), sel
    assert sel["_G/worker/held"][0]["type"] == "object", sel
    assert sel["_G/callbacks/2/big"][0]["type"] == "hidden", sel
    assert sel["_G/callbacks/2/big/value"][0]["name"] == "table", sel
    assert sel["_G/weakcache/[1]"][0]["id"] == sel["_G/keeper/only"][0]["id"], sel
    assert sel["_G/weakcache/[1]"][0]["edge"] == "weak", sel
    assert sel["_G/keeper/only"][0]["edge"] == "property", sel
    # (The string "ljgdb.Probe" is a node of that name too.)
    assert [n["id"] for n in sel["name=ljgdb.Probe"] if n["type"] == "object"] == \
        [sel["_G/named"][0]["id"]], sel
    return sel


def _want(stop):
    return {r[1]: int(r[3]) for r in stop.expected if r[0] == "retained"}


@pytest.mark.parametrize("mode", ("live", "core"))
def test_memlab_reads_what_gdb_wrote(stop, mode):
    res = gdb_results(stop, mode)
    assert res["mode"] == mode
    sel = _check(stop, res, _want(stop))
    # The same retained sizes as lgcstat --retained on the same stop.
    for name, path in PROBES.items():
        o = res["retained"][name]
        assert (o["address"], o["retained"]) == (hex(addr_of(
            [r for r in stop.expected if r[:2] == ["retained", name]][0][2])),
            sel[path][0]["retained"]), (name, o, sel[path])
    text = res["text"].strip()
    assert text.startswith("Wrote a V8 heap snapshot of (global_State *)0x") and \
        "\n" not in text and " bytes), " in text, text


def test_memlab_reads_what_the_core_reader_wrote(stop):
    res = reader_results(stop)
    _check(stop, res, _want(stop))
    # Byte for byte what gdb wrote from the same core.
    with open(res["save"]["file"], "rb") as a, \
            open(os.path.join(stop.work, "core.heapsnapshot"), "rb") as b:
        assert a.read() == b.read()


def test_bad_input_is_one_line(stop):
    bad = gdb_results(stop, "live")["bad"]
    starts = {"--format xml": "error: lgcstat: unknown format 'xml' (ljgdb or heapsnapshot). "
              "Usage: ",
              "lgcstat --format heapsnapshot": "error: lgcstat: --format goes with --save FILE. "
              "Usage: ",
              "--retained --format": "error: lgcstat: --format goes with --save FILE. Usage: "}
    for cmd, text in bad.items():
        (start,) = [s for k, s in starts.items() if k in cmd]
        assert text.startswith(start) and "\n" not in text.strip(), (cmd, text)
    rc, out, err = reader(stop, ["lgcstat", "--format", "heapsnapshot"])
    assert rc != 0 and err.strip().startswith("lgcstat: --format goes with --save FILE. Usage: ") \
        and "\n" not in err.strip(), (rc, out, err)


@pytest.mark.parametrize("variant", ("r21-gc64", "r21-x64"))
def test_memlab_reads_what_pid_wrote(variant, tmp_path):
    """python3 -m ljgdb --pid PID on a running program (testprogs/lua/wait.lua,
    blocked in a read of a FIFO): the same command writes the snapshot, and
    memlab's nodes add up to what lgcstat --pid counts."""
    build = manifest()[variant]
    fifo, exp = str(tmp_path / "fifo"), str(tmp_path / "expected.txt")
    os.mkfifo(fifo)
    proc = subprocess.Popen([build["host"], os.path.join(ROOT, "testprogs", "lua", "wait.lua"),
                             exp, fifo], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            env=dict(os.environ, LUA_PATH=os.path.join(build["src"], "?.lua") +
                                     ";;"))
    try:
        for _ in range(300):
            if os.path.exists(exp) and "ready" in open(exp).read():
                break
            time.sleep(0.05)
        path = str(tmp_path / "pid.heapsnapshot")

        def pid(*args):
            p = subprocess.run([sys.executable, "-m", "ljgdb", "--pid", str(proc.pid)] +
                               list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=ROOT, timeout=300)
            assert p.returncode == 0, p.stderr.decode()
            return json.loads(p.stdout.decode())
        save = pid("lgcstat", "--save", path, "--format", "heapsnapshot", "--json")
        stat = pid("lgcstat", "--json")
    finally:
        with open(fifo, "w") as f:
            f.write("quit\n")
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    got = memlab(path, [])
    assert (got["nodes"], got["edges"]) == (save["nodes"], save["edges"]), (got, save)
    assert got["self_size"] == save["self_size"] == stat["object_bytes"], (got, save, stat)
