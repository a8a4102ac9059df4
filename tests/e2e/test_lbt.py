"""lbt and lthreads against LuaJIT's own view of the stack.

testprogs/lua/bt.lua records, with debug.getinfo/getlocal/getupvalue, the
stack it stops with (on the same line as the stop) and LuaJIT's names of its
fast functions (jit.vmdef.ffnames); these tests compare lbt's frames and
`lbt full`'s locals with that record, on every variant, live and on a core.
"""
import json
import re
import subprocess
import sys

import pytest

from support.stop import (BOTH_ARCHES, ROOT, Stop, chunk_display, frame_place, traceback_name, value_regex,
                          addr_of, manifest)

MODES = ("live", "core")
# A GCRef/MRef field as a pointer: 8 bytes in GC64 builds, 4 in the others.
_REF = "(sizeof(L->{0}) == 8 ? *(unsigned long *)&L->{0} : *(unsigned int *)&L->{0})"
# gdb's own commands with ljgdb's frame filter and pretty-printers (the
# printer is disabled last: the commands after it see gdb's plain view).
GDB_COMMANDS = ["bt", "bt full", "bt -no-filters", "print/x (unsigned long)L", "print L",
                "print *L", "print L->base[0]", "print L->env", "print (GCstr *)" + _REF.format("env"),
                "print (global_State *)" + _REF.format("glref"),
                "disable pretty-printer .* ljgdb;TValue", "print L->base[0]"]
JSON_COMMANDS = ["lbt full --json", "lthreads --json", "lbt --all --group --json",
                 "lbt --folded --json"]
COMMANDS = ["lbt", "lbt full", "lbt --all", "lthreads", "lbt bogus", "lbt L=8", "lbt --folded",
            "print $lua_where()"] + GDB_COMMANDS + JSON_COMMANDS
SCENARIOS = {"nest": "break", "deep": "break", "coro": "break", "fficb": "break",
             "jit": "break", "crash": "SIGSEGV", "gc": "break", "popen": "break",
             "popen_open": "break", "gc_traverse": "break", "gc_free": "break"}
# Stops that move on from bt.lua's first ljgdb_stop in the live gdb only
# (Stop's live_prelude): (bt.lua scenario, gdb commands).  Both run bt.lua's
# `popen` scenario, whose two ljgdb_stop("armed") calls each come on the
# line just before the call they arm for.  "popen": past the second armed
# stop to the read(2) of f:read("*l") on the popen pipe (blocking: the
# command sleeps 0.2 s first); "popen_open": past the first one to the
# pipe2(2) inside io.popen (glibc's popen makes its pipe with pipe2).
PRELUDES = {
    "popen": ("popen", ["continue", "catch syscall read", "continue"]),
    "popen_open": ("popen", ["catch syscall pipe2", "continue"]),
    # bt.lua's `gcthreads`: inside its collectgarbage(), the collector
    # traversing the suspended coroutine (status LUA_YIELD, 1) and freeing
    # the dead one: frames whose lua_State * is not the running thread.
    "gc_traverse": ("gcthreads", ["break lj_state_shrinkstack if L->status == 1", "continue"]),
    "gc_free": ("gcthreads", ["break lj_state_free", "continue"]),
}
# What each prelude's catchpoint prints when gdb stops there.
CAUGHT = {"popen": "(call to syscall read)", "popen_open": "(call to syscall pipe2)",
          "gc_traverse": "lj_state_shrinkstack", "gc_free": "lj_state_free"}
# qemu-user's gdb stub (7.2) has no syscall catchpoints: on arm64 the
# preludes break at the libc function that makes the system call.
ARM64_PRELUDE = {"catch syscall read": "break read", "catch syscall pipe2": "break pipe2"}
# The frame above the recorded ones (the recorded tag, the frame text).
TOP = {"popen": ("main", "[builtin#io.method.read]"), "popen_open": ("open", "[builtin#io.popen]")}
# Variants of the collector scenarios: the four lines of LuaJIT, x86-64.
GC_VARIANTS = ("r21-gc64", "r20-x64", "deb-x64", "or-x64")

