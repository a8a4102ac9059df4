"""python3 -m ljgdb dump --pid PID [--all] [--locals] [--json]: the Lua
backtrace of every OS thread of a running process that runs Lua code, as
lbt prints it in gdb attached to that thread (py-spy dump's shape).

Each OS thread whose machine frames name a lua_State (the ones in LuaJIT's
code, or in C called from it) gets a header line, its id, its name
(/proc/PID/task/TID/comm) and its scheduling state as the kernel gave it
just before the process was stopped (R running, S sleeping ...), then lbt's
text for it: `lbt` (--all: `lbt --all`, every coroutine of its VM;
--locals: `lbt full`), or with --json one document holding lbt --json's
per thread.  Threads that run no Lua are counted on the last line.  The
process is stopped only while it is read (commands.hosts.livehost), and it is
read as --pid COMMAND reads it: the same engine and the same lbt.

It imports lbt and the live backend only, no other command: the whole run,
Python's start included, is meant to stay well under gdb's start alone
(docs/benchmarks.md)."""
import json
import sys
from typing import Dict, List, Sequence, Tuple

from ..gdb_ext.errors import LjError
from ..gdb_ext.stack.sampletimer import thread_facts

USAGE = "python3 -m ljgdb dump --pid PID [--all] [--locals] [--json]"
FLAGS = ("--all", "--locals", "--json")
STATES = {"R": "running", "S": "sleeping", "D": "in uninterruptible wait", "T": "stopped",
          "t": "stopped by a tracer", "Z": "zombie", "X": "dead", "I": "idle"}


def parse(argv: Sequence[str]) -> Tuple[int, Dict[str, bool]]:
    """(pid, {'all', 'locals', 'json'}) of dump's arguments; ValueError
    with the line that says what is wrong."""
    pid = None
    flags = {f[2:]: False for f in FLAGS}
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--pid" or a.startswith("--pid="):
            val = a[len("--pid="):] if "=" in a else (args.pop(0) if args else "")
            if not val.isdigit() or int(val) < 1:
                raise ValueError("--pid takes a process id, not '%s'" % val)
            pid = int(val)
        elif a in FLAGS:
            flags[a[2:]] = True
        else:
            raise ValueError("'%s' is not an option of dump (--pid PID, %s)"
                             % (a, ", ".join(FLAGS)))
    if pid is None:
        raise ValueError("give --pid PID")
    return pid, flags


def lbt_args(flags: Dict[str, bool]) -> str:
    """The lbt command line that prints what dump prints for one thread."""
    return " ".join(w for w, on in (("full", flags["locals"]), ("--all", flags["all"]),
                                    ("--json", flags["json"])) if on)


def header(tid: int, name: str, state: str) -> str:
    """The line before a thread's backtrace."""
    return "Thread %d \"%s\" (%s: %s)" % (tid, name, state, STATES.get(state, "unknown"))


def runs_lua(host) -> bool:
    """Whether the host's selected thread runs Lua: its frames name a
    lua_State or global_State that checks out (no search of memory)."""
    from ..gdb_ext.vm.state import make_vm
    target, lay = host.target_and_layout()
    try:
        return make_vm(target, lay, candidates=host.frame_candidates(lay),
                       search=False) is not None
    except LjError:
        return False


def dump(process, flags: Dict[str, bool],
         facts: Dict[int, Tuple[str, str]]) -> Tuple[List[dict], List[int]]:
    """[{tid, name, state, and 'lbt' (its text or JSON document) or
    'error' (lbt's line)}] of the threads that run Lua, and the ids of
    the others; process inside stopped(), facts: thread_facts by tid."""
    from .base import CommandError
    from .host import install
    from .lbt import LBt
    from .hosts.livehost import LiveHost
    cmd, arg = LBt(), lbt_args(flags)
    out, others = [], []
    for i, th in enumerate(process.threads):
        host = install(LiveHost(process, thread=i + 1))
        name, state = facts.get(th.tid) or thread_facts(process.pid, th.tid)
        if not runs_lua(host):
            others.append(th.tid)
            continue
        item = {"tid": th.tid, "name": name, "state": state}
        try:
            text = cmd.execute(arg)
            item["lbt"] = json.loads(text) if flags["json"] else text
        except CommandError as e:
            item["error"] = str(e)
        out.append(item)
    return out, others


def text(pid: int, items: List[dict], others: List[int]) -> str:
    out = []
    for item in items:
        out.append(header(item["tid"], item["name"], item["state"]))
        out.append(item["lbt"] if "lbt" in item else item["error"] + "\n")
    if not items:
        out.append("no thread of process %d runs Lua code now (no frame names a lua_State); "
                   "python3 -m ljgdb --pid %d lbt searches its memory for the VM\n" % (pid, pid))
    if others:
        out.append("%d other thread%s run%s no Lua: %s\n" % (
            len(others), "" if len(others) == 1 else "s", "s" if len(others) == 1 else "",
            " ".join(str(t) for t in others)))
    return "\n".join(out)


def main(argv: Sequence[str]) -> int:
    """python3 -m ljgdb dump ...; the exit status."""
    if list(argv[:1]) in (["-h"], ["--help"]):
        sys.stdout.write("usage: %s\n\n%s\n" % (USAGE, __doc__.split("\n\n", 1)[1]))
        return 0
    try:
        pid, flags = parse(argv)
    except ValueError as e:
        sys.stderr.write("ljgdb: dump: %s; usage: %s\n" % (e, USAGE))
        return 1
    from ..gdb_ext.backends.live import open_process
    try:
        process = open_process(pid)
        # (The states as they were, before the stop makes every thread 't'.)
        facts = {t: thread_facts(pid, t) for t in process.task_ids()}
        try:
            with process.stopped():
                items, others = dump(process, flags, facts)
        finally:
            process.close()
    except LjError as e:
        sys.stderr.write("ljgdb: %s\n" % e)
        return 1
    if flags["json"]:
        doc = {"command": "dump", "pid": pid, "threads": items, "other_threads": others}
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(text(pid, items, others))
    return 1 if any("error" in i for i in items) else 0
