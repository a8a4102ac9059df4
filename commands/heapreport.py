"""lgcstat --retained: what each object keeps alive (gdb_ext.heapdom)."""
from ..gdb_ext import consts as C
from ..gdb_ext.heapdom import Dominators
from .format import hexa
from .heaptext import object_text, path_expression, root_text


def _where(vm, heap, dom, k, maxs):
    """The Lua expression of object k's first-found (shortest) path."""
    root, chain = dom.chain(k)
    if any(r is None for r in chain):
        return None
    return path_expression(vm, heap, root, chain, maxs)


def _entry(vm, heap, dom, k, maxs):
    addr = dom.address(k)
    gct = dom.gct(k)
    return {"address": hexa(addr), "type": C.GCT_TEXT[gct],
            "object": object_text(vm, heap, addr, gct),
            "retained": dom.retained[k], "objects": dom.count[k],
            "own": heap.sizes[dom.order[k]], "path": _where(vm, heap, dom, k, maxs)}


def retained_data(vm, heap, top, target=None, progress=None, max_string=200):
    """lgcstat --retained's document: the `top` objects that retain the
    most, or (target: (address, gct)) the one object and its dominators."""
    dom = Dominators(heap, progress)
    st = heap.stat
    unreached, unreached_bytes = dom.unreached()
    roots = []
    for k, name in sorted(dom.root_names.items()):
        roots.append({"root": root_text(heap, name), "kind": name[0],
                      "address": hexa(dom.address(k)),
                      "retained": dom.retained[k], "objects": dom.count[k]})
    shared, shared_bytes, reached_bytes = dom.shared_by_roots()
    doc = {"G": hexa(vm.G), "objects": dom.n, "object_bytes": st.object_bytes,
           "reached": dom.reached, "reached_bytes": reached_bytes,
           "shared_by_roots": shared, "shared_by_roots_bytes": shared_bytes,
           "unreached": unreached, "unreached_bytes": unreached_bytes,
           "references_into_shared": dom.references, "passes": dom.passes,
           "roots": roots}
    if target is None:
        doc["top"] = [_entry(vm, heap, dom, k, max_string) for k in dom.top(top)]
        return doc
    addr, gct = target
    k = dom.number(addr)
    doc["target"] = hexa(addr)
    if k < 0:
        doc["object"] = {"address": hexa(addr), "type": C.GCT_TEXT[gct],
                         "object": object_text(vm, heap, addr, gct), "retained": None,
                         "reached": False}
        return doc
    doc["object"] = _entry(vm, heap, dom, k, max_string)
    doc["object"]["reached"] = True
    doc["dominators"] = [_entry(vm, heap, dom, d, max_string)
                         for d in dom.dominator_chain(k)
                         if dom.gct(d) != C.GCT_UPVAL]
    return doc


def _line(e):
    return "%12d %9d %9d  %-9s %s" % (e["retained"], e["objects"], e["own"], e["type"],
                                      e["path"] or e["object"])


def retained_report(doc):
    out = ["Retained sizes (dominator tree) of (global_State *)%s: %d of %d objects reached "
           "from the roots" % (doc["G"], doc["reached"], doc["objects"])]
    head = "%12s %9s %9s  %-9s %s" % ("retained", "objects", "own", "type", "object (path)")
    if "top" in doc:
        out.append(head)
        out += [_line(e) for e in doc["top"]]
    else:
        o = doc["object"]
        if not o["reached"]:
            out.append("%s: no root reaches it through strong references: it retains nothing "
                       "(the next full collection frees it)" % o["object"])
        else:
            out.append(head)
            out.append(_line(o))
            out.append("  %s" % o["object"])
            if doc["dominators"]:
                out.append("Dominated by (every path from the roots passes through these), "
                           "nearest first:")
                out += [_line(e) for e in doc["dominators"]]
            else:
                out.append("Dominated by no object but the roots: more than one root "
                           "reaches it, or it is one")
    out.append("Roots:")
    gcroot = [r for r in doc["roots"] if r["kind"] == "gcroot"]
    for r in doc["roots"]:
        if r["kind"] != "gcroot":
            out.append("%12d %9d  %s" % (r["retained"], r["objects"], r["root"]))
    if gcroot:
        out.append("%12d %9d  g->gcroot: %d entries (metamethod names, the basic types' "
                   "metatables, io's files; --json lists each)"
                   % (sum(r["retained"] for r in gcroot), sum(r["objects"] for r in gcroot),
                      len(gcroot)))
    out.append("%12d %9d  no one root: reached from more than one" % (
        doc["shared_by_roots_bytes"], doc["shared_by_roots"]))
    out.append("reached: %d bytes; not reached from the roots: %d objects, %d bytes (garbage "
               "the next cycle frees, or held only by weak tables); together %d = the objects' "
               "bytes (lgcstat)" % (doc["reached_bytes"], doc["unreached"],
                                    doc["unreached_bytes"],
                                    doc["reached_bytes"] + doc["unreached_bytes"]))
    return out
