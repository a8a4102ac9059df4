"""ltrace: the JIT's live traces, or one trace in detail."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.jit.jit import NoJitError, jit_state, trace_by_number, traces
from ..gdb_ext.jit.mcode import assign_traces, mcode_areas
from .base import LjCommand, UsageError, eval_address, get_vm, split_args
from .format import hexa
from .lmcode import parent_text, trace_site


def trace_number(words):
    """The trace number the words of a command line give (a number or a
    gdb expression)."""
    expr = " ".join(words)
    try:
        return int(expr, 0)
    except ValueError:
        try:
            return eval_address(expr, "trace number")
        except UsageError:
            raise UsageError("'%s' is not a trace number" % expr)


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
        doc = self.data(arg)
        if doc.get("note"):
            return ["ltrace: " + doc["note"]]
        if "trace" in doc:
            return self.detail_lines(doc["trace"])
        out = ["%5s %-9s %-15s %5s  %-18s %6s %5s %5s %5s %5s  %s"
               % ("trace", "parent", "link", "to", "mcode", "size", "loop", "IR", "K", "exits",
                  "start")]
        for t in doc["traces"]:
            if "unreadable" in t:
                out.append("%5d <unreadable: %s>" % (t["number"], t["unreadable"]))
                continue
            out.append("%5d %-9s %-15s %5s  %-18s %6d %5d %5d %5d %5d  %s"
                       % (t["number"], t["parent"], t["link"], t["to"] or "-", t["mcode"],
                          t["size"], t["loop"], t["ir"], t["k"], t["exits"], t["start"]))
        sm = doc["summary"]
        out.append("%d traces (%d root, %d side), %d bytes of machine code"
                   % (sm["root"] + sm["side"], sm["root"], sm["side"], sm["mcode_bytes"]))
        return out

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        """ltrace's document: "traces" and "summary"; with N, "trace"; when
        there is nothing to show, "note" says why."""
        flags, opts, L_expr, rest = split_args(arg)
        n = trace_number(rest) if rest else None
        vm = get_vm(L_expr)
        try:
            js = jit_state(vm)
        except NoJitError as e:
            return {"note": "no JIT: %s" % e}
        all_traces = traces(vm, js)
        if n is not None:
            return self.detail(vm, js, all_traces, n)
        if not all_traces:
            return {"note": "no traces: the JIT has not compiled any, or all were flushed "
                            "(J->trace has %d slots, all empty)" % js.sizetrace}
        items = []
        nroot = nside = code = 0
        for num, T in all_traces:
            if isinstance(T, Exception):
                items.append({"number": num, "unreadable": str(T)})
                continue
            if T.root:
                nside += 1
            else:
                nroot += 1
            code += T.szmcode
            items.append({"number": num, "parent": parent_text(vm, js, all_traces, T),
                          "link": T.link_name, "to": T.link or None, "mcode": hexa(T.mcode),
                          "size": T.szmcode, "loop": T.mcloop, "ir": T.ir_count,
                          "k": T.k_count, "exits": T.nsnap, "start": trace_site(vm, T),
                          "address": hexa(T.addr)})
        return {"traces": items,
                "summary": {"root": nroot, "side": nside, "mcode_bytes": code}}

    def detail(self, vm, js, all_traces, n):
        try:
            T = trace_by_number(vm, js, n)
        except (FaultError, CorruptError) as e:
            return {"note": "trace %d is unreadable: %s" % (n, e)}
        if T is None:
            live = [num for num, t in all_traces]
            return {"note": "no trace %d: %s" % (
                n, "live traces are %d..%d" % (live[0], live[-1]) if live else
                "there are no live traces")}
        d = {"number": T.traceno, "address": hexa(T.addr), "root": T.root or None,
             "parent": parent_text(vm, js, all_traces, T)}
        if T.root:
            d["kind"] = "side trace of root %d, parent %s (trace/exit)" % (T.root, d["parent"])
        else:
            p = d["parent"]
            d["kind"] = "root trace" + (" stitched from trace %s" % p.split("/")[0]
                                        if p != "-" else "")
        try:
            chunk, line, pos = T.start_site(vm)
            d["start"] = {"site": trace_site(vm, T), "bytecode": pos, "proto": hexa(T.startpt)}
        except (FaultError, CorruptError) as e:
            d["start"] = {"unreadable": str(e)}
        d["link"] = {"kind": T.link_name, "to": T.link or None}
        d["mcode"] = {"start": hexa(T.mcode), "end": hexa(T.end), "size": T.szmcode,
                      "loop": T.mcloop, "area": None}
        try:
            areas = mcode_areas(vm, js)
            assign_traces(areas, all_traces)
            for i, a in enumerate(areas, 1):
                if a.contains(T.mcode):
                    d["mcode"]["area"] = {"number": i, "current": bool(a.current),
                                          "start": hexa(a.start), "end": hexa(a.end)}
        except (FaultError, CorruptError):
            pass
        d["ir"] = T.ir_count
        d["k"] = T.k_count
        d["snapshots"] = T.nsnap
        d["snapmap_entries"] = T.nsnapmap
        if not T.root:
            d["children"] = [num for num, t in all_traces if not isinstance(t, Exception)
                             and t.root == T.traceno]
        return {"trace": d}

    @staticmethod
    def detail_lines(d):
        out = ["trace %d (GCtrace *)%s: %s" % (d["number"], d["address"], d["kind"])]
        st = d["start"]
        if "unreadable" in st:
            out.append("  start:    <unreadable: %s>" % st["unreadable"])
        else:
            out.append("  start:    %s (bytecode %d of (GCproto *)%s)"
                       % (st["site"], st["bytecode"], st["proto"]))
        link = d["link"]["kind"]
        if d["link"]["to"] and d["link"]["to"] != d["number"]:
            link += " -> trace %d" % d["link"]["to"]
        elif d["link"]["to"] == d["number"]:
            link += " (to itself)"
        out.append("  link:     %s" % link)
        mc = d["mcode"]
        area = mc["area"]
        area_text = ", in mcode area %d%s %s-%s" % (
            area["number"], "*" if area["current"] else "", area["start"], area["end"]) \
            if area else ""
        out.append("  mcode:    %s-%s, %d bytes, loop at +0x%x%s"
                   % (mc["start"], mc["end"], mc["size"], mc["loop"], area_text))
        out.append("  IR:       %d instructions, %d constants (jit.util.traceinfo nins, nk)"
                   % (d["ir"], d["k"]))
        out.append("  exits:    %d snapshots, %d snapshot map entries"
                   % (d["snapshots"], d["snapmap_entries"]))
        if "children" in d:
            sides = d["children"]
            out.append("  children: %d side trace%s%s" % (
                len(sides), "" if len(sides) == 1 else "s",
                ": " + " ".join(map(str, sides)) if sides else ""))
        out.append("disassemble %s,%s" % (mc["start"], mc["end"]))
        return out
