"""Stop a spinning VM at random moments and judge lbt against the stack
the Lua program recorded (testprogs/lua/moments.lua).

Three ways to stop, as operators do:
  attach   gdb attaches to the running process (gdb -p), lbt, detach; again
  sigint   the process runs under gdb; SIGINT from outside stops it; again
  abort    SIGABRT makes the kernel write a core; gdb loads each core
  sweep    (not random) stopped once, then `stepi` n times: every machine
           instruction the loop runs, in order, is a moment
  pid      no gdb: `python3 -m ljgdb --pid PID lbt` and `python3 -m ljgdb
           dump --pid PID` against the running process (the live backend
           stops it only while it reads), at random moments as attach; the
           process runs on between and after them

arm64 builds run under qemu-user (tests/support/stop.py qemu_gdb), which has no
attach: its gdb stub takes one debugger, connected before the first
instruction.  There sigint sends SIGINT to the qemu process (the guest's
signal, which the stub reports to gdb), abort sends it SIGABRT (qemu writes
the guest's core, qemu_<prog>_<date>_<pid>.core), and the sweep steps over
the stub.  qemu stops the guest at the start of a translated block only,
so random moments fall on fewer places than on x86-64; the sweep covers
every instruction.

Each way but pid runs one gdb for many moments.  The program records its
stack once, before it starts its loop, and closes the file ("ready"): the
records are the truth of every moment after that, which is why attach, and
pid, may read the file after the moments.  An lbt output is judged:
  exact    every frame equals the recorded stack (plus, on top, only frames
           the loop may call, see `allow` in moments.lua) and no warning
  honest   the frames shown are right (the innermost ones, or the
           outermost ones), and an `lbt:` line says what is missing and why
  wrong    any other output: a frame that differs, without a warning
Used by tests/e2e/test_moments.py (a fixed-seed subset) and
bench/bench_moments.py (thousands of moments, the README's table).
"""
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

from .stop import (LOADER, LUA_DIR, ROOT, chunk_display, frame_place, manifest, qemu_gdb, qemu_target,
                   read_expected, run_gdb, traceback_name)

PROGRAM = os.path.join(LUA_DIR, "moments.lua")
SHAPES = ("interp", "alloc", "calls", "luacall", "meta", "gsub", "sort", "vararg", "coro", "gc",
          "hook", "jit", "jitside", "jitcall", "jitalloc", "parse", "grow", "error", "coswitch",
          "record", "ffasm")
WAYS = ("attach", "sigint", "abort")
ARM64_WAYS = ("sigint", "abort")
LIVE_WAYS = ("pid",)        # the live backend, no gdb (ptrace cannot read qemu's guest)
LIVE_COMMANDS = ("lbt", "dump")


def ways_of(variant):
    return ARM64_WAYS if manifest()[variant].get("arch") == "arm64" else WAYS


def can_stop(variant, way):
    """Whether the variant's program can be stopped (or read) that way."""
    if way == "sweep":
        return True
    if way in LIVE_WAYS:
        return manifest()[variant].get("arch") != "arm64"
    return way in ways_of(variant)


_MARK = "@@LJM %d@@"
_MARK_END = "@@LJM-END %d@@"

