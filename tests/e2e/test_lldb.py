"""ljgdb in lldb (commands/hosts/lldbhost.py, gdb_ext/backends/lldbtarget.py)
against ljgdb in gdb.

- The layout lldb's types give (SBType) is the one gdb's give, member by
  member (offset, size, count, type name as gdb writes it), with every
  enumerator, symbol and flag the engine reads, on every x86-64 build.
- On the same core, each command lldb has prints in lldb what it prints
  in gdb, on every x86-64 build: the commands of the core reader's
  conformance test (tests/e2e/test_corereader.py).
- Bad input gets one line, never a traceback.

gdb's output is the reference: the other tests hold gdb's output to
LuaJIT's own view.  lldb comes from Debian (testprogs/install-deps.sh); the
tests skip, with one line, where no lldb with its Python is installed.
"""
import functools
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from support.stop import (ALL_VARIANTS, ARM64_VARIANTS, LOADER, NOJIT_VARIANTS, ROOT, Stop, chunk_display,
                          cut_outputs, manifest, read_expected, run_gdb, stripped_with_profile,
                          wrap_commands)
from support import moments
from support.host import proc_state
from support.stop import frame_place, without_frame_names
from test_corereader import (MOMENT_COMMANDS, MOMENT_SHAPES, PLAIN, _value_commands, differs, gdb_on_core,
                             kernel_cores)
from test_profile_layout import gdb_layout, gnu_build_id, same

DUMP_LLDB = os.path.join(ROOT, "testprogs", "dump_layout_lldb.py")
LLDBRUN = os.path.join(ROOT, "tests", "support", "lldbrun.py")
LLDB_TIMEOUT = 600