_stops = {}


@pytest.fixture(scope="module")
def stops(tmp_path_factory):
    def get(variant, scenario, commands=COMMANDS):
        """The stop of bt.lua `scenario` on `variant`, with `commands` (all
        of COMMANDS unless a test needs fewer: each costs a gdb run's time)."""
        key = (variant, scenario, tuple(commands))
        if key not in _stops:
            arg, prelude = PRELUDES.get(scenario, (scenario, ()))
            arm64 = manifest()[variant].get("arch") == "arm64"
            if arm64:
                prelude = [ARM64_PRELUDE.get(c, c) for c in prelude]
            _stops[key] = Stop(variant, "bt.lua", list(commands),
                               str(tmp_path_factory.mktemp("%s-%s" % key[:2])), args=[arg],
                               stop_on=SCENARIOS[scenario], live_prelude=prelude)
            if scenario in CAUGHT:
                # The live gdb stopped at the syscall, not somewhere later.
                if scenario.startswith("gc_"):
                    caught = r"Breakpoint 2, %s \(" % CAUGHT[scenario]
                elif arm64:
                    caught = r"Breakpoint 2, (0x[0-9a-f]+ in )?(__libc_)?%s " % CAUGHT[scenario].split()[-1][:-1]
                else:
                    caught = re.escape("Catchpoint 2 " + CAUGHT[scenario])
                assert re.search(caught, _stops[key].live_text), _stops[key].live_text[-3000:]
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
            frames.append((int(m.group(1)), frame_place(m.group(2)), []))
        elif line.startswith("      ") and frames:
            frames[-1][2].append(line.strip())
        elif line.startswith("(g->vmthref runs ") and frames:
            pass        # the note that ends g->vmthref's backtrace (test_lbt_in_gc_finalizer)
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
@pytest.mark.parametrize("variant", BOTH_ARCHES)
@pytest.mark.parametrize("scenario", ["nest", "deep", "fficb", "gc", "popen", "popen_open"])
def test_lbt_matches_luajit(stops, variant, scenario, mode):
    stop = stops(variant, scenario)
    header, frames = parse_bt(stop.out(mode, "lbt"))
    assert header.startswith("Lua backtrace of (lua_State *)0x")
    # The VM state is C at every one of these stops, the GC's too: the VM
    # sets it to C in BC_FUNCC right before it calls a C function (ljgdb_stop,
    # io.popen, f:read), R vm_x64.dasc:4787, DB :4671, OR :4696, 20
    # vm_x86.dasc:6063.  See test_lbt_in_gc_finalizer for the finalizer.
    who = "main thread"
    if scenario == "gc":
        running, X = gc_threads(stop)
        who = "coroutine" if running == X else "VM thread g->vmthref"
        assert header.startswith("Lua backtrace of (lua_State *)0x%x (" % running), header
    assert header.endswith("(%s, running); VM state: C (in a C function called from Lua)" % who), \
        header
    tag, top = TOP.get(scenario, ("main", "C:ljgdb_stop"))
    recs = recorded(stop, tag)
    assert [f[0] for f in frames] == list(range(len(frames)))
    extra = check_frames(stop, frames, recs)
    assert [t for _, t, _ in extra] == [top]
    if scenario == "deep":
        assert len(recs) > 5000
    _, full = parse_bt(stop.out(mode, "lbt full"))
    check_frames(stop, full, recs, full)
    # The same stack folded on one line, outermost first, and the innermost
    # Lua frame as $lua_where() gives it.
    folded = stop.out(mode, "lbt --folded").strip().splitlines()
    stack, count = folded[0].rsplit(" ", 1)
    assert count == "1" and len(folded) == 1, folded
    texts = stack.split(";")[::-1]
    check_frames(stop, [(i, t, []) for i, t in enumerate(texts)], recs)
    assert texts[0] == top
    where = next(t for t in texts if not t.startswith(("C:", "[builtin#")))
    assert stop.out(mode, "print $lua_where()").strip() == '$1 = "%s"' % where


