"""The Lua heap as a V8 heap snapshot (Chrome DevTools' `.heapsnapshot`
JSON, which memlab and DevTools' Memory panel read).

The document: `snapshot` (the `meta` that names the fields of the flat
arrays, node_count, edge_count), `nodes` (7 numbers per node: type, name,
id, self_size, edge_count, trace_node_id, detachedness), `edges` (3
numbers per edge: type, name_or_index, to_node: the index of the target
node's first number in `nodes`), each node's edges following the previous
node's in node order, and `strings` (every name, referred to by index).

The graph is the collector's (heapgraph.Heap, as lgcstat --retained's
dominator tree sees it):
  node 0     a synthetic root ("(Lua roots)", id 1, as V8's root is id 1)
             whose edges are the collector's roots (heapgraph.Heap.roots:
             _G, the registry, the main thread, g->gcroot, the finalizer
             list) and the thread the VM runs (g->cur_L, when it is another)
  node k+1   the object k of the heap's index (address order): every GC
             object lgcstat counts, self_size its size as lgcstat counts it
             (the nodes' sizes add up to lgcstat's object bytes); its name
             is its type (table, function, thread, proto, trace, upvalue,
             userdata, cdata), a table's or userdata's its metatable's
             __name where it has one, a Lua function's its chunk:line, a
             string's its text (as V8 names string nodes; DevTools groups
             them under "(string)")
  edges      each reference as lgcref names it: a table's array slots
             (element, the index), hash slots (property, the key; element
             for a non-negative integer key), keys ("(key)"), metatable,
             environment, prototype; a Lua function's upvalues go to its
             upvalue objects (context, the upvalue's name), which hold the
             value ("value"); a thread's stack slots (context, the local's
             name; else "slot N"); a prototype's constants and chunk name;
             a trace's IR constants and links.  A weak table's weak side is
             a weak edge (no retainer in DevTools' or memlab's dominators).
Node types are V8's: table and thread "object", function "closure", string
"string", proto and trace "code", userdata and cdata "native", upvalue
"hidden".

Two writers make the same document.  CSnapshotWriter, wherever graphc's C
code loads: the references and names in flat arrays in C (graphc.SnapGraph:
per reference a target, a name and a type; per object a name), the names
the C code cannot make asked of Python once each, and the nodes, edges and
strings' texts written by the C code straight to the file, each string's
text read again as it is written (none is kept).  SnapshotWriter, in
Python (LJGDB_HEAPGRAPH=python, no compiler): the objects and their sizes
are the heap's arrays, with a name and an edge count per object; the edges
go to a temporary file as text 64K at a time (the nodes, which come first
in the document, need every object's edge count); each name is kept once;
the document is written a slice at a time.
"""
from typing import Any, Callable, Dict, IO, List, Optional, TYPE_CHECKING
import bisect
import json
import struct
import tempfile
from array import array

from . import graphc
from .. import consts as C
from ..cbuild import zeros
from ..errors import CorruptError, FaultError
from ..vm.objects import Proto, Str, decode_tv
from ..vm.protoinfo import cached_proto, upvalue_names

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .heapgraph import Heap

NODE_FIELDS = ["type", "name", "id", "self_size", "edge_count", "trace_node_id", "detachedness"]
NODE_TYPES = ["hidden", "array", "string", "object", "code", "closure", "regexp", "number",
              "native", "synthetic", "concatenated string", "sliced string", "symbol", "bigint",
              "object shape"]
EDGE_FIELDS = ["type", "name_or_index", "to_node"]
EDGE_TYPES = ["context", "element", "property", "internal", "hidden", "shortcut", "weak"]
LOCATION_FIELDS = ["object_index", "script_id", "line", "column"]

_NT = {name: i for i, name in enumerate(NODE_TYPES)}
_ET = {name: i for i, name in enumerate(EDGE_TYPES)}
NODE_TYPE_OF = {C.GCT_TAB: _NT["object"], C.GCT_THREAD: _NT["object"],
                C.GCT_FUNC: _NT["closure"], C.GCT_STR: _NT["string"],
                C.GCT_PROTO: _NT["code"], C.GCT_TRACE: _NT["code"],
                C.GCT_UDATA: _NT["native"], C.GCT_CDATA: _NT["native"],
                C.GCT_UPVAL: _NT["hidden"]}
