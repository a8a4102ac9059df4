"""lstates: every LuaJIT VM in the process."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.vm.state import VM
from ..gdb_ext.vm.vmfind import list_states
from .base import LjCommand, UsageError, check_environment, split_args
from .host import current
from .format import hexa


class LStates(LjCommand):
    """List every LuaJIT VM (global_State) in the process: those the selected
thread's stack frames name, and those a search of the process's writable
memory finds (a global_State whose main thread points back to it, checked
further).  Each line: the global_State, its main lua_State, the running
thread (g->cur_L; 'idle' when no Lua code runs), gc.total, the VM state,
and how it was found.  Any command takes G=<global_State *> (or
L=<lua_State *>) to work on one of them.

Usage: lstates
Example:
  (gdb) lstates
  global_State        main lua_State      running             gc.total  VM state  found by
  0x7ffff7fb6390      0x7ffff7fb6380      idle                   28793  C         memory search ([heap])"""

    NAME = "lstates"
    SUMMARY = "every LuaJIT VM in the process and how it was found"
    USAGE = "lstates"

    def run(self, arg, from_tty):
        doc = self.data(arg)
        out = ["%-19s %-19s %-19s %12s  %-9s %s" % ("global_State", "main lua_State", "running",
                                                    "gc.total", "VM state", "found by")]
        for s in doc["states"]:
            running = "idle" if s["idle"] else (s["running"] or "-")
            if s["unreadable"]:
                running, total, vmstate = "?", "?", "unreadable: %s" % s["unreadable"]
            else:
                total = "%d" % s["gc_total"]
                vmstate = "TRACE %d" % s["trace"] if s["trace"] is not None else \
                    "TRACE ?" if s["vmstate"] == "TRACE" else s["vmstate"]
            out.append("%-19s %-19s %-19s %12s  %-9s %s"
                       % (s["G"], s["main_L"], running, total, vmstate, "; ".join(s["found_by"])))
        n = len(doc["states"])
        if not n:
            out.append("(no LuaJIT state found)")
        out.append("%d LuaJIT state%s; any command takes G=<global_State *> or L=<lua_State *> "
                   "to work on one" % (n, "" if n == 1 else "s"))
        if doc["search_problem"]:
            out.append("lstates: %s; only the states the stack frames name are listed"
                       % doc["search_problem"])
        return out

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        flags, opts, state, rest = split_args(arg)
        if rest or state is not None:
            raise UsageError("lstates takes no arguments: it lists every Lua state")
        target, lay = check_environment()
        states, problem = list_states(target, lay, current().frame_candidates(lay))
        items = []
        for s in states:
            vm = VM(target, lay, s.G)
            d = {"G": hexa(s.G), "main_L": hexa(s.L), "found_by": list(s.ways), "idle": False,
                 "running": None, "gc_total": None, "vmstate": None, "trace": None,
                 "unreadable": None}
            try:
                run = vm.running_L
                d["idle"] = bool(vm.idle)
                d["running"] = hexa(run) if run and not d["idle"] else None
                d["gc_total"] = vm.gc_total
                d["vmstate"], d["trace"] = vm.vmstate_name()
            except (FaultError, CorruptError) as e:
                d["unreadable"] = str(e)
            items.append(d)
        return {"states": items, "search_problem": problem}