@pytest.mark.parametrize("mode", MODES + ("reader",))
@pytest.mark.parametrize("variant", GC_VARIANTS)
@pytest.mark.parametrize("scenario", ["gc_traverse", "gc_free"])
def test_lbt_while_collector_handles_another_thread(stops, variant, scenario, mode):
    """Stopped in the collector where it traverses a suspended coroutine
    (lj_state_shrinkstack, called from gc_traverse_thread) or frees a dead
    one (lj_state_free, from the sweep), inside the main thread's
    collectgarbage(): the innermost frame's lua_State * is that other
    thread, and lbt still shows the running main thread's stack, with
    collectgarbage on top and the levels the program recorded (in gdb, live
    and on the core, and in the core reader)."""
    stop = stops(variant, scenario, ("lbt",))
    if mode == "reader":
        text = run_reader([stop.core, stop.build["host"], "lbt"])
    else:
        text = stop.out(mode, "lbt")
    header, frames = parse_bt(text)
    assert header.startswith("Lua backtrace of (lua_State *)0x"), text
    assert header.endswith("(main thread, running); VM state: GC (in the garbage collector)"), text
    susp = [r for r in stop.expected if r[:2] == ["gcthreads", "susp"]]
    assert not susp, "the program went on past its collectgarbage()"
    extra = check_frames(stop, frames, recorded(stop, "main"))
    assert [t for _, t, _ in extra] == ["[builtin#collectgarbage]"]


def run_reader(args):
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + args, cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def gc_threads(stop):
    """(thread the finalizer runs on, coroutine X that ran collectgarbage),
    as tostring() gave them inside the finalizer."""
    r = [r for r in stop.expected if r[:2] == ["gc", "running"]][0]
    return addr_of(r[2]), addr_of(r[3])


