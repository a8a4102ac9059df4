"""lbt: the Lua backtrace of a thread (or of all of them)."""
from ..gdb_ext.stack.backtrace import Backtracer
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.stack.frames import frame_locals, frame_upvalues
from ..gdb_ext.stack.funcname import called_as
from ..gdb_ext.stack.signature import thread_signature
from ..gdb_ext.vm.protoinfo import cached_proto
from ..gdb_ext.vm.state import TRACE_UNKNOWN
from .base import LjCommand, UsageError, get_vm, param, split_args
from .format import chunk_display, error_text, hexa, value_text

VMSTATE_TEXT = {
    "INTERP": "INTERP (running the bytecode interpreter)",
    "C": "C (in a C function called from Lua)",
    "GC": "GC (in the garbage collector)",
    "EXIT": "EXIT (leaving JIT-compiled code)",
    "RECORD": "RECORD (recording a trace)",
    "OPT": "OPT (optimizing a trace)",
    "ASM": "ASM (assembling a trace)",
    "TRACE": "TRACE (%s)" % TRACE_UNKNOWN,
}


class BtFormat(object):
    """Text of backtraces (gdb_ext.stack.backtrace gives the data); shared by lbt
    and lthreads."""

    def __init__(self, vm, bt=None):
        self.vm = vm
        self.bt = bt if bt is not None else Backtracer(vm)
        self._key_json = {}     # frame key -> key_json's dict (lbt --all: a few keys, many threads)
        self._frame_lines = {}  # frame keys -> their lines (summary_lines)

    def frame_text(self, fr):
        return self.key_text(self.bt.frame_key(fr))

    def key_text(self, key):
        """Text of a frame key (Backtracer.frame_key, gdb_ext.stack.threadscan)."""
        cache = self.vm.cache("key_text")
        text = cache.get(key)
        if text is None:
            if key[0] == "L":
                text = "%s:%s" % (self.source(cached_proto(self.vm, key[1])),
                                  key[2] if key[2] is not None else "?")
            elif key[0] == "F":
                name = self.bt.names.get(key[1])
                text = "[builtin#%s]" % (name if name else key[1])
            else:
                sym = self.vm.t.symbolize(key[1])
                name = key[2] if len(key) > 2 else self.bt.cnames.get(key[1])
                text = "C:%s" % sym if sym else \
                    "C:0x%x%s" % (key[1], " (%s)" % name if name else "")
            cache[key] = text
        return text

    def source(self, pt):
        """The chunk name of prototype pt as lbt shows it (kept in pt.memo)."""
        src = pt.memo.get("display")
        if src is None:
            src = pt.memo["display"] = chunk_display(pt.chunk(self.vm))
        return src

    @staticmethod
    def header(L, who, status, fiber):
        """The first line of a thread's backtrace (without the VM state);
        fiber: the text of the fiber that runs it (Tarantool), or None."""
        return "Lua backtrace of (lua_State *)%s (%s, %s%s)" % (
            hexa(L) if isinstance(L, int) else L, who, status, "; " + fiber if fiber else "")

    def summary_where(self, s):
        """where (see `where`) of a threadscan.ThreadSummary."""
        if s.bt is not None:
            return self.where(s.bt)
        where = next((self.key_text(k) for k in s.keys if k[0] == "L"), None)
        if where is None:
            where = self.key_text(s.keys[0]) if s.keys else "-"
        return where

    # --- folded stacks (FlameGraph, inferno, speedscope read them) --------
    @staticmethod
    def folded_lines(doc):
        """The text of a folded document: 'a;b;c N' lines, outermost frame
        first (';' inside a frame's text becomes ','), then '# ' notes."""
        out = ["%s %d" % (";".join(t.replace(";", ",") for t in st["frames"]), st["count"])
               for st in doc["stacks"]]
        return out + ["# " + n for n in doc["notes"]]

    def folded_one(self, L):
        b = self.bt.backtrace(L)
        doc = {"stacks": [], "notes": []}
        if b.frames:
            doc["stacks"].append({"frames": [self.frame_text(f) for f in reversed(b.frames)],
                                  "count": 1})
        else:
            doc["notes"].append("(lua_State *)0x%x has no Lua frames" % L)
        for w in (b.warning, b.error):
            if w:
                doc["notes"].append("lbt: %s" % w)
        return doc

    def folded_all(self, summaries, nthreads, walk_err):
        counts = {}
        empty = 0
        warned = []
        for s in summaries:
            if not s.keys:
                empty += 1
                continue
            stack = tuple(self.key_text(k) for k in reversed(s.keys))
            counts[stack] = counts.get(stack, 0) + 1
            if s.bt is not None and s.bt.warning:
                warned.append("lbt: (lua_State *)0x%x: %s" % (s.L, s.bt.warning))
        doc = {"stacks": [{"frames": list(st), "count": n} for st, n in
                          sorted(counts.items(), key=lambda e: (-e[1], ";".join(e[0])))],
               "notes": []}
        if empty:
            doc["notes"].append("%d thread%s with no Lua frames" % (empty,
                                                                    "" if empty == 1 else "s"))
        doc["notes"].extend(warned)
        if walk_err is not None or len(summaries) < nthreads:
            doc["notes"].append("lbt: %d of %d threads could not be read%s" % (
                nthreads - len(summaries), nthreads,
                "; walk of g->gc.root stopped: %s" % walk_err if walk_err else ""))
        return doc

    def summary_data(self, s):
        """A threadscan.ThreadSummary as data (thread_data's form, from the
        summary's frame keys when it has no full backtrace)."""
        if s.bt is not None:
            return self.thread_data(s.L)
        fiber = self.bt.fibers.get(s.L)
        frames = []
        for i, k in enumerate(s.keys):
            d = {"level": i}
            d.update(self.key_json(k))
            frames.append(d)
        return {"L": hexa(s.L), "who": self.bt.who(s.L), "status": s.status,
                "fiber": fiber.describe() if fiber else None, "frames": frames,
                "more_frames": 0, "caller": None, "warning": None, "error": None}

    def summary_lines(self, s):
        """data_lines(summary_data(s)), the same text, with each stack
        shape's frame lines made once (lbt --all over 10^6 threads)."""
        if s.bt is not None:
            return self.data_lines(self.thread_data(s.L))
        keys = tuple(s.keys)
        lines = self._frame_lines.get(keys)
        if lines is None:
            lines = ["#%-3d %s" % (i, self.line_text(k)) for i, k in enumerate(keys)]
            self._frame_lines[keys] = lines = lines or ["(no Lua frames)"]
        fiber = self.bt.fibers.get(s.L)
        return [self.header(s.L, self.bt.who(s.L), s.status, fiber.describe() if fiber else None)
                ] + lines

    def group_data(self, g):
        return {"count": g.count, "status": g.status, "vmthref": bool(g.internal),
                "examples": [hexa(L) for L in g.examples],
                "frames": [self.key_json(k) for k in g.keys],
                "warning": g.warning}

    def group_lines(self, g):
        """lbt --all --group's lines for a group_data document."""
        ex = ", ".join(g["examples"])
        more = g["count"] - len(g["examples"])
        out = ["%d thread%s (%s%s): (lua_State *)%s%s" % (
            g["count"], "" if g["count"] == 1 else "s",
            "VM thread g->vmthref, " if g["vmthref"] else "", g["status"], ex,
            " and %d more" % more if more else "")]
        out.extend("#%-3d %s" % (i, self.frame_line(f)) for i, f in enumerate(g["frames"]))
        if not g["frames"]:
            out.append("(no Lua frames)")
        if g["warning"]:
            out.append("lbt: %s" % g["warning"])
        return out

    def where(self, b):
        """The innermost Lua frame of Backtrace b as chunk:line (or its
        innermost frame), '-' when it has none, '?' when unknown."""
        where = next((self.frame_text(f) for f in b.frames if f.kind == "lua"), None)
        if where is None:
            where = self.frame_text(b.frames[0]) if b.frames else "-"
        if b.warning and (b.hidden_top or not b.frames):
            where = "? (%s)" % where if b.frames else "? (not known at this moment)"
        return where

    def state_line(self):
        bt = self.bt
        if bt.trace_no is not None:
            site = bt.trace_start()
            at = ""
            if site is not None:
                at = " of trace %d, started at %s:%s" % (bt.trace_no,
                                                         chunk_display(site[0].chunk(self.vm)),
                                                         site[1])
            return "TRACE %d (in JIT-compiled code%s)" % (bt.trace_no, at)
        return VMSTATE_TEXT.get(bt.vmstate_name, bt.vmstate_name)

    # --- data (the JSON document; the text is made from it) -------------
    def key_json(self, key):
        """A frame key (Backtracer.frame_key) as data: its kind, the text
        lbt prints, and what it names."""
        d = self._key_json.get(key)
        if d is not None:
            return dict(d)
        d = {"kind": {"L": "lua", "F": "builtin", "C": "c"}[key[0]], "text": self.key_text(key)}
        if key[0] == "L":
            pt = cached_proto(self.vm, key[1])
            d.update(source=self.source(pt), line=key[2],
                     linedefined=pt.firstline, proto=hexa(key[1]), called_as=_called(key[3]),
                     # (R lj_debug.c lj_debug_getinfo: ar->what)
                     what="Lua" if pt.firstline or not pt.numline else "main")
        elif key[0] == "F":
            d.update(ffid=key[1], name=self.bt.names.get(key[1]))
        else:
            d.update(cfunc=hexa(key[1]), symbol=self.vm.t.symbolize(key[1]),
                     name=key[2] if len(key) > 2 else self.bt.cnames.get(key[1]))
        self._key_json[key] = d
        return dict(d)

    def thread_data(self, L, full=False, max_frames=None):
        """Thread L's backtrace as data: the document of lbt --json."""
        b = self.bt.backtrace(L)
        doc = {"L": hexa(L), "who": b.who, "status": b.status,
               "fiber": b.fiber.describe() if b.fiber else None}
        if b.status == "running":
            doc["vmstate"] = self.state_line()
        frames = b.frames if max_frames is None else b.frames[:max_frames]
        out = [self.frame_data(b, i, full) for i in range(len(frames))]
        doc["frames"] = out
        doc["more_frames"] = len(b.frames) - len(frames)
        doc["caller"] = hexa(b.caller) if b.caller else None
        doc["warning"] = b.warning
        doc["error"] = error_text(b.error)
        return doc

    def signature(self, doc):
        """The crash signature (gdb_ext.stack.signature) of the selected OS
        thread when it runs thread doc (one of thread_data's documents),
        else None."""
        if doc.get("status") != "running":
            return None
        return thread_signature(self.vm.t, [f["text"] for f in doc["frames"]])

    def frame_data(self, b, i, full=False):
        """Frame i of Backtrace b as data: one of thread_data's "frames",
        each with "called_as", the name debug.getinfo(level, "n") gives it
        from its caller's call site (builtins and C functions too)."""
        vm = self.vm
        fr = b.frames[i]
        snap = b.start.trace if b.start is not None else None
        d = {"level": fr.level + b.hidden_top}
        d.update(self.key_json(self.bt.frame_key(fr)))
        if fr.kind != "lua":
            d["called_as"] = _called(called_as(vm, fr))
        if fr.kind in ("builtin", "c"):
            co = self.bt.resumed_thread(b.walker, fr)
            if co:
                d["resumed"] = hexa(co)
        if i == 0 and not b.hidden_top and snap is not None and fr.kind == "lua":
            # From the trace's snapshot in effect at the machine pc:
            # the line of its last guard, at or before the line executing.
            d["trace"] = {"number": snap.traceno,
                          "line_from": "last snapshot" if snap.exact else "trace start"}
        if full and fr.kind == "lua":
            maxs = param("max-string")
            loc = []
            for name, v, addr in frame_locals(b.walker, fr, b.frame_top(i), with_addr=True):
                if addr is not None and self.bt.in_trace_value(b, fr, addr):
                    loc.append({"name": name, "value": None, "stale": (
                        "in trace %d: kept in a register or spill slot, the stack slot is "
                        "stale" % snap.traceno)})
                else:
                    loc.append({"name": name, "value": _val(vm, v, maxs)})
            d["locals"] = loc
            d["upvalues"] = [{"name": n, "value": _val(vm, v, maxs)}
                             for n, v in frame_upvalues(vm, fr)]
        return d

    @staticmethod
    def frame_line(d):
        """A frame's text on lbt's line: a Lua frame's place and, as Lua's
        traceback says it, its name (key_json's document)."""
        if d["kind"] != "lua":
            return d["text"]
        named = d.get("called_as")
        if named:
            return "%s: in %s '%s'" % (d["text"], _NAMEWHAT.get(named["namewhat"],
                                                                named["namewhat"]), named["name"])
        if d["what"] == "main":
            return "%s: in main chunk" % d["text"]
        return "%s: in function <%s:%d>" % (d["text"], d["source"], d["linedefined"])

    def line_text(self, key):
        """frame_line of a frame key."""
        cache = self.vm.cache("line_text")
        text = cache.get(key)
        if text is None:
            text = cache[key] = self.frame_line(self.key_json(key))
        return text

    @classmethod
    def frame_lines(cls, d):
        """The text of one frame_data document (its line, its variables)."""
        text = cls.frame_line(d)
        if "resumed" in d:
            text += " -> resumed (lua_State *)%s" % d["resumed"]
        if "trace" in d:
            text += " (in trace %d, %s)" % (d["trace"]["number"], "at its last snapshot"
                                            if d["trace"]["line_from"] == "last snapshot"
                                            else "at its start")
        out = ["#%-3d %s" % (d["level"], text)]
        for loc in d.get("locals", ()):
            out.append("      %s = %s" % (loc["name"], loc["value"] if loc["value"] is not None
                                          else "<%s>" % loc["stale"]))
        for up in d.get("upvalues", ()):
            out.append("      upvalue %s = %s" % (up["name"], up["value"]))
        return out

    def lines(self, L, full=False, max_frames=None, header=True):
        return self.data_lines(self.thread_data(L, full, max_frames), header)

    def data_lines(self, doc, header=True):
        """The text of a thread_data document."""
        out = []
        if header:
            head = self.header(doc["L"], doc["who"], doc["status"], doc["fiber"])
            if "vmstate" in doc:
                head += "; VM state: " + doc["vmstate"]
            out.append(head)
        for d in doc["frames"]:
            out.extend(self.frame_lines(d))
        if doc["more_frames"]:
            out.append("... %d more frames" % doc["more_frames"])
        if not doc["frames"] and doc["error"] is None and doc["warning"] is None:
            out.append("(no Lua frames)")
        if doc["caller"]:
            out.append("(g->vmthref runs __gc finalizers and VM event handlers; it was called "
                       "from (lua_State *)%s: lbt L=%s)" % (doc["caller"], doc["caller"]))
        if doc["warning"] is not None:
            out.append("lbt: %s" % doc["warning"])
        if doc["error"] is not None:
            out.append("lbt: walk stopped: %s" % doc["error"])
        return out


