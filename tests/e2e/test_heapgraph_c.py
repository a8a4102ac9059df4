"""The heap graph in C (gdb_ext/heap/graphc.c) answers as the Python search
does (LJGDB_HEAPGRAPH=python), and so it does when no run of its requests
can be read at once and each request is read alone, and when it is handed
the walk's copied pages rather than the core's mapped segments (as in gdb,
lldb and --pid), the requests that cross a page read: lgcstat --retained,
lgcpath, lgcref and --diff on a core of testprogs/lua/heap.lua (N objects
made and counted by the program, one probe table), in the core reader."""
import json
import os

import pytest

from support import cpaths
from support.stop import Stop, addr_of

N = 20000


@pytest.fixture(scope="module")
def stop(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("heapgraphc"))
    st = Stop("r21-gc64", "heap.lua", ["linfo"], work, args=(str(N),))
    st.work = work
    return st


def reader(stop, how, *args):
    return cpaths.reader(stop, how, "LJGDB_HEAPGRAPH", *args)


WAYS = ("C", "python", "runs unreadable", "pages copied")


def test_the_same_answers_four_ways(stop):
    probe = "0x%x" % addr_of([r for r in stop.expected if r[0] == "probe"][0][1])
    made = int([r for r in stop.expected if r[0] == "made"][0][1])
    snap = os.path.join(stop.work, "base.snap")
    reader(stop, "python", "lgcstat", "--save", snap)
    for args in (["lgcstat", "--retained", "--json"], ["lgcpath", probe], ["lgcref", probe],
                 ["lgcstat", "--diff", snap, "--list", "--top", "5", "--json"]):
        outs = {how: reader(stop, how, *args) for how in WAYS}
        assert len(set(outs.values())) == 1, (args, outs)
    # (and what they agree on is the program's heap: every object it made
    # reached, the probe's one holder)
    doc = json.loads(outs["C"])
    assert doc["same_process"] and doc["freed"] == {}
    ret = json.loads(reader(stop, "C", "lgcstat", "--retained", "--json"))
    assert ret["reached"] >= made, (ret["reached"], made)
    assert reader(stop, "C", "lgcref", probe).startswith(
        "references to table (GCtab *)%s: 1\n" % probe)