@functools.lru_cache(maxsize=None)
def lldb_binary():
    """The path of an lldb whose Python bindings load, or None."""
    for name in ("lldb-19", "lldb-18", "lldb-17", "lldb-16", "lldb-15", "lldb-14", "lldb"):
        path = shutil.which(name)
        if path is None:
            continue
        p = subprocess.run([path, "-b", "-o", "script import lldb; print('lldb-python-ok')"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                           stdin=subprocess.DEVNULL)
        if b"lldb-python-ok" in p.stdout:
            return path
    return None


def need_lldb():
    if lldb_binary() is None:
        pytest.skip("no lldb with its Python bindings (Debian's lldb-19 and python3-lldb-19; "
                    "testprogs/install-deps.sh installs them)")
    return lldb_binary()


def run_lldb(args, cwd, env=None):
    """lldb in batch mode without ~/.lldbinit; its whole output."""
    p = subprocess.run([need_lldb(), "--no-lldbinit", "-b"] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=LLDB_TIMEOUT, stdin=subprocess.DEVNULL,
                       cwd=cwd, env=dict(os.environ, LC_ALL="C", **(env or {})))
    return p.stdout.decode("utf-8", "replace")


def lldb_commands(target_args, commands, tmp, build=None, cwd=None):
    """[(output, error line or None)] of each command in lldb, after
    `target create` with target_args and `command script import` of the
    loader (from tmp: any directory will do); an arm64 build's libraries
    from its sysroot (lldb's platform's, as gdb's `set sysroot`)."""
    first = ["target create " + target_args]
    if build and build.get("sysroot"):
        first.insert(0, "platform select remote-linux --sysroot " + build["sysroot"])
    return lldb_run(first, commands, tmp, cwd)


def lldb_run(first, commands, tmp, cwd=None):
    """The same after the lldb commands `first` (which choose the target);
    lldb runs in cwd (default: tmp, where its files are)."""
    cmds = os.path.join(tmp, "lldb-commands.json")
    out = os.path.join(tmp, "lldb-out.json")
    with open(cmds, "w") as f:
        json.dump(commands, f)
    if os.path.exists(out):
        os.unlink(out)
    args = [a for c in first + ["command script import " + LOADER,
                                "command script import " + LLDBRUN] for a in ("-o", c)]
    text = run_lldb(args, cwd or tmp, env={"LJGDB_LLDB_COMMANDS": cmds, "LJGDB_LLDB_OUT": out})
    assert os.path.exists(out), text[-3000:]
    with open(out) as f:
        return [tuple(r) for r in json.load(f)]


def lldb_layout(binary, tmp):
    """testprogs/dump_layout_lldb.py's JSON (dump_layout.py's, from lldb)."""
    out = os.path.join(tmp, "lldb.json")
    text = run_lldb(["-o", "target create " + binary, "-o", "command script import " +
                     DUMP_LLDB], tmp, env={"LJGDB_LAYOUT_OUT": out})
    assert os.path.exists(out), text[-3000:]
    with open(out) as f:
        return json.load(f)


@pytest.mark.parametrize("variant", ALL_VARIANTS + NOJIT_VARIANTS + ARM64_VARIANTS)
def test_layout_equals_gdb(variant, tmp_path):
    need_lldb()
    host = manifest()[variant]["host"]
    want = gdb_layout(host, str(tmp_path))
    got = lldb_layout(host, str(tmp_path))
    same(got, want)
    assert got["constants"] == want["constants"]
    assert (got["ptr_size"], got["arch"]) == (want["ptr_size"], want["arch"])


def assert_same(got, want, cmds):
    bad = [d for d in (differs(g, w, c, "lldb") for g, w, c in zip(got, want, cmds)) if d]
    assert not bad, "%d of %d differ: %s\n%s" % (
        len(bad), len(cmds), [b.split(":\n")[0] for b in bad], "\n".join(bad))


def _doc_stops():
    """docs/gen_commands.py's STOPS: (program and arguments, the commands
    whose output the README and docs/commands/ show)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_commands",
                                                  os.path.join(ROOT, "docs", "gen_commands.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.VARIANT, mod.STOPS


def test_docs_examples_same_as_gdb(tmp_path):
    """Every example of the README and docs/commands/ (gen_commands.py's
    STOPS, which write them) prints in lldb, on the core gdb saved at the
    same moment, what it prints in gdb (lir's machine code in lldb's
    disassembler's spelling, at the same addresses): C in the arguments
    too (`ltab L->base --depth 2`, `lgcpath L->base+2`), which lldb's IR
    interpreter evaluates without running code in the process."""
    need_lldb()
    variant, stops = _doc_stops()
    m = manifest()[variant]
    env = {"LUA_PATH": os.path.join(m["src"], "?.lua") + ";;"}
    arith = 0
    for k, (prog, cmds) in enumerate(stops):
        work = tmp_path / str(k)
        work.mkdir()
        core = str(work / "core")
        # As gen_commands runs them: from the checkout, the program by its
        # relative path; then the core gdb saved there, in gdb and lldb.
        text = run_gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                        "-ex", "gcore " + core, "-ex", "kill", "--args", m["host"], prog[0],
                        str(work / "expected.txt")] + list(prog[1:]), cwd=ROOT, env=env)
        assert os.path.exists(core), text[-3000:]
        want = [out for _, out in cut_outputs(run_gdb(
            ["-ex", "source " + LOADER, "-ex", "core-file " + core] + wrap_commands(cmds)
            + [m["host"]], cwd=ROOT, env=env), cmds)]
        got = lldb_commands("%s --core %s" % (m["host"], core), cmds, str(work), cwd=ROOT)
        plain = [i for i, c in enumerate(cmds) if not c.startswith("lir ")]
        assert_same([got[i] for i in plain], [want[i] for i in plain], [cmds[i] for i in plain])
        for i, c in enumerate(cmds):
            if c.startswith("lir "):
                assert_lir_same(got[i], want[i], int(c.split()[1]))
        arith += sum(1 for c in cmds if "->" in c)
    assert arith >= 3


@pytest.mark.parametrize("variant", ALL_VARIANTS + NOJIT_VARIANTS + ARM64_VARIANTS)
def test_same_as_gdb_on_a_core(variant, tmp_path):
    """At a C call (values.lua's ljgdb_break, gcore'd by gdb; on arm64,
    qemu-user's core of the guest, read by gdb-multiarch)."""
    need_lldb()
    stop = Stop(variant, "values.lua", ["print/x (unsigned long)L"], str(tmp_path))
    # (and the C variable L by name, which lldb reads from the frame)
    cmds = PLAIN + _value_commands(stop) + ["lbt L=L", "lval L 3"]
    host = stop.build["host"]
    want = gdb_on_core(stop.core, host, cmds + ["lir 1"], str(tmp_path), build=stop.build)
    got = lldb_commands("%s --core %s" % (host, stop.core), cmds + ["lir 1"], str(tmp_path),
                        build=stop.build)
    assert len(want) == len(got) == len(cmds) + 1
    assert "values.lua:" in want[cmds.index("lbt")], want[cmds.index("lbt")]
    assert_same(got[:-1], want[:-1], cmds)
    assert_lir_same(got[-1], want[-1])


def assert_lir_same(got, ref, trace=1):
    """lir with its machine code: the IR as gdb's; the code through lldb's
    disassembler, which spells instructions its own way (movq %rax, %rbx
    where gdb writes mov %rax,%rbx), at the same addresses."""
    out, err = got
    if ref.startswith("lir: "):
        return
    mark = "---- TRACE %d mcode" % trace
    ir, _, code = out.partition(mark)
    ref_ir, _, ref_code = ref.partition(mark)
    assert err is None and ir == ref_ir and code, (out, err)

    def column(text):
        return [ln.split()[0] for ln in text.splitlines()[1:] if ln.strip()]
    assert column(code) == column(ref_code), (code, ref_code)
    assert len(column(code)) > 10 and "no disassembler" not in code


def test_bad_input_is_one_line(tmp_path):
    """Unknown options, a name lldb does not know, a setting's bad value,
    a command without a process: one line each, no traceback."""
    need_lldb()
    stop = Stop("r21-gc64", "values.lua", ["lbt"], str(tmp_path))
    host = stop.build["host"]
    cases = [("lbt --bogus", r"^lbt: unknown option '--bogus'"),
             ("lval nosuchname", r"^lval: expression 'nosuchname' is neither an address"),
             ("ljgdb set max-string x", r"^ljgdb set max-string takes a number$"),
             ("ljgdb frobnicate", r"^ljgdb: takes 'set NAME VALUE'"),
             ("ltab (GCtab *)0x10", r"^ltab: ")]
    got = lldb_commands("%s --core %s" % (host, stop.core), [c for c, _ in cases], str(tmp_path))
    for (cmd, want), (out, err) in zip(cases, got):
        assert err is not None and not out, (cmd, out, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, (cmd, err)
        assert re.search(want, err), (cmd, err)
    # No process at all: the program alone.
    (out, err), = lldb_commands(host, ["lbt"], str(tmp_path))
    assert err.startswith("lbt: no process or core file: launch the program"), err
    # The core of another build: refused, naming the binary's build-id (readelf's).
    other = manifest()["r21-x64"]["host"]
    (_, err), = lldb_commands("%s --core %s" % (other, stop.core), ["lbt"], str(tmp_path))
    assert err.startswith("lbt: the core file does not match %s: lldb loaded it with build-id %s"
                          % (other, gnu_build_id(other))), err
    assert "'ljgdb set check-build-id off'" in err and len(err.splitlines()) == 1, err
    # A setting set is used: max-string cuts a string.
    (_, err1), (out, err2) = lldb_commands("%s --core %s" % (host, stop.core),
                                           ["ljgdb set max-string 3", "ljgdb show max-string"],
                                           str(tmp_path))
    assert err1 is None and err2 is None and out.startswith("max-string:  3 "), (err1, out)


@pytest.mark.parametrize("variant", ["r21-gc64", "r20-x64", "or-x64"])
def test_same_as_gdb_attached(variant, tmp_path):
    """One moment of a running process, seen by both debuggers attached
    one after the other: values.lua stops itself with SIGSTOP in
    ljgdb_break (the host's LJGDB_SELF_STOP), gdb -p runs the commands
    and detaches (the process stays stopped), then lldb's `process attach
    -p` runs them; each prints what gdb printed."""
    need_lldb()
    m = manifest()[variant]
    cmds = [c for c in PLAIN if "--json" not in c] + ["lbt --json", "lgcstat --json"]
    env = dict(os.environ, LUA_PATH=os.path.join(m["src"], "?.lua") + ";;", LJGDB_SELF_STOP="1")
    prog = subprocess.Popen([m["host"], os.path.join(ROOT, "testprogs", "lua", "values.lua"),
                             str(tmp_path / "expected.txt")], env=env, cwd=str(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while proc_state(prog.pid) != "T" and time.time() < deadline:
            time.sleep(0.05)
        assert proc_state(prog.pid) == "T"
        text = run_gdb(["-ex", "source " + LOADER, "-p", str(prog.pid)] + wrap_commands(cmds),
                       cwd=str(tmp_path))
        want = [out for _, out in cut_outputs(text, cmds)]
        assert proc_state(prog.pid) == "T", "gdb let the process go on"
        got = lldb_run(["process attach -p %d" % prog.pid], cmds, str(tmp_path))
    finally:
        prog.kill()
        prog.wait()
    assert len(want) == len(got) == len(cmds)
    # (gdb read the moment: the program's own frames, not an error line)
    assert "values.lua:" in want[cmds.index("lbt")], want[cmds.index("lbt")]
    assert_same(got, want, cmds)


SUMMARY_PATHS = ["L", "*L", "L->env", "L->glref"] + ["L->base[%d]" % i for i in range(12)]


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64", "r20-x64", "or-gc64"])
def test_type_summaries_as_gdb_prints(variant, tmp_path):
    """frame variable shows LuaJIT's values as gdb's print does with ljgdb's
    pretty-printers (the same text after lldb's "(type) path = " and gdb's
    "$N = "; lldb lists *L's members on lines of its own); a pointer to a
    TValue is an address; with the ljgdb category disabled, lldb's own
    view."""
    need_lldb()
    stop = Stop(variant, "values.lua", ["print " + p for p in SUMMARY_PATHS], str(tmp_path))
    host = stop.build["host"]
    cmds = ["frame variable " + p for p in SUMMARY_PATHS] + [
        "frame variable L->base", "type category disable ljgdb", "frame variable L->base[0]"]
    got = lldb_commands("%s --core %s" % (host, stop.core), cmds, str(tmp_path))
    for path, (out, err) in zip(SUMMARY_PATHS, got):
        want = re.sub(r"^\$\d+ = ", "", stop.out("core", "print " + path).strip())
        assert err is None, (path, err)
        m = re.match(r"^\([^)]*\) %s = (0x[0-9a-f]{16} )?(.*)$" % re.escape(path), out.strip(),
                     re.S)
        assert m, (path, out)
        mine = m.group(2)
        if path == "*L":
            want, mine = want.split(" = {")[0], mine.split(" {")[0]
        assert mine == want, (path, mine, want)
        if path == "L->env":        # (the globals: a table, as LuaJIT's tostring says)
            assert mine.startswith("table: (GCtab *)0x"), mine
    base = got[cmds.index("frame variable L->base")][0].strip()
    assert re.match(r"^\(TValue \*\) L->base = 0x[0-9a-f]{16}$", base), base
    raw = got[-1][0]
    assert "u64 = " in raw and "it64 = " in raw or "u32 = " in raw, raw


def without_frames(text):
    """without_frame_names, and the frames left out of a list of places a
    state was found ("frame; memory search"): the C variables that name a
    state are read in lldb's frames, and lldb's unwinder can end before the
    frame that names it, at a moment gdb's does not (the state found is
    the same)."""
    return re.sub(r"frame; |; frame\b", "", without_frame_names(text))


@pytest.mark.slow      # random moments, a kernel core each
@pytest.mark.parametrize("variant", ("r21-gc64", "r20-x64", "or-x64") + ARM64_VARIANTS)
def test_same_as_gdb_on_kernel_cores(variant, tmp_path):
    """Kernel cores (qemu-user's on arm64) at random moments of six
    spinning shapes (SIGABRT into the interpreter, traces, the GC,
    coroutine switches, calls from traces, allocation), two each: lldb
    prints what gdb prints (the frames that name a state left out, and
    whether a frame named it), and lldb's lbt is never wrong against the
    frames the program recorded (moments.judge).  The machine frames are
    ljgdb's own unwinder's in lldb too: before, lldb's unwinder stopped
    short inside lj_alloc_malloc in one core of twelve (a CI run, or-x64)
    where gdb's went on."""
    need_lldb()
    compared, bad, verdicts = 0, [], {}
    cores = list(kernel_cores(variant, tmp_path, 2000))
    # One lldb for the twelve cores, each loaded and deleted in turn (as a
    # user goes from core to core).
    build = cores[0][5]
    cmds = []
    for _, _, _, _, core, _ in cores:
        cmds += ["target create %s --core %s" % (build["host"], core)] + MOMENT_COMMANDS + \
            ["target delete"]
    first = ["platform select remote-linux --sysroot " + build["sysroot"]] \
        if build.get("sysroot") else []
    every = lldb_run(first, cmds, str(tmp_path))
    n = len(MOMENT_COMMANDS) + 2
    for k, (shape, i, records, outs, core, build) in enumerate(cores):
        made, got = every[k * n], every[k * n + 1:(k + 1) * n - 1]
        assert made[1] is None, made
        lbt = (got[0][0] or "") + (got[0][1] or "")
        verdict, why = moments.judge(records, lbt)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        assert verdict != "wrong", (shape, i, why, got[0])
        for cmd, g, c in zip(MOMENT_COMMANDS, outs, got):
            # (The moments' driver marks gdb's error lines, and gdb drops
            # what a command wrote before it failed: test_corereader.)
            if g.startswith("gdb error: ") and c[1]:
                c = ("", c[1])
            g = re.sub(r"^gdb error: ", "", g, flags=re.M)
            if cmd in ("lstates", "linfo"):
                g, c = without_frames(g), (without_frames(c[0] or ""), c[1])
            bad.append(differs(c, g, "%s (%s, %s core %d)" % (cmd, variant, shape, i),
                               "lldb"))
            compared += 1
    assert not any(bad), "\n".join(d for d in bad if d)
    assert compared == len(MOMENT_SHAPES) * 2 * len(MOMENT_COMMANDS)
    assert verdicts.get("exact", 0) >= len(MOMENT_SHAPES), verdicts


@pytest.mark.parametrize("variant", ["r21-gc64", "r20-x64", "r21-arm64"])
def test_frame_commands_as_gdb(variant, tmp_path):
    """lframe, lup, ldown, llocals, lprint and llist in one lldb session on
    frames.lua's core: gdb's text on the same core, command for command
    (tests/e2e/test_lframe.py's list, which holds gdb's to LuaJIT's
    debug.getinfo and debug.getlocal; without gdb's convenience
    functions)."""
    need_lldb()
    from test_lframe import CMDS
    stop = Stop(variant, "frames.lua", CMDS, str(tmp_path))
    cmds = [c for c in CMDS if not c.startswith("print ")]
    got = lldb_commands("%s --core %s" % (stop.build["host"], stop.core), cmds, str(tmp_path),
                        build=stop.build)
    seen, bad = {}, []
    for cmd, res in zip(cmds, got):
        nth = seen.get(cmd, 0)
        seen[cmd] = nth + 1
        bad.append(differs(res, stop.out("core", cmd, nth), "%s (#%d)" % (cmd, nth), "lldb"))
    assert not any(bad), "\n".join(d for d in bad if d)


def test_frame_selection_forgotten_when_the_program_runs(tmp_path):
    """In a process lldb runs: frames.lua stops a second time, in its main
    chunk; after `process continue`, lframe is frame 0 again, and lup goes
    to the main chunk at the line LuaJIT gave.  llist of a chunk named
    relative to where the program started, from another directory, says
    how to name where to look in lldb's words."""
    need_lldb()
    from test_lframe import PROG
    m = manifest()["r21-gc64"]
    rel = os.path.relpath(PROG, ROOT)
    expected = str(tmp_path / "expected.txt")
    got = lldb_run(["target create " + m["host"],
                    "settings set target.run-args %s %s" % (rel, expected),
                    "breakpoint set -n ljgdb_break", "process launch -w " + ROOT],
                   ["lframe 3", "llist 3", "process continue", "lframe", "lup", "process kill"],
                   str(tmp_path))
    (first, err1), (listed, err2), _, (again, err3), (up, err4), _ = got
    assert err1 is None and first.startswith("#3   "), (first, err1)
    line = [int(r[4]) for r in read_expected(expected) if r[:2] == ["frame", "3"]][0]
    assert err2 == ("llist: frame #3 (%s:%d): no file %s (name where to look: ljgdb set "
                    "source-path DIR[:DIR...])" % (rel, line, rel)), (listed, err2)
    top = [r for r in read_expected(expected) if r[0] == "top"][0]
    assert (again, err3) == ("#0   C:ljgdb_stop\n", None), (again, err3)
    assert (frame_place(up or ""), err4) == ("#1   %s:%s\n" % (chunk_display(top[1]), top[2]), None), \
        (up, err4)


@pytest.mark.parametrize("variant", ["r21-gc64", "or-x64"])
def test_stripped_build_through_a_profile(variant, tmp_path):
    """A stripped host (no DWARF, no .symtab) and its layout profile in
    $LJGDB_PROFILES: lldb reads the core through the profile as gdb does
    (the same text); without the profile, one line saying what to do."""
    need_lldb()
    host = manifest()[variant]["host"]
    stripped, profs = stripped_with_profile(host, variant, str(tmp_path))
    cmds = ["lbt", "lbt full", "lthreads", "lgcstat", "ltrace", "linfo"]
    stop = Stop(variant, "bt.lua", cmds, str(tmp_path / "run"), args=["nest"],
                env={"LJGDB_PROFILES": profs}, host=stripped)
    assert "layout:           layout profile" in stop.out("core", "linfo"), stop.out("core", "linfo")
    target = "%s --core %s" % (stripped, stop.core)
    os.environ["LJGDB_PROFILES"], old = profs, os.environ.get("LJGDB_PROFILES")
    try:
        got = lldb_commands(target, cmds, str(tmp_path))
        os.environ["LJGDB_PROFILES"] = "none"     # (the library has or-x64's version)
        (out, err), = lldb_commands(target, ["lbt"], str(tmp_path))
    finally:
        if old is None:
            del os.environ["LJGDB_PROFILES"]
        else:
            os.environ["LJGDB_PROFILES"] = old
    assert_same(got, [stop.out("core", c) for c in cmds], cmds)
    assert err.startswith("lbt: LuaJIT is in %s but without debug info" % stripped), err
    assert "$LJGDB_PROFILES" in err and len(err.splitlines()) == 1, err


# In lldb on a live process: commands that read, the summaries, the frame
# commands, and bad input, some of which lldb's expression evaluator would
# run as code (a call, an assignment): ljgdb never evaluates them.
LIVE_GOOD = ["lbt", "lbt full", "lbt --all --group", "linfo", "lthreads", "lgcstat --top 5",
             "lstates", "lmcode", "ltrace", "lstr", "lheap", "lframe 1", "llocals", "lup",
             "frame variable"]
LIVE_BAD = ["lval nosuch", "lval abort()", "lval ljgdb_break_count = 5", "ltab (GCtab *)0x10",
            "lbt --bogus", "ljgdb set max-string many"]


def test_lldb_never_changes_the_process(tmp_path):
    """A process blocked in a read (test_live_readonly's Waiting), hashed
    by the test's own reads of /proc/PID/mem before lldb attaches and
    after it detached: every writable mapping, each thread's system call
    and state the same; lbt shows the frames the program recorded; C
    arithmetic in an argument (`((lua_State *)L)->base+1`, evaluated by
    lldb without running code) is slot 2 as `lval L 2` reads it; bad input
    (calls and assignments among it) gets one line; the process is left
    untraced with nothing pending, and reads its next line."""
    need_lldb()
    from test_live import Waiting, assert_frames
    from test_live_readonly import assert_unchanged, snapshot
    prog = Waiting("r21-gc64", tmp_path, args=("5",), env={"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})
    try:
        before = snapshot(prog.pid)
        assert before[1] > 100000, before
        got = lldb_run(["process attach -p %d" % prog.pid], LIVE_GOOD + LIVE_BAD, str(tmp_path))
        for cmd, (out, err) in zip(LIVE_GOOD, got):
            assert err is None and out.strip() and "internal error" not in out, (cmd, out, err)
        for cmd, (out, err) in zip(LIVE_BAD, got[len(LIVE_GOOD):]):
            assert err is not None and not out and len(err.splitlines()) == 1, (cmd, out, err)
            assert "Traceback" not in err, (cmd, err)
        assert_frames(got[0][0], prog.frames())
        # C arithmetic and member access, by lldb's IR interpreter (no
        # code run in the process); an assignment refused before it.
        L = re.match(r"Lua backtrace of \(lua_State \*\)(0x[0-9a-f]+)", got[0][0]).group(1)
        exprs = ["lval ((lua_State *)%s)->base+1" % L, "lval (lua_State *)%s 2" % L,
                 "lval ((lua_State *)%s)->base = 0" % L, "lval ((lua_State *)%s)->top++" % L]
        (a, err_a), (b, err_b), (_, err_c), (_, err_d) = lldb_run(
            ["process attach -p %d" % prog.pid], exprs, str(tmp_path))
        assert err_a is None and err_b is None and b == "slot 2 " + a, (a, err_a, b, err_b)
        for err in (err_c, err_d):
            assert err and "assigns: ljgdb never writes to the process" in err, err
        assert_unchanged(prog, before)
    finally:
        prog.stop()


def test_launched_process_as_luajit_sees_it(tmp_path):
    """A process lldb launches (process launch, stopped at frames.lua's
    ljgdb_break): lbt lists every frame at the line debug.getinfo gave,
    llocals each Lua frame's locals and upvalues as debug.getlocal and
    debug.getupvalue named them (test_lframe's checks, on lldb's text)."""
    need_lldb()
    from test_lframe import PROG, check_locals, frame_line, luajit_view
    m = manifest()["r21-gc64"]
    expected = str(tmp_path / "expected.txt")
    levels = list(range(1, 4))
    cmds = ["lbt"] + [c for k in levels for c in ("lframe %d" % k, "llocals")] + ["process kill"]
    got = lldb_run(["target create " + m["host"],
                    "settings set target.run-args %s %s" % (PROG, expected),
                    "breakpoint set -n ljgdb_break", "process launch"], cmds, str(tmp_path))
    stop = Stop.__new__(Stop)           # (only its records: luajit_view reads .expected)
    stop.expected = read_expected(expected)
    view = luajit_view(stop)
    bt, err = got[0]
    assert err is None and len(view) > len(levels), (err, view)
    for level in sorted(view):
        assert frame_line(level, view) in frame_place(bt).split("\n"), (level, bt)
    for i, level in enumerate(levels):
        out, err = got[2 + 2 * i]
        assert err is None, err
        check_locals(out.rstrip("\n"), level, view)


@pytest.mark.slow      # random moments of spinning programs
@pytest.mark.parametrize("variant", ["r21-gc64", "or-x64"])
def test_lbt_at_random_moments_attached(variant, tmp_path):
    """lldb attaches to a spinning program at random moments (`process
    attach -p`, lbt, `process detach`, a random pause, again), four times
    for each of six shapes: lbt is never wrong against the stack the
    program recorded (moments.judge: exact, or honest with a line saying
    what it could not know), and the program runs on after each detach."""
    need_lldb()
    import random
    build = moments.manifest()[variant]
    rnd = random.Random(3000)
    verdicts = {}
    for shape in MOMENT_SHAPES:
        work = str(tmp_path / shape)
        with moments.running(build, shape, work) as (prog, exp):
            cmds = []
            for _ in range(4):
                cmds += ["script import time; time.sleep(%.4f)" % rnd.uniform(0, 0.2),
                         "process attach -p %d" % prog.pid, "lbt", "process detach"]
            got = lldb_run([], cmds, work)
            assert prog.poll() is None, "the program ended"
            time.sleep(0.2)
            assert proc_state(prog.pid) in "RSD", proc_state(prog.pid)
        records = read_expected(exp)
        for k in range(4):
            (_, aerr), (out, err), (_, derr) = got[4 * k + 1:4 * k + 4]
            assert aerr is None and derr is None, (shape, k, aerr, derr)
            verdict, why = moments.judge(records, (out or "") + (err or ""))
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
            assert verdict != "wrong", (shape, k, why, out, err)
    assert sum(verdicts.values()) == 4 * len(MOMENT_SHAPES)
    assert verdicts.get("exact", 0) >= len(MOMENT_SHAPES), verdicts


def lldb_sweep(build, shape, steps, work, first=()):
    """lldb launches moments.lua's `shape`, stops it once it has recorded
    its stack (SIGINT, not passed on), runs the lldb commands `first`, then
    steps one machine instruction at a time: [(lbt's text, pc)] at each of
    `steps` instructions, and the program's records."""
    exp = os.path.join(work, "expected.txt")
    sender = subprocess.Popen(
        ["sh", "-c", "while ! grep -q '^ready' %s 2>/dev/null; do sleep 0.02; done; "
         "sleep 0.05; kill -INT $(sed -n 's/^pid\t//p' %s)" % (exp, exp)])
    cmds = ["process handle SIGINT -s true -p false -n false", "process launch"] + list(first)
    for _ in range(steps):
        cmds += ["lbt", "register read pc", "thread step-inst"]
    cmds.append("process kill")
    try:
        got = lldb_run(["target create " + build["host"],
                        "settings set target.run-args %s %s %s" % (moments.PROGRAM, exp, shape),
                        "settings set target.env-vars LUA_PATH=%s"
                        % moments._env(build)["LUA_PATH"]], cmds, work)
    finally:
        sender.kill()
        sender.wait()
    for cmd, (_, err) in zip(cmds[:2 + len(first)], got):
        assert err is None, (cmd, err)
    out = []
    for k in range(steps):
        (text, err), (pc, _), (_, serr) = got[2 + len(first) + 3 * k:5 + len(first) + 3 * k]
        assert serr is None, (shape, k, serr)
        out.append(((text or "") + (err or ""),
                    int(re.search(r"\b(?:rip|pc) = (0x[0-9a-f]+)", pc).group(1), 16)))
    return out, read_expected(exp)


@pytest.mark.slow      # about a minute per build
@pytest.mark.parametrize("variant", ["r21-gc64", "or-x64"])
def test_instruction_sweep(variant, tmp_path):
    """test_moments' instruction sweep in lldb: the program launched by
    lldb, stopped once inside its loop, then stepped one machine
    instruction at a time (`thread step-inst`), with lbt at every
    instruction of the loops' bytecode handlers, fast functions, VM
    routines and the C helpers they call: never wrong against the stack
    the program recorded, exact at nine moments in ten at least
    (test_moments' bound)."""
    need_lldb()
    from test_moments import SWEEPS
    for shape, steps in SWEEPS:
        work = str(tmp_path / shape)
        os.mkdir(work)
        res, records = lldb_sweep(manifest()[variant], shape, steps, work)
        verdicts = [moments.judge(records, text) for text, _ in res]
        wrong = [(k, v, text) for k, (v, (text, _)) in enumerate(zip(verdicts, res))
                 if v[0] == "wrong"]
        assert not wrong, (shape, wrong[:3])
        exact = sum(1 for v in verdicts if v[0] == "exact")
        assert exact >= 0.90 * steps, (shape, [v for v in verdicts if v[0] != "exact"][:5])
        # The sweep went through VM code and more than one place.
        assert len({pc for _, pc in res}) > 10, shape


@pytest.mark.slow      # about 30 s per build
@pytest.mark.parametrize("variant", ["r21-gc64", "or-x64"])
def test_allocator_sweep(variant, tmp_path):
    """The allocator, instruction by instruction: moments.lua's `alloc`
    stopped at lj_alloc_malloc's and then lj_alloc_free's first
    instruction, stepped 400 instructions on: lbt is exact at every one.
    The machine frames are ljgdb's unwinder's (the core reader's): with
    lldb's own, 86 of the 400 moments in lj_alloc_malloc on or-x64 ended
    at the allocator's frame, lbt then saying it could not place the
    Lua frames (docs/lldb.md)."""
    need_lldb()
    for fn in ("lj_alloc_malloc", "lj_alloc_free"):
        work = str(tmp_path / fn)
        os.mkdir(work)
        res, records = lldb_sweep(manifest()[variant], "alloc", 400, work,
                                  ["breakpoint set -n " + fn, "process continue",
                                   "breakpoint delete -f"])
        verdicts = [moments.judge(records, text) for text, _ in res]
        assert all(v[0] == "exact" for v in verdicts), \
            (fn, [(k, v, res[k][0]) for k, v in enumerate(verdicts) if v[0] != "exact"][:3])
        # It went through the function, not round one loop.
        assert len({pc for _, pc in res}) > 100, fn
