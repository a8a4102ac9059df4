"""lir: a trace's IR and snapshots as jit.dump lists them, then its machine
code through the host's disassembler (gdb_ext.jit.irdump)."""
from ..gdb_ext.jit.irdump import TraceIR
from ..gdb_ext.errors import LjError
from ..gdb_ext.jit.jit import jit_state, trace_by_number, traces
from .base import LjCommand, UsageError, get_vm, split_args
from .format import hexa
from .host import current
from .ltrace import trace_number


class LIr(LjCommand):
    """A JIT trace's IR and snapshots, as LuaJIT's jit.dump writes them with
its i and s flags (luajit -jdump=is): constants, guards (>), PHIs (+),
types, operands, and each snapshot's stack slots where it is taken
(`....  SNAP #n [ ... ]`: a constant, an IR ref, `----` for an unchanged
slot, `|` after a frame slot).  Then the trace's machine code (jit.dump's
m part) through gdb's disassembler, with ->LOOP: where its loop starts.
  --no-snap   the IR without the snapshots (-jdump=i)
  --no-mcode  no machine code

Usage: lir <trace> [--no-snap] [--no-mcode] [L=<lua_State *>]
Example:
  (gdb) lir 5 --no-mcode
  ---- TRACE 5 IR
  ....        SNAP   #0   [ ---- ---- ]
  0001    int SLOAD  #5    CI
  0002    num CONV   0001  num.int
  ...
  0020  + int ADD    0012  +1
  ....        SNAP   #3   [ ---- ---- ---- ---- ---- ]
  0021 >  int LE     0020  +100
  0022    int PHI    0012  0020"""

    NAME = "lir"
    SUMMARY = "a trace's IR and snapshots as jit.dump lists them, and its machine code"
    WORDS = ("--no-snap", "--no-mcode")
    USAGE = "lir <trace> [--no-snap] [--no-mcode] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.data(arg)
        out = list(doc["ir"])
        mc = doc.get("mcode")
        if mc is not None:
            out.append("---- TRACE %d mcode %d" % (doc["trace"], mc["size"]))
            if mc["lines"] is None:
                out.append("(%d bytes at %s: no disassembler here; run lir in gdb to see them)"
                           % (mc["size"], mc["start"]))
            else:
                for addr, text in mc["lines"]:
                    if mc["loop"] and addr == int(mc["start"], 16) + mc["loop"]:
                        out.append("->LOOP:")
                    out.append("%x  %s" % (addr, text))
        return out

    def run_json(self, arg, from_tty):
        doc = self.data(arg)
        if doc.get("mcode") and doc["mcode"]["lines"] is not None:
            doc["mcode"]["lines"] = [{"address": hexa(a), "text": t}
                                     for a, t in doc["mcode"]["lines"]]
        return doc

    def data(self, arg):
        flags, opts, state, rest = split_args(arg, flags=("no-snap", "no-mcode"))
        if not rest:
            raise UsageError("missing trace number")
        n = trace_number(rest)
        vm = get_vm(state)
        js = jit_state(vm)
        T = trace_by_number(vm, js, n)
        if T is None:
            live = [num for num, _ in traces(vm, js)]
            raise LjError("no trace %d: %s" % (
                n, "live traces are %d..%d (ltrace lists them)" % (live[0], live[-1])
                if live else "there are no live traces"))
        ir = TraceIR(vm, js, T)
        doc = {"trace": T.traceno, "address": hexa(T.addr),
               "ir": ir.lines(with_snapshots="no-snap" not in flags)}
        if "no-mcode" not in flags:
            lo, hi = T.code_range()
            doc["mcode"] = {"start": hexa(T.mcode), "size": T.szmcode, "loop": T.mcloop,
                            "lines": current().disassemble(lo, hi)}
        return doc
