"""ljgdb as a Debug Adapter Protocol server: the Lua world of a core or a
running process in an editor's call stack, variables and debug console,
with no debugger (docs/dap.md).

  python3 -m ljgdb dap [--port N]

The server speaks DAP (JSON messages, each after a Content-Length header)
on standard input and output, or, with --port, to one client that connects
to 127.0.0.1:N (--port 0: a free port, which the first line on standard
error names).  `launch` takes {"core": PATH, "program": PATH?,
"sysroot": DIR?, "sourcePath": [DIR...]?}: the core reader
(commands.hosts.corehost) is the Host the commands and the engine read
through.  `attach` takes {"pid": N}: the process is held stopped (ptrace,
as --pid holds it: commands.hosts.livehost) while the session looks,
let go on `continue` and `disconnect`, held again on `pause`.  Read-only:
nothing is written to the core or the process.

What the editor gets: the Lua threads of every VM of the process as DAP
threads (the selected OS thread's VM and its running thread first; past
THREAD_LIMIT coroutines, one a group that reads the same),
each thread's Lua frames as lbt gives them, then the running thread's
machine frames; a frame's Locals, Upvalues and Globals; tables,
functions, userdata and cdata expandable (tables in pages); names on hover
and in watches as the frame's code reads them; any ljgdb command in the
debug console.  Breakpoints, stepping and setting a variable do not apply:
the capabilities say so."""
import json
import os
import re
import socket
import sys
import threading

from ...gdb_ext.errors import CorruptError, FaultError, LjError
from ...gdb_ext.stack.frames import frame_locals, frame_upvalues, func_upvalues
from ...gdb_ext.stack.luaframe import Picked, resolve, source_file
from ...gdb_ext.stack.threadscan import ThreadScanner, ThreadSummary, scan_groups
from ...gdb_ext.vm.ffitypes import cdata_text
from ...gdb_ext.vm.objects import Cdata, Func, Tab, Udata
from ...gdb_ext.vm.state import make_vm
from ...gdb_ext.vm.vmfind import list_states
from ..base import CommandError, get_vm, param
from ..format import key_text, proto_site, value_text
from ..host import install
from ..lbt import BtFormat
from .corehost import CoreHost, commands
from .livehost import LiveHost

USAGE = "python3 -m ljgdb dap [--port N]"
# What the server can do, as DAP's Capabilities say it (the rest: false).
CAPABILITIES = {
    "supportsConfigurationDoneRequest": True,
    "supportsEvaluateForHovers": True,
    "supportsDelayedStackTraceLoading": True,
    "supportsTerminateRequest": True,
    "supportsSetVariable": False,
    "supportsStepBack": False,
    "supportsRestartRequest": False,
    "supportsConditionalBreakpoints": False,
    "supportsFunctionBreakpoints": False,
    "supportsGotoTargetsRequest": False,
    "supportsStepInTargetsRequest": False,
    "supportsCompletionsRequest": False,
    "supportsModulesRequest": False,
    "supportsExceptionInfoRequest": False,
    "supportsValueFormattingOptions": False,
    "supportsReadMemoryRequest": False,
}
# A Lua name (hover and watch resolve it in the frame; else lval reads it).
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
# Table entries a variables request gives when the client asks for no count.
PAGE = 1000
# How frames.frame_locals names a vararg ("(*vararg 1)", as LuaJIT's
# debug.getlocal(level, -1) does).
VARARG = "(*vararg "
# Machine frames shown after the running thread's Lua frames, at most.
MACHINE_FRAMES = 64
# Coroutines shown one DAP thread each; past this many, one a group.
THREAD_LIMIT = 1000
# Bytes of the process's memory the thread scan keeps read at most.
SCAN_CACHE = 64 << 20


class DapError(Exception):
    """A request that fails: its message is the one line the user sees."""


class Stale(Exception):
    """A local whose stack slot a trace does not keep up to date."""


class Text(str):
    """A child that is no Lua value, shown as its text."""