def lbt_blocks(text):
    """lbt --all output -> {lua_State address: that thread's block}."""
    out = {}
    for b in text.split("\n\n"):
        m = re.match(r"Lua backtrace of \(lua_State \*\)(0x[0-9a-f]+)", b)
        if m:
            out[int(m.group(1), 16)] = b
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_lbt_in_gc_finalizer(stops, variant, mode):
    """A __gc finalizer that collectgarbage() runs in coroutine X.  The VM
    state there is C, not GC: lj_gc_fullgc sets GC (R lj_gc.c:781, DB :780,
    OR :783, 20 :738), but gc_call_finalizer enters the finalizer with
    lj_vm_pcall (R lj_gc.c:522, DB/OR :520, 20 :483), whose entry sets
    INTERP (R vm_x64.dasc:637, DB :627, OR :624, 20 vm_x86.dasc:710), and the
    finalizer's call to ljgdb_stop sets C (BC_FUNCC, see above).  Upstream
    2.1 rolling runs the finalizer on its own thread g->vmthref
    (R lj_gc.c:511,522), the others on X (DB/OR :520, 20 :483): collectgarbage
    is then on g->vmthref's caller X, recorded with debug.getinfo(X, ...)."""
    stop = stops(variant, "gc")
    ff = ffnames(stop)
    running, X = gc_threads(stop)
    text = stop.out(mode, "lbt")
    header, frames = parse_bt(text)
    assert "; VM state: C (in a C function called from Lua)" in header, header
    blocks = lbt_blocks(stop.out(mode, "lbt --all"))
    assert running in blocks and X in blocks, (hex(running), hex(X), blocks.keys())
    _, xframes = parse_bt(blocks[X])
    if running == X:
        recs = recorded(stop, "main")
        extra = check_frames(stop, xframes, recs)
        assert [t for _, t, _ in extra] == ["C:ljgdb_stop"]
        assert "(g->vmthref" not in text
    else:
        assert variant.startswith("r21-"), variant
        assert "(VM thread g->vmthref, running)" in header, header
        assert text.splitlines()[-1] == (
            "(g->vmthref runs __gc finalizers and VM event handlers; it was called from "
            "(lua_State *)0x%x: lbt L=0x%x)" % (X, X))
        recs = recorded(stop, "X")
        assert check_frames(stop, xframes, recs) == []
        assert blocks[X].splitlines()[0].endswith("(coroutine, normal)"), blocks[X]
    # LuaJIT's debug.getinfo shows the C function collectgarbage on X, just
    # below the frames of the finalizer (if any), and lbt names it there.
    cg = [i for i, r in enumerate(recs)
          if r["what"] == "C" and "builtin#" in r["func"]
          and ff.get(int(r["func"].split("#")[1])) == "collectgarbage"]
    assert len(cg) == 1, recs
    k = len(xframes) - len(recs)
    assert xframes[k + cg[0]][1] == "[builtin#collectgarbage]", xframes
    # The finalizer's own frame: its argument is the userdata being finalized.
    fin = recorded(stop, "main")[0]
    assert [n for n, _, _ in fin["locals"]][:2] == ["ud", "inside"]
    assert fin["locals"][0][1] == "userdata"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_lbt_in_popen(stops, variant, mode):
    """Stopped in C called from Lua, at a syscall: io.popen's pipe2 and the
    blocking read of f:read("*l").  lbt names the fast function on top
    ([builtin#io.popen], [builtin#io.method.read], as jit.vmdef names them)
    above the Lua frame at the line of its call, in VM state C."""
    for scenario, tag, top in (("popen_open", "open", "[builtin#io.popen]"),
                               ("popen", "main", "[builtin#io.method.read]")):
        stop = stops(variant, scenario)
        assert top[len("[builtin#"):-1] in ffnames(stop).values()
        _, frames = parse_bt(stop.out(mode, "lbt"))
        recs = recorded(stop, tag)
        assert frames[0][1] == top, frames
        assert frames[1][1] == "%s:%s" % (chunk_display(recs[0]["source"]), recs[0]["line"])
        _, full = parse_bt(stop.out(mode, "lbt full"))
        # f is live (a file) at the read and not yet at io.popen.
        names = [line.split(" = ")[0] for line in full[1][2]]
        assert ("f" in names) == (scenario == "popen"), full[1]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_lbt_nest_has_every_kind_of_frame(stops, variant, mode):
    stop = stops(variant, "nest")
    _, frames = parse_bt(stop.out(mode, "lbt"))
    texts = [t for _, t, _ in frames]
    for want in ("[builtin#xpcall]", "[builtin#string.gsub]",
                 "[builtin#table.sort]", "C:ljgdb_ccall", "C:ljgdb_stop"):
        assert want in texts, (want, texts)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
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
    # Upstream 2.1 runs finalizers on a thread of its own: not a coroutine.
    internal = any("g->vmthref" in r[1] for r in rows.values())
    assert summary.startswith("%d threads (%d coroutines, the main thread and the VM's internal "
                              "thread)" % (n, n - 2) if internal else
                              "%d threads (%d coroutines and the main thread)" % (n, n - 1)), summary
    # lbt of the running coroutine C, and lbt --all for the others.
    header, frames = parse_bt(stop.out(mode, "lbt"))
    assert header.startswith("Lua backtrace of (lua_State *)0x%x (coroutine, running)" % C)
    check_frames(stop, frames, recorded(stop, "main"))
    by_thread = lbt_blocks(stop.out(mode, "lbt --all"))
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
@pytest.mark.parametrize("variant", BOTH_ARCHES)
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
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_lbt_after_crash(stops, variant, mode):
    stop = stops(variant, "crash")
    header, frames = parse_bt(stop.out(mode, "lbt"))
    extra = check_frames(stop, frames, recorded(stop, "main"))
    assert all(not re.match(r".*:\d+$", t) for _, t, _ in extra), extra