# debug.getinfo's namewhat as Lua 5.2's traceback words it: a global is
# "function 'name'"; a local, method, field, upvalue or metamethod is named
# as what it is.
_NAMEWHAT = {"global": "function"}


def _called(name):
    """funcname's (namewhat, name) as lbt --json's called_as."""
    return {"namewhat": name[0], "name": name[1]} if name else None


def _val(vm, v, maxs):
    if isinstance(v, Exception):
        return "<unreadable: %s>" % v
    return value_text(vm, v, maxs)


class LBt(LjCommand):
    """Print the Lua backtrace of a Lua thread, innermost frame first.

Each frame is one line, numbered as lua_getstack numbers levels:
  <source>:<line>: in <how it was called>
                         a Lua function, at the line it is executing, named
                         as Lua's traceback names it (debug.getinfo's name
                         from the caller's call site): in local 'f', in
                         upvalue 'f', in method 'get', in field 'f', in
                         function 'f' (a global), in metamethod '__index';
                         in function <source:line> without a name; in
                         main chunk
  [builtin#<lib.name>]   a fast function (builtin#<ffid> if it has no name)
  C:<symbol>             a C function
The first line names the thread, its status and, for the running thread, the
VM state (interpreter, C, GC, TRACE n...).  A frame of coroutine.resume or of
a coroutine.wrap function shows the coroutine it resumed.  Upstream 2.1 runs
__gc finalizers on its own thread, g->vmthref: its backtrace ends with the
thread it runs them for.

  full      also list each Lua frame's live locals, varargs and upvalues
  --all     every coroutine's backtrace
  --group   with --all: threads whose status and frames are the same as one
            entry with their count, the largest first
  --folded  the stack as one line of folded frames, outermost first, then a
            count ("a.lua:9;a.lua:3;C:read 1"): what FlameGraph, inferno and
            speedscope read; with --all, every thread's, equal stacks counted
            together.  Lines that start with # say what is missing.
  L=<expr>  the lua_State to use (default: the current one, see linfo)

Usage: lbt [full] [--all [--group]] [--folded] [L=<lua_State *>]
Example:
  (gdb) lbt full
  Lua backtrace of (lua_State *)0x7ffff7cb2380 (main thread, running); VM state: C (in a C function called from Lua)
  #0   C:ljgdb_stop
  #1   testprogs/lua/demo.lua:19: in local 'handle'
        req = table: (GCtab *)0x7ffff7cc4908
        user = table: (GCtab *)0x7ffff7cc0cb0
        upvalue sessions = table: (GCtab *)0x7ffff7cb4810
        upvalue config = table: (GCtab *)0x7ffff7cbc4f8
  #2   testprogs/lua/demo.lua:22: in main chunk
        config = table: (GCtab *)0x7ffff7cbc4f8
        sessions = table: (GCtab *)0x7ffff7cb4810
        handle = function: (GCfuncL *)0x7ffff7cc4858 testprogs/lua/demo.lua:15"""

    NAME = "lbt"
    SUMMARY = "the Lua backtrace of a thread, or of every thread (--all, --group)"
    WORDS = ('full', '--all', '--group', '--folded')
    USAGE = "lbt [full] [--all [--group]] [--folded] [L=<lua_State *>]"

    def _parse(self, arg):
        flags, opts, L_expr, rest = split_args(arg, flags=("all", "full", "group", "folded"))
        for r in rest:
            if r == "full":
                flags.add("full")
            else:
                raise UsageError("unexpected argument '%s'" % r)
        full = "full" in flags
        if "group" in flags and "all" not in flags:
            raise UsageError("--group folds the threads of --all: use lbt --all --group")
        if "group" in flags and full:
            raise UsageError("--group folds frames, not locals: use it without full")
        if "folded" in flags and (full or "group" in flags):
            raise UsageError("--folded prints frames only, one line a stack: not with full or "
                             "--group")
        return flags, BtFormat(get_vm(L_expr))

    def run(self, arg, from_tty):
        flags, bt = self._parse(arg)
        full = "full" in flags
        if "folded" in flags:
            return bt.folded_lines(self.data(bt, flags)["folded"])
        if "all" not in flags:
            return bt.lines(bt.vm.L, full)
        doc = self.data(bt, flags, text=True)
        out = []
        for t in doc.get("threads", ()):
            if isinstance(t, list):
                out.extend(t)           # (summary_lines)
            elif "unreadable" in t:
                out.append("Lua backtrace of (lua_State *)%s: unreadable: %s"
                           % (t["L"], t["unreadable"]))
            else:
                out.extend(bt.data_lines(t))
            out.append("")
        for g in doc.get("groups", ()):
            out.extend(bt.group_lines(g))
            out.append("")
        n = doc["thread_count"]
        out.append("%d thread%s" % (n, "" if n == 1 else "s"))
        if doc["walk_error"] is not None:
            out.append("lbt: walk of g->gc.root stopped, threads after it are missing: %s"
                       % doc["walk_error"])
        return out

    def run_json(self, arg, from_tty):
        flags, bt = self._parse(arg)
        if "all" not in flags and "folded" not in flags:
            doc = {"threads": [bt.thread_data(bt.vm.L, "full" in flags)]}
            doc["signature"] = bt.signature(doc["threads"][0])
            return doc
        return self.data(bt, flags)

    def data(self, bt, flags, text=False):
        """lbt's document: {"folded": ...} with --folded; else for --all
        "threads" (or "groups" with --group), "thread_count", "walk_error".
        text: each thread scanned that is readable given as its lines of
        text (summary_lines), not as data (for run)."""
        from ..gdb_ext.stack.threadscan import ThreadScanner, group
        full = "full" in flags
        if "folded" in flags and "all" not in flags:
            return {"folded": bt.folded_one(bt.vm.L)}
        scanner = ThreadScanner(bt.bt)
        threads, walk_err = scanner.threads()
        doc = {"thread_count": len(threads),
               "walk_error": None if walk_err is None else str(walk_err)}
        if full:
            items = []
            for L in threads:
                try:
                    items.append(bt.thread_data(L, True))
                except (FaultError, CorruptError) as e:
                    items.append({"L": hexa(L), "unreadable": str(e)})
            doc["threads"] = items
            return doc
        summaries, items = [], []
        for L, s in zip(threads, scanner.scan(threads)):
            if isinstance(s, Exception):
                items.append({"L": hexa(L), "unreadable": str(s)})
            else:
                summaries.append(s)
                if "group" not in flags and "folded" not in flags:
                    items.append(bt.summary_lines(s) if text else bt.summary_data(s))
        if "folded" in flags:
            return {"folded": bt.folded_all(summaries, len(threads), walk_err)}
        if "group" in flags:
            doc["threads"] = items          # the unreadable ones
            doc["groups"] = [bt.group_data(g) for g in group(summaries, bt.bt.vmthread)]
        else:
            doc["threads"] = items
        return doc
