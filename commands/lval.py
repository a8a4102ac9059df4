"""lval: decode a TValue, a GC object or a stack slot."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.vm.objects import (KIND_GCT, Func, Proto, Str, Tab, Thread, Value, decode_tv,
                                  gc_kind_at, looks_like_gc_object, read_object, split_tv)
from ..gdb_ext import consts as C
from .base import LjCommand, UsageError, get_vm, operand, param, split_args
from .format import chunk_display, hexa, quote, table_header, value_text


class LVal(LjCommand):
    """Decode a LuaJIT value.

  lval <TValue *>        the TValue at that address (a plain number is taken
                         as the address of a TValue)
  lval <GC pointer>      a GCstr/GCtab/GCfunc/GCproto/GCudata/GCcdata/... or
                         lua_State pointer: that object
  lval <lua_State *> N   stack slot N as the C API numbers it: 1 is L->base[0],
                         -1 is the top
  --raw                  also show the 64 raw bits and how this layout (GC64 or
                         X64) splits them into type tag and payload

Usage: lval [--raw] <TValue * | GC object pointer | lua_State * N> [L=<lua_State *>]
Example:
  (gdb) lval L 1
  slot 1 (TValue *)0x7ffff7a04f88: "hello"
"""

    NAME = "lval"
    SUMMARY = "decode a Lua value: a TValue, a GC object or a stack slot"
    WORDS = ('--raw',)
    USAGE = "lval [--raw] <TValue * | GC object pointer | lua_State * N> [L=<lua_State *>]"

    def run(self, arg, from_tty):
        return self.lines(self.data(arg))

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        """lval's document: the TValue's address ("tvalue", with "label"
        for a stack slot) or the object's ("object"), "kind", "value" (the
        text lval prints), "details", "raw" with --raw, "note"."""
        flags, opts, L_expr, rest = split_args(arg, flags=("raw",))
        if not rest:
            raise UsageError("missing expression")
        maxs = param("max-string")
        slot = None
        expr = " ".join(rest)
        selected = False
        if len(rest) >= 2 and _is_int(rest[-1]):
            head = " ".join(rest[:-1])
            try:
                if operand(head).pointee == "lua_State":
                    expr, slot = head, int(rest[-1], 0)
            except UsageError:
                if head == "L":
                    # No C variable L in this frame: `lval L N` means the
                    # selected thread (the one lbt shows), as linfo names it.
                    expr, slot, selected = head, int(rest[-1], 0), True
        if selected:
            vm = get_vm(L_expr)
            addr, tname = vm.L, "lua_State"
        else:
            v = operand(expr)
            addr, tname = (None if v.floating else v.value), v.pointee
        if slot is not None:
            if not selected:
                vm = get_vm(L_expr if L_expr is not None else expr)
            th = Thread(vm, addr)
            if not th.stack <= th.base <= th.top <= th.stack + 8 * th.stacksize:
                raise CorruptError("lua_State 0x%x is inconsistent: base 0x%x and top 0x%x are "
                                   "not in order inside its stack 0x%x (%d slots)"
                                   % (addr, th.base, th.top, th.stack, th.stacksize), addr)
            if slot > 0:
                tv_addr = th.base + 8 * (slot - 1)
            elif slot < 0:
                tv_addr = th.top + 8 * slot
            else:
                raise UsageError("slot 0 does not exist; slots count from 1 (or -1 from the top)")
            if not th.stack <= tv_addr < th.top:
                n = (th.top - th.base) // 8
                raise UsageError("slot %d is outside the %d slots of this frame (base 0x%x, top 0x%x)"
                                 % (slot, n, th.base, th.top))
            label = "slot %d of the selected thread (lua_State *)0x%x " % (slot, addr) if selected \
                else "slot %d " % slot
            return self._tv(vm, tv_addr, label, "raw" in flags, maxs)
        vm = get_vm(L_expr)
        if addr is None:
            # A TValue (not a pointer): use its address when it has one.
            if v.type_name == "TValue" and v.address is not None:
                return self._tv(vm, v.address, "", "raw" in flags, maxs)
            raise UsageError("'%s' is not a pointer or an address" % expr)
        if tname in C.POINTER_KINDS:
            kind = C.POINTER_KINDS[tname] or gc_kind_at(vm, addr)
            return self._gc(vm, kind, addr, "raw" in flags, maxs)
        if tname in (None, "void"):
            # A bare address: a GC object's if its header reads like one.
            kind = looks_like_gc_object(vm, addr)
            if kind is not None:
                doc = self._gc(vm, kind, addr, "raw" in flags, maxs)
                doc["note"] = ("(0x%x read as a GC object: its header says %s; (TValue *)0x%x "
                               "reads the 8 bytes there as a TValue)" % (addr, kind, addr))
                return doc
        if tname in (None, "TValue", "void", "char") or tname.startswith("unsigned"):
            return self._tv(vm, addr, "", "raw" in flags, maxs)
        raise UsageError("'%s' is a pointer to %s; expected a TValue *, a GC object pointer or an "
                         "address" % (expr, tname))

    def _tv(self, vm, addr, prefix, raw, maxs):
        """The document of the TValue at addr."""
        bits = vm.t.u64(addr, "TValue")
        doc = {"label": prefix.strip() or None, "tvalue": hexa(addr), "object": None}
        if raw:
            doc["raw"] = raw_lines(vm, bits)
        try:
            v = decode_tv(vm, bits)
        except CorruptError as e:
            doc.update(kind=None, value=None, error=str(e), details=[])
            return doc
        doc.update(kind=v.kind, value=value_text(vm, v, maxs), details=detail_lines(vm, v, maxs),
                   object=hexa(v.addr) if v.is_gc else None)
        return doc

    def _gc(self, vm, kind, addr, raw, maxs):
        """The document of the GC object at addr."""
        read_object(vm, kind, addr)     # an unreadable or wrong object fails here
        it = (~KIND_GCT[kind]) & 0xFFFFFFFF
        v = Value(kind, 0, it, addr=addr)
        doc = {"label": None, "tvalue": None, "object": hexa(addr), "kind": kind}
        if raw:
            doc["raw"] = ["GC object at 0x%x, gct %d (%s); as a TValue its tag would be %s"
                          % (addr, KIND_GCT[kind], kind, C.ITYPE_MACROS.get(it, hex(it)))]
        doc.update(value=value_text(vm, v, maxs), details=detail_lines(vm, v, maxs))
        return doc

    @staticmethod
    def lines(doc):
        out = list(doc.get("raw", ()))
        if doc["tvalue"] is not None:
            label = doc["label"] + " " if doc["label"] else ""
            out.append("%s(TValue *)%s: %s" % (label, doc["tvalue"], doc["value"]
                                               if doc.get("error") is None else doc["error"]))
        else:
            out.append(doc["value"])
        out.extend(doc["details"])
        if doc.get("note"):
            out.append(doc["note"])
        return out


def raw_lines(vm, bits):
    lay = vm.lay
    it, payload = split_tv(lay, bits)
    if lay.gc64:
        how = ("GC64: itype = bits >> 47 (sign-extended, 17 bits) = 0x%08x, payload = bits & "
               "(2^47-1) = 0x%x" % (it, payload))
    else:
        how = "X64: itype = high 32 bits = 0x%08x, payload = low 32 bits = 0x%x" % (it, payload)
    name = C.ITYPE_MACROS.get(it)
    tisnum = C.LJ_TISNUM_GC64 if lay.gc64 else C.LJ_TISNUM_X64
    if it == tisnum and lay.dualnum:
        # (In GC64 LJ_TISNUM is LJ_TNUMX, a tag that only dual numbers use.)
        name = "an int32 (itype == LJ_TISNUM, dual-number mode)"
    elif name is None:
        if it < tisnum:
            name = "a double (itype < LJ_TISNUM 0x%08x)" % tisnum
        elif it == tisnum:
            name = "an int32 (itype == LJ_TISNUM, DUALNUM)"
        elif not lay.gc64 and ((it ^ 0x80000000) - 0x80000000) >> 15 == -2:
            name = "light userdata ((int32)itype >> 15 == -2)"
        else:
            name = "not a valid tag"
    return ["raw 0x%016x" % bits, "  " + how, "  tag: %s" % name]


def detail_lines(vm, v, maxs):
    """Extra lines for objects worth a closer look."""
    out = []
    try:
        if v.kind == "str":
            s = Str(vm, v.addr, maxs)
            out.append("  (GCstr *)0x%x len %d, data at 0x%x" % (v.addr, s.len, s.data_addr))
        elif v.kind == "table":
            out.append("  " + table_header(vm, Tab(vm, v.addr)))
        elif v.kind == "func":
            fn = Func(vm, v.addr)
            if fn.is_lua:
                pt = Proto(vm, fn.proto)
                out.append("  Lua function, proto (GCproto *)0x%x, defined at %s:%d, %d params,"
                           " %d upvalues" % (fn.proto, chunk_display(pt.chunk(vm)), pt.firstline,
                                             pt.numparams, fn.nupvalues))
            else:
                sym = vm.t.symbolize(fn.cfunc) or "?"
                out.append("  %s function, ffid %d, C code 0x%x <%s>, %d upvalues"
                           % ("C" if fn.kind == "c" else "fast", fn.ffid, fn.cfunc, sym,
                              fn.nupvalues))
        elif v.kind == "thread":
            th = Thread(vm, v.addr)
            out.append("  status %s, stack %d slots at 0x%x, %d slots in use"
                       % (C.THREAD_STATUS.get(th.status, th.status), th.stacksize, th.stack,
                          (th.top - th.stack) // 8))
        elif v.kind == "proto":
            pt = Proto(vm, v.addr)
            out.append("  %d bytecodes, %d params, lines %d-%d, chunk %s"
                       % (pt.sizebc, pt.numparams, pt.firstline, pt.firstline + pt.numline,
                          quote(pt.chunk(vm).encode())))
    except (FaultError, CorruptError) as e:
        out.append("  <unreadable: %s>" % e)
    return out


def _is_int(tok):
    try:
        int(tok, 0)
        return True
    except ValueError:
        return False
