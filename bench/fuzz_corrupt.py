#!/usr/bin/env python3
"""Corruption fuzzer: every ljgdb command on cores with damaged LuaJIT memory
(and damaged glibc heap: its arenas and free chunks, for lmalloc).

A core of testprogs/lua/fuzz.lua (a small heap with a bit of everything,
stopped in nested Lua calls inside a coroutine) is written once per build
variant.  ljgdb itself then lists where the VM's memory is: every GC object
on the root list and in the string table (its header struct), the array and
hash parts of tables, whole prototypes, each thread's Lua stack, the
global_State and jit_State; and glibc's arenas with the headers of their
largest free chunks and top chunk.  Each trial copies the core and overwrites 1 to 3
random 8-byte words in those ranges (file offsets from the core's PT_LOAD
headers) with a random value, a flipped bit, 0, all ones, an unmapped
address, the word's own address or another object's (cycles), a huge
length, or another type tag; then runs every command on the copy in gdb
batch mode.  Many trials share one gdb process (it loads each core in turn);
a gdb that does not finish in time is killed, the trial it was in counted as
a hang, and the rest of its batch run again.

Each command's output is classified:
  result   what the command prints on success (it may end with a line saying
           where a walk stopped)
  clean    one line "<command>: <message>" (gdb's error line)
  failure  a Python traceback, "internal error", "Python Exception", empty
           output, or a hang

Usage: python3 bench/fuzz_corrupt.py [--trials N] [--seed S] [--batch B]
                                     [--jobs J] [VARIANT...]
(default: 1000 trials on each of r21-gc64 and r21-x64)
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from gdb_ext.backends import corefile  # noqa: E402
from support.stop import LOADER, LUA_DIR, manifest, run_gdb  # noqa: E402

COMMANDS = (
    "linfo",
    "lval L 1",
    "lval --raw L->base",
    "ltab (GCtab *){env} --depth 2 --limit 30",
    "lbt full",
    "lbt full --all",
    "lthreads",
    "lgcstat --top 5 --by-chunk",
    "lmcode",
    "lmcode {mcode}",
    "ltrace",
    "ltrace 2",
    "lir 1",
    "lstr",
    "lgcref (GCtab *){env}",
    "lgcpath (GCtab *){env}",
    "lgcstat --retained --top 3",
    "lbc fuzz.lua:0 --all",
    "lheap",
    "lmalloc --bins",
)
FAIL_RE = re.compile(r"Traceback|internal error|Python Exception|Error occurred in Python")
_BEGIN = "@@FZ-BEGIN %d %d@@"
_END = "@@FZ-END %d %d@@"

# Python run inside gdb on the intact core: where the VM's memory is.
_REGIONS_PY = r'''
import json
from ljgdb.commands.base import get_vm
from ljgdb.gdb_ext import consts as C
from ljgdb.gdb_ext.vm import walkers
from ljgdb.gdb_ext.vm.objects import Tab, Thread, Proto, Func
from ljgdb.gdb_ext.jit.jit import jit_state, traces
from ljgdb.gdb_ext.jit.mcode import mcode_areas
vm = get_vm()
lay = vm.lay
hdr = {C.GCT_STR: lay.str.size, C.GCT_UPVAL: lay.uv.size, C.GCT_THREAD: lay.L.size,
       C.GCT_PROTO: lay.pt.size, C.GCT_FUNC: lay.fnL.size, C.GCT_CDATA: lay.cd.size,
       C.GCT_TAB: lay.tab.size, C.GCT_UDATA: lay.ud.size}
if lay.trace is not None:
    hdr[C.GCT_TRACE] = lay.trace.size
R = []
def add(a, n, kind):
    if a and n > 0:
        R.append([a, min(n, 1 << 16), kind])
def thread(o):
    th = Thread(vm, o)
    add(th.stack, th.top - th.stack + 8, "stack-used")
    add(th.stack, 8 * th.stacksize, "stack")
for o, gct in walkers.root_objects(vm):
    add(o, hdr.get(gct, 16), C.GCT_NAMES.get(gct, "object"))
    try:
        if gct == C.GCT_TAB:
            t = Tab(vm, o)
            add(t.array, 8 * t.asize, "array")
            if t.node:
                add(t.node, (t.hmask + 1) * lay.node.size, "node")
        elif gct == C.GCT_THREAD:
            thread(o)
        elif gct == C.GCT_PROTO:
            add(o + lay.pt.size, Proto(vm, o).sizept - lay.pt.size, "proto-body")
    except Exception:
        pass
thread(vm.main_L)
add(vm.main_L, lay.L.size, "thread")
tab = vm.t.ptr(vm.G + lay.o_strtab)
mask = vm.t.u32(vm.G + lay.o_strmask)
add(tab, (mask + 1) * lay.ref_size, "strtab")
for i in range(mask + 1):
    s = vm.t.uint(tab + i * lay.ref_size, lay.ref_size) & ~1
    n = 0
    while s and n < 1000:
        add(s, lay.str.size, "str")
        s = vm.t.uint(s, lay.ref_size)
        n += 1
add(vm.G, lay.G.size, "state")
mcode = 0
if lay.jit and lay.J is not None:
    add(vm.GG + lay.GG.J, lay.J.size, "state")
    try:
        js = jit_state(vm)
        add(js.trace, js.sizetrace * lay.ref_size, "trace-table")
        ts = [T for _, T in traces(vm, js) if not isinstance(T, Exception)]
        ss = lay.s.get("SnapShot")
        for T in ts:
            add(T.snap, T.nsnap * (ss.size if ss else 12), "snapshots")
            add(T.snapmap, T.nsnapmap * 4, "snapshots")
            ir = T._f(vm, "ir")
            add(ir + 8 * T.nk, 8 * (T.nins - T.nk), "trace-ir")
        for a in mcode_areas(vm, js):
            add(a.start, 16, "mclink")
        mcode = ts[0].mcode + 4 if ts else 0
    except Exception:
        pass
# glibc's heap (lmalloc): the arenas and the free chunks' headers.
try:
    from ljgdb.gdb_ext.heap.glibc import read_heap
    for ar in read_heap(vm.t).arenas:
        add(ar.addr, 2200, "glibc-arena")
        add(ar.top, 16, "glibc-chunk")
        for _, p in ar.largest:
            add(p, 32, "glibc-chunk")
except Exception:
    pass
env = Thread(vm, vm.main_L).env
print("@@REGIONS@@" + json.dumps({"regions": R, "env": env, "mcode": mcode, "gc64": lay.gc64}))
'''


def make_core(variant, workdir):
    """Write the intact core of fuzz.lua for a variant; return its path."""
    m = manifest()[variant]
    core = os.path.join(workdir, "fuzz-%s.core" % variant)
    if os.path.exists(core):
        os.unlink(core)
    text = run_gdb(["-ex", "break ljgdb_break", "-ex", "run", "-ex", "gcore " + core,
                    "-ex", "kill", "--args", m["host"], os.path.join(LUA_DIR, "fuzz.lua"),
                    os.path.join(workdir, "fuzz-%s.expected" % variant)], cwd=workdir)
    if not os.path.exists(core):
        raise RuntimeError("%s: no core written:\n%s" % (variant, text[-2000:]))
    return core


def regions(variant, core):
    m = manifest()[variant]
    script = os.path.join(os.path.dirname(core), "regions.py")
    with open(script, "w") as f:
        f.write(_REGIONS_PY)
    text = run_gdb(["-ex", "source " + LOADER, "-ex", "core-file " + core,
                    "-ex", "source " + script, m["host"]])
    mm = re.search(r"@@REGIONS@@(.*)", text)
    if not mm:
        raise RuntimeError("%s: no regions:\n%s" % (variant, text[-3000:]))
    return json.loads(mm.group(1))


# How often each kind of memory is hit (object headers by type, the used
# part of stacks, table parts, prototypes' bytecode and debug info, the
# global and JIT state, trace snapshots, mcode area links).
WEIGHTS = {"thread": 4, "stack-used": 6, "stack": 1, "func": 3, "proto": 3, "proto-body": 3,
           "table": 3, "node": 3, "array": 1, "str": 2, "strtab": 1, "upval": 1,
           "udata": 1, "cdata": 1, "trace": 3, "trace-table": 1, "snapshots": 1,
           "mclink": 1, "state": 5, "glibc-arena": 2, "glibc-chunk": 2}
NOT_OBJECTS = ("stack-used", "stack", "proto-body", "node", "array", "strtab", "trace-table",
               "snapshots", "mclink", "state", "glibc-arena", "glibc-chunk")


class Mutator(object):
    """Chooses words and values to overwrite."""

    def __init__(self, info, segs, rng):
        self.rng = rng
        self.gc64 = info["gc64"]
        self.segs = segs
        self.objects = [r[0] for r in info["regions"] if r[2] in WEIGHTS and
                        r[2] not in NOT_OBJECTS]
        by_kind = {}
        for a, n, kind in info["regions"]:
            if corefile.file_offset(segs, a) is not None:
                by_kind.setdefault(kind, []).append((a, n))
        self.by_kind = by_kind
        # How often each kind of memory is hit.
        self.kinds = [k for k, w in WEIGHTS.items() if k in by_kind for _ in range(w)]

    def word(self):
        kind = self.rng.choice(self.kinds)
        a, n = self.rng.choice(self.by_kind[kind])
        addr = a + 8 * self.rng.randrange(max(1, n // 8))
        return addr, kind

    def value(self, addr, old):
        r = self.rng
        choice = r.randrange(10)
        if choice == 0:
            return r.getrandbits(64), "random"
        if choice == 1:
            return old ^ (1 << r.randrange(64)), "bitflip"
        if choice == 2:
            return 0, "zero"
        if choice == 3:
            return (1 << 64) - 1, "ones"
        if choice == 4:        # an address that is mapped nowhere
            bad = 0x7fff0000 + 8 * r.randrange(1 << 12) if not self.gc64 else \
                0x0000deadbee00000 + 8 * r.randrange(1 << 12)
            return (old & ~0xFFFFFFFF) | bad if not self.gc64 else bad, "unmapped"
        if choice == 5:        # the word's own address: a one-object cycle
            return (old & ~0xFFFFFFFF) | (addr & 0xFFFFFFFF) if not self.gc64 else \
                (old & ~((1 << 47) - 1)) | addr, "self"
        if choice == 6:        # another object: a cycle or a wrong type
            o = r.choice(self.objects)
            return (old & ~0xFFFFFFFF) | (o & 0xFFFFFFFF) if not self.gc64 else \
                (old & ~((1 << 47) - 1)) | o, "other-object"
        if choice == 7:        # a huge length or count in either half
            big = r.choice((0x7fffffff, 0xffffffff, 0x10000000, 0x80000000))
            return ((old & ~0xFFFFFFFF) | big) if r.randrange(2) else \
                ((old & 0xFFFFFFFF) | (big << 32)), "huge"
        if choice == 8:        # another type tag on a TValue
            if self.gc64:
                return ((r.randrange(1 << 17)) << 47) | (old & ((1 << 47) - 1)), "tag"
            return (((0xFFFFFFFF - r.randrange(20)) << 32) | (old & 0xFFFFFFFF)), "tag"
        return old ^ (0xFF << (8 * r.randrange(8))), "byte"


def make_trials(variant, core, info, n, seed, outdir):
    """[(trial number, path, description, patches)] of n corrupted copies;
    patches [(file offset, 8 bytes)] are written to path by write_trial."""
    with open(core, "rb") as f:
        base = f.read()
    segs = corefile.segments(core)
    rng = random.Random("%s-%d" % (variant, seed))
    mut = Mutator(info, segs, rng)
    out = []
    for i in range(n):
        data = bytearray(base)
        desc = []
        patches = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            addr, kind = mut.word()
            off = corefile.file_offset(segs, addr)
            if off is None or off + 8 > len(data):
                continue
            old = int.from_bytes(data[off:off + 8], "little")
            new, how = mut.value(addr, old)
            new &= (1 << 64) - 1
            data[off:off + 8] = new.to_bytes(8, "little")
            patches.append((off, new.to_bytes(8, "little")))
            desc.append("%s 0x%x %s 0x%016x->0x%016x" % (kind, addr, how, old, new))
        out.append((i, os.path.join(outdir, "t%05d.core" % i), "; ".join(desc), patches))
    return out


def write_trial(base, trial):
    """Write a trial's core file: the intact core with its patches."""
    data = bytearray(base)
    for off, b in trial[3]:
        data[off:off + len(b)] = b
    with open(trial[1], "wb") as f:
        f.write(data)


