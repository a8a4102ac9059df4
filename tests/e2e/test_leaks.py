"""lgcref and lgcpath against the references testprogs/lua/leak.lua made
itself: a growing cache table, closures in a callback list, a suspended
coroutine's local, a weak-valued table beside a strong reference, and a
table that only an upvalue of a function in the registry holds, a table
only a weak-keyed table holds, and a dead key (its value set to nil).  Every
variant, live and from the core."""
import json

import pytest

from support.stop import BOTH_ARCHES, Stop, addr_of, driver_command

# Runs inside gdb, live and on the core: lgcpath and lgcref (--json) on
# every object the program recorded (its expected file is beside it).
DRIVER = r'''
import json, os
exp = os.path.join(os.path.dirname(os.path.abspath(%r)), "expected.txt")
out = {}
retained = {}
for line in open(exp):
    r = line.rstrip("\n").split("\t")
    if r[0] == "retained":
        a = r[2].rsplit(" ", 1)[1]
        retained[r[1]] = json.loads(gdb.execute("lgcstat --retained --json %%s" %% a,
                                                to_string=True))
        continue
    if r[0] in ("traced", "zombie"):
        a = r[1].rsplit(" ", 1)[1]
        out[r[0]] = {cmd: json.loads(gdb.execute("%%s --json %%s" %% (cmd, a), to_string=True))
                     for cmd in ("lgcpath", "lgcref")}
        continue
    if r[0] != "leak":
        continue
    a = r[2].rsplit(" ", 1)[1]
    res = {}
    for cmd in ("lgcpath", "lgcref"):
        try:
            res[cmd] = json.loads(gdb.execute("%%s --json %%s" %% (cmd, a), to_string=True))
        except gdb.error as e:
            res[cmd] = {"error": str(e)}
    res["text"] = gdb.execute("lgcpath %%s" %% a, to_string=True)
    out[r[1]] = res
bad = {}
for cmd in ("lgcref", "lgcpath 0x8", "lgcref (GCtab *)0", "lgcpath ljgdb_break", "lgcref 1.5"):
    try:
        bad[cmd] = gdb.execute(cmd, to_string=True)
    except gdb.error as e:
        bad[cmd] = "error: " + str(e)
out["bad input"] = bad
out["retained"] = retained
top = json.loads(gdb.execute("lgcstat --retained --top 5 --json", to_string=True))
out["top"] = top
print("@@LEAKS@@" + json.dumps(out))
'''


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp(request.param))
    return Stop(request.param, "leak.lua", [driver_command(work, DRIVER)], work)


def results(stop, mode):
    text = stop.out(mode, [c for c in stop.commands][0])
    return json.loads(text.split("@@LEAKS@@", 1)[1].strip().splitlines()[0])


def recorded(stop):
    leaks, refs = {}, {}
    for r in stop.expected:
        if r[0] == "leak":
            leaks[r[1]] = (addr_of(r[2]), r[3])
        elif r[0] == "ref":
            refs.setdefault(r[1], []).append((r[2], addr_of(r[3]), r[4]))
    assert set(leaks) == {"cache", "closure", "coroutine", "weak", "registry", "orphan",
                          "deadkey"}, \
        stop.expected
    return leaks, refs


@pytest.mark.parametrize("mode", ("live", "core"))
def test_retained_bytes_are_what_the_collector_freed(stop, mode):
    """For each leak, leak.lua measured what dropping its one reference
    frees (collectgarbage("count") around full collections), then built it
    again: lgcstat --retained of the new one says the same bytes, and the
    path the program built."""
    want = {r[1]: (addr_of(r[2]), int(r[3]), r[4]) for r in stop.expected
            if r[0] == "retained"}
    assert set(want) == {"cache", "closure", "coroutine", "weak", "registry"}, stop.expected
    got = results(stop, mode)["retained"]
    for name, (addr, nbytes, path) in want.items():
        o = got[name]["object"]
        assert o["address"] == "0x%x" % addr, (name, o)
        assert (o["retained"], o["path"]) == (nbytes, path), (name, o)
        # Every object is reached or not, once: the bytes add up.
        doc = got[name]
        assert doc["reached_bytes"] + doc["unreached_bytes"] == doc["object_bytes"], doc
    # In the list of the most retaining objects, each retains at least what
    # the next does, and _G (holding every leak but the registry's) is there.
    top = results(stop, mode)["top"]["top"]
    assert [e["retained"] for e in top] == sorted((e["retained"] for e in top), reverse=True)
    assert "_G" in [e["path"] for e in top], top


