"""lthreads: every coroutine of the VM."""
from operator import attrgetter

from ..gdb_ext.bulk import gc_paused
from ..gdb_ext.stack.threadscan import ThreadScanner, ThreadSummary, group
from .base import LjCommand, UsageError, get_vm, split_args
from .format import error_text, hexa
from .lbt import BtFormat

# Published figure for comparison: PUC Lua 5.4 needs about 1.1 kB per coroutine.
PUC_LUA54_BYTES = 1100
_STACKSIZE = attrgetter("stacksize")


def _row_tail(s, lsize, where):
    """A thread's row after its address: status, slots, stack and total
    bytes, where (a threadscan.ThreadSummary s; lsize: sizeof(lua_State))."""
    return " %-9s %7d %9d %9d  %s" % (s.status, s.stacksize, s.stacksize * 8,
                                      lsize + s.stacksize * 8, where)


class LThreads(LjCommand):
    """List every Lua thread (coroutine) of the VM: every lua_State that is a
GC object, and the main thread.  For each: address, status (running,
suspended, normal, dead, error), stack size in slots and bytes, the bytes the
thread costs the collector (sizeof(lua_State) + its stack), who resumed it,
and where it is: its innermost Lua frame as chunk:line.  A summary line gives
the count and the average bytes per coroutine.

With --group, threads whose status and frames are the same are folded into
one line with their count, the largest groups first (as Go's goroutine
dumps are read): 20,000 requests blocked on the same read are one line.

Usage: lthreads [--group] [L=<lua_State *>]
Example:
  (gdb) lthreads
  lua_State            status      slots   stack B   total B  where
  0x7ffff7cb3380       running       105       840       936  app.lua:12 (main)"""

    NAME = "lthreads"
    SUMMARY = "every Lua thread: status, stack, where it stands, who resumed it"
    WORDS = ('--group',)
    USAGE = "lthreads [--group] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.data(arg, text=True)
        if "groups" in doc:
            out = ["%8s  %-9s  %s" % ("threads", "status",
                                      "frames, innermost first (e.g. lua_State)")]
            for g in doc["groups"]:
                frames = " < ".join(f["text"] for f in g["frames"]) or "(no Lua frames)"
                out.append("%8d  %-9s  %s  (%s%s)%s" % (
                    g["count"], g["status"], frames,
                    "the VM's internal thread, g->vmthref: " if g["vmthref"] else "e.g. ",
                    ", ".join(g["examples"]), "; " + g["warning"] if g["warning"] else ""))
        else:
            out = ["%-20s %-9s %7s %9s %9s  %s" % ("lua_State", "status", "slots", "stack B",
                                                   "total B", "where")]
            out.extend(doc["threads"])      # (data(text=True): each row is its line)
        sm = doc["summary"]
        parts = ["%d coroutine%s" % (sm["coroutines"], "" if sm["coroutines"] == 1 else "s"),
                 "the main thread"]
        if sm["vmthref"]:
            parts.append("the VM's internal thread")
        line = "%d thread%s (%s and %s), %d bytes" % (
            sm["threads"], "" if sm["threads"] == 1 else "s", ", ".join(parts[:-1]), parts[-1],
            sm["bytes"])
        if sm["coroutines"]:
            line += ("; %.0f bytes per coroutine on average (sizeof(lua_State) = %d; PUC Lua "
                     "5.4: about %d)" % (sm["coroutine_bytes"] / sm["coroutines"],
                                         sm["sizeof_lua_State"], PUC_LUA54_BYTES))
        out.append(line)
        if doc["walk_error"] is not None:
            out.append("lthreads: walk of g->gc.root stopped, threads after it are missing: %s"
                       % doc["walk_error"])
        return out

    def run_json(self, arg, from_tty):
        return self.data(arg)

    @staticmethod
    def _rows(fmt, threads, summaries, resumer, text):
        """lthreads' "threads": a row a thread (with text: its line)."""
        vm, bt = fmt.vm, fmt.bt
        main, vmthread = vm.main_L, bt.vmthread
        lsize = vm.lay.L.size
        fibers = bt.fibers
        where_of = {}
        items = []
        # A row of a thread with nothing of its own to note is the same
        # text after its address for every thread of its status, stack
        # size and frames: made once (10^6 rows).  (Keyed by the frame
        # keys' identity: the scanner gives the threads of one shape one
        # tuple, and `summaries` keeps them all alive meanwhile.)
        plain = {}
        noted = {main, vmthread}
        noted.update(resumer)
        noted.update(fibers)
        for L, s in zip(threads, summaries):
            if s.__class__ is not ThreadSummary:
                items.append("%-20s <unreadable: %s>" % (hexa(L), s) if text else
                             {"L": hexa(L), "unreadable": str(s)})
                continue
            _, status, stacksize, keys, sbt, exdata = s
            if text and sbt is None and not exdata and L not in noted:
                k = (status, stacksize, id(keys))
                tail = plain.get(k)
                if tail is None:
                    where = where_of.get(keys)
                    if where is None:
                        where = where_of[keys] = fmt.summary_where(s)
                    tail = plain[k] = _row_tail(s, lsize, where)
                items.append("0x%-18x%s" % (L, tail))      # (hex(L) in 20 columns)
                continue
            stack_b = s.stacksize * 8
            note = []
            if L == main:
                note.append("main")
            if L == vmthread:
                note.append("the VM's internal thread, g->vmthref")
            if L in resumer:
                note.append("resumed by 0x%x" % resumer[L])
            fiber = fibers.get(L)
            if fiber is not None:
                note.append(fiber.describe())
            if s.exdata:
                note.append(bt.exdata_text(s.exdata))
            if s.bt is None:
                where = where_of.get(s.keys)
                if where is None:
                    where = where_of[s.keys] = fmt.summary_where(s)
            else:
                where = fmt.summary_where(s)
            if text:
                items.append("%-20s%s%s" % (hex(L), _row_tail(s, lsize, where),
                                            " (%s)" % ", ".join(note) if note else ""))
                continue
            items.append({"L": hexa(L), "status": s.status, "slots": s.stacksize,
                          "stack_bytes": stack_b, "total_bytes": lsize + stack_b,
                          "where": where, "main": L == main, "vmthref": L == vmthread,
                          "resumed_by": hexa(resumer.get(L)),
                          "fiber": fiber.describe() if fiber is not None else None,
                          "exdata": hexa(s.exdata) if s.exdata else None, "notes": note})
        return items

    def data(self, arg, text=False):
        """lthreads' document: "threads" (or "groups" with --group),
        "summary", "walk_error".  text: each readable thread's row given
        as the line run prints for it, not as data (10^6 rows)."""
        flags, opts, L_expr, rest = split_args(arg, flags=("group",))
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        vm = get_vm(L_expr)
        fmt = BtFormat(vm)
        bt = fmt.bt
        lsize = vm.lay.L.size
        scanner = ThreadScanner(bt)
        threads, walk_err = scanner.threads()
        summaries = scanner.scan(threads)
        main, vmthread = vm.main_L, bt.vmthread
        # Who resumed whom: a resume frame names the thread it resumed; the
        # threads with one are the Backtracer's (the scanner's fast path
        # leaves them to it).
        resumer = {}
        for s in scanner.walked:
            for fr in s.bt.frames:
                if fr.kind in ("builtin", "c"):
                    co = bt.resumed_thread(s.bt.walker, fr)
                    if co:
                        resumer.setdefault(co, s.L)
        good = [s for s in summaries if s.__class__ is ThreadSummary]
        doc = {}
        if "group" in flags:
            doc["groups"] = [fmt.group_data(g) for g in group(good, vmthread)]
        else:
            with gc_paused():           # (10^6 rows)
                doc["threads"] = self._rows(fmt, threads, summaries, resumer, text)
        all_b = 8 * sum(map(_STACKSIZE, good)) + lsize * len(good)
        # The main thread and g->vmthref are no coroutines.
        own = [summaries[threads.index(L)] for L in (main, vmthread) if L in threads]
        own = [s for s in own if s.__class__ is ThreadSummary]
        own_b = sum(lsize + 8 * s.stacksize for s in own)
        doc["summary"] = {
            "threads": len(good), "coroutines": len(good) - len(own),
            "vmthref": any(s.L == vmthread for s in own),
            "bytes": all_b, "coroutine_bytes": all_b - own_b, "sizeof_lua_State": lsize}
        doc["walk_error"] = error_text(walk_err)
        return doc