def classify(cmd, text):
    """'result', 'clean' or 'failure' for one command's output."""
    if text is None:
        return "failure"
    if FAIL_RE.search(text):
        return "failure"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "failure"
    name = cmd.split()[0]
    if len(lines) == 1 and lines[0].startswith(name + ": "):
        return "clean"
    return "result"


def run_batch(host, base, trials, commands, timeout):
    """Run commands on each trial's core in one gdb (the core files are
    written first and removed after).  Returns ({trial: [(cmd, output or
    None)]}, hung trial or None, trials not reached)."""
    for tr in trials:
        write_trial(base, tr)
    try:
        return _run_batch(host, trials, commands, timeout)
    finally:
        for tr in trials:
            if os.path.exists(tr[1]):
                os.unlink(tr[1])


def _run_batch(host, trials, commands, timeout):
    args = ["-ex", "source " + LOADER, "-ex", "file " + host]
    for t, path, _, _ in trials:
        args += ["-ex", "core-file " + path]
        for i, cmd in enumerate(commands):
            args += ["-ex", "echo \\n" + _BEGIN % (t, i) + "\\n", "-ex", cmd,
                     "-ex", "echo \\n" + _END % (t, i) + "\\n"]
    cmd = ["gdb", "-nx", "-nh", "--batch", "-ex", "set confirm off", "-ex",
           "set pagination off", "-ex", "set width 0"] + args
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=dict(os.environ, LC_ALL="C"))
        try:
            p.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            timed_out = True
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    results = {}
    hung = None
    rest = []
    for tr in trials:
        t = tr[0]
        row = []
        for i, c in enumerate(commands):
            m = re.search(re.escape(_BEGIN % (t, i)) + r"\n(.*?)\n?" + re.escape(_END % (t, i)),
                          text, re.S)
            row.append((c, m.group(1) if m else None))
        # A gdb that was killed (or died: a signal): the trial it was in is
        # the hang, the ones after it run again in another gdb.
        if (timed_out or p.returncode < 0) and any(o is None for _, o in row):
            if hung is None and (_BEGIN % (t, 0)) in text:
                hung = t
                results[t] = row
            else:
                rest.append(tr)
            continue
        results[t] = row
    return results, hung, rest


