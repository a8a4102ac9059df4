"""Things the process itself knows at run time: the registry, loaded
libraries, jit.version.  Read-only walks over tables."""
from typing import Any, Dict, Iterator, List, Optional, TYPE_CHECKING, Tuple
from .. import consts as C
from ..errors import CorruptError, FaultError
from .objects import Func, Str, Tab, decode_tv

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .objects import Value
    from .state import VM

# Bound for scanning one table's hash part when looking a key up.
_LOOKUP_LIMIT = 1 << 20


def tab_get_str(vm: 'VM', tab_addr: int, key: bytes) -> Optional['Value']:
    """t[key] for a string key (bytes), by scanning the hash part; or None."""
    t = Tab(vm, tab_addr)
    nodes, _ = t.hash_nodes(vm, _LOOKUP_LIMIT)
    for k, v in nodes:
        if k.kind != "str":
            continue
        try:
            s = Str(vm, k.addr, len(key) + 1)
        except (FaultError, CorruptError):
            continue
        if s.len == len(key) and s.data == key:
            return v
    return None


def registry_table(vm: 'VM') -> Optional[int]:
    v = decode_tv(vm, vm.registry)
    return v.addr if v.kind == "table" else None


def loaded_table(vm: 'VM') -> Optional[int]:
    """registry._LOADED (package.loaded), or None."""
    reg = registry_table(vm)
    if reg is None:
        return None
    v = tab_get_str(vm, reg, b"_LOADED")
    return v.addr if v is not None and v.kind == "table" else None


def jit_version(vm: 'VM') -> Optional[str]:
    """The jit.version string of the running VM ('LuaJIT 2.1.xxx'), or None
    when the jit library is not loaded."""
    try:
        loaded = loaded_table(vm)
        if loaded is None:
            return None
        jit = tab_get_str(vm, loaded, b"jit")
        if jit is None or jit.kind != "table":
            return None
        ver = tab_get_str(vm, jit.addr, b"version")
        if ver is None or ver.kind != "str":
            return None
        return Str(vm, ver.addr, 200).data.decode("utf-8", "replace")
    except (FaultError, CorruptError):
        return None


def _str_of(vm, v, limit=256):
    if v.kind != "str":
        return None
    s = Str(vm, v.addr, limit)
    return None if s.truncated else s.data.decode("utf-8", "replace")


def loaded_libs(vm: 'VM') -> List[Tuple[str, int]]:
    """[(name, table address)] of the tables in package.loaded, _G first,
    then by name."""
    loaded = loaded_table(vm)
    if loaded is None:
        return []
    entries = []
    for k, v in Tab(vm, loaded).hash_nodes(vm, 4096)[0]:
        lib = _str_of(vm, k)
        if lib is not None and v.kind == "table":
            entries.append((lib, v.addr))
    entries.sort(key=lambda e: (e[0] != "_G", e[0]))
    return entries


# Library modules of lj_lib*.c (LJLIB_MODULE_*); buildvm prints their
# underscores as dots (jit/vmdef.lua ffnames: io.method.close, ffi.meta.__call).
_MODULES = ("io_method", "ffi_meta", "buffer_method", "jit_util", "jit_opt", "jit_profile", "string",
            "table", "math", "io", "os", "coroutine", "debug", "jit", "bit", "ffi", "buffer",
            "package")


