"""lthreads: every coroutine of the VM."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.walkers import threads_walk
from .base import LjCommand, UsageError, get_vm, split_args
from .lbt import BtFormat

# Published figure for comparison: PUC Lua 5.4 needs about 1.1 kB per coroutine.
PUC_LUA54_BYTES = 1100


class LThreads(LjCommand):
    """List every Lua thread (coroutine) of the VM: every lua_State that is a
GC object, and the main thread.  For each: address, status (running,
suspended, normal, dead, error), stack size in slots and bytes, the bytes the
thread costs the collector (sizeof(lua_State) + its stack), who resumed it,
and where it is: its innermost Lua frame as chunk:line.  A summary line gives
the count and the average bytes per coroutine.

Usage: lthreads [L=<lua_State *>]
Example:
  (gdb) lthreads
  lua_State            status      slots   stack B   total B  where
  0x7ffff7cb3380       running       105       840       936  app.lua:12 (main)"""

    NAME = "lthreads"
    USAGE = "lthreads [L=<lua_State *>]"

    def run(self, arg, from_tty):
        flags, opts, L_expr, rest = split_args(arg)
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        vm = get_vm(L_expr)
        fmt = BtFormat(vm)
        bt = fmt.bt
        lsize = vm.lay.L.size
        threads, walk_err = threads_walk(vm)
        resumer = {}
        rows = []
        for L in threads:
            try:
                b = bt.backtrace(L)
            except (FaultError, CorruptError) as e:
                rows.append((L, None, e))
                continue
            for fr in b.frames:
                if fr.kind in ("builtin", "c"):
                    co = bt.resumed_thread(b.walker, fr)
                    if co:
                        resumer.setdefault(co, L)
            rows.append((L, b.th, (b.status, fmt.where(b), b.fiber, b.exdata)))
        out = ["%-20s %-9s %7s %9s %9s  %s" % ("lua_State", "status", "slots", "stack B", "total B",
                                               "where")]
        total = 0
        count = 0
        vmthread = bt.vmthread
        for L, th, info in rows:
            if th is None:
                out.append("0x%-18x <unreadable: %s>" % (L, info))
                continue
            status, where, fiber, exdata = info
            stack_b = th.stacksize * 8
            cost = lsize + stack_b
            total += cost
            count += 1
            note = []
            if L == vm.main_L:
                note.append("main")
            if L == vmthread:
                note.append("the VM's internal thread, g->vmthref")
            if L in resumer:
                note.append("resumed by 0x%x" % resumer[L])
            if fiber is not None:
                note.append(fiber.describe())
            if exdata:
                note.append(bt.exdata_text(exdata))
            out.append("0x%-18x %-9s %7d %9d %9d  %s%s" % (
                L, status, th.stacksize, stack_b, cost, where,
                " (%s)" % ", ".join(note) if note else ""))
        coros = [r for r in rows if r[1] is not None and r[0] != vm.main_L]
        cbytes = sum(lsize + r[1].stacksize * 8 for r in coros)
        avg = (cbytes / len(coros)) if coros else 0
        out.append("%d threads (%d coroutine%s and the main thread), %d bytes; %.0f bytes per "
                   "coroutine on average (sizeof(lua_State) = %d; PUC Lua 5.4: about %d)"
                   % (count, len(coros), "" if len(coros) == 1 else "s", total, avg, lsize,
                      PUC_LUA54_BYTES))
        if walk_err is not None:
            addr = getattr(walk_err, "address", None)
            out.append("lthreads: walk of g->gc.root stopped, threads after it are missing: %s%s"
                       % (walk_err, "" if addr is None or "0x%x" % addr in str(walk_err)
                          else " (at 0x%x)" % addr))
        return out
