"""lmcode on arm64 when the mcode window runs out (testprogs/lua/
mcode_window.lua): the program maps the rest of the +-128 MB around the
JIT's first area for itself, stops, then compiles until LuaJIT cannot place
a new area.  lmcode's verdict at the first stop must predict what LuaJIT's
own trace abort events say after it: "failed to allocate mcode memory"."""
import json

import pytest

from support.stop import ARM64_VARIANTS
from support.multistop import MultiStop

CMDS = ["lmcode", "lmcode --json"]
MCODEAL = "failed to allocate mcode memory"


@pytest.fixture(scope="module", params=ARM64_VARIANTS)
def run(request, tmp_path_factory):
    return MultiStop(request.param, "mcode_window.lua", CMDS, 2,
                     str(tmp_path_factory.mktemp(request.param)))


def records(run, tag):
    return [r[1:] for r in run.expected if r[0] == tag]


def test_program_ran_out_of_window(run):
    """LuaJIT itself: no allocation failure before the first stop, one after."""
    order = [r[0] if r[0] != "abort" else "abort:" + r[1] for r in run.expected]
    first_stop = order.index("traces")
    assert ("abort:" + MCODEAL) not in order[:first_stop], order
    assert ("abort:" + MCODEAL) in order[first_stop:], order
    assert int(records(run, "blocked")[0][0]) > 64 << 20


@pytest.mark.parametrize("mode", ["live", "core"])
def test_verdict_before_the_failure(run, mode):
    doc = json.loads(run.out(mode, 0, 1))
    size_kb, max_kb = [int(x) for x in records(run, "param")[0]]
    (area,) = doc["areas"]
    assert area["size"] == size_kb << 10 and area["in_window"] is True, area
    assert len(area["traces"]) >= int(records(run, "traces")[0][0])
    room = doc["room"]
    assert room["area_size"] == size_kb << 10
    assert room["areas_under_maxmcode"] == max_kb // size_kb - 1
    if mode == "live":
        # qemu-user's gdb stub gives no memory map: said so, no guess.
        assert room["window_holes"] is None and room["window_unmapped_bytes"] is None
        assert doc["verdict"].endswith(
            "; free space in the window unknown (no memory map of the process here)"), doc
    else:
        # The core's segments are the whole address space: no hole is left.
        assert room["window_holes"] == 0 and room["window_unmapped_bytes"] < size_kb << 10
        assert doc["verdict"].endswith(
            'no hole an area fits in: the next area fails ("%s")' % MCODEAL), doc
    # The window is cut at the bottom: the binary is linked near address 0.
    assert "would lie below 0x10000" in "\n".join(doc["placement"]), doc["placement"]
    text = run.out(mode, 0, 0)
    assert text.splitlines()[-1] == "verdict: " + doc["verdict"]


@pytest.mark.parametrize("mode", ["live", "core"])
def test_after_the_failure(run, mode):
    """Every trace LuaJIT keeps after the failure is in a listed area."""
    doc = json.loads(run.out(mode, 1, 1))
    listed = sum(len(a["traces"]) for a in doc["areas"])
    assert listed >= int(records(run, "traces2")[0][0]) and not doc["orphans"], doc
    placement = "\n".join(doc["placement"])
    if run.variant == "r21-arm64":
        # Upstream 2.1 gives up the window around the exit handler and
        # places a new one wherever the kernel put an area (exits then
        # reach the handler through an indirect branch).
        assert "moved away from the exit handler after a failed allocation" in placement
    else:
        assert "+-62 MB" in placement
