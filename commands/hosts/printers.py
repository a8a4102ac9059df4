"""Pretty-printers for LuaJIT's types: `p L->base[0]`, `p *L`, `p t` show
the Lua value as lval does.  Registered on the objfile that holds LuaJIT
(`info pretty-printer` lists them as ljgdb; `disable pretty-printer .*
ljgdb` turns them off, `disable pretty-printer .* ljgdb;TValue` one).

  TValue            the Lua value: "hello", 42, table: (GCtab *)0x...
  GCRef             the object it references
  MRef              the address it holds
  GCstr *, GCtab *, GCfunc *, GCproto *, GCudata *, lua_State *
                    the object, as lval prints it
  global_State *    its heap size and state
  struct lua_State, GCtab, GCstr, ... (p *L)
                    that line, then the struct's own fields

What cannot be read prints as <unreadable: why>; nothing is written."""
import gdb
import gdb.printing

from ..base import display_vm
from ..summaries import GC_TYPES, global_text, guarded, object_text, tvalue_text

PRINTER_NAME = "ljgdb"

_cache = {}


def _reset(*_):
    _cache.clear()


def _vm():
    """The VM to decode with (base.display_vm), made once per gdb command:
    the cache is cleared before each prompt and when the process runs or
    stops."""
    if "vm" not in _cache:
        _cache["vm"] = display_vm((gdb.error,))
    return _cache["vm"]


def _text(fn):
    return guarded(_vm(), fn)


class TValuePrinter(object):
    def __init__(self, val):
        self.val = val

    def to_string(self):
        addr = self.val.address
        if addr is None:
            return None
        a = int(addr)
        return _text(lambda vm: tvalue_text(vm, a))


class GCRefPrinter(object):
    def __init__(self, val):
        self.val = val

    def to_string(self):
        addr = _ref_value(self.val)
        return _text(lambda vm: object_text(vm, None, addr))


class MRefPrinter(object):
    def __init__(self, val):
        self.val = val

    def to_string(self):
        return "0x%x" % _ref_value(self.val)


def _ref_value(val):
    """The address a GCRef / MRef holds (gcptr64/ptr64 or gcptr32/ptr32)."""
    f = val.type.strip_typedefs().fields()[0]
    return int(val[f.name]) & 0xFFFFFFFFFFFFFFFF


class PointerPrinter(object):
    def __init__(self, val, kind):
        self.val = val
        self.kind = kind

    def to_string(self):
        addr = int(self.val) & 0xFFFFFFFFFFFFFFFF
        kind = self.kind
        if kind == "global":
            return _text(lambda vm: global_text(vm, addr))
        return _text(lambda vm: object_text(vm, kind, addr))


class StructPrinter(object):
    """An object itself (p *L): its line, then its own fields."""

    def __init__(self, val, kind):
        self.val = val
        self.kind = kind

    def to_string(self):
        if self.val.address is None:
            return None
        return PointerPrinter(self.val.address, self.kind).to_string()

    def children(self):
        for f in self.val.type.strip_typedefs().fields():
            if f.name is not None:
                yield f.name, self.val[f.name]


class _Sub(gdb.printing.SubPrettyPrinter):
    pass


class LuaJITPrinter(gdb.printing.PrettyPrinter):
    """One printer, ljgdb, with a subprinter per type (each can be disabled)."""

    def __init__(self):
        names = ["TValue", "GCRef", "MRef", "global_State"] + sorted(GC_TYPES)
        super().__init__(PRINTER_NAME, [_Sub(n) for n in names])
        self._on = {s.name: s for s in self.subprinters}

    def _enabled(self, name):
        s = self._on.get(name)
        return s is not None and s.enabled

    def __call__(self, val):
        if not self.enabled:
            return None
        t = val.type.strip_typedefs()
        if t.code == gdb.TYPE_CODE_PTR:
            target = t.target().strip_typedefs()
            name = target.tag or target.name
            if (name == "global_State" or name in GC_TYPES) and _vm() is None:
                return None
            if name == "global_State" and self._enabled(name):
                return PointerPrinter(val, "global")
            if name in GC_TYPES and self._enabled(name):
                return PointerPrinter(val, GC_TYPES[name])
            return None
        if t.code not in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
            return None
        name = t.tag or t.name
        if not self._enabled(name):
            return None
        if _vm() is None:
            return None     # no process or core, or no LuaJIT: gdb's own view
        if name == "TValue":
            return TValuePrinter(val)
        if name == "GCRef":
            return GCRefPrinter(val)
        if name == "MRef":
            return MRefPrinter(val)
        if name == "global_State":
            return StructPrinter(val, "global")
        if name in GC_TYPES:
            return StructPrinter(val, GC_TYPES[name])
        return None


def _has_luajit(objfile):
    try:
        return any(objfile.lookup_global_symbol(s) is not None or
                   objfile.lookup_static_symbol(s) is not None
                   for s in ("lua_pcall", "luaL_newstate", "lj_state_new"))
    except (gdb.error, AttributeError, RuntimeError):
        return False


def _ours(p):
    return getattr(p, "name", None) == PRINTER_NAME


def _register(objfile):
    """Give objfile the printer if it holds LuaJIT and no loaded objfile has
    it yet (gdb consults every objfile's printers for every value)."""
    if any(o.is_valid() and any(_ours(p) for p in o.pretty_printers) for o in gdb.objfiles()):
        return
    if _has_luajit(objfile):
        gdb.printing.register_pretty_printer(objfile, LuaJITPrinter())


def _on_new_objfile(event):
    _reset()
    _register(event.new_objfile)


def register():
    """Install the printer, replacing one an earlier `source` of ljgdb left
    (with its event handlers)."""
    for ev, fn in getattr(gdb, "_ljgdb_printer_events", ()):
        try:
            ev.disconnect(fn)
        except (RuntimeError, ValueError):
            pass
    for o in gdb.objfiles():
        o.pretty_printers[:] = [p for p in o.pretty_printers if not _ours(p)]
    for o in gdb.objfiles():
        _register(o)
    handlers = [(gdb.events.new_objfile, _on_new_objfile)]
    for ev in ("before_prompt", "cont", "stop", "exited"):
        if hasattr(gdb.events, ev):
            handlers.append((getattr(gdb.events, ev), _reset))
    for ev, fn in handlers:
        ev.connect(fn)
    gdb._ljgdb_printer_events = handlers