@pytest.mark.parametrize("mode", ("live", "core"))
def test_lgcpath_is_the_path_the_program_built(stop, mode):
    leaks, _ = recorded(stop)
    got = results(stop, mode)
    for name, (addr, path) in leaks.items():
        doc = got[name]["lgcpath"]
        assert doc.get("target") == "0x%x" % addr, (name, doc)
        text = got[name]["text"].splitlines()
        if path == "-":
            # Only a weak table's key: nothing keeps it alive.
            assert doc["expression"] is None and doc["steps"] == [], (name, doc)
            assert text == ["table (GCtab *)0x%x: no root reaches it (the next full collection "
                            "frees it)" % addr], text
            continue
        assert doc["expression"] == path, (name, doc)
        assert text[0] == path and len(text) == len(doc["steps"]) + 1, text


@pytest.mark.parametrize("mode", ("live", "core"))
def test_bad_input_is_one_line(stop, mode):
    bad = results(stop, mode)["bad input"]
    want = {
        "lgcref": "error: lgcref: missing object. Usage: ",
        "lgcpath 0x8": "error: lgcpath: no GC object at 0x8 (its header does not read as one)",
        "lgcref (GCtab *)0": "error: lgcref: no GC object at 0x0",
        "lgcpath ljgdb_break": "error: lgcpath: 'ljgdb_break' is not a pointer or an address",
        "lgcref 1.5": "error: lgcref: '1.5' is not a pointer or an address",
    }
    for cmd, start in want.items():
        assert bad[cmd].startswith(start) and "\n" not in bad[cmd].strip(), (cmd, bad[cmd])


@pytest.mark.parametrize("mode", ("live", "core"))
def test_a_trace_constant_is_a_reference(stop, mode):
    """A closure only a trace calls: lgcref finds it exactly where
    jit.util.tracek found it (trace number, constant index)."""
    want = sorted((int(r[2]), int(r[3])) for r in stop.expected if r[0] == "traced")
    assert want, ("the loop made no trace that holds the closure", stop.expected)
    doc = results(stop, mode)["traced"]["lgcref"]
    got = sorted((r["traceno"], r["index"]) for r in doc["referrers"] if r["how"] == "irk")
    assert got == want, doc
    assert [r for r in doc["referrers"] if r["how"] != "irk"] == [], doc
    assert doc["roots"] == []
    assert "(IR constant %d of " % want[0][1] in results(stop, mode)["traced"]["lgcpath"][
        "expression"]


@pytest.mark.parametrize("mode", ("live", "core"))
def test_a_resurrected_userdata_is_shown_as_such(stop, mode):
    """A userdata whose __gc stored it in _G.zombie: its finalizer has run
    (LJ_GC_FINALIZED), and _G.zombie keeps it alive."""
    (z,), = [r[1:] for r in stop.expected if r[0] == "zombie"]
    got = results(stop, mode)["zombie"]
    for cmd in ("lgcpath", "lgcref"):
        # tostring() printed the payload's address, which follows the
        # GCudata header the command names.
        assert 0 < addr_of(z) - int(got[cmd]["target"], 16) <= 64, got[cmd]
        assert got[cmd]["finalizer"] == "finalized", got[cmd]
        assert "its __gc has run: resurrected" in got[cmd]["object"], got[cmd]
    assert got["lgcpath"]["expression"] == "_G.zombie", got["lgcpath"]
    assert [(r["how"], r["key"]) for r in got["lgcref"]["referrers"]] == [("val", '"zombie"')]


def _as_recorded(ref):
    """A referrer of lgcref --json in the terms leak.lua records them."""
    how = ref["how"]
    if how == "arr":
        return ("arr-weak" if ref["weak"] else "arr", int(ref["holder"], 16), str(ref["index"]))
    if how == "val":
        return ("val-weak" if ref["weak"] else "val", int(ref["holder"], 16),
                ref["key"].strip('"'))
    if how == "key":
        return ("key-weak" if ref["weak"] else "key", int(ref["holder"], 16), ref["value"])
    return (how, int(ref["holder"], 16), ref.get("name"))


@pytest.mark.parametrize("mode", ("live", "core"))
def test_lgcref_lists_every_reference_the_program_made(stop, mode):
    leaks, refs = recorded(stop)
    got = results(stop, mode)
    for name in leaks:
        doc = got[name]["lgcref"]
        assert doc["roots"] == [], (name, doc)
        have = sorted(_as_recorded(r) for r in doc["referrers"])
        want = sorted((how, holder, where) for how, holder, where in refs.get(name, ()))
        assert have == want, (name, doc["referrers"])
