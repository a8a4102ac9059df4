"""lbt and lthreads against LuaJIT's own view of the stack.

testprogs/lua/bt.lua records, with debug.getinfo/getlocal/getupvalue, the
stack it stops with (on the same line as the stop) and LuaJIT's names of its
fast functions (jit.vmdef.ffnames); these tests compare lbt's frames and
`lbt full`'s locals with that record, on every variant, live and on a core.
"""
import re

import pytest

from harness import ALL_VARIANTS, Stop, chunk_display, value_regex, addr_of

MODES = ("live", "core")
COMMANDS = ["lbt", "lbt full", "lbt --all", "lthreads", "lbt bogus", "lbt L=8"]
SCENARIOS = {"nest": "break", "deep": "break", "coro": "break", "fficb": "break",
             "jit": "break", "crash": "SIGSEGV"}

_stops = {}


@pytest.fixture(scope="module")
def stops(tmp_path_factory):
    def get(variant, scenario):
        key = (variant, scenario)
        if key not in _stops:
            _stops[key] = Stop(variant, "bt.lua", COMMANDS,
                               str(tmp_path_factory.mktemp("%s-%s" % key)), args=[scenario],
                               stop_on=SCENARIOS[scenario])
        return _stops[key]
    return get


def ffnames(stop):
    return {int(r[1]): r[2] for r in stop.expected if r[0] == "ffname"}


def recorded(stop, tag):
    """[(what, source, line, func, locals, upvals)] for each recorded level."""
    frames = []
    for r in stop.expected:
        if r[0] != tag:
            continue
        kind = r[1]
        if kind == "frame":
            frames.append({"what": r[3], "source": r[4], "line": r[5], "func": r[6],
                           "locals": [], "upvals": []})
        elif kind == "local":
            frames[int(r[2])]["locals"].append((r[3], r[4], r[5]))
        elif kind == "vararg":
            frames[int(r[2])]["locals"].append(("(*vararg %s)" % r[3], r[4], r[5]))
        elif kind == "upval":
            frames[int(r[2])]["upvals"].append((r[3], r[4], r[5]))
    return frames


def parse_bt(text):
    """(header, [(level, frame text, [local lines])]) of one lbt output."""
    lines = text.splitlines()
    header = lines[0]
    frames = []
    for line in lines[1:]:
        m = re.match(r"^#(\d+)\s+(.*)$", line)
        if m:
            frames.append((int(m.group(1)), m.group(2), []))
        elif line.startswith("      ") and frames:
            frames[-1][2].append(line.strip())
        else:
            raise AssertionError("unexpected lbt line %r in:\n%s" % (line, text))
    return header, frames


def expected_frame(stop, rec):
    if rec["what"] in ("Lua", "main"):
        return re.escape("%s:%s" % (chunk_display(rec["source"]), rec["line"]))
    if "builtin#" in rec["func"]:
        ffid = int(rec["func"].split("#")[1])
        return re.escape("[builtin#%s]" % ffnames(stop).get(ffid, ffid)) + "( -> resumed .*)?"
    return r"C:ljgdb_\w+"


def check_frames(stop, frames, recs, full_frames=None):
    """frames (parsed lbt) end with exactly the recorded levels."""
    assert len(frames) >= len(recs), (len(frames), len(recs))
    k = len(frames) - len(recs)
    for (level, text, _), rec in zip(frames[k:], recs):
        assert re.match(expected_frame(stop, rec) + "$", text), (level, text, rec)
    if full_frames is not None:
        ff = ffnames(stop)
        for (level, text, local_lines), rec in zip(full_frames[k:], recs):
            if rec["what"] not in ("Lua", "main"):
                assert local_lines == []
                continue
            want = [(n, value_regex(t, s, ff)) for n, t, s in rec["locals"]]
            want += [("upvalue " + n, value_regex(t, s, ff)) for n, t, s in rec["upvals"]]
            assert len(local_lines) == len(want), (level, local_lines, want)
            for line, (name, rx) in zip(local_lines, want):
                assert re.match(re.escape(name) + " = " + rx + "$", line), (level, line, rx)
    return frames[:k]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", ALL_VARIANTS)