# Runs inside gdb (python exec of this text): one moment per loop turn.
_GDB_DRIVER = r'''
import json, os, random, subprocess, time
import gdb
cfg = json.loads(os.environ["LJM_CONFIG"])
rnd = random.Random(cfg["seed"])
gdb.execute("source " + cfg["loader"])

def moment(i):
    try:
        f = gdb.newest_frame()
        where = f.name() or "0x%x" % f.pc()
        pc = f.pc()
    except gdb.error:
        where, pc = "?", 0
    out = []
    for cmd in cfg["commands"]:
        try:
            out.append(gdb.execute(cmd, to_string=True))
        except gdb.error as e:
            out.append("gdb error: %s\n" % e)
    gdb.write("\n@@LJM %d@@\n%s\n%s@@LJM-END %d@@\n" % (i, json.dumps({"frame0": where, "pc": pc}),
                                                       "@@LJM-SEP@@\n".join(out), i))

if cfg["way"] == "attach":
    for i in range(cfg["n"]):
        time.sleep(rnd.uniform(0, cfg["delay"]))
        gdb.execute("attach %d" % cfg["pid"], to_string=True)
        moment(i)
        gdb.execute("detach", to_string=True)
elif cfg["way"] == "sigint":
    gdb.execute("handle SIGINT stop nopass", to_string=True)
    for i in range(cfg["n"]):
        d = cfg["ready_delay"] if i == 0 else 0
        d += rnd.uniform(0.001, cfg["delay"])
        subprocess.Popen(["sh", "-c", "while [ ! -s %s ] || ! grep -q '^ready' %s; do sleep 0.02; "
                          "done; sleep %.4f; kill -INT $(sed -n 's/^pid\t//p' %s)"
                          % (cfg["expected"], cfg["expected"], d, cfg["expected"])])
        gdb.execute(cfg["start"] if i == 0 else "continue", to_string=True)
        moment(i)
    gdb.execute("kill", to_string=True)
elif cfg["way"] == "sweep":
    # Stop once, then step one machine instruction at a time: every
    # instruction the loop executes (VM handlers, fast functions, C
    # helpers) is a moment.
    gdb.execute("handle SIGINT stop nopass", to_string=True)
    subprocess.Popen(["sh", "-c", "while [ ! -s %s ] || ! grep -q '^ready' %s; do sleep 0.02; "
                      "done; sleep %.4f; kill -INT $(sed -n 's/^pid\t//p' %s)"
                      % (cfg["expected"], cfg["expected"], cfg["ready_delay"], cfg["expected"])])
    gdb.execute(cfg["start"], to_string=True)
    for i in range(cfg["n"]):
        moment(i)
        gdb.execute("stepi", to_string=True)
    gdb.execute("kill", to_string=True)
else:
    for i, core in enumerate(cfg["cores"]):
        gdb.execute("core-file " + core, to_string=True)
        moment(i)
'''


def _env(build):
    return {"LUA_PATH": os.path.join(build["src"], "?.lua") + ";;"}


def _wait_ready(path, proc, timeout=20):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if os.path.exists(path):
            with open(path) as f:
                if any(line.startswith("ready") for line in f):
                    return
        if proc is not None and proc.poll() is not None:
            raise AssertionError("the program exited (%s) before it was ready" % proc.returncode)
        time.sleep(0.01)
    raise AssertionError("the program was not ready after %d s" % timeout)


def _start(build, shape, expected, workdir, core=False):
    cmd = build.get("runner", []) + [build["host"], PROGRAM, expected, shape]
    if core:
        cmd = ["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh"] + cmd
    env = dict(os.environ, **_env(build))
    return subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def running(build, shape, workdir):
    """moments.lua's shape running in workdir (made), its stack recorded:
    (the process, its records' file); killed after."""
    os.makedirs(workdir, exist_ok=True)
    expected = os.path.join(workdir, "expected.txt")
    p = _start(build, shape, expected, workdir)
    try:
        _wait_ready(expected, p)
        yield p, expected
    finally:
        p.kill()
        p.wait()


def kernel_cores_possible():
    """None when the kernel writes a core named 'core' into the working
    directory (core_pattern 'core', what the abort way relies on), else why not."""
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            pattern = f.read().strip()
    except OSError as e:
        return "cannot read core_pattern: %s" % e
    if pattern.startswith("|") or "/" in pattern:
        return "core_pattern is %r: the kernel does not write cores into the working directory" \
            % pattern
    return None