class BuiltinNames(object):
    """ffid -> 'lib.name' for fast functions, from the process itself:
    package.loaded (base functions under their plain names, others as
    lib.name), the file methods in registry['FILE*'] as io.method.name, and
    for the rest the FF_* enumerators of the build's DWARF (lj_ff.h), split
    at a known library prefix; a dict's get() and items().  Worked out as
    asked, in the order the answer is decided: each function's ffid is
    read when a search first passes it, and only the key of the function
    that names the ffid asked for (a stop's lbt names one or two builtins
    of the 180 that package.loaded holds; reading them all was two thirds
    of lbt's time at such a stop)."""

    def __init__(self, vm: 'VM') -> None:
        self.vm = vm
        # [lib (None: FILE*), key Value, function address, its ffid or
        # False before it is read], in the order they win; the tables not
        # yet read
        self._slots = []
        self._tables = None
        self._libs = []
        self._got = {}
        f = vm.lay.s["GCfuncC"]
        self._gct, self._ffid_at = f.field("gct").offset, f.field("ffid").offset

    def _ffid(self, addr: int) -> Optional[int]:
        """The ffid of the function at addr, its header read for it alone;
        None when it cannot be read or is not a function."""
        try:
            head = self.vm.t.read(addr, max(self._gct, self._ffid_at) + 1, "function header")
        except FaultError:
            return None
        return head[self._ffid_at] if head[self._gct] == C.GCT_FUNC else None

    def _table_order(self) -> Iterator[Tuple[Optional[str], int]]:
        """(lib, table) in the order their names win: package.loaded's,
        then registry['FILE*'] (lib None)."""
        vm = self.vm
        libs = loaded_libs(vm)
        self._libs = [lib.replace(".", "_") for lib, _ in libs]
        yield from libs
        reg = registry_table(vm)
        if reg is not None:
            fh = tab_get_str(vm, reg, b"FILE*")
            if fh is not None and fh.kind == "table":
                yield None, fh.addr

    def _each_slot(self) -> Iterator[List[Any]]:
        """The slots in order, each table read when the walk reaches it,
        each ffid when it is passed; stops at a table that cannot be read."""
        if self._tables is None:
            self._tables = self._table_order()
        i = 0
        while True:
            while i >= len(self._slots):
                try:
                    lib, addr = next(self._tables)
                    funcs = Tab(self.vm, addr).hash_funcs(self.vm, 4096)
                    self._slots.extend([lib, k, a, False] for k, a in funcs)
                except (StopIteration, FaultError, CorruptError):
                    self._tables = iter(())
                    return
            slot = self._slots[i]
            if slot[3] is False:
                slot[3] = self._ffid(slot[2])
            yield slot
            i += 1

    def get(self, ffid: int, default: Any = None) -> Any:
        if ffid in self._got:
            name = self._got[ffid]
            return default if name is None else name
        name = None
        try:
            for lib, k, _, f in self._each_slot() if ffid >= 2 else ():
                if f != ffid:
                    continue
                key = _str_of(self.vm, k)
                if key is None or (lib is None and key.startswith("__")):
                    continue
                name = key if lib == "_G" else "io.method." + key if lib is None \
                    else "%s.%s" % (lib, key)
                break
        except (FaultError, CorruptError):
            pass
        if name is None:
            name = self._dwarf_name(ffid)
        self._got[ffid] = name
        return default if name is None else name

    def _dwarf_name(self, ffid: int) -> Optional[str]:
        enum_name = self.vm.lay.ff_names.get(ffid)
        if enum_name is None or not enum_name.startswith("FF_"):
            return None
        rest = enum_name[3:]
        prefixes = sorted(set(self._libs + list(_MODULES)) - {"_G"}, key=len, reverse=True)
        for p in prefixes:
            if rest.startswith(p + "_"):
                return p.replace("_", ".") + "." + rest[len(p) + 1:]
        return rest

    def items(self) -> List[Tuple[int, str]]:
        ids = sorted(set(s[3] for s in self._each_slot() if s[3] is not None) |
                     set(self.vm.lay.ff_names))
        return [(i, n) for i, n in ((i, self.get(i)) for i in ids) if n is not None]


def builtin_names(vm: 'VM') -> BuiltinNames:
    """The names of the fast functions (BuiltinNames), worked out as asked."""
    return BuiltinNames(vm)


def cfunc_names(vm: 'VM', max_tables: int = 4096) -> Optional[Dict[int, str]]:
    """{C function address: name} for the C functions (not fast functions)
    a host or a C module registered where Lua code finds them:
    package.loaded's libraries ('ngx.sleep', plain names for _G) and their
    sub-tables ('ngx.socket.tcp'), and the methods of the tables in the
    registry and of their __index tables (':receive': a metatable's
    method, its class unknown).  Stripped C modules (nginx's lua module)
    have no symbol for these functions; this is how Lua code names them."""
    names = {}
    seen = set()

    def add(tab_addr, prefix, sub_depth, method):
        if tab_addr in seen or len(seen) >= max_tables:
            return
        seen.add(tab_addr)
        try:
            nodes, _ = Tab(vm, tab_addr).hash_nodes(vm, 4096)
        except (FaultError, CorruptError):
            return
        subs = []
        for k, v in nodes:
            key = _str_of(vm, k)
            if key is None:
                continue
            if v.kind == "func":
                try:
                    fn = Func(vm, v.addr)
                except (FaultError, CorruptError):
                    continue
                if fn.kind == "c" and fn.cfunc not in names:
                    names[fn.cfunc] = (":" + key) if method else \
                        (key if not prefix else prefix + "." + key)
            elif v.kind == "table":
                if method and key == "__index":
                    subs.append((v.addr, prefix, 0, True))
                elif sub_depth > 0 and not method:
                    subs.append((v.addr, (prefix + "." if prefix else "") + key, sub_depth - 1,
                                 False))
        for s in subs:
            add(*s)

    try:
        for lib, addr in loaded_libs(vm):
            add(addr, "" if lib == "_G" else lib, 1, False)
        reg = registry_table(vm)
        if reg is not None:
            t = Tab(vm, reg)
            values = [v for _, v in t.hash_nodes(vm, 1 << 16)[0]]
            values += [v for _, v in t.array_values(vm, 1 << 16)]
            for v in values:
                if v.kind == "table":
                    add(v.addr, "", 0, True)
    except (FaultError, CorruptError):
        pass
    return names