@pytest.mark.parametrize("scenario", ["nest", "deep", "fficb"])
def test_lbt_matches_luajit(stops, variant, scenario, mode):
    stop = stops(variant, scenario)
    header, frames = parse_bt(stop.out(mode, "lbt"))
    assert header.startswith("Lua backtrace of (lua_State *)0x")
    assert header.endswith("(main thread, running); VM state: C (in a C function called from Lua)")
    recs = recorded(stop, "main")
    assert [f[0] for f in frames] == list(range(len(frames)))
    extra = check_frames(stop, frames, recs)
    assert [t for _, t, _ in extra] == ["C:ljgdb_stop"]
    if scenario == "deep":
        assert len(recs) > 5000
    _, full = parse_bt(stop.out(mode, "lbt full"))
    check_frames(stop, full, recs, full)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_lbt_nest_has_every_kind_of_frame(stops, variant, mode):
    stop = stops(variant, "nest")
    _, frames = parse_bt(stop.out(mode, "lbt"))
    texts = [t for _, t, _ in frames]
    for want in ("[builtin#xpcall]", "[builtin#string.gsub]",
                 "[builtin#table.sort]", "C:ljgdb_ccall", "C:ljgdb_stop"):
        assert want in texts, (want, texts)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_coroutines(stops, variant, mode):
    stop = stops(variant, "coro")
    cos = {r[1]: (addr_of(r[2]), r[3]) for r in stop.expected if r[0] == "co"}
    # lthreads: every coroutine with the status coroutine.status gives.
    rows = {}
    for line in stop.out(mode, "lthreads").splitlines()[1:-1]:
        f = line.split()
        rows[int(f[0], 16)] = (f[1], line)
    for name, (addr, status) in cos.items():
        assert addr in rows, (name, hex(addr), rows)
        assert rows[addr][0] == status, (name, rows[addr], status)
    A, B, C = cos["A"][0], cos["B"][0], cos["C"][0]
    assert "resumed by 0x%x" % A in rows[B][1]
    assert "resumed by 0x%x" % B in rows[C][1]
    summary = stop.out(mode, "lthreads").splitlines()[-1]
    n = len(rows)
    assert summary.startswith("%d threads (%d coroutines and the main thread)" % (n, n - 1))
    # lbt of the running coroutine C, and lbt --all for the others.
    header, frames = parse_bt(stop.out(mode, "lbt"))
    assert header.startswith("Lua backtrace of (lua_State *)0x%x (coroutine, running)" % C)
    check_frames(stop, frames, recorded(stop, "main"))
    blocks = stop.out(mode, "lbt --all").split("\n\n")
    by_thread = {}
    for b in blocks:
        m = re.match(r"Lua backtrace of \(lua_State \*\)(0x[0-9a-f]+)", b)
        if m:
            by_thread[int(m.group(1), 16)] = b
    assert set(by_thread) == set(rows)
    for name in ("A", "B", "susp"):
        header, frames = parse_bt(by_thread[cos[name][0]])
        extra = check_frames(stop, frames, recorded(stop, name))
        assert extra == []
    _, fa = parse_bt(by_thread[A])
    assert fa[0][1] == "[builtin#coroutine.resume] -> resumed (lua_State *)0x%x" % B
    _, fb = parse_bt(by_thread[B])
    assert fb[0][1].endswith("-> resumed (lua_State *)0x%x" % C)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_lbt_in_jit_trace(stops, variant, mode):
    stop = stops(variant, "jit")
    header, frames = parse_bt(stop.out(mode, "lbt"))
    assert re.search(r"VM state: TRACE \d+ \(in JIT-compiled code of trace \d+, started at ", header), header
    jitline = int([r[1] for r in stop.expected if r[0] == "jitline"][0])
    recs = recorded(stop, "main")
    extra = check_frames(stop, frames, recs)
    assert len(extra) == 1
    # The innermost line comes from the trace's last snapshot before the
    # call: inside the loop (which starts two lines above the call), at or
    # before the line of the call.
    # 2.0 keeps no machine-code offsets in snapshots: the trace's start pc.
    m = re.match(r"(.*):(\d+) \(in trace (\d+), at its (last snapshot|start)\)$", extra[0][1])
    assert m, extra
    assert m.group(1) == chunk_display(recs[0]["source"])
    assert jitline - 2 <= int(m.group(2)) <= jitline, (m.group(2), jitline)
    assert header.startswith("Lua backtrace") and "TRACE %s " % m.group(3) in header


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_lbt_after_crash(stops, variant, mode):
    stop = stops(variant, "crash")
    header, frames = parse_bt(stop.out(mode, "lbt"))
    extra = check_frames(stop, frames, recorded(stop, "main"))
    assert all(not re.match(r".*:\d+$", t) for _, t, _ in extra), extra


@pytest.mark.parametrize("mode", MODES)
def test_lbt_bad_input(stops, mode):
    stop = stops("r21-gc64", "nest")
    assert stop.out(mode, "lbt bogus").strip() == \
        "lbt: unexpected argument 'bogus'. Usage: lbt [full] [--all] [L=<lua_State *>]"
    assert stop.out(mode, "lbt L=8").startswith("lbt: 0x8 is not a lua_State")
