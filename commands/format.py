"""Text forms of decoded values, shared by the commands."""

from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.vm.objects import Cdata, Func, Proto, Str, Tab, Udata, number_text as number
from ..gdb_ext.vm.ffitypes import cdata_text, ctype_object
from ..gdb_ext.vm.runtime import builtin_names
from ..gdb_ext import consts as C

_ESC = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\r"): "\\r",
        ord("\t"): "\\t", 0: "\\0", 7: "\\a", 8: "\\b", 11: "\\v", 12: "\\f"}


def hexa(addr):
    """An address as JSON documents give it: a hex string (a JSON number
    loses precision above 2^53)."""
    return None if addr is None else "0x%x" % addr


def error_text(e):
    """An exception's text, with the address it carries (FaultError,
    CorruptError) when the text does not name it; None for None."""
    if e is None:
        return None
    addr = getattr(e, "address", None)
    return "%s%s" % (e, "" if addr is None or "0x%x" % addr in str(e) else " (at 0x%x)" % addr)


def quote(data, truncated=False, length=None):
    """A Lua string literal for bytes; non-printable bytes as \\ddd."""
    out = ['"']
    for b in data:
        e = _ESC.get(b)
        if e is not None:
            out.append(e)
        elif 32 <= b < 127:
            out.append(chr(b))
        else:
            out.append("\\%d" % b)
    out.append('"')
    s = "".join(out)
    if truncated:
        s += "... (%d bytes)" % length
    return s


def chunk_display(name):
    """A chunk name as LuaJIT's short_src shows it, but never cut; control
    characters (a NUL, an escape sequence) as \\ddd, so that one line stays
    one harmless line."""
    if name.startswith("@") or name.startswith("="):
        return _controls(name[1:])
    line = name.split("\n", 1)
    text = line[0]
    if len(line) > 1:
        text += "..."
    return '[string "%s"]' % _controls(text)


_CONTROL = {c: "\\%d" % c for c in list(range(32)) + [127]}


def _controls(text):
    return text.translate(_CONTROL)


def proto_site(vm, proto_addr):
    """'chunk:firstline' of a proto (cached for the command's VM object)."""
    cache = vm.cache("sites")
    site = cache.get(proto_addr)
    if site is None:
        pt = Proto(vm, proto_addr)
        site = cache[proto_addr] = "%s:%d" % (chunk_display(pt.chunk(vm)), pt.firstline)
    return site


def func_text(vm, addr):
    fn = Func(vm, addr)
    if fn.is_lua:
        try:
            site = proto_site(vm, fn.proto)
        except (FaultError, CorruptError) as e:
            site = "<bad proto: %s>" % e
        return "function: (GCfuncL *)0x%x %s" % (addr, site)
    if fn.kind == "c":
        sym = vm.t.symbolize(fn.cfunc)
        return "function: (GCfuncC *)0x%x C:%s" % (addr, sym or "0x%x" % fn.cfunc)
    cache = vm.cache("ffnames")
    if "names" not in cache:
        cache["names"] = builtin_names(vm)
    names = cache["names"]
    # The name lbt gives it (package.loaded, then the build's FF_* names).
    return "function: (GCfuncC *)0x%x [builtin#%s]" % (addr, names.get(fn.ffid, fn.ffid))


def value_text(vm, v, max_string=200):
    """One-line text of a decoded Value."""
    k = v.kind
    if k == "nil":
        return "nil"
    if k in ("true", "false"):
        return k
    if k == "number":
        return number(v.num)
    if k == "int":
        return "%d" % v.num
    if k == "lightud":
        return "light userdata (void *) 0x%x" % v.addr
    try:
        if k == "str":
            s = Str(vm, v.addr, max_string)
            return quote(s.data, s.truncated, s.len)
        if k == "table":
            return "table: (GCtab *)0x%x" % v.addr
        if k == "func":
            return func_text(vm, v.addr)
        if k == "thread":
            return "thread: (lua_State *)0x%x" % v.addr
        if k == "udata":
            u = Udata(vm, v.addr)
            return "userdata: (GCudata *)0x%x %s, %d bytes at 0x%x" % (
                v.addr, C.UDTYPE_NAMES.get(u.udtype, "udtype %d" % u.udtype), u.len, u.payload)
        if k == "cdata":
            cd = Cdata(vm, v.addr)
            ctype = ctype_object(vm, cd)
            if ctype is not None:
                return "%s: (GCcdata *)0x%x ctypeid %d, the ctype object of CTypeID %d" % (
                    ctype[0], v.addr, cd.ctypeid, ctype[1])
            size = "size %d" % cd.size if cd.size is not None else "size unknown"
            typ, val = cdata_text(vm, cd)
            return "cdata<%s>: (GCcdata *)0x%x ctypeid %d, %s, data at 0x%x%s" % (
                typ, v.addr, cd.ctypeid, size, cd.payload, " = " + val if val else "")
        if k == "proto":
            return "proto: (GCproto *)0x%x %s" % (v.addr, proto_site(vm, v.addr))
        if k == "upval":
            return "upvalue: (GCupval *)0x%x" % v.addr
        if k == "trace":
            return "trace: (GCtrace *)0x%x" % v.addr
    except (FaultError, CorruptError) as e:
        return "%s: 0x%x <unreadable: %s>" % (v.type_name, v.addr, e)
    return "%s 0x%x" % (k, v.raw)