@pytest.mark.parametrize("mode", MODES)
def test_lbt_bad_input(stops, mode):
    stop = stops("r21-gc64", "nest")
    assert stop.out(mode, "lbt bogus").strip() == (
        "lbt: unexpected argument 'bogus'. Usage: lbt [full] [--all [--group]] [--folded] "
        "[L=<lua_State *>]")
    assert stop.out(mode, "lbt L=8").startswith("lbt: 0x8 is not a lua_State")


# --- gdb's own bt, with ljgdb's frame filter ---------------------------------

def parse_gdb_bt(text):
    """[(kind, text, [local lines])] of gdb's bt: ('C', function) for a
    machine frame, ('lua', frame text as lbt writes it) for a Lua or builtin
    frame the filter put under a VM frame."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \(", line)
        if m:
            out.append(("C", m.group(1), []))
            continue
        m = re.match(r"^    (\[builtin#[^\]]+\]) \(\)$", line)
        if m:
            out.append(("lua", m.group(1), []))
            continue
        m = re.match(r"^    \[Lua\](?: .+?)? \(\) at (.+)$", line)
        if m:
            out.append(("lua", m.group(1), []))
            continue
        if line.startswith("    [Lua: "):
            out.append(("warning", line.strip(), []))
        elif line.startswith("        ") and out:
            out[-1][2].append(line.strip())
        elif line.startswith("Backtrace stopped"):
            continue
        elif line.strip():
            raise AssertionError("unexpected bt line %r in:\n%s" % (line, text))
    return out


# The host's C functions that Lua calls as Lua functions (host.c registers
# them with lua_register); its FFI functions are C called from C.
LUA_C_FUNCTIONS = ("ljgdb_stop", "ljgdb_ccall")


def parse_named_bt(text):
    """[(name or None, file:line)] of the Lua frames in gdb's bt: '[Lua] NAME
    () at FILE:LINE' ('[Lua] () at' for a frame without a name)."""
    return [(m.group(1), m.group(2)) for m in
            re.finditer(r"^    \[Lua\](?: (.+?))? \(\) at (.+)$", text, re.M)]


def bt_as_lbt(entries):
    """gdb's bt as lbt's frames: its Lua frames, and the machine frames of
    the host's C functions that Lua calls (C:ljgdb_...)."""
    out = []
    for kind, text, local_lines in entries:
        if kind == "lua":
            out.append((len(out), text, local_lines))
        elif kind == "C" and text in LUA_C_FUNCTIONS:
            out.append((len(out), "C:" + text, []))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
