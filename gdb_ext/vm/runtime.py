"""Things the process itself knows at run time: the registry, loaded
libraries, jit.version.  Read-only walks over tables."""
from typing import Dict, List, Optional, TYPE_CHECKING, Tuple
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


def _funcs_in(vm, tab_addr, limit=4096):
    """[(key, ffid, func addr)] of the fast and C functions in a table."""
    out = []
    t = Tab(vm, tab_addr)
    nodes, _ = t.hash_nodes(vm, limit)
    for k, v in nodes:
        if v.kind != "func":
            continue
        key = _str_of(vm, k)
        if key is None:
            continue
        try:
            fn = Func(vm, v.addr)
        except (FaultError, CorruptError):
            continue
        out.append((key, fn.ffid, v.addr))
    return out


def builtin_names(vm: 'VM') -> Dict[int, str]:
    """{ffid: 'lib.name'} for fast functions, from the process itself:
    package.loaded (base functions under their plain names, others as
    lib.name), the file methods in registry['FILE*'] as io.method.name, and
    for the rest the FF_* enumerators of the build's DWARF (lj_ff.h), split
    at a known library prefix.  Missing ids fall back to builtin#N."""
    names = {}
    libs = []
    try:
        for lib, addr in loaded_libs(vm):
            libs.append(lib.replace(".", "_"))
            for key, ffid, _ in _funcs_in(vm, addr):
                if ffid >= 2 and ffid not in names:
                    names[ffid] = key if lib == "_G" else "%s.%s" % (lib, key)
        reg = registry_table(vm)
        if reg is not None:
            fh = tab_get_str(vm, reg, b"FILE*")
            if fh is not None and fh.kind == "table":
                for key, ffid, _ in _funcs_in(vm, fh.addr):
                    if ffid >= 2 and ffid not in names and not key.startswith("__"):
                        names[ffid] = "io.method." + key
    except (FaultError, CorruptError):
        pass
    # Library modules of lj_lib*.c (LJLIB_MODULE_*); buildvm prints their
    # underscores as dots (jit/vmdef.lua ffnames: io.method.close, ffi.meta.__call).
    prefixes = sorted(set(libs + ["io_method", "ffi_meta", "buffer_method", "jit_util", "jit_opt",
                                  "jit_profile", "string", "table", "math", "io", "os",
                                  "coroutine", "debug", "jit", "bit", "ffi", "buffer",
                                  "package"]) - {"_G"},
                      key=len, reverse=True)
    for ffid, enum_name in vm.lay.ff_names.items():
        if ffid in names or not enum_name.startswith("FF_"):
            continue
        rest = enum_name[3:]
        for p in prefixes:
            if rest.startswith(p + "_"):
                rest = p.replace("_", ".") + "." + rest[len(p) + 1:]
                break
        names[ffid] = rest
    return names


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