class Transport(object):
    """DAP's framing over a pair of binary streams: a header block (only
    Content-Length matters), a blank line, then that many bytes of JSON."""

    def __init__(self, rfile, wfile):
        self.rfile = rfile
        self.wfile = wfile
        self.lock = threading.Lock()
        self.seq = 0

    def receive(self):
        """The next message as a dict, or None at the end of the input."""
        length = None
        while True:
            line = self.rfile.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                if length is not None:
                    break
                continue
            name, _, value = line.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise DapError("a Content-Length that is not a number: %r" % value)
        body = self.rfile.read(length)
        if len(body) < length:
            return None
        return json.loads(body.decode("utf-8"))

    def send(self, msg):
        with self.lock:
            self.seq += 1
            msg["seq"] = self.seq
            body = json.dumps(msg, ensure_ascii=False).encode("utf-8")
            self.wfile.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.wfile.flush()


class Handles(object):
    """Small integers for the things a client refers to by number (frames,
    variable containers), valid until the session looks again."""

    def __init__(self):
        self.items = {}
        self.ids = {}

    def get(self, key):
        h = self.ids.get(key)
        if h is None:
            h = self.ids[key] = len(self.items) + 1
            self.items[h] = key
        return h

    def find(self, h, what):
        try:
            return self.items[int(h)]
        except (KeyError, TypeError, ValueError):
            raise DapError("no %s %r in this session (the editor asked for one the server "
                           "did not give)" % (what, h))


