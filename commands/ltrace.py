"""ltrace: the JIT's live traces, or one trace in detail."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.jit import NoJitError, assign_traces, jit_state, mcode_areas, trace_by_number, \
    traces
from .base import LjCommand, UsageError, eval_address, get_vm, split_args
from .lmcode import parent_text, trace_site


class LTrace(LjCommand):
    """List the JIT's live traces, or show one in detail.

Without N: every live trace, J->trace[1 .. J->sizetrace), one a line:
  trace   trace number
  parent  '-' for a root trace; 'P/E' for a side trace: parent trace P, exit
          E (as jit.dump's "TRACE n start P/E"); 'P/stitch' for a stitched trace
  link    how the trace ends (jit.dump's names: loop, root, tail-recursion,
          up-recursion, down-recursion, interpreter, return, stitch, none)
  to      the trace it links to ('-' for none)
  mcode   address of its machine code, size in bytes, loop offset
  IR, K, exits  what jit.util.traceinfo calls nins, nk and nexit: IR
          instructions (nins - REF_BIAS - 1), constants, snapshots
  start   chunk:line where it starts
With N (a number or gdb expression): that trace in detail, including its
machine-code range as a `disassemble` command.

Usage: ltrace [N] [L=<lua_State *>]
Example:
  (gdb) ltrace 2
  trace 2 (GCtrace *)0x7ffff7cc41b8: side trace of root 1, parent 1/5"""

    NAME = "ltrace"
    SUMMARY = "the JIT's live traces, or one trace in detail"
    USAGE = "ltrace [N] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        flags, opts, L_expr, rest = split_args(arg)
        n = None
        if rest:
            expr = " ".join(rest)
            try:
                n = int(expr, 0)
            except ValueError:
                try:
                    n = eval_address(expr, "trace number")
                except UsageError:
                    raise UsageError("'%s' is not a trace number" % expr)
        vm = get_vm(L_expr)
        try:
            js = jit_state(vm)
        except NoJitError as e:
            return ["ltrace: no JIT: %s" % e]
        all_traces = traces(vm, js)
        if n is not None:
            return self.detail(vm, js, all_traces, n)
        if not all_traces:
            return ["ltrace: no traces: the JIT has not compiled any, or all were flushed "
                    "(J->trace has %d slots, all empty)" % js.sizetrace]
        out = ["%5s %-9s %-15s %5s  %-18s %6s %5s %5s %5s %5s  %s"
               % ("trace", "parent", "link", "to", "mcode", "size", "loop", "IR", "K", "exits",
                  "start")]
        nroot = nside = code = 0
        for num, T in all_traces:
            if isinstance(T, Exception):
                out.append("%5d <unreadable: %s>" % (num, T))
                continue
            if T.root:
                nside += 1
            else:
                nroot += 1
            code += T.szmcode
            out.append("%5d %-9s %-15s %5s  0x%-16x %6d %5d %5d %5d %5d  %s"
                       % (num, parent_text(vm, js, all_traces, T), T.link_name,
                          T.link if T.link else "-", T.mcode, T.szmcode, T.mcloop, T.ir_count,
                          T.k_count, T.nsnap, trace_site(vm, T)))
        out.append("%d traces (%d root, %d side), %d bytes of machine code"
                   % (nroot + nside, nroot, nside, code))
        return out

    def detail(self, vm, js, all_traces, n):
        try:
            T = trace_by_number(vm, js, n)
        except (FaultError, CorruptError) as e:
            return ["ltrace: trace %d is unreadable: %s" % (n, e)]
        if T is None:
            live = [num for num, t in all_traces]
            return ["ltrace: no trace %d: %s" % (
                n, "live traces are %d..%d" % (live[0], live[-1]) if live else
                "there are no live traces")]
        if T.root:
            kind = "side trace of root %d, parent %s (trace/exit)" % (
                T.root, parent_text(vm, js, all_traces, T))
        else:
            p = parent_text(vm, js, all_traces, T)
            kind = "root trace" + (" stitched from trace %s" % p.split("/")[0] if p != "-" else "")
        out = ["trace %d (GCtrace *)0x%x: %s" % (T.traceno, T.addr, kind)]
        try:
            chunk, line, pos = T.start_site(vm)
            out.append("  start:    %s (bytecode %d of (GCproto *)0x%x)"
                       % (trace_site(vm, T), pos, T.startpt))
        except (FaultError, CorruptError) as e:
            out.append("  start:    <unreadable: %s>" % e)
        link = T.link_name
        if T.link and T.link != T.traceno:
            link += " -> trace %d" % T.link
        elif T.link == T.traceno:
            link += " (to itself)"
        out.append("  link:     %s" % link)
        area_text = ""
        try:
            areas = mcode_areas(vm, js)
            assign_traces(areas, all_traces)
            for i, a in enumerate(areas, 1):
                if a.contains(T.mcode):
                    area_text = ", in mcode area %d%s 0x%x-0x%x" % (
                        i, "*" if a.current else "", a.start, a.end)
        except (FaultError, CorruptError):
            pass
        out.append("  mcode:    0x%x-0x%x, %d bytes, loop at +0x%x%s"
                   % (T.mcode, T.end, T.szmcode, T.mcloop, area_text))
        out.append("  IR:       %d instructions, %d constants (jit.util.traceinfo nins, nk)"
                   % (T.ir_count, T.k_count))
        out.append("  exits:    %d snapshots, %d snapshot map entries" % (T.nsnap, T.nsnapmap))
        if not T.root:
            sides = [num for num, t in all_traces if not isinstance(t, Exception)
                     and t.root == T.traceno]
            out.append("  children: %d side trace%s%s" % (
                len(sides), "" if len(sides) == 1 else "s",
                ": " + " ".join(map(str, sides)) if sides else ""))
        out.append("disassemble 0x%x,0x%x" % (T.mcode, T.end))
        return out