def fuzz_variant(variant, trials, seed, batch, timeout, workdir, jobs=1, dump=None,
                 only=None):
    """Run `trials` corrupted cores of one variant.  Returns counts
    {'trials', 'runs', 'result', 'clean', 'failure', 'hang'} and a list of
    failures (trial, description, command, output)."""
    m = manifest()[variant]
    vdir = os.path.join(workdir, variant)
    os.makedirs(vdir, exist_ok=True)
    core = make_core(variant, vdir)
    info = regions(variant, core)
    commands = [c.format(env="0x%x" % info["env"], mcode="0x%x" % info["mcode"])
                for c in COMMANDS]
    tdir = os.path.join(vdir, "trials")
    shutil.rmtree(tdir, ignore_errors=True)
    os.makedirs(tdir)
    counts = {"trials": trials if only is None else len(only), "runs": 0, "result": 0,
              "clean": 0, "failure": 0, "hang": 0}
    failures = []
    todo = make_trials(variant, core, info, trials, seed, tdir)
    if only is not None:
        todo = [tr for tr in todo if tr[0] in only]
    desc_of = {tr[0]: tr[2] for tr in todo}
    with open(core, "rb") as f:
        base = f.read()
    queue = [todo[i:i + batch] for i in range(0, len(todo), batch)]
    running = []

    def harvest(res):
        results, hung, rest = res
        for t, row in sorted(results.items()):
            if dump is not None:
                dump.write("=== %s trial %d: %s\n" % (variant, t, desc_of[t]))
                for c, o in row:
                    dump.write(">>> %s [%s]\n%s\n" % (c, classify(c, o), o))
            for c, o in row:
                if t == hung and o is None:
                    counts["hang"] += 1
                    failures.append((t, desc_of[t], c, "hang (no output within %d s)" % timeout))
                    break
                k = classify(c, o)
                counts["runs"] += 1
                counts[k] += 1
                if k == "failure":
                    failures.append((t, desc_of[t], c, o))
        if rest:
            queue.append(rest)

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        while queue or running:
            while queue and len(running) < jobs:
                b = queue.pop(0)
                running.append(ex.submit(run_batch, m["host"], base, b, commands, timeout))
            done = [f for f in running if f.done()]
            if not done:
                time.sleep(0.05)
                continue
            for f in done:
                running.remove(f)
                harvest(f.result())
    shutil.rmtree(tdir, ignore_errors=True)
    return counts, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variants", nargs="*", default=["r21-gc64", "r21-x64"])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per gdb process")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--show", type=int, default=5, help="failures to print per variant")
    ap.add_argument("--dump", default=None, help="write every output to this file")
    ap.add_argument("--only", type=int, action="append", default=None,
                    help="run only trial N (of the same --trials and --seed); repeatable")
    a = ap.parse_args()
    workdir = a.workdir or tempfile.mkdtemp(prefix="ljgdb-fuzz-")
    total = {"trials": 0, "runs": 0, "result": 0, "clean": 0, "failure": 0, "hang": 0}
    print("%-10s %7s %8s %8s %8s %8s %6s %8s" % ("variant", "trials", "runs", "result", "clean",
                                                 "failure", "hang", "time s"))
    dump = open(a.dump, "w") if a.dump else None
    for v in a.variants:
        t0 = time.time()
        counts, failures = fuzz_variant(v, a.trials, a.seed, a.batch, a.timeout, workdir,
                                        a.jobs, dump, a.only)
        for k in total:
            total[k] += counts[k]
        print("%-10s %7d %8d %8d %8d %8d %6d %8.0f" % (
            v, counts["trials"], counts["runs"], counts["result"], counts["clean"],
            counts["failure"], counts["hang"], time.time() - t0))
        for t, desc, c, o in failures[:a.show]:
            print("  trial %d [%s] %s:\n    %s" % (t, desc, c, (o or "").replace("\n", "\n    ")[-1500:]))
        sys.stdout.flush()
    print("%-10s %7d %8d %8d %8d %8d %6d" % ("all", total["trials"], total["runs"], total["result"],
                                             total["clean"], total["failure"], total["hang"]))
    return 1 if total["failure"] or total["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
