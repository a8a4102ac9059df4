"""lgcstat --retained: what each object keeps alive (gdb_ext.heap.heapdom);
lgcstat --save and --diff: what grew between two moments
(gdb_ext.heap.heapsnap)."""
from ..gdb_ext import consts as C
from ..gdb_ext.heap import heapsnap, heapsnapshot
from ..gdb_ext.heap.gcstat import TYPE_ORDER
from ..gdb_ext.heap.heapdom import Dominators
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
    both = doc["reached_bytes"] + doc["unreached_bytes"]
    out.append("reached: %d bytes; not reached from the roots: %d objects, %d bytes (garbage "
               "the next cycle frees, or held only by weak tables); together %d bytes, %s"
               % (doc["reached_bytes"], doc["unreached"], doc["unreached_bytes"], both,
                  "the objects' bytes (exact)" if both == doc["object_bytes"] else
                  "but the objects have %d bytes: the tree lost some (a bug: please report "
                  "it)" % doc["object_bytes"]))
    return out


# --- lgcstat --save / --diff ---------------------------------------------

HOLDERS = 200


def holders(vm, heap, dom, count, maxs):
    """The `count` objects that retain the most, as {path: {"retained",
    "objects", "type"}} (those with a path)."""
    out = {}
    for k in dom.top(count):
        path = _where(vm, heap, dom, k, maxs)
        if path is not None and path not in out:
            out[path] = {"retained": dom.retained[k], "objects": dom.count[k],
                         "type": C.GCT_TEXT[dom.gct(k)]}
    return out


def save_data(vm, heap, path, progress=None, max_string=200):
    dom = Dominators(heap, progress)
    held = holders(vm, heap, dom, HOLDERS, max_string)
    head = heapsnap.save(heap, path, [dict(v, path=p) for p, v in held.items()])
    return {"kind": "save", "file": path, "G": hexa(vm.G), "objects": head["objects"],
            "object_bytes": heap.stat.object_bytes, "gc_total": head["gc_total"],
            "process": head["identity"]["process"]}


def heapsnapshot_data(vm, heap, path, progress=None, max_string=200):
    """lgcstat --save FILE --format heapsnapshot: the heap as a V8 heap
    snapshot (gdb_ext.heap.heapsnapshot)."""
    out = heapsnapshot.save(heap, path, max_string, progress)
    return {"kind": "heapsnapshot", "file": path, "G": hexa(vm.G), "format": "heapsnapshot",
            "nodes": out["nodes"], "edges": out["edges"], "strings": out["strings"],
            "self_size": out["self_size"], "object_bytes": out["object_bytes"],
            "gc_total": out["gc_total"]}


def heapsnapshot_report(doc):
    return ["Wrote a V8 heap snapshot of (global_State *)%s to %s: %d nodes (the root and %d "
            "objects, %d bytes%s), %d edges, %d strings"
            % (doc["G"], doc["file"], doc["nodes"], doc["nodes"] - 1, doc["self_size"],
               "" if doc["self_size"] == doc["object_bytes"] else
               " but lgcstat counts %d" % doc["object_bytes"], doc["edges"], doc["strings"])]


def save_report(doc):
    return ["Saved %d objects (%d bytes; g->gc.total %d) of (global_State *)%s%s to %s"
            % (doc["objects"], doc["object_bytes"], doc["gc_total"], doc["G"],
               " in process %d" % doc["process"] if doc["process"] else "", doc["file"])]


def _who(ident):
    return "process %s, (global_State *)0x%x" % (ident["process"] or "?", ident["G"])


def diff_data(vm, heap, path, top, listing, progress=None, max_string=200):
    snap = heapsnap.load(path)
    heap.index()
    st = heap.stat
    then_id, now_id = snap.head["identity"], heapsnap.identity(vm)
    doc = {"kind": "diff", "file": path, "G": hexa(vm.G), "then": _who(then_id),
           "now": _who(now_id), "same_process": heapsnap.same_heap(then_id, now_id),
           "types": [], "other": []}
    for g in TYPE_ORDER:
        name = C.GCT_TEXT[g]
        c0, b0 = snap.head["types"].get(name, [0, 0])
        ts = st.types[g]
        doc["types"].append({"type": name, "count_then": c0, "count_now": ts.count,
                             "bytes_then": b0, "bytes_now": ts.bytes})
    then_other = dict(snap.head["other"])
    now_other = {name: size for name, size, _ in st.other}
    for name in list(then_other) + [n for n in now_other if n not in then_other]:
        doc["other"].append({"name": name, "bytes_then": then_other.get(name, 0),
                             "bytes_now": now_other.get(name, 0)})
    doc["gc_total_then"], doc["gc_total_now"] = snap.head["gc_total"], st.total
    # The objects matched before the graph is built: the snapshot's arrays
    # are let go of first, so the two are never held together.
    d = heapsnap.Diff(heap, snap) if doc["same_process"] else None
    snap.forget()
    dom = Dominators(heap, progress)
    doc["paths"] = _path_changes(snap.head.get("holders") or [],
                                 holders(vm, heap, dom, HOLDERS, max_string), top)
    if d is None:
        return doc
    doc["new"] = {C.GCT_TEXT[g]: v for g, v in d.new.items() if v[0]}
    doc["freed"] = {C.GCT_TEXT[g]: v for g, v in d.freed.items() if v[0]}
    doc["resized"] = {C.GCT_TEXT[g]: v for g, v in d.resized.items() if v[0]}
    owners = d.owners(dom)
    rows = []
    for k, (objs, nbytes, grew) in owners.items():
        row = {"objects": objs, "bytes": nbytes, "grew": grew}
        if k >= 0:
            row.update(_entry(vm, heap, dom, k, max_string))
            row["objects"], row["bytes"] = objs, nbytes
        else:
            row["path"] = None
            row["object"] = ("(no one root: reached from more than one)" if k == -1 else
                             "(not reached from the roots: garbage, or held only weakly)")
        rows.append(row)
    rows.sort(key=lambda r: (-(r["bytes"] + r["grew"]), r["object"]))
    doc["owners"] = rows[:top]
    doc["owners_more"] = len(rows) - len(doc["owners"])
    if listing:
        doc["list"] = [{"address": hexa(heap.addrs[i]), "type": C.GCT_TEXT[heap.gcts[i]],
                        "bytes": heap.sizes[i],
                        "object": object_text(vm, heap, heap.addrs[i], heap.gcts[i])}
                       for i in d.new_index]
    return doc


