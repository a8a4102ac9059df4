"""Things the process itself knows at run time: the registry, loaded
libraries, jit.version.  Read-only walks over tables."""
from .errors import CorruptError, FaultError
from .objects import Str, Tab, decode_tv

# Bound for scanning one table's hash part when looking a key up.
_LOOKUP_LIMIT = 1 << 20


def tab_get_str(vm, tab_addr, key):
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


def registry_table(vm):
    v = decode_tv(vm, vm.registry)
    return v.addr if v.kind == "table" else None


def loaded_table(vm):
    """registry._LOADED (package.loaded), or None."""
    reg = registry_table(vm)
    if reg is None:
        return None
    v = tab_get_str(vm, reg, b"_LOADED")
    return v.addr if v is not None and v.kind == "table" else None


def jit_version(vm):
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
