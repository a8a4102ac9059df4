"""lgcref during a collection cycle (testprogs/lua/sweep.lua): references
from tables that are garbage.  Once the collector has marked them dead
(its atomic phase) and until its sweep frees them, lgcref says so of each;
before that it lists them as any referrer.  Live and from the cores."""
import json
import os

import pytest

from support.stop import addr_of
from support.multistop import MultiStop

# 40 stops per build: about 20 s each on x86-64.
pytestmark = pytest.mark.slow

NSTOPS = 40
DRIVER = r'''
import json, os
_exp = os.path.join(%r, "expected.txt")
_keep = [l.split("\t")[1].split()[1] for l in open(_exp) if l.startswith("keep")][0]
_ref = json.loads(gdb.execute("lgcref --json " + _keep, to_string=True))
_st = json.loads(gdb.execute("lgcstat --json", to_string=True))["gc_state"]
print("@@SWEEP@@" + json.dumps({"state": _st, "refs": _ref["referrers"]}))
'''


@pytest.fixture(scope="module", params=("r21-gc64", "r20-x64", "or-x64", "r21-dualnum", "r21-arm64",
                                        "or-arm64"))
def run(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("sweep-" + request.param))
    driver = os.path.join(work, "driver.py")
    with open(driver, "w") as f:
        f.write(DRIVER % work)
    return MultiStop(request.param, "sweep.lua", ["python exec(open(%r).read())" % driver],
                     NSTOPS, work)


@pytest.mark.parametrize("mode", ("live", "core"))
def test_garbage_referrers_are_marked_dead_during_the_sweep(run, mode):
    holders = {addr_of(r[1]) for r in run.expected if r[0] == "holder"}
    assert len(holders) == 200
    states, before, during = [], 0, 0
    listed = []
    for s in range(NSTOPS):
        doc = json.loads(run.out(mode, s).split("@@SWEEP@@", 1)[1].strip().splitlines()[0])
        states.append(doc["state"])
        refs = doc["refs"]
        mine = [r for r in refs if int(r["holder"], 16) in holders]
        others = [r for r in refs if int(r["holder"], 16) not in holders]
        # _G.keep: the one live referrer, never dead.
        assert [(r["how"], r["key"], r["dead"]) for r in others] == [("val", '"keep"', False)], \
            (s, others)
        assert all(r["how"] == "arr" and r["index"] == 1 for r in mine), (s, mine)
        dead = {r["dead"] for r in mine}
        if doc["state"].startswith("sweep"):
            assert dead <= {True}, (s, doc["state"], mine)
            during += bool(mine)
        elif doc["state"] in ("pause", "propagate"):
            assert dead <= {False}, (s, doc["state"], mine)
            before += len(mine) == 200
        listed.append(len(mine))
    # The sweep frees them a few at a time and none comes back.
    first0 = listed.index(0) if 0 in listed else NSTOPS
    assert all(n == 0 for n in listed[first0:]), listed
    assert before and during, (states, listed)