def _path_changes(then, now, top):
    """The paths among the most retaining objects then or now, by the
    change of their retained bytes (largest growth first); a side where a
    path was not among them has null."""
    was = {h["path"]: h for h in then}
    rows = []
    for path in list(was) + [p for p in now if p not in was]:
        a, b = was.get(path), now.get(path)
        rows.append({"path": path, "retained_then": a["retained"] if a else None,
                     "retained_now": b["retained"] if b else None,
                     "objects_then": a["objects"] if a else None,
                     "objects_now": b["objects"] if b else None})
    both = [r for r in rows if r["retained_then"] is not None and r["retained_now"] is not None]
    both.sort(key=lambda r: (-(r["retained_now"] - r["retained_then"]), r["path"]))
    return [r for r in both if r["retained_now"] != r["retained_then"]][:top]


def _signed(v):
    return "%+d" % v if v else "0"


def diff_report(doc):
    out = ["Heap now (%s) against %s (%s)" % (doc["now"], doc["file"], doc["then"])]
    out.append("%-10s %10s %10s %8s %14s %14s %10s" % ("type", "then", "now", "change",
                                                       "bytes then", "bytes now", "change"))
    for t in doc["types"]:
        out.append("%-10s %10d %10d %8s %14d %14d %10s" % (
            t["type"], t["count_then"], t["count_now"], _signed(t["count_now"] - t["count_then"]),
            t["bytes_then"], t["bytes_now"], _signed(t["bytes_now"] - t["bytes_then"])))
    moved = [o for o in doc["other"] if o["bytes_now"] != o["bytes_then"]]
    obj_change = sum(t["bytes_now"] - t["bytes_then"] for t in doc["types"])
    other_change = sum(o["bytes_now"] - o["bytes_then"] for o in doc["other"])
    out.append("memory that is no object: %s%s" % (
        _signed(other_change), " (%s)" % ", ".join("%s %s" % (o["name"], _signed(
            o["bytes_now"] - o["bytes_then"])) for o in moved) if moved else ""))
    total = doc["gc_total_now"] - doc["gc_total_then"]
    out.append("g->gc.total: %d then, %d now: %s bytes%s" % (
        doc["gc_total_then"], doc["gc_total_now"], _signed(total),
        " (objects %s, the rest %s)" % (_signed(obj_change), _signed(other_change))))
    if doc["paths"]:
        out.append("Retained bytes by path (of the %d objects that retain the most, then and "
                   "now), most growth first:" % HOLDERS)
        out.append("%12s %12s %10s  %s" % ("then", "now", "change", "path"))
        for r in doc["paths"]:
            out.append("%12d %12d %10s  %s" % (r["retained_then"], r["retained_now"],
                                               _signed(r["retained_now"] - r["retained_then"]),
                                               r["path"]))
    if not doc["same_process"]:
        out.append("The snapshot is of another process or VM: objects cannot be matched by "
                   "address, so only the figures per type and the retained bytes by path "
                   "compare")
        return out

    def per(d):
        return ", ".join("%d %s (%d bytes)" % (v[0], k, v[1]) for k, v in d.items()) or "none"
    out.append("New objects: %s" % per(doc["new"]))
    out.append("Freed: %s" % per(doc["freed"]))
    out.append("Resized (existed before, other size now): %s" % per(doc["resized"]))
    if doc["freed"]:
        out.append("Objects were freed in between: one made at a freed object's address, of "
                   "its type, counts as that object (kept), not as new")
    if doc["owners"]:
        out.append("Where they hang: each new object charged to the nearest object that "
                   "dominates it and existed before; most bytes first:")
        out.append("%9s %12s %10s  %s" % ("new", "new bytes", "grew", "owner (path)"))
        for r in doc["owners"]:
            out.append("%9d %12d %10s  %s" % (r["objects"], r["bytes"], _signed(r["grew"]),
                                              r["path"] or r["object"]))
        if doc["owners_more"]:
            out.append("  ... %d more owners (--top N shows more)" % doc["owners_more"])
    if "list" in doc:
        out.append("The new objects:")
        out += ["  %8d  %s" % (e["bytes"], e["object"]) for e in doc["list"]]
    return out