def sample(variant, shape, way, n, seed, workdir, delay=0.05, commands=None):
    """Run n moments of one shape stopped one way.  Returns a list of
    (expected records, {"frame0": ...}, [command outputs]).  commands:
    gdb command lines (default lbt); for the pid way, LIVE_COMMANDS' words
    (default both: lbt's output, then dump's section of the thread)."""
    build = manifest()[variant]
    arm64 = build.get("arch") == "arm64"
    if not can_stop(variant, way):
        raise ValueError("%s cannot be stopped the %s way" % (variant, way))
    os.makedirs(workdir, exist_ok=True)
    if way == "pid":
        return _sample_pid(build, shape, n, seed, workdir, delay, commands or LIVE_COMMANDS)
    commands = commands or ("lbt",)
    rnd = random.Random(seed)
    cfg = {"seed": seed, "loader": LOADER, "commands": list(commands), "way": way, "n": n,
           "delay": delay, "start": "continue" if arm64 else "run"}
    # The program under gdb: started by gdb (x86-64) or by qemu, which
    # gdb-multiarch then connects to.
    under_gdb = None
    target = qemu_target(build) if arm64 else [build["host"]]
    expected_files = []
    proc = None
    args = ["-ex", "python exec(open(%r).read())" % os.path.join(workdir, "driver.py")]
    with open(os.path.join(workdir, "driver.py"), "w") as f:
        f.write(_GDB_DRIVER)
    try:
        if way == "attach":
            exp = os.path.join(workdir, "expected.txt")
            _clean(exp)
            proc = _start(build, shape, exp, workdir)
            _wait_ready(exp, proc)
            cfg["pid"] = proc.pid
            expected_files = [exp] * n
            args = [build["host"]] + args
        elif way in ("sigint", "sweep"):
            exp = os.path.join(workdir, "expected.txt")
            _clean(exp)
            cfg["expected"] = exp
            cfg["ready_delay"] = 0.05
            expected_files = [exp] * n
            under_gdb = [build["host"], PROGRAM, exp, shape]
            if not arm64:
                args += ["--args"] + under_gdb
        elif way == "abort":
            cores = []
            for i in range(n):
                d = os.path.join(workdir, "c%d" % i)
                os.makedirs(d, exist_ok=True)
                exp = os.path.join(d, "expected.txt")
                core = os.path.join(d, "core")
                _clean(exp)
                _clean(core)
                p = _start(build, shape, exp, d, core=True)
                _wait_ready(exp, p)
                time.sleep(rnd.uniform(0, delay))
                p.send_signal(signal.SIGABRT)
                p.wait(timeout=60)
                if arm64:
                    core = _qemu_core(d)
                if not os.path.exists(core):
                    raise AssertionError("no kernel core in %s (%s)" % (d, kernel_cores_possible()))
                cores.append(core)
                expected_files.append(exp)
            cfg["cores"] = cores
            args = target + args
        else:
            raise ValueError(way)
        env = dict(_env(build), LJM_CONFIG=json.dumps(cfg))
        if under_gdb and arm64:
            text = qemu_gdb(build, under_gdb, workdir, env, args, timeout=120 + 20 * n)[0]
        else:
            text = run_gdb(args, env=env, cwd=workdir, timeout=120 + 20 * n,
                           gdb="gdb-multiarch" if arm64 else "gdb")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
    results = []
    for i in range(n):
        m = re.search(re.escape(_MARK % i) + r"\n(.*?)\n(.*?)" + re.escape(_MARK_END % i), text, re.S)
        if not m:
            raise AssertionError("moment %d of %s/%s/%s has no output:\n%s"
                                 % (i, variant, shape, way, text[-3000:]))
        results.append((read_expected(expected_files[i]), json.loads(m.group(1)),
                        m.group(2).split("@@LJM-SEP@@\n")))
    return results