ROOT_NAME = "(Lua roots)"
NF = len(NODE_FIELDS)
# Edges (3 numbers each) held before they go to the temporary file.
_SPILL = 3 << 16


def node_id(k: int) -> int:
    """The snapshot id of the heap's object k (odd, as V8 gives its heap
    objects; 1 is the root)."""
    return 2 * k + 3


def chunk_site(chunk: str) -> str:
    """A chunk name as LuaJIT's short_src shows it, uncut."""
    if chunk[:1] in ("@", "="):
        return chunk[1:]
    first = chunk.split("\n", 1)
    return '[string "%s%s"]' % (first[0], "..." if len(first) > 1 else "")


def root_edge_name(name) -> str:
    kind = name[0]
    if kind == "gcroot":
        return "g->gcroot[%d]" % name[1]
    if kind == "finalizer":
        return "finalizer list"
    return kind


class SnapshotWriter(object):
    """Builds the graph of a heapgraph.Heap and writes it as a V8 heap
    snapshot.  max_string: bytes of a string kept in its node's name (and
    of a key in an edge's name)."""

    def __init__(self, heap: 'Heap', max_string: int = 200,
                 progress: Optional[Callable[[int], Any]] = None) -> None:
        self.heap = heap
        self.vm = heap.vm
        self.max_string = max_string
        self.progress = progress
        self.strings = {"": 0}          # name -> index
        self.string_list = [""]
        self._mtnames = {}              # metatable -> __name or None
        self._sites = {}                # prototype -> "chunk:line"
        self._uvnames = {}              # prototype -> [upvalue names]
        self._tab = (0, None)           # (table, its header) last named
        self._Q = struct.Struct("<Q")

    def name(self, text: str) -> int:
        i = self.strings.get(text)
        if i is None:
            i = self.strings[text] = len(self.string_list)
            self.string_list.append(text)
        return i

    # --- names of nodes ------------------------------------------------------
    def _str_text(self, o: int, limit: int) -> str:
        """The text of the string at o, cut at limit bytes (then "...")."""
        heap, lay = self.heap, self.heap.lay
        n = int.from_bytes(heap.read(o + lay.str.len, 4), "little")
        if n > heap.stat.total:
            raise CorruptError("string at 0x%x claims length %d, more than g->gc.total"
                               % (o, n), o)
        data = heap.read(o + lay.str.size, min(n, limit)) if n else b""
        text = data.decode("utf-8", "replace")
        return text + "..." if n > limit else text

    def _mt_name(self, mt: int) -> Optional[str]:
        """The __name string of metatable mt, or None."""
        if mt in self._mtnames:
            return self._mtnames[mt]
        heap, lay = self.heap, self.heap.lay
        found = None
        try:
            _, _, hmask, _, node = heap._tab_header(mt)
            if node and hmask < (1 << 20):
                ns = lay.node.size
                data = heap.read(node, (hmask + 1) * ns)
                for j in range(hmask + 1):
                    kraw = self._Q.unpack_from(data, j * ns + lay.node.key)[0]
                    vraw = self._Q.unpack_from(data, j * ns + lay.node.val)[0]
                    k, v = decode_tv(self.vm, kraw), decode_tv(self.vm, vraw)
                    if k.kind == "str" and v.kind == "str" and \
                            Str(self.vm, k.addr, 8).data == b"__name":
                        found = self._str_text(v.addr, self.max_string)
                        break
        except (FaultError, CorruptError):
            found = None
        self._mtnames[mt] = found
        return found

    def _site(self, pt: int) -> str:
        site = self._sites.get(pt)
        if site is None:
            try:
                p = Proto(self.vm, pt)
                site = "%s:%d" % (chunk_site(p.chunk(self.vm)), p.firstline)
            except (FaultError, CorruptError):
                site = "function"
            self._sites[pt] = site
        return site

    def node_name(self, o: int, gct: int) -> str:
        heap, lay = self.heap, self.heap.lay
        try:
            if gct == C.GCT_STR:
                return self._str_text(o, self.max_string)
            if gct == C.GCT_TAB:
                hdr = heap._tab_header(o)
                self._tab = (o, hdr)        # for _table_edges, next
                mt = hdr[0]
                return (self._mt_name(mt) if mt else None) or "table"
            if gct == C.GCT_UDATA:
                mt = heap.ref(o + lay.ud.metatable)
                return (self._mt_name(mt) if mt else None) or "userdata"
            if gct == C.GCT_FUNC:
                hdr = heap.read(o, lay.fnC.size)
                ffid = hdr[lay.fnC.ffid]
                if ffid == C.FF_LUA:
                    pc = int.from_bytes(hdr[lay.fnL.pc:lay.fnL.pc + lay.mref_size], "little")
                    return self._site(pc - lay.pt.size)
                return "C function" if ffid == 1 else "builtin#%d" % ffid
        except (FaultError, CorruptError):
            pass
        return C.GCT_TEXT.get(gct, "object")

    # --- names of edges ------------------------------------------------------
    def _key_edge(self, kraw: int):
        """(edge type, name_or_index) of a hash slot by its key."""
        k = decode_tv(self.vm, kraw)
        try:
            if k.kind == "str":
                return _ET["property"], self.name(self._str_text(k.addr, self.max_string))
            if k.kind in ("number", "int"):
                n = k.num
                if n == int(n) and 0 <= n < (1 << 32):
                    return _ET["element"], int(n)
                return _ET["property"], self.name("[%r]" % n)
            if k.kind in ("true", "false"):
                return _ET["property"], self.name("[%s]" % k.kind)
            if k.is_gc:
                return _ET["property"], self.name("[%s 0x%x]" % (k.type_name, k.addr))
        except (FaultError, CorruptError, OverflowError, ValueError):
            pass
        return _ET["property"], self.name("[%s]" % k.type_name)

    def _uv_names(self, pt: int) -> List[str]:
        names = self._uvnames.get(pt)
        if names is None:
            try:
                names = upvalue_names(self.vm, cached_proto(self.vm, pt))
            except (FaultError, CorruptError):
                names = []
            self._uvnames[pt] = names
        return names

    def _slot_names(self, L: int) -> Dict[int, str]:
        """{stack slot index: local name} of thread L's Lua frames."""
        from ..stack.frames import FrameWalker, frame_locals
        from ..vm.objects import Thread
        out = {}
        try:
            th = Thread(self.vm, L)
            walker = FrameWalker(self.vm, th)
            frames = walker.walk()[0]
        except (FaultError, CorruptError):
            return out
        top = th.top
        for fr in frames:                   # innermost first
            if fr.kind == "lua":
                try:
                    for nm, _, a in frame_locals(walker, fr, top, with_addr=True):
                        if a is not None and a >= th.stack:
                            out.setdefault((a - th.stack) // 8, nm)
                except (FaultError, CorruptError):
                    pass
            top = fr.slot - 8 * self.heap.lay.fr2
        return out

    def edges_of(self, o: int, gct: int, add: Callable[[int, int, int], None]) -> None:
        """add(edge type, name_or_index, target address) for each reference
        of the object at o."""
        heap, lay = self.heap, self.heap.lay
        name = self.name
        if gct == C.GCT_FUNC:
            try:
                hdr = heap.read(o, lay.fnC.size)
            except FaultError:
                return
            env = int.from_bytes(hdr[lay.fnC.env:lay.fnC.env + heap.rs], "little")
            if env:
                add(_ET["internal"], name("environment"), env)
            nup = hdr[lay.fnC.nupvalues]
            if hdr[lay.fnC.ffid] == C.FF_LUA:
                pc = int.from_bytes(hdr[lay.fnL.pc:lay.fnL.pc + lay.mref_size], "little")
                pt = pc - lay.pt.size
                add(_ET["internal"], name("prototype"), pt)
                if nup:
                    names = self._uv_names(pt)
                    try:
                        data = heap.read(o + lay.fnL.uvptr, nup * heap.rs)
                    except FaultError:
                        return
                    for i in range(nup):
                        uv = int.from_bytes(data[i * heap.rs:(i + 1) * heap.rs], "little")
                        if uv:
                            add(_ET["context"], name(names[i] if i < len(names) else
                                                     "#%d" % (i + 1)), uv)
                return
            for r in heap.refs(o, gct):
                if r.how[0] == "cuv":
                    add(_ET["context"], name("#%d" % (r.how[1] + 1)), r.target)
            return
        if gct == C.GCT_TAB:
            self._table_edges(o, add)
            return
        slots = None
        for r in heap.refs(o, gct):
            how = r.how[0]
            if how == "slot":
                if slots is None:
                    slots = self._slot_names(o)
                nm = slots.get(r.how[1])
                if nm is not None:
                    add(_ET["context"], name(nm), r.target)
                else:
                    add(_ET["internal"], name("slot %d" % r.how[1]), r.target)
            elif how == "frame":
                add(_ET["internal"], name("function of frame at slot %d" % r.how[1]), r.target)
            elif how == "kgc":
                add(_ET["internal"], name("constant #%d" % r.how[1]), r.target)
            elif how == "irk":
                add(_ET["internal"], name("IR constant %d" % r.how[1]), r.target)
            else:
                add(_ET["internal"], name({"mt": "metatable", "env": "environment",
                                           "uvval": "value"}.get(how, how)), r.target)

    def _table_edges(self, o, add, with_mt=True):
        heap, lay = self.heap, self.heap.lay
        name = self.name
        try:
            last = self._tab
            mt, asize, hmask, arr, node = last[1] if last[0] == o else heap._tab_header(o)
        except FaultError:
            return
        wk = wv = False
        if mt:
            if with_mt:
                add(_ET["internal"], name("metatable"), mt)
            wk, wv = heap.weak_mode(mt)
        gc_of = heap.gc_of
        weak = _ET["weak"]
        try:
            if asize and arr and asize < (1 << 28):
                for first in range(0, asize, 1 << 16):
                    cnt = min(1 << 16, asize - first)
                    raws = struct.unpack("<%dQ" % cnt, heap.read(arr + 8 * first, 8 * cnt))
                    for i, raw in enumerate(raws, first):
                        v = gc_of(raw)
                        if v:
                            if wv:
                                add(weak, name("[%d]" % i), v)
                            else:
                                add(_ET["element"], i, v)
            if node and hmask < (1 << 27):
                ns = lay.node.size
                data = heap.read(node, (hmask + 1) * ns)
                unpack = self._Q.unpack_from
                ko, vo = lay.node.key, lay.node.val
                for j in range(hmask + 1):
                    vraw = unpack(data, j * ns + vo)[0]
                    if vraw >> heap.nil_shift == heap.nil_top:
                        continue            # an empty slot (a dead key)
                    kraw = unpack(data, j * ns + ko)[0]
                    k, v = gc_of(kraw), gc_of(vraw)
                    if v:
                        et, ni = self._key_edge(kraw)
                        if wv:
                            add(weak, ni if et == _ET["property"] else name("[%d]" % ni), v)
                        else:
                            add(et, ni, v)
                    if k:
                        add(weak if wk else _ET["internal"], name("(key)"), k)
        except FaultError:
            pass

    # --- the document ----------------------------------------------------------
    def build(self) -> None:
        """Every node's name and edge count (arrays), the edges (the
        temporary file)."""
        heap = self.heap
        addrs, gcts = heap.index()
        n = len(addrs)
        self.n = n
        self.names = array("I", [0]) * (n + 1)
        self.counts = array("I", [0]) * (n + 1)
        # The edges as text, in a temporary file a slice at a time.
        self.edge_file = tempfile.TemporaryFile("w+", encoding="ascii")
        self.nedges = 0
        edges = self._edge_buf = array("I")
        bisect_left = bisect.bisect_left

        def add(et, ni, target):
            j = bisect_left(addrs, target)
            if j < n and addrs[j] == target:
                edges.append(et)
                edges.append(ni)
                edges.append((j + 1) * NF)
                cnt[0] += 1

        # The root.
        self.names[0] = self.name(ROOT_NAME)
        root = self._root_edges()
        edges.extend(root)
        self.counts[0] = len(root) // 3
        cnt = [0]
        every = 100000
        for k in range(n):
            cnt[0] = 0
            o, gct = addrs[k], gcts[k]
            self.names[k + 1] = self.name(self.node_name(o, gct))
            if gct != C.GCT_STR and gct != C.GCT_CDATA:
                self.edges_of(o, gct, add)
            self.counts[k + 1] = cnt[0]
            if len(edges) >= _SPILL:
                self._spill()
            if self.progress is not None and k and k % every == 0:
                self.progress(k)
            if not k & 0xFFFF:
                heap.check_budget(k)
        self._spill()

    def _root_edges(self) -> array:
        """The root's edges (type, name, to_node: three numbers each): the
        collector's roots, then the running thread where it is none of them."""
        heap = self.heap
        out = array("I")
        seen = set()
        pairs = [(root_edge_name(rname), v) for rname, v in heap.roots()]
        try:
            cur = self.vm.cur_L
        except (FaultError, CorruptError):
            cur = None
        for text, v in pairs + ([("running thread", cur)] if cur else []):
            j = heap.position(v)
            if j >= 0 and not (text == "running thread" and v in seen):
                out.extend((_ET["property"], self.name(text), (j + 1) * NF))
                seen.add(v)
        return out

    def _spill(self):
        """Append the edges held to the temporary file, as the document's
        text."""
        edges = self._edge_buf
        if edges:
            self.edge_file.write(("," if self.nedges else "") + ",".join(map(str, edges)))
            self.nedges += len(edges) // 3
            del edges[:]

    def write(self, f: IO[str]) -> Dict[str, Any]:
        """Write the document to the text file f; returns {"nodes",
        "edges", "strings", "self_size"}."""
        heap = self.heap
        addrs, gcts = heap.index()
        sizes = heap.sizes
        n = self.n
        nedges = self.nedges
        self._header(f, nedges)
        f.write('"nodes":[%d,%d,1,0,%d,0,0' % (_NT["synthetic"], self.names[0], self.counts[0]))
        names, counts = self.names, self.counts
        step = 20000
        for first in range(0, n, step):
            part = []
            for k in range(first, min(n, first + step)):
                part.append(",\n%d,%d,%d,%d,%d,0,0" % (
                    NODE_TYPE_OF.get(gcts[k], 0), names[k + 1], node_id(k), sizes[k],
                    counts[k + 1]))
            f.write("".join(part))
        f.write('],\n"edges":[')
        ef = self.edge_file
        ef.seek(0)
        while True:
            text = ef.read(1 << 20)
            if not text:
                break
            f.write(text)
        ef.close()
        self._strings(f)
        f.write("]}\n")
        return {"nodes": n + 1, "edges": nedges, "strings": len(self.string_list),
                "self_size": sum(sizes)}

    def _header(self, f: IO[str], nedges: int) -> None:
        meta = {"node_fields": NODE_FIELDS,
                "node_types": [NODE_TYPES, "string", "number", "number", "number", "number",
                               "number"],
                "edge_fields": EDGE_FIELDS,
                "edge_types": [EDGE_TYPES, "string_or_number", "node"],
                "trace_function_info_fields": [], "trace_node_fields": [],
                "sample_fields": [], "location_fields": LOCATION_FIELDS}
        f.write('{"snapshot":%s,\n' % json.dumps(
            {"meta": meta, "node_count": self.n + 1, "edge_count": nedges,
             "trace_function_count": 0}, separators=(",", ":")))

    def _strings(self, f: IO[str]) -> None:
        """The end of the edges, the empty arrays, and the names made here."""
        f.write('],\n"trace_function_infos":[],"trace_tree":[],"samples":[],"locations":[],\n'
                '"strings":[')
        step = 20000
        for first in range(0, len(self.string_list), step):
            f.write(("," if first else "") + ",\n".join(
                json.dumps(s) for s in self.string_list[first:first + step]))

    def close(self) -> None:
        pass


class CSnapshotWriter(SnapshotWriter):
    """The same document with its graph in C (graphc.SnapGraph): the
    references of tables, functions and upvalues decoded and named there,
    the other objects' (threads, prototypes, traces, userdata, weak
    tables' parts) named here by edges_of; each name the C code cannot
    make (a metatable's __name, a prototype's chunk:line and upvalue
    names, a builtin's, an odd key's) asked of Python once; the nodes,
    edges and strings' texts written by the C code.  A string node's name
    is its own entry among the strings, after the names made here (so a
    text may be there twice)."""

    def build(self) -> None:
        heap = self.heap
        addrs, gcts = heap.index()
        n = self.n = len(addrs)
        self.names = zeros("I", n)
        bytype = [self.name(C.GCT_TEXT.get(g, "object")) for g in range(16)]
        self.names_root = self.name(ROOT_NAME)
        fixed = [self.name(t) for t in ("metatable", "environment", "prototype", "(key)", "value")]
        g = self.g = graphc.snap_graph(heap, self.names, bytype, fixed)
        self.root = self._root_edges()
        g.read_memory()
        # (Names are made in an order of their own, never in the order the
        # C code met them: that order depends on which memory was at hand
        # in place, and the document must not.)
        for k in sorted(g.weak_tables()):
            self._python_edges(k, 1, lambda o, add: self._table_edges(o, add, with_mt=False))
        for gct in (C.GCT_THREAD, C.GCT_PROTO, C.GCT_TRACE, C.GCT_UDATA):
            for k in graphc.positions(gcts, gct):
                if gct == C.GCT_UDATA:
                    self.names[k] = self.name(self.node_name(addrs[k], gct))
                self._python_edges(k, 0, lambda o, add, gct=gct: self.edges_of(o, gct, add))
        heap.check_budget(n)
        self._answer(g.pending())
        self.nedges = len(self.root) // 3 + g.sort()
        heap.check_budget(n)

    def _python_edges(self, k, part, edges):
        types, names, targets = bytearray(), array("I"), array("Q")

        def add(et, ni, target):
            types.append(et)
            names.append(ni)
            targets.append(target)
        edges(self.heap.addrs[k], add)
        if targets:
            self.g.add(k, part, bytes(types), names, targets)

    def _answer(self, asked) -> None:
        """Each name the C code asked for."""
        g = self.g
        keep = 0xFF
        types, names = bytearray(len(asked)), zeros("I", len(asked))
        for d in sorted(range(len(asked)), key=asked.__getitem__):
            cls, key, sub = asked[d]
            types[d] = keep
            if cls == g.METATABLE:
                text = self._mt_name(key)
                names[d] = self.name(text) if text else 0
            elif cls == g.SITE:
                names[d] = self.name(self._site(key))
            elif cls == g.BUILTIN:
                names[d] = self.name("C function" if key == C.FF_C else "builtin#%d" % key)
            elif cls == g.UPVALUE:
                uv = self._uv_names(key)
                names[d] = self.name(uv[sub] if sub < len(uv) else "#%d" % (sub + 1))
            elif cls == g.C_UPVALUE:
                names[d] = self.name("#%d" % key)
            else:
                types[d], names[d] = self._key_edge(key)
        g.resolve(bytes(types), names)

    def write(self, f: IO[str]) -> Dict[str, Any]:
        heap, g = self.heap, self.g
        n, base = self.n, len(self.string_list)
        self._header(f, self.nedges)
        f.write('"nodes":[%d,%d,1,0,%d,0,0' % (
            _NT["synthetic"], self.names_root, len(self.root) // 3))
        g.write_nodes(f, bytes(NODE_TYPE_OF.get(t, 0) for t in range(16)), base)
        f.write('],\n"edges":[' + ",".join(map(str, self.root)))
        g.write_edges(f, len(self.root) > 0, base)
        self._strings(f)
        g.write_strings(f, self.max_string)
        f.write("]}\n")
        return {"nodes": n + 1, "edges": self.nedges, "strings": base + heap.gcts.count(C.GCT_STR),
                "self_size": sum(heap.sizes)}

    def close(self) -> None:
        if getattr(self, "g", None) is not None:
            self.g.close()
            self.g = None


def save(heap: 'Heap', path: str, max_string: int = 200,
         progress: Optional[Callable[[int], Any]] = None) -> Dict[str, Any]:
    """Write heap's V8 heap snapshot to path; returns what write() says,
    with the file's name and the objects' bytes as lgcstat counts them.
    The graph is built in C (CSnapshotWriter) where graphc loads and the
    heap fits it, else in Python (SnapshotWriter)."""
    from .heapsnap import SnapshotError
    heap.index()
    kind = CSnapshotWriter if graphc.snap_ready(heap) else SnapshotWriter
    w = kind(heap, max_string, progress)
    try:
        w.build()
        try:
            with open(path, "w", encoding="utf-8") as f:
                out = w.write(f)
        except OSError as e:
            raise SnapshotError("cannot write %s: %s" % (path, e.strerror or e))
    finally:
        w.close()
    out["file"] = path
    out["object_bytes"] = heap.stat.object_bytes
    out["gc_total"] = heap.stat.total
    return out
