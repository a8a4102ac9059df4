"""lgcref and lgcpath: who holds a GC object (gdb_ext.heap.heapgraph)."""
from ..gdb_ext import consts as C
from ..gdb_ext.heap.budget import Budget
from ..gdb_ext.heap.heapgraph import Heap
from ..gdb_ext.vm.objects import decode_tv, looks_like_gc_object
from .base import LjCommand, UsageError, get_vm, operand, param, split_args
from .format import hexa
from .heaptext import object_text, path_expression, ref_data, root_text
from .host import current


def target_object(vm, expr):
    """(address, gct) of the GC object an argument names: a GC object
    pointer, a TValue (or a pointer to one) that holds one, an address
    whose header reads as a GC object's, or the address tostring() prints
    for a userdata (its payload's)."""
    v = operand(expr)
    if v.type_name == "TValue" and v.address is not None:
        addr, pointee = v.address, "TValue"
    else:
        addr, pointee = v.value, v.pointee
    if addr is None or v.floating:
        raise UsageError("'%s' is not a pointer or an address" % expr)
    if pointee == "TValue":
        tv = decode_tv(vm, vm.t.u64(addr, "TValue"))
        if not tv.is_gc:
            raise UsageError("the TValue at 0x%x holds %s, not a GC object" % (addr, tv.type_name))
        addr = tv.addr
    elif pointee not in C.POINTER_KINDS and pointee not in (None, "void", "char"):
        raise UsageError("'%s' is a pointer to %s; expected a GC object pointer, a TValue * "
                         "or an address" % (expr, pointee))
    kind = looks_like_gc_object(vm, addr)
    if kind is None and addr > vm.lay.ud.size:
        # tostring(userdata) prints its payload's address, which follows
        # the GCudata header (R lj_strfmt.c lj_strfmt_obj: uddata(ud)).
        ud = addr - vm.lay.ud.size
        if looks_like_gc_object(vm, ud) == C.GCT_NAMES[C.GCT_UDATA]:
            return ud, C.GCT_UDATA
    if kind is None:
        raise UsageError("no GC object at 0x%x (its header does not read as one)" % addr)
    return addr, C.KIND_GCT[kind]


def graph_heap(vm, command):
    """A heapgraph.Heap for `command` (its name as budget.GRAPH_BYTES has
    it), its memory bounded by the heap-memory setting."""
    heap = Heap(vm, max(param("heap-cache"), 4) << 20)
    heap.budget = Budget(command, param("heap-memory"),
                         lambda mb: current().setting_hint("heap-memory", mb))
    return heap


def object_and_heap(arg, command):
    """(vm, address, gct, heapgraph.Heap) for the argument of lgcref and
    lgcpath."""
    flags, opts, state, rest = split_args(arg)
    if not rest:
        raise UsageError("missing object")
    vm = get_vm(state)
    addr, gct = target_object(vm, " ".join(rest))
    return vm, addr, gct, graph_heap(vm, command)


class LGcRef(LjCommand):
    """Every reference to a GC object, as the collector follows them: table
slots (with their key), array indexes, table keys, metatables, environments,
a function's upvalues (by name), a thread's stack slots (with the frame and
the local's name), a prototype's constants; and the roots that are the
object itself (_G, the registry, the main thread, g->gcroot, the finalizer
list).  A weak table's references are listed, marked as not keeping the
object alive.  The whole heap is read once.

Usage: lgcref <GC object pointer | TValue * | address> [L=<lua_State *>]
Example:
  (gdb) lgcref (GCtab *)0x7ffff7cc5a00
  references to table (GCtab *)0x7ffff7cc5a00: 2
    [3] of table (GCtab *)0x7ffff7cc59c0
    upvalue big of function: (GCfuncL *)0x7ffff7cc6b10 leak.lua:20"""

    NAME = "lgcref"
    SUMMARY = "every reference to a GC object: table slots, upvalues, stack slots ..."
    USAGE = "lgcref <GC object pointer | TValue * | address> [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.data(arg)
        out = ["references to %s: %d" % (doc["object"], len(doc["referrers"]) + len(doc["roots"]))]
        out += ["  root: %s" % r for r in doc["roots"]]
        out += ["  %s" % r["text"] for r in doc["referrers"]]
        return out

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        vm, addr, gct, heap = object_and_heap(arg, "lgcref")
        refs, roots = heap.referrers(addr)
        maxs = param("max-string")
        return {"target": hexa(addr), "type": C.GCT_TEXT[gct],
                "object": object_text(vm, heap, addr, gct),
                "finalizer": heap.finalizer_state(addr) if gct == C.GCT_UDATA else None,
                "roots": [root_text(heap, r) for r in roots],
                "referrers": [ref_data(vm, heap, r, maxs) for r in refs]}


class LGcPath(LjCommand):
    """The shortest chain of references that keeps a GC object alive, from
the roots (_G, the registry, the main thread, g->gcroot, the finalizer
list, tried in that order), written as a Lua expression where one exists,
then step by step.  Weak references do not keep objects alive and are not
followed.  'no root reaches it' means the next full collection frees it.

Usage: lgcpath <GC object pointer | TValue * | address> [L=<lua_State *>]
Example:
  (gdb) lgcpath (GCtab *)0x7ffff7cc5a00
  _G.cache.sessions["u42"][3]
    _G                            table (GCtab *)0x7ffff7cb4f40
    .cache                        table (GCtab *)0x7ffff7cc2a80
    ..."""

    NAME = "lgcpath"
    SUMMARY = "the shortest path from the roots that keeps a GC object alive"
    USAGE = "lgcpath <GC object pointer | TValue * | address> [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.data(arg)
        if doc["expression"] is None:
            return ["%s: no root reaches it (the next full collection frees it)"
                    % doc["object"]]
        out = [doc["expression"]]
        for st in doc["steps"]:
            out.append("  %-40s %s" % (st["step"], st["object"]))
        return out

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        vm, addr, gct, heap = object_and_heap(arg, "lgcpath")
        found = heap.path_to(addr)
        doc = {"target": hexa(addr), "type": C.GCT_TEXT[gct],
               "object": object_text(vm, heap, addr, gct),
               "finalizer": heap.finalizer_state(addr) if gct == C.GCT_UDATA else None,
               "root": None, "expression": None,
               "steps": []}
        if found is None:
            return doc
        root, chain = found
        maxs = param("max-string")
        doc["root"] = root_text(heap, root)
        doc["expression"] = path_expression(vm, heap, root, chain, maxs)
        first = chain[0].holder if chain else addr
        doc["steps"].append({"step": root_text(heap, root), "how": "root",
                             "object": object_text(vm, heap, first)})
        for r in chain:
            d = ref_data(vm, heap, r, maxs)
            d["step"] = "local %s" % d["name"] if d.get("name") and d["how"] == "slot" else \
                d["text"].split(" of ", 1)[0]
            d["object"] = object_text(vm, heap, r.target)
            doc["steps"].append(d)
        return doc
