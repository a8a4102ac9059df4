"""lstr against LuaJIT's own count and the strings the program made:
testprogs/lua/strtab.lua makes 300 strings of 64 bytes that differ only in
bytes the primary string hash does not read, keeps them and stops.  On
every variant, live and from the core: the strings in the chains are
g->str.num (g->strnum in 2.0), as gdb prints it; the histogram covers every
slot (mask + 1, as gdb prints it); on 2.0 the 300 strings are one chain,
newest first (flooding works); on 2.1 and its forks the chain was rehashed
with the secondary hash once it passed 32 collisions (lj_str.c), so no
chain holds them all (flooding is defeated)."""
import json
import re

import pytest

from support.stop import BOTH_ARCHES, Stop, manifest

N = 300


def state_expr(variant, field):
    """A gdb expression (not ljgdb) for a field of the string table, from
    the C variable L of ljgdb_break."""
    gc64 = manifest()[variant]["gc64"]
    g = "((global_State *)%sL->glref.%s)" % ("" if gc64 else "(unsigned long)",
                                             "ptr64" if gc64 else "ptr32")
    if variant.startswith("r20"):
        return "print %s->str%s" % (g, field)
    return "print %s->str.%s" % (g, field)


def commands(variant):
    return ["lstr --top 3", "lstr --json", state_expr(variant, "num"),
            state_expr(variant, "mask"), "lstr --top x", "lstr extra", "lstr --bogus"]


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    return Stop(request.param, "strtab.lua", commands(request.param),
                str(tmp_path_factory.mktemp("lstr-" + request.param)), args=[str(N)])


def gdb_number(text):
    return int(text.rsplit("=", 1)[1])


def flood(stop):
    assert [r[1] for r in stop.expected if r[0] == "flood"] == [str(N)]
    strs = [r[1] for r in stop.expected if r[0] == "str"]
    assert len(strs) == N and len(set(strs)) == N
    return strs


@pytest.mark.parametrize("mode", ("live", "core"))
def test_lstr_counts_and_flooding(stop, mode):
    strs = flood(stop)
    cmds = commands(stop.variant)
    num = gdb_number(stop.out(mode, cmds[2]))
    slots = gdb_number(stop.out(mode, cmds[3])) + 1
    text = stop.out(mode, "lstr --top 3")
    lines = text.splitlines()
    m = re.match(r"string table \(GCRef \*\)0x[0-9a-f]+: (\d+) slots, (\d+) strings", lines[0])
    assert m and (int(m.group(1)), int(m.group(2))) == (slots, num), lines[0]
    assert not any(line.startswith("note:") for line in lines), text
    doc = json.loads(stop.out(mode, "lstr --json"))
    assert (doc["slots"], doc["count"], doc["walked"]) == (slots, num, num)
    assert sum(h[1] for h in doc["histogram"]) == slots
    assert sum(h[2] for h in doc["histogram"]) == num
    longest = doc["longest"][0]
    shown = [s["text"] for s in longest["strings"]]
    if stop.variant.startswith("r20"):
        # One chain of all of them and a few others; strings are put at a
        # chain's head, so the newest come first.
        assert N <= longest["length"] < N + 5, longest["length"]
        assert shown == ['"%s"' % s for s in reversed(strs[-len(shown):])], shown
        assert "hash:" not in text
    else:
        h = doc["hash"]
        assert h["secondary_slots"] >= 1 and h["second"] == 1 and h["seed"] != 0, h
        assert h["dense_strings"] >= N, h
        assert longest["length"] < 40, longest
        assert re.search(r"^hash: .*seed 0x[0-9a-f]+", text, re.M), text
        assert re.search(r"^secondary hash: %d slots? past 32 collisions \(slots? [\d .]+\), "
                         r"%d strings hashed with it$" % (h["secondary_slots"], h["dense_strings"]),
                         text, re.M), text


def test_lstr_bad_input_is_one_line(stop):
    want = {"lstr --top x": "lstr: --top needs a number, not 'x'. Usage: lstr",
            "lstr extra": "lstr: unexpected argument 'extra'. Usage: lstr",
            "lstr --bogus": "lstr: unknown option '--bogus'. Usage: lstr"}
    for cmd, start in want.items():
        out = stop.out("live", cmd).strip()
        assert out.startswith(start) and "\n" not in out, (cmd, out)