def _sample_pid(build, shape, n, seed, workdir, delay, commands):
    """The pid way: the program runs by itself; at each moment (a random
    delay, as attach) each command runs once against it.  frame0 is the
    scheduling state dump saw ("R", "S"; "?" without dump)."""
    rnd = random.Random(seed)
    exp = os.path.join(workdir, "expected.txt")
    _clean(exp)
    proc = _start(build, shape, exp, workdir)
    moments = []
    try:
        _wait_ready(exp, proc)
        for i in range(n):
            time.sleep(rnd.uniform(0, delay))
            outs, state = [], "?"
            for cmd in commands:
                text = live_output(proc.pid, cmd)
                if cmd.split()[0] == "dump":
                    state, text = dump_section(text)
                outs.append(text)
            if proc.poll() is not None:
                raise AssertionError("%s/%s ended (%s) after moment %d:\n%s"
                                     % (build["name"], shape, proc.returncode, i, outs))
            moments.append(({"frame0": "pid:" + state, "pc": 0}, outs))
    finally:
        proc.kill()
        proc.wait()
    records = read_expected(exp)
    return [(records, info, outs) for info, outs in moments]


def live_output(pid, cmd, timeout=120):
    """What `python3 -m ljgdb --pid PID CMD` (CMD "dump ...": `python3 -m
    ljgdb dump --pid PID ...`) printed: its standard output, then its
    standard error (lbt's one-line refusals and errors are there)."""
    words = cmd.split()
    if words[0] == "dump":
        argv = ["dump", "--pid", str(pid)] + words[1:]
    else:
        argv = ["--pid", str(pid)] + words
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + argv, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=ROOT, timeout=timeout)
    return p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")


_DUMP_HEADER = re.compile(r'^Thread \d+ ".*" \((\S): [^)]*\)$')


def dump_section(text):
    """(state letter, lbt's text) of the one thread dump shows with a
    header; ("?", the whole text) when it shows no thread's (its line saying
    why is then a warning to the judge) or more than one."""
    lines = text.splitlines(True)
    heads = [i for i, line in enumerate(lines) if _DUMP_HEADER.match(line.rstrip("\n"))]
    if len(heads) != 1:
        return "?", text
    body = []
    for line in lines[heads[0] + 1:]:
        if re.match(r"^\d+ other threads? runs? no Lua: ", line):
            break
        body.append(line)
    return _DUMP_HEADER.match(lines[heads[0]].rstrip("\n")).group(1), "".join(body)


def _qemu_core(d):
    """The guest's core qemu wrote in d (and no core of qemu itself)."""
    if os.path.exists(os.path.join(d, "core")):
        os.unlink(os.path.join(d, "core"))
    found = [f for f in os.listdir(d) if f.startswith("qemu_") and f.endswith(".core")]
    if len(found) != 1:
        raise AssertionError("qemu wrote %d cores in %s" % (len(found), d))
    os.rename(os.path.join(d, found[0]), os.path.join(d, "core"))
    return os.path.join(d, "core")


def _clean(path):
    if os.path.exists(path):
        os.unlink(path)


# --------------------------------------------------------------------------
# Judging

def truth(records, tag="frame"):
    """(recorded frame texts innermost first, {allowed extra text: max
    count}).  tag "altframe": the other thread's stack a shape may show
    (the coroutine of "coswitch" while it runs)."""
    ff = {int(r[1]): r[2] for r in records if r[0] == "ffname"}
    frames = []
    allowed = {}
    for r in records:
        if r[0] == tag:
            what, source, line, func = r[2], r[3], r[4], r[5]
            if what in ("Lua", "main"):
                frames.append("%s:%s" % (chunk_display(source), line))
            elif "builtin#" in func:
                ffid = int(func.split("#")[1])
                frames.append("[builtin#%s]" % ff.get(ffid, ffid))
            else:
                frames.append("C:*")
        elif r[0] == "allow":
            if r[1] == "lua":
                text = "%s:%s" % (chunk_display(r[2]), r[3])
                allowed[text] = int(r[4])
            else:
                ffid = int(r[2].split("#")[1])
                allowed["[builtin#%s]" % ff.get(ffid, ffid)] = int(r[3])
    return frames, allowed


_ANNOT = re.compile(r"( -> resumed \(lua_State \*\)0x[0-9a-f]+| \(in trace \d+[^)]*\))+$")


