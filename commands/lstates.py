"""lstates: every LuaJIT VM in the process."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.gdbtarget import frame_candidates
from ..gdb_ext.state import VM
from ..gdb_ext.vmfind import list_states
from .base import LjCommand, UsageError, check_environment, split_args


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
        flags, opts, state, rest = split_args(arg)
        if rest or state is not None:
            raise UsageError("lstates takes no arguments: it lists every Lua state")
        target, lay = check_environment()
        states, problem = list_states(target, lay, frame_candidates(lay))
        out = ["%-19s %-19s %-19s %12s  %-9s %s" % ("global_State", "main lua_State", "running",
                                                   "gc.total", "VM state", "found by")]
        for s in states:
            vm = VM(target, lay, s.G)
            try:
                run = vm.running_L
                running = "idle" if vm.idle else ("0x%x" % run if run else "-")
                total = "%d" % vm.gc_total
                name, trace = vm.vmstate_name()
                vmstate = "TRACE %d" % trace if trace is not None else name
            except (FaultError, CorruptError) as e:
                running, total, vmstate = "?", "?", "unreadable: %s" % e
            out.append("0x%-17x 0x%-17x %-19s %12s  %-9s %s"
                       % (s.G, s.L, running, total, vmstate, "; ".join(s.ways)))
        if not states:
            out.append("(no LuaJIT state found)")
        out.append("%d LuaJIT state%s; any command takes G=<global_State *> or L=<lua_State *> "
                   "to work on one" % (len(states), "" if len(states) == 1 else "s"))
        if problem:
            out.append("lstates: %s; only the states the stack frames name are listed" % problem)
        return out
