"""Text of the heap graph's references and paths (gdb_ext.heap.heapgraph), for
lgcref and lgcpath: where a reference is, and a path from the roots as a
Lua expression where one exists."""
from ..gdb_ext import consts as C
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.vm.protoinfo import cached_proto, upvalue_names
from .format import chunk_display, hexa, key_text, proto_site, value_text

FINALIZER_TEXT = {
    "pending": "waits for its __gc on the finalizer list",
    "finalized": "its __gc has run: resurrected, what references it keeps it alive"}

# The pointer type of each GC type (a function of either kind as GCfunc).
_PTR = dict(C.HEADER_STRUCT)
_PTR[C.GCT_FUNC] = "GCfunc"


def object_text(vm, heap, addr, gct=None):
    """'table (GCtab *)0x...' (functions with their site, strings with their
    text)."""
    if gct is None:
        try:
            gct = heap.type_at(addr)
        except FaultError:
            return "object 0x%x" % addr
    try:
        if gct == C.GCT_FUNC:
            return value_text(vm, heap.object_value(addr, gct))
        if gct == C.GCT_STR:
            return "string (GCstr *)0x%x %s" % (addr, value_text(
                vm, heap.object_value(addr, gct), 40))
        if gct == C.GCT_PROTO:
            return "prototype (GCproto *)0x%x %s" % (addr, proto_site(vm, addr))
        if gct == C.GCT_TRACE:
            return "trace %d (GCtrace *)0x%x" % (heap.traceno(addr), addr)
        if gct == C.GCT_UDATA:
            state = heap.finalizer_state(addr)
            if state is not None:
                return "userdata (GCudata *)0x%x (%s)" % (addr, FINALIZER_TEXT[state])
    except (FaultError, CorruptError):
        pass
    return "%s (%s *)0x%x" % (C.GCT_TEXT.get(gct, "object"), _PTR.get(gct, "GCobj"), addr)


def upvalue_name(vm, func, i):
    try:
        from ..gdb_ext.vm.objects import Func
        fn = Func(vm, func)
        names = upvalue_names(vm, cached_proto(vm, fn.proto)) if fn.is_lua else []
        return names[i] if i < len(names) else None
    except (FaultError, CorruptError):
        return None


def _upvalue(vm, r):
    """(name or None, the label text) of an upvalue reference: a Lua
    function's by its name, a C function's by its number."""
    name = upvalue_name(vm, r.holder, r.how[1]) if r.how[0] == "uv" else None
    return name, name or "#%d" % (r.how[1] + 1)


def ref_data(vm, heap, r, max_string=200):
    """A JSON-ready dict of Ref r: holder, holder_type, how (its kind),
    index/key/name where it has one, weak, and its text."""
    how = r.how[0]
    d = {"holder": hexa(r.holder), "holder_type": C.GCT_TEXT.get(r.gct), "how": how,
         "weak": r.weak}
    holder = object_text(vm, heap, r.holder, r.gct)
    try:
        if how == "arr":
            d["index"] = r.how[1]
            text = "[%d] of %s" % (r.how[1], holder)
        elif how == "val":
            k = heap.reference_key(r)
            d["key"] = value_text(vm, k, max_string)
            kt = key_text(vm, k, max_string)
            text = "%s%s of %s" % ("" if kt.startswith("[") else ".", kt, holder)
        elif how == "key":
            d["value"] = value_text(vm, heap.reference_value(r), max_string)
            text = "a key of %s (its value: %s)" % (holder, d["value"])
        elif how == "mt":
            text = "metatable of %s" % holder
        elif how == "env":
            text = "environment of %s" % holder
        elif how == "proto":
            text = "prototype of %s" % holder
        elif how in ("uv", "cuv"):
            d["index"] = r.how[1]
            d["name"], label = _upvalue(vm, r)
            text = "upvalue %s of %s" % (label, holder)
        elif how in ("slot", "frame"):
            d["index"] = r.how[1]
            fr, name = heap.slot_owner(r.holder, r.how[1])
            d["name"] = name
            where = ""
            if fr is not None:
                site = ("%s:%s" % (chunk_display(fr.proto.chunk(vm)), fr.line)
                        if fr.kind == "lua" and fr.proto is not None else None)
                d["frame"] = site
                where = " (%s%s)" % ("local %s, " % name if name else "",
                                     "frame at %s" % site if site else "a C frame")
            text = "%s %d of %s%s" % ("stack slot" if how == "slot" else "function of frame",
                                      r.how[1], holder, where)
        elif how == "kgc":
            d["index"] = r.how[1]
            text = "constant #%d of %s" % (r.how[1], holder)
        elif how == "irk":
            d["index"] = r.how[1]
            d["traceno"] = heap.traceno(r.holder)
            text = "IR constant %d (jit.util.tracek index) of %s" % (r.how[1], holder)
        elif how == "chunkname":
            text = "chunk name of %s" % holder
        elif how == "startpt":
            text = "start prototype of %s" % holder
        elif how == "uvval":
            text = "value of %s" % holder
        else:
            text = "%s of %s" % (how, holder)
    except (FaultError, CorruptError) as e:
        text = "%s of %s <unreadable: %s>" % (how, holder, e)
    if r.weak:
        text += " (weak: does not keep it alive)"
    d["dead"] = heap.is_dead(r.holder)
    if d["dead"]:
        text += " (the holder is garbage: the collector's sweep frees it)"
    d["text"] = text
    return d


def root_text(heap, name):
    kind = name[0]
    if kind == "_G":
        return "_G (the main thread's environment)"
    if kind == "registry":
        return "the registry"
    if kind == "main thread":
        return "the main thread"
    if kind == "finalizer":
        return "the finalizer list (g->gc.mmudata)"
    if kind == "gcroot":
        t = heap.basemt_type(name[1])
        return "g->gcroot[%d]%s" % (name[1], " (the metatable of every %s)" % t if t else "")
    return kind


def root_expr(name):
    if name[0] == "gcroot":
        return "g->gcroot[%d]" % name[1]
    return {"_G": "_G", "registry": "registry", "main thread": "(the main thread)",
            "finalizer": "(the finalizer list)"}[name[0]]


def path_expression(vm, heap, root, chain, max_string=200):
    """A Lua-like expression for the path: table steps as Lua writes them
    (.name, ["key"], [3]), the rest as words in parentheses."""
    expr = root_expr(root)
    for r in chain:
        how = r.how[0]
        if how == "arr":
            expr += "[%d]" % r.how[1]
        elif how == "val":
            kt = key_text(vm, heap.reference_key(r), max_string)
            expr += kt if kt.startswith("[") else "." + kt
        elif how == "mt":
            expr = "getmetatable(%s)" % expr
        elif how == "env":
            expr = "getfenv(%s)" % expr
        elif how in ("uv", "cuv"):
            expr = "(upvalue %s of %s)" % (_upvalue(vm, r)[1], expr)
        elif how in ("slot", "frame"):
            fr, name = heap.slot_owner(r.holder, r.how[1])
            expr = "(%s of thread %s)" % ("local %s" % name if name else
                                          "stack slot %d" % r.how[1], expr)
        elif how == "key":
            expr = "(a key of %s)" % expr
        elif how == "kgc":
            expr = "(constant #%d of %s)" % (r.how[1], expr)
        elif how == "proto":
            expr = "(prototype of %s)" % expr
        elif how == "irk":
            expr = "(IR constant %d of %s)" % (r.how[1], expr)
        else:
            expr = "(%s of %s)" % (how, expr)
    return expr