class Session(object):
    """One client's session over a core or a process."""

    def __init__(self, transport):
        self.io = transport
        self.host = None
        self.vm = None              # the VM the selected OS thread runs
        self.fmt = None
        self.ctxs = {}              # G -> (VM, BtFormat) of every VM shown
        self.owner = {}             # a listed lua_State -> its VM's G
        self.threads = []           # [(thread id, L, name)]
        self.by_id = {}             # thread id -> L
        self.backtraces = {}        # L -> the engine's Backtrace
        self.frames = Handles()     # (L, index)
        self.refs = Handles()       # ("scope", frame id, kind) / ("table", addr)
        self.done = False
        self.source_dirs = []
        self.process = None         # attach: the LiveProcess
        self.held = None            # its stopped() while held

    # --- the loop ---------------------------------------------------------
    def run(self):
        try:
            self.loop()
        finally:
            self.close()        # (a client gone without a disconnect: the process let go)

    def loop(self):
        while not self.done:
            try:
                msg = self.io.receive()
            except (DapError, ValueError) as e:
                self.event("output", {"category": "stderr", "output": "ljgdb dap: %s\n" % e})
                return
            if msg is None:
                return
            if not isinstance(msg, dict):
                self.event("output", {"category": "stderr",
                                      "output": "ljgdb dap: a message that is no JSON object\n"})
                continue
            if msg.get("type") == "request":
                self.handle(msg)

    def handle(self, req):
        cmd = req.get("command")
        args = req.get("arguments") or {}
        fn = getattr(self, "on_" + str(cmd), None)
        if fn is None:
            self.respond(req, error="ljgdb's DAP server does not do '%s' (a core is read, not "
                                    "run: see its capabilities)" % cmd)
            return
        try:
            body = fn(args)
        except DapError as e:
            self.respond(req, error=str(e))
            return
        except CommandError as e:
            self.respond(req, error=str(e))
            return
        except (LjError, FaultError, CorruptError) as e:
            self.respond(req, error="%s: %s" % (cmd, e))
            return
        except (ValueError, TypeError, AttributeError) as e:
            self.respond(req, error="%s: arguments ljgdb cannot read (%s): see the Debug Adapter "
                                    "Protocol's %s request" % (cmd, e, cmd))
            return
        except Exception as e:          # (one line, never a traceback)
            self.respond(req, error="%s: internal error (%s: %s)" % (cmd, type(e).__name__, e))
            return
        self.respond(req, body=body)
        after = getattr(self, "after_" + str(cmd), None)
        if after is not None:
            try:
                after(args)
            except Exception as e:      # (an event not sent: said, never a traceback)
                self.event("output", {"category": "stderr", "output": "ljgdb dap: after %s: %s\n"
                                      % (cmd, e)})

    def respond(self, req, body=None, error=None):
        msg = {"type": "response", "request_seq": req.get("seq"), "command": req.get("command"),
               "success": error is None}
        if error is not None:
            msg["message"] = error
            msg["body"] = {"error": {"id": 1, "format": error.replace("{", "{{").replace("}", "}}"),
                                     "showUser": True}}
        elif body is not None:
            msg["body"] = body
        self.io.send(msg)

    def event(self, name, body=None):
        msg = {"type": "event", "event": name}
        if body is not None:
            msg["body"] = body
        self.io.send(msg)

    # --- start and end ----------------------------------------------------
    def on_initialize(self, args):
        return dict(CAPABILITIES)

    def on_launch(self, args):
        core = args.get("core")
        if not core:
            raise DapError("launch needs \"core\": the path of a core file (ljgdb's DAP server "
                           "reads cores)")
        if not os.path.isfile(core):
            raise DapError("core file '%s' does not exist or is not a file" % core)
        program = args.get("program")
        if program is not None and not os.path.isfile(program):
            raise DapError("program '%s' does not exist or is not a file" % program)
        sysroot = args.get("sysroot") or "/"
        if not os.path.isdir(sysroot):
            raise DapError("sysroot '%s' is not a directory" % sysroot)
        paths = args.get("sourcePath") or []
        if isinstance(paths, str):
            paths = [paths]
        self.source_dirs = [os.path.abspath(d) for d in paths]
        self.close()                # (a session that attached before)
        # (A session stays open: the pages of the core it went over are
        # let go of every 64 MB, not held for the session's life.)
        self.host = install(CoreHost(core, program, None, 1, sysroot, release_every=64 << 20))
        self.look()
        return None

    def after_launch(self, args):
        self.event("initialized")

    def on_attach(self, args):
        pid = args.get("pid", args.get("processId"))
        try:
            pid = int(pid)
        except (TypeError, ValueError):
            raise DapError("attach needs \"pid\": the id of a running process, not %r" % (pid,))
        from ...gdb_ext.backends.live import open_process
        self.close()                # (a process attached before)
        self.process = open_process(pid)
        try:
            self.hold()
        except BaseException:
            self.close()            # (refused: the process let go at once)
            raise
        return None

    after_attach = after_launch

    def hold(self):
        """The attached process stopped (every thread, by ptrace, as --pid
        holds it) and looked at afresh."""
        if self.held is None:
            held = self.process.stopped()
            held.__enter__()
            self.held = held
        self.host = install(LiveHost(self.process))
        self.look()

    def release(self):
        """The attached process let go as it was (nothing written, no
        signal of ours pending, no thread left stopped)."""
        held, self.held = self.held, None
        if held is not None:
            held.__exit__(None, None, None)
        self.vm = None

    def on_continue(self, args):
        if self.process is None:
            raise DapError("a core is not run: nothing to continue (attach to a process for that)")
        self.release()
        return {"allThreadsContinued": True}

    def on_pause(self, args):
        if self.process is None:
            raise DapError("a core is not run: it is always paused")
        self.hold()
        return None

    def after_pause(self, args):
        self.stopped("pause")

    def on_configurationDone(self, args):
        return None

    def after_configurationDone(self, args):
        if self.vm is not None:
            self.stopped("pause" if self.process is not None else "exception")

    def stopped(self, reason):
        body = {"reason": reason, "allThreadsStopped": True, "description": self.stop_text()}
        if self.threads:
            body["threadId"] = self.threads[0][0]
        self.event("stopped", body)

    def on_setBreakpoints(self, args):
        lines = args.get("breakpoints") or [{"line": n} for n in args.get("lines") or []]
        return {"breakpoints": [{"verified": False, "line": b.get("line"),
                                 "message": "a core is not run: no breakpoint applies"}
                                for b in lines]}

    def on_setExceptionBreakpoints(self, args):
        return {"breakpoints": []}

    def on_disconnect(self, args):
        self.done = True
        self.close()
        return None

    def close(self):
        if self.process is not None:
            self.release()
            self.process.close()
            self.process = None

    on_terminate = on_disconnect

    # --- what the core holds ----------------------------------------------
    def look(self):
        """Reads the VMs and their threads afresh (handles start over): the
        VM of the selected OS thread first, its running thread, its main
        thread, then its coroutines, each its own DAP thread (past
        THREAD_LIMIT of them, one DAP thread a group of coroutines that read
        the same, lbt --all --group's groups, its stack its first
        example's); then every other VM of the process the same way, each
        thread's name prefixed with its VM's global_State."""
        self.vm = vm = get_vm(None)
        self.fmt = BtFormat(vm)
        self.ctxs = {vm.G: (vm, self.fmt)}
        self.owner = {}
        self.backtraces = {}
        self.frames = Handles()
        self.refs = Handles()
        named = self.vm_threads(vm, self.fmt, "")
        target, lay = vm.t, vm.lay          # (get_vm checked the environment)
        states, _ = list_states(target, lay, self.host.frame_candidates(lay))
        for st in states:
            if st.G in self.ctxs:
                continue
            try:
                other = make_vm(target, lay, explicit_G=st.G, search=False)
            except (LjError, FaultError, CorruptError):
                continue
            fmt = BtFormat(other)
            self.ctxs[st.G] = (other, fmt)
            named.extend(self.vm_threads(other, fmt, "[G 0x%x] " % st.G))
        self.threads = [(i + 1, L, name) for i, (L, name) in enumerate(named)]
        self.by_id = {t: L for t, L, _ in self.threads if L is not None}

    def vm_threads(self, vm, fmt, prefix):
        """[(L or None, name)] of one VM's threads, as look lists them."""
        bt = fmt.bt
        scanner = ThreadScanner(bt, SCAN_CACHE)
        threads, _ = scanner.threads()
        first = []
        for L in (bt.running, vm.main_L, bt.vmthread):
            if L and L not in first and (L in threads or L == vm.main_L):
                first.append(L)
        rest = [L for L in threads if L not in first]
        named = []
        for L, s in zip(first, scanner.scan(first)):
            named.append((L, prefix + self.thread_name(vm, fmt, L, s)))
        if len(rest) <= THREAD_LIMIT:
            named.extend((L, prefix + self.thread_name(vm, fmt, L, s))
                         for L, s in zip(rest, scanner.scan(rest)))
        else:
            groups, bad = scan_groups(scanner, rest, bt.vmthread, examples=1)
            for g in groups:
                where = fmt.key_text(next((k for k in g.keys if k[0] == "L"), g.keys[0])) \
                    if g.keys else "no Lua frames"
                named.append((g.examples[0], "%s%d coroutine%s (%s): %s (e.g. 0x%x)%s" % (
                    prefix, g.count, "" if g.count == 1 else "s", g.status, where, g.examples[0],
                    "; " + g.warning if g.warning else "")))
            if bad:
                named.append((None, "%s%d coroutines that do not read (lthreads lists them)"
                              % (prefix, bad)))
        for L, _ in named:
            if L is not None:
                self.owner[L] = vm.G
        return named

    def ctx(self, L):
        """(VM, BtFormat) of the VM thread L belongs to."""
        return self.ctxs[self.owner.get(L, self.vm.G)]

    def thread_name(self, vm, fmt, L, s):
        """A thread's name: who it is, its address, status and where, and
        the Tarantool fiber or the nginx request it serves (as lthreads
        notes them)."""
        bt = fmt.bt
        who = ("main thread" if L == vm.main_L else "VM thread g->vmthref" if L == bt.vmthread
               else "coroutine")
        if s.__class__ is not ThreadSummary:
            return "%s 0x%x <unreadable: %s>" % (who, L, s)
        status = "running" if L == bt.running else s.status
        where = fmt.summary_where(s)
        notes = []
        fiber = bt.fibers.get(L)
        if fiber is not None:
            notes.append(fiber.describe())          # (Tarantool's fiber)
        if s.exdata:
            notes.append(bt.exdata_text(s.exdata))  # (nginx's request)
        return "%s 0x%x (%s)%s%s" % (who, L, status, ": " + where if where not in ("", "-") else "",
                                     "".join(" [%s]" % n for n in notes))

    def stop_text(self):
        if self.process is not None:
            return "process %d, stopped while the session looks at it" % self.process.pid
        doc = self.fmt.thread_data(self.fmt.bt.running) if self.fmt.bt.running else None
        sig = self.fmt.signature(doc) if doc else None
        if sig and sig.get("signal"):
            return "%s (a core: the program is not running)" % sig["signal"]
        return "a core (the program is not running)"

    def backtrace(self, L):
        b = self.backtraces.get(L)
        if b is None:
            b = self.backtraces[L] = self.ctx(L)[1].bt.backtrace(L)
        return b

    def source_of(self, chunk, proto, G):
        """DAP's Source of a chunk: its file where one is found (as llist
        finds it: as named, then under launch's "sourcePath" directories and
        the source-path setting's),
        else a reference to the function's bytecode listing (a chunk loaded
        from a string, or a file not found here)."""
        dirs = self.source_dirs + [d for d in (param("source-path") or "").split(":") if d]
        path, _ = source_file(chunk, dirs)
        if path is not None:
            return {"name": os.path.basename(path), "path": os.path.abspath(path)}
        return {"name": chunk, "sourceReference": self.refs.get(("source", proto, G)),
                "presentationHint": "deemphasize"}

    def on_source(self, args):
        self.need_core()
        ref = args.get("sourceReference") or (args.get("source") or {}).get("sourceReference")
        kind, proto = self.refs.find(ref, "source reference")[:2]
        if kind != "source":
            raise DapError("reference %r is not a source" % ref)
        return {"content": self.command("lbc (GCproto *)0x%x" % proto),
                "mimeType": "text/x-lua-bytecode"}

    def on_threads(self, args):
        self.need_core()
        return {"threads": [{"id": t, "name": name} for t, _, name in self.threads]}

    def need_core(self):
        if self.vm is None:
            if self.process is not None:
                raise DapError("process %d runs: pause it first" % self.process.pid)
            raise DapError("no core yet: launch one first")

    def thread_L(self, tid):
        """Thread tid's lua_State (None: the entry that counts the threads
        that do not read)."""
        L = self.by_id.get(tid)
        if L is None and not any(t == tid for t, _, _ in self.threads):
            raise DapError("no thread %r here (threads lists them)" % tid)
        return L

    def on_stackTrace(self, args):
        self.need_core()
        L = self.thread_L(args.get("threadId"))
        if L is None:
            return {"stackFrames": [], "totalFrames": 0}
        b = self.backtrace(L)
        vm, fmt = self.ctx(L)
        items = [("lua", i) for i in range(len(b.frames))] + self.machine_items(L)
        start = max(0, int(args.get("startFrame") or 0))
        levels = int(args.get("levels") or 0)
        end = len(items) if levels <= 0 else min(len(items), start + levels)
        out = []
        for kind, i in items[start:end]:
            if kind != "lua":
                out.append(self.machine_frame(L, kind, i))
                continue
            d = fmt.frame_data(b, i)
            fr = b.frames[i]
            sf = {"id": self.frames.get((L, i)), "name": frame_name(d), "line": 0, "column": 0}
            if fr.kind == "lua":
                sf["line"] = d["line"] or 0
                sf["column"] = 1
                sf["source"] = self.source_of(fr.proto.chunk(vm), fr.proto.addr, vm.G)
            else:
                sf["presentationHint"] = "subtle"
            out.append(sf)
        return {"stackFrames": out, "totalFrames": len(items)}

    def machine_items(self, L):
        """After the running thread's Lua frames, the machine frames of the
        OS thread that runs it (the VM's C frames, the host's), innermost
        first, under a label: ("label", None) then ("c", MachineFrame)."""
        if L != self.fmt.bt.running:
            return []
        try:
            mframes = self.vm.t.machine_frames(MACHINE_FRAMES)
        except (FaultError, CorruptError, LjError):
            return []
        return [("label", None)] + [("c", m) for m in mframes] if mframes else []

    def machine_frame(self, L, kind, m):
        if kind == "label":
            return {"id": self.frames.get((L, "label")), "name": "C frames of the OS thread",
                    "line": 0, "column": 0, "presentationHint": "label"}
        return {"id": self.frames.get((L, "c", m.level)), "name": m.name or "??", "line": 0,
                "column": 0, "presentationHint": "subtle",
                "instructionPointerReference": "0x%x" % m.pc}

    def on_scopes(self, args):
        self.need_core()
        fid = args.get("frameId")
        key = self.frames.find(fid, "frame")
        if len(key) != 2 or not isinstance(key[1], int):
            return {"scopes": []}           # (a machine frame: no Lua variables)
        L, i = key
        fr = self.backtrace(L).frames[i]
        if fr.kind != "lua":
            return {"scopes": []}
        scopes = [{"name": "Locals", "presentationHint": "locals",
                   "variablesReference": self.refs.get(("scope", fid, "locals")), "expensive": False}]
        if self.scope_items(fid, "varargs"):
            scopes.append({"name": "Varargs", "expensive": False,
                           "variablesReference": self.refs.get(("scope", fid, "varargs"))})
        scopes.append({"name": "Upvalues", "expensive": False,
                       "variablesReference": self.refs.get(("scope", fid, "upvalues"))})
        # The function's environment table (a global is a field of it).
        glob = {"name": "Globals", "expensive": True}
        self.table_counts(glob, fr.fn.env, self.ctx(L)[0].G)
        scopes.append(glob)
        return {"scopes": scopes}

    def on_variables(self, args):
        self.need_core()
        ref = self.refs.find(args.get("variablesReference"), "variables reference")
        start = max(0, int(args.get("start") or 0))
        count = int(args.get("count") or 0) or PAGE
        if ref[0] == "scope":
            G = self.ctx(self.frames.find(ref[1], "frame")[0])[0].G
            items = self.scope_items(ref[1], ref[2])
        else:
            G = ref[2]
            if ref[0] == "func":
                items = self.func_items(ref[1], G)
            elif ref[0] == "udata":
                items = self.udata_items(ref[1], G)
            elif ref[0] == "cdata":
                items = self.cdata_items(ref[1], G)
            elif ref[0] == "table":
                items = self.table_items(ref[1], G, args.get("filter"), start, count)
                start = 0
            else:
                raise DapError("reference %r is a source, not variables"
                               % args.get("variablesReference"))
        return {"variables": [self.variable(n, v, G) for n, v in items[start:start + count]]}

    def scope_items(self, fid, kind):
        L, i = self.frames.find(fid, "frame")
        b = self.backtrace(L)
        fr = b.frames[i]
        vm, fmt = self.ctx(L)
        if kind == "upvalues":
            return frame_upvalues(vm, fr)
        out = []
        snap = b.start.trace if b.start is not None else None
        for name, v, addr in frame_locals(b.walker, fr, b.frame_top(i), with_addr=True):
            if name.startswith(VARARG) != (kind == "varargs"):
                continue
            if addr is not None and fmt.bt.in_trace_value(b, fr, addr):
                v = Stale("in trace %d: kept in a register or spill slot, the stack slot is "
                          "stale" % snap.traceno)
            out.append((name, v))
        return out

    def func_items(self, addr, G):
        """A function's children: a Lua function's prototype (where it is
        defined, as a Text) and its upvalues by name; a C closure's
        upvalues numbered as debug.getupvalue numbers them."""
        vm = self.ctxs[G][0]
        fn = Func(vm, addr)
        out = []
        if fn.is_lua:
            out.append(("[prototype]", Text("(GCproto *)0x%x %s"
                                            % (fn.proto, proto_site(vm, fn.proto)))))
        for i, (name, v) in enumerate(func_upvalues(vm, fn)):
            out.append((name or "[%d]" % (i + 1), v))
        return out

    def udata_items(self, addr, G):
        """A userdata's metatable and environment (tables), and its payload."""
        u = Udata(self.ctxs[G][0], addr)
        out = []
        for name, t in (("[metatable]", u.metatable), ("[env]", u.env)):
            if t:
                out.append((name, self.table_var(t, G)))
        out.append(("[payload]", Text("%d bytes at 0x%x" % (u.len, u.payload))))
        return out

    def cdata_items(self, addr, G):
        """A cdata's C type (as ffi.typeof names it), its value as lval
        writes it, and its payload."""
        vm = self.ctxs[G][0]
        cd = Cdata(vm, addr)
        typ, val = cdata_text(vm, cd)
        return [("[type]", Text(typ)),
                ("[value]", Text(val if val is not None else "<not decoded: see lval>")),
                ("[payload]", Text("%s bytes at 0x%x" % (cd.size if cd.size is not None else "?",
                                                         cd.payload)))]

    def table_items(self, addr, G, which, start, count):
        """The entries of table addr from entry `start` on (array part
        first, nil slots left out, then the hash part), at most count;
        `which` is DAP's filter ("indexed": the array part, "named": the
        hash part, None: both in turn)."""
        vm = self.ctxs[G][0]
        t = Tab(vm, addr)
        maxs = param("max-string")
        out = []
        if which in (None, "indexed"):
            out = [("[%d]" % i, v) for i, v in t.entries(vm, "array", start, count)]
            if which is None:
                start = max(0, start - t.counts(vm)[0]) if len(out) < count else 0
        if which in (None, "named") and len(out) < count:
            out.extend((key_text(vm, k, maxs), v)
                       for k, v in t.entries(vm, "hash", start, count - len(out)))
        return out

    def variable(self, name, v, G):
        if isinstance(v, dict):
            return dict(v, name=name)
        if isinstance(v, Text):
            return {"name": name, "value": str(v), "variablesReference": 0}
        if isinstance(v, Stale):
            return {"name": name, "value": "<%s>" % v, "variablesReference": 0}
        if isinstance(v, Exception):
            return {"name": name, "value": "<unreadable: %s>" % v, "variablesReference": 0}
        vm = self.ctxs[G][0]
        text = value_text(vm, v, param("max-string"))
        var = {"name": name, "value": text, "type": v.kind, "variablesReference": 0}
        if v.kind == "table":
            self.table_counts(var, v.addr, G)
        elif v.kind == "func":
            fn = Func(vm, v.addr)
            if fn.is_lua or fn.nupvalues:
                var["variablesReference"] = self.refs.get(("func", v.addr, G))
        elif v.kind in ("udata", "cdata"):
            var["variablesReference"] = self.refs.get((v.kind, v.addr, G))
        return var

    def table_var(self, addr, G):
        """A child that is a table given by address (a userdata's
        metatable), as a variable holding it would show."""
        var = {"value": "table: (GCtab *)0x%x" % addr, "type": "table"}
        self.table_counts(var, addr, G)
        return var

    def table_counts(self, var, addr, G):
        """var (a Variable or Scope) made expandable into table addr, with
        its array part's and hash part's entries counted (the editor pages
        by them)."""
        var["variablesReference"] = self.refs.get(("table", addr, G))
        vm = self.ctxs[G][0]
        try:
            var["indexedVariables"], var["namedVariables"] = Tab(vm, addr).counts(vm)
        except (FaultError, CorruptError, LjError):
            pass

    def on_evaluate(self, args):
        self.need_core()
        expr = (args.get("expression") or "").strip()
        if args.get("context") in ("hover", "watch"):
            if _NAME_RE.match(expr):
                return self.lookup(expr, args.get("frameId"))
            return self.lval(expr)
        return {"result": self.command(expr).rstrip("\n"), "variablesReference": 0}

    def lval(self, expr):
        """What lval says of an expression it takes (an address, a cast
        such as (GCtab *)0x..., L 3): its value, expandable as a local
        would be when it is a table or a function."""
        doc = self.lval_doc(expr)
        out = {"result": doc["value"], "type": doc["kind"], "variablesReference": 0}
        if doc.get("object") and doc["kind"] in ("table", "func", "udata", "cdata"):
            out["variablesReference"] = self.refs.get((doc["kind"], int(doc["object"], 16),
                                                       self.vm.G))
        return out

    def command(self, line):
        """An ljgdb command's text output, as the core reader prints it."""
        cmds = commands()
        words = line.split(None, 1)
        if not words or words[0] not in cmds:
            raise DapError("'%s' is not an ljgdb command (%s)"
                           % (words[0] if words else "", ", ".join(sorted(cmds))))
        # (execute splits the words itself: unbalanced quotes are its one line)
        return cmds[words[0]]().execute(words[1] if len(words) > 1 else "")

    def lval_doc(self, expr):
        return json.loads(self.command("lval %s --json" % expr))

    def lookup(self, name, fid):
        """A name in frame fid as the frame's code reads it (a local, an
        upvalue, else a global: luaframe.resolve, as lprint takes it)."""
        if fid is None:
            raise DapError("'%s': choose a Lua frame first" % name)
        L, i = self.frames.find(fid, "frame")
        b = self.backtrace(L)
        vm, fmt = self.ctx(L)
        r = resolve(fmt.bt, Picked(L, b, i), name)
        if r.value is None:
            if r.nil:
                return {"result": "nil", "type": "nil", "variablesReference": 0}
            raise DapError("%s '%s': %s" % (r.kind, name, r.note))
        var = self.variable(name, r.value, vm.G)
        return {"result": var["value"], "type": var.get("type"),
                "variablesReference": var["variablesReference"]}