def parse_lbt(text):
    """(header, [frame texts], [warning lines]) of one lbt output."""
    lines = text.strip("\n").splitlines()
    header = lines[0] if lines else ""
    frames, warnings = [], []
    for line in lines[1:]:
        m = re.match(r"^#(\d+)\s+(.*)$", line)
        if m:
            frames.append(_ANNOT.sub("", frame_place(m.group(2))))
        elif line.startswith("(g->vmthref runs "):
            continue
        else:
            warnings.append(line)
    if not header.startswith("Lua backtrace of "):
        warnings.insert(0, header)
    return header, frames, warnings


def _same(shown, want):
    return shown == want or (want == "C:*" and shown.startswith("C:"))


TRACEBACK = "Traceback (most recent call last)"


def judge(records, lbt_text):
    """'exact', 'honest' or 'wrong', and a reason for the last two.  A shape
    with another stack it may show ("altframe" records) is judged against
    both, and the better verdict counts.  A Python traceback is wrong,
    whatever else the output says."""
    if TRACEBACK in lbt_text:
        return "wrong", "a Python traceback"
    header, shown, warnings = parse_lbt(lbt_text)
    verdicts = [_named(records, lbt_text, _judge(truth(records), shown, warnings))]
    if any(r[0] == "altframe" for r in records):
        verdicts.append(_judge(truth(records, "altframe"), shown, warnings))
    order = {"exact": 0, "honest": 1, "wrong": 2}
    return min(verdicts, key=lambda v: order[v[0]])


def _named(records, lbt_text, verdict):
    """An exact verdict stays exact when each recorded Lua frame is also
    named as the program's debug.getinfo named it ("in upvalue 'f'"),
    where the records carry names (moments.lua's do); else it is wrong."""
    if verdict[0] != "exact":
        return verdict
    recs = [r for r in records if r[0] == "frame"]
    if not recs or len(recs[0]) < 9:
        return verdict
    lines = [_ANNOT.sub("", m.group(1)) for m in re.finditer(r"^#\d+\s+(.*)$", lbt_text, re.M)]
    for line, r in zip(lines[len(lines) - len(recs):], recs):
        if r[2] in ("Lua", "main"):
            want = "%s:%s: in %s" % (chunk_display(r[3]), r[4],
                                     traceback_name(r[2], r[6], r[7], r[3], r[8]))
            if line != want:
                return "wrong", "frame %r, want %r (its name as debug.getinfo gives it)" % (
                    line, want)
    return verdict


def _judge(want_allowed, shown, warnings):
    want, allowed = want_allowed
    k = len(shown) - len(want)
    tail_ok = k >= 0 and all(_same(s, w) for s, w in zip(shown[k:], want))
    extras = shown[:k] if k > 0 else []
    counts = {}
    for e in extras:
        counts[e] = counts.get(e, 0) + 1
    extras_ok = all(e in allowed and counts[e] <= allowed[e] for e in counts)
    if tail_ok and extras_ok and not warnings:
        return "exact", ""
    if warnings:
        # Honest: what is shown is right, and a line says what is not:
        # the outermost frames (a suffix of the truth), or the innermost
        # ones (allowed frames on top, then a prefix of the recorded ones).
        if tail_ok and extras_ok:
            return "honest", warnings[0]
        if len(shown) <= len(want) and all(_same(s, w) for s, w in zip(shown, want[-len(shown):]
                                                                       if shown else [])):
            return "honest", warnings[0]
        i = 0
        seen = {}
        while i < len(shown) and shown[i] in allowed and seen.get(shown[i], 0) < allowed[shown[i]]:
            seen[shown[i]] = seen.get(shown[i], 0) + 1
            i += 1
        rest = shown[i:]
        if len(rest) <= len(want) and all(_same(s, w) for s, w in zip(rest, want)):
            return "honest", warnings[0]
        return "wrong", "frames %s, want %s (+ %s); warning %s" % (shown, want, allowed, warnings)
    return "wrong", "frames %s, want %s (+ %s)" % (shown, want, allowed)