@pytest.mark.parametrize("scenario", ["nest", "deep", "fficb", "popen"])
def test_gdb_bt_shows_lua_frames(stops, variant, scenario, mode):
    """bt puts each Lua frame under the VM frame that runs it, in LuaJIT's
    order (debug.getinfo), between the C functions Lua calls and that call
    Lua; bt full adds the locals LuaJIT reports; bt -no-filters is gdb's."""
    stop = stops(variant, scenario)
    tag, top = TOP.get(scenario, ("main", "C:ljgdb_stop"))
    recs = recorded(stop, tag)
    entries = parse_gdb_bt(stop.out(mode, "bt"))
    assert not [e for e in entries if e[0] == "warning"], entries
    frames = bt_as_lbt(entries)
    extra = check_frames(stop, frames, recs)
    assert [t for _, t, _ in extra] == [top]
    # Every Lua frame comes right after a VM frame (lj_...) or another Lua frame.
    for prev, cur in zip(entries, entries[1:]):
        if cur[0] == "lua":
            assert prev[0] == "lua" or prev[1].startswith("lj_"), (prev, cur)
    # main() is the outermost frame, after all the Lua frames.
    assert entries[-1] == ("C", "main", [])
    full = bt_as_lbt(parse_gdb_bt(stop.out(mode, "bt full")))
    check_frames(stop, full, recs, full)
    plain = stop.out(mode, "bt -no-filters")
    assert "[Lua]" not in plain and "[builtin#" not in plain
    assert len(re.findall(r"^#\d+", plain, re.M)) == \
        len([e for e in entries if e[0] == "C"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_gdb_bt_coroutines(stops, variant, mode):
    """In the running coroutine C (resumed through coroutine.wrap by B,
    resumed by A with coroutine.resume), bt shows C's frames, then B's, then
    A's, each under the VM frame of its own resume."""
    stop = stops(variant, "coro")
    entries = parse_gdb_bt(stop.out(mode, "bt"))
    frames = bt_as_lbt(entries)
    want = []
    for tag in ("main", "B", "A"):
        want += recorded(stop, tag)
    assert frames[0][1] == "C:ljgdb_stop"
    inner = frames[1:1 + len(want)]
    assert len(inner) == len(want), (frames, want)
    for (_, text, _), rec in zip(inner, want):
        assert re.match(expected_frame(stop, rec) + "$", text), (text, rec)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_pretty_printers(stops, variant, mode):
    """print shows LuaJIT's values decoded: L (the main thread at the nest
    stop), *L with its fields, a stack slot, a GCRef, a GCstr pointer that
    is not a string, the global_State; with the TValue printer disabled,
    gdb's raw union."""
    stop = stops(variant, "nest")
    out = {c: re.sub(r"^\$\d+ = ", "", stop.out(mode, c).strip()) for c in GDB_COMMANDS}
    L = int(out["print/x (unsigned long)L"], 16)
    genv = addr_of([r for r in stop.expected if r[0] == "genv"][0][1])
    assert out["print L"] == "thread: (lua_State *)0x%x" % L
    assert out["print *L"].startswith("thread: (lua_State *)0x%x = {" % L)
    assert "env = table: (GCtab *)0x%x," % genv in out["print *L"]
    assert out["print L->env"] == "table: (GCtab *)0x%x" % genv
    assert out["print (GCstr *)" + _REF.format("env")] == \
        "0x%x <not a str: its header says table>" % genv
    g = out["print (global_State *)" + _REF.format("glref")]
    assert re.match(r"\(global_State \*\)0x[0-9a-f]+: Lua heap \d+ bytes "
                    r"\(g->gc.total\), GC GCS\w+, main thread \(lua_State \*\)0x%x$" % L, g), g
    # ljgdb_stop() has no arguments: L->base[0] is whatever the slot holds.
    assert "u64 = " not in out["print L->base[0]"]
    assert re.match(r"\$\d+ = \{u64 = ", stop.out(mode, "print L->base[0]", nth=1).strip())


# --- --json --------------------------------------------------------------------

def json_frames(thread):
    """A thread of lbt --json as parse_bt's frames: (level, text, locals)."""
    out = []
    for f in thread["frames"]:
        text = f["text"] + (" -> resumed (lua_State *)%s" % f["resumed"] if "resumed" in f
                            else "")
        loc = ["%s = %s" % (x["name"], x["value"]) for x in f.get("locals", ())]
        loc += ["upvalue %s = %s" % (x["name"], x["value"]) for x in f.get("upvalues", ())]
        out.append((f["level"], text, loc))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
@pytest.mark.parametrize("scenario", ["nest", "fficb", "popen"])
def test_json_lbt_matches_luajit(stops, variant, scenario, mode):
    """lbt full --json: the frames and locals LuaJIT recorded, with the
    source and line of each Lua frame as data."""
    stop = stops(variant, scenario)
    doc = json.loads(stop.out(mode, "lbt full --json"))
    assert doc["command"] == "lbt" and len(doc["threads"]) == 1
    th = doc["threads"][0]
    assert th["status"] == "running" and th["who"] == "main thread"
    tag, top = TOP.get(scenario, ("main", "C:ljgdb_stop"))
    recs = recorded(stop, tag)
    frames = json_frames(th)
    extra = check_frames(stop, frames, recs, frames)
    assert [t for _, t, _ in extra] == [top]
    k = len(frames) - len(recs)
    for f, rec in zip(th["frames"][k:], recs):
        if rec["what"] in ("Lua", "main"):
            assert f["kind"] == "lua" and f["source"] == chunk_display(rec["source"])
            assert f["line"] == int(rec["line"])
    folded = json.loads(stop.out(mode, "lbt --folded --json"))["folded"]
    assert folded["stacks"][0]["frames"][::-1] == [t for _, t, _ in frames]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_json_lthreads_and_groups(stops, variant, mode):
    """lthreads --json and lbt --all --group --json: every coroutine with the
    status coroutine.status gives, who resumed whom."""
    stop = stops(variant, "coro")
    cos = {r[1]: (addr_of(r[2]), r[3]) for r in stop.expected if r[0] == "co"}
    doc = json.loads(stop.out(mode, "lthreads --json"))
    rows = {int(t["L"], 16): t for t in doc["threads"]}
    for name, (addr, status) in cos.items():
        assert rows[addr]["status"] == status, (name, rows[addr])
    A, B, C = cos["A"][0], cos["B"][0], cos["C"][0]
    assert int(rows[B]["resumed_by"], 16) == A and int(rows[C]["resumed_by"], 16) == B
    assert doc["summary"]["threads"] == len(rows)
    groups = json.loads(stop.out(mode, "lbt --all --group --json"))["groups"]
    assert sum(g["count"] for g in groups) == len(rows)
    running = [g for g in groups if g["status"] == "running"]
    assert len(running) == 1 and int(running[0]["examples"][0], 16) == C


# --- function names ------------------------------------------------------------

@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_frame_names_are_luajits(variant, tmp_path):
    """lbt --json names each frame as debug.getinfo(level, "n") does
    (`called_as`: namewhat and name, from the caller's call site, or null
    where LuaJIT gives no name), live and from the core; lbt's text says
    it as Lua's traceback does ("in upvalue 'x'", "in function 'g'" for a
    global, "in function <file:line>" without a name, "in main chunk"),
    and gdb's bt beside each Lua frame:
    names.lua calls functions as a method, a field, an upvalue, a global, a
    local, an __index metamethod and a for iterator, through pcall (whose
    callee has no name) and a tail call (named as the function it
    replaced)."""
    stop = Stop(variant, "names.lua", ["lbt --json", "lbt", "bt"], str(tmp_path))
    recs = [r for r in stop.expected if r[0] == "frame"]
    kinds = set(r[5] for r in recs)
    assert {"method", "field", "upvalue", "global", "local", "metamethod"} <= kinds, recs
    for mode in ("live", "core"):
        doc = json.loads(stop.out(mode, "lbt --json"))
        frames = doc["threads"][0]["frames"]
        assert frames[0]["text"].startswith("C:") and len(frames) == len(recs) + 1, \
            (mode, frames, recs)
        for f, r in zip(frames[1:], recs):
            want = {"namewhat": r[5], "name": r[6]} if r[5] else None
            assert f["called_as"] == want, (mode, f, r)
        lines = stop.out(mode, "lbt").splitlines()[2:]
        bt = parse_named_bt(stop.out(mode, "bt"))
        assert len(lines) == len(recs) and len(bt) == len([r for r in recs if r[2] != "C"]), \
            (mode, lines, bt, recs)
        lua = iter(bt)
        for level, (line, r) in enumerate(zip(lines, recs), 1):
            if r[2] == "C":
                assert line.startswith("#%-3d [builtin#" % level), (mode, line, r)
                continue
            place = "%s:%s" % (chunk_display(r[3]), r[4])
            said = traceback_name(r[2], r[5], r[6], r[3], r[7])
            assert line == "#%-3d %s: in %s" % (level, place, said), (mode, line, r)
            assert next(lua) == (r[6] or None, place), (mode, bt, r)