def key_text(vm, k, max_string=200):
    """A table key as it would be written in a Lua table constructor."""
    if k.kind == "str":
        try:
            s = Str(vm, k.addr, max_string)
        except (FaultError, CorruptError) as e:
            return "[<bad string key: %s>]" % e
        if not s.truncated and _is_ident(s.data):
            return s.data.decode("ascii")
        return "[%s]" % quote(s.data, s.truncated, s.len)
    return "[%s]" % value_text(vm, k, max_string)


_KEYWORDS = frozenset(b"and break do else elseif end false for function goto if in local nil "
                      b"not or repeat return then true until while".split())


def _is_ident(b):
    if not b or b in _KEYWORDS:
        return False
    if not (b[0:1].isalpha() or b[0:1] == b"_"):
        return False
    return all(c == 95 or 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 for c in b)


def table_header(vm, t):
    mt = "(GCtab *)0x%x" % t.metatable if t.metatable else "nil"
    return "table: (GCtab *)0x%x asize=%d hmask=0x%x metatable=%s" % (t.addr, t.asize, t.hmask, mt)


def table_data(vm, addr, depth, limit, max_string, visited=None):
    """A table's entries as data (ltab --json): {"entries": [{"key": text,
    "value": text} or, expanded while depth > 1, {"key", "table": address,
    "entries", "more"} or {"key", "cycle": address} or {"key", "table",
    "unreadable"}], "more": entries not shown}."""
    visited = set() if visited is None else visited
    visited.add(addr)
    t = Tab(vm, addr)
    entries = []
    shown = 0
    total = 0
    for i, v in t.array_values(vm, t.asize):
        if v.kind == "nil":
            continue
        total += 1
        if shown < limit:
            entries.append(_entry(vm, "[%d]" % i, v, depth, limit, max_string, visited))
            shown += 1
    nodes, seen = t.hash_nodes(vm, max(0, limit - shown))
    total += seen
    for k, v in nodes:
        entries.append(_entry(vm, key_text(vm, k, max_string), v, depth, limit, max_string,
                              visited))
        shown += 1
    visited.discard(addr)   # only ancestors count: a shared table is no cycle
    return {"entries": entries, "more": total - shown}


def _entry(vm, key, v, depth, limit, max_string, visited):
    if v.kind == "table" and depth > 1:
        if v.addr in visited:
            return {"key": key, "cycle": hexa(v.addr)}
        try:
            sub = table_data(vm, v.addr, depth - 1, limit, max_string, visited)
        except (FaultError, CorruptError) as e:
            return {"key": key, "table": hexa(v.addr), "unreadable": str(e)}
        sub.update(key=key, table=hexa(v.addr))
        return sub
    return {"key": key, "value": value_text(vm, v, max_string)}


def table_lines(doc, indent=""):
    """The Lua-constructor-like text of a table_data document."""
    pad = indent + "  "
    lines = ["{"]
    for e in doc["entries"]:
        if "cycle" in e:
            lines.append("%s%s = <cycle: table: (GCtab *)%s>," % (pad, e["key"], e["cycle"]))
        elif "unreadable" in e:
            lines.append("%s%s = table: (GCtab *)%s <unreadable: %s>,"
                         % (pad, e["key"], e["table"], e["unreadable"]))
        elif "entries" in e:
            sub = table_lines(e, pad)
            sub[0] = "%s%s = %s  -- (GCtab *)%s" % (pad, e["key"], sub[0], e["table"])
            sub[-1] += ","
            lines.extend(sub)
        else:
            lines.append("%s%s = %s," % (pad, e["key"], e["value"]))
    if doc["more"] > 0:
        lines.append("%s... (%d more entries; see --limit)" % (pad, doc["more"]))
    return lines + [indent + "}"]