def frame_name(d):
    """A frame's name in the editor's call stack: the name its caller
    called it by, as Lua's traceback gives it, else its place."""
    if d["kind"] != "lua":
        return d["text"]
    named = d.get("called_as")
    if named:
        return named["name"]
    if d["what"] == "main":
        return "main chunk"
    return "function <%s:%d>" % (d["source"], d["linedefined"])


def serve(rfile, wfile):
    Session(Transport(rfile, wfile)).run()


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    port = None
    while argv:
        a = argv.pop(0)
        if a in ("-h", "--help"):
            sys.stdout.write("usage: %s\n\n%s\n" % (USAGE, __doc__))
            return 0
        if a == "--port" or a.startswith("--port="):
            v = a.split("=", 1)[1] if "=" in a else (argv.pop(0) if argv else "")
            if not v.isdigit() or not 0 <= int(v) < 65536:
                return _fail("--port takes a TCP port number (1 to 65535, or 0: any free one), "
                             "not '%s'" % v)
            port = int(v)
        else:
            return _fail("'%s' is not an option of dap" % a)
    if port is None:
        serve(sys.stdin.buffer, sys.stdout.buffer)
        return 0
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("127.0.0.1", port))
    except OSError as e:
        return _fail("cannot listen on 127.0.0.1:%d (%s)" % (port, e.strerror))
    srv.listen(1)
    sys.stderr.write("ljgdb dap: listening on 127.0.0.1:%d\n" % srv.getsockname()[1])
    sys.stderr.flush()
    conn, _ = srv.accept()
    srv.close()
    with conn:
        f = conn.makefile("rwb")
        serve(f, f)
        f.flush()
        # (The client closes its end after the disconnect's response; closing
        # before it does would answer its close with a reset.)
        try:
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(5)
            while conn.recv(4096):
                pass
        except OSError:
            pass
    return 0


def _fail(line):
    sys.stderr.write("ljgdb dap: %s; usage: %s\n" % (line, USAGE))
    return 2
