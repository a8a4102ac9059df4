"""What this LuaJIT build is, and where every field the engine uses lives.

Everything comes from debug info (through Target.type_info/constant/symbol);
nothing here is a hard-coded offset.  Field renames between versions are
resolved here and only here:

  string table     g->str.{tab,mask,num}  (2.1 since 2020)
                   g->strhash/strmask/strnum  (2.0, older 2.1)
  current thread   g->cur_L (2.1)  /  g->jit_L (2.0, only set in traces)
  GC64             sizeof(GCRef) == 8 (members gcptr64 vs gcptr32)
  FR2              union TValue has 'ftsz' (two-slot frames) instead of 'fr'
  DUALNUM          not in DWARF: the symbol lj_lib_checknumber exists only
                   when LJ_DUALNUM is on (lj_lib.c, #if LJ_DUALNUM)
  JIT              GG_State has a member J (jit_State) unless LUAJIT_DISABLE_JIT
  OpenResty fork   lua_State has exdata (luajit2's thread exdata API)
  Tarantool fork   GCState has allocated and freed (its metrics, lmisclib.h)
"""
from typing import Any, Dict

from ..errors import NotLuaJITError
from ..target import Field, TypeInfo

# Struct/union names the engine reads (all typedef names of LuaJIT).
REQUIRED_TYPES = ("GCRef", "MRef", "TValue", "lua_State", "global_State", "GCState",
                  "GCstr", "GCtab", "Node", "GCfuncL", "GCfuncC", "GCproto",
                  "GCupval", "GCudata", "GCcdata", "GG_State", "SBuf")
OPTIONAL_TYPES = ("GCtrace", "jit_State", "StrInternState", "CTState", "CType", "SnapShot",
                  "MCLink")
# Types other parts of the engine read when present (gcstat: K64Array,
# SBufExt; tarantool: fiber, cord).
EXTRA_TYPES = ("K64Array", "SBufExt", "fiber", "cord", "malloc_state", "malloc_segment")
# Of those, the structs that have a tag and no typedef (lj_alloc.c).
TAG_ONLY_TYPES = ("malloc_state", "malloc_segment")
# Enumerators read from DWARF when present (for names of states).
GC_STATE_NAMES = ("GCSpause", "GCSpropagate", "GCSatomic", "GCSsweepstring", "GCSsweep",
                  "GCSfinalize")
VMSTATE_NAMES = ("LJ_VMST_INTERP", "LJ_VMST_C", "LJ_VMST_GC", "LJ_VMST_EXIT",
                 "LJ_VMST_RECORD", "LJ_VMST_OPT", "LJ_VMST_ASM")
PROBE_SYMBOLS = ("lj_lib_checknumber",)
# Functions every LuaJIT build exports (lj_api.c, lib_aux.c, luajit.h): what
# tells that a file holds LuaJIT, with or without its debug info.
LUAJIT_SYMBOLS = ("luaL_newstate", "lua_newstate", "luaJIT_setmode", "lua_pcall")
# Enumerations read whole, by one of their enumerators (both are anonymous
# enums in LuaJIT: lj_bc.h BCOp, lj_ff.h fast-function ids).
ENUMS = ("BC_ISLT", "FF_LUA_")


def engine_tables(target: Any) -> Dict[str, Any]:
    """What the engine reads from a target's debug info, as JSON-ready
    tables: {"types", "constants", "enums", "symbols"} (the layout files of
    tests/data, testprogs/dump_layout.py, and layout profiles)."""
    out = {"types": {}, "constants": {}, "enums": {}, "symbols": {}}
    for name in REQUIRED_TYPES + OPTIONAL_TYPES + EXTRA_TYPES:
        info = target.type_info(name)
        if info is not None:
            out["types"][name] = info.to_json()
    for name in GC_STATE_NAMES + VMSTATE_NAMES:
        v = target.constant(name)
        if v is not None:
            out["constants"][name] = v
    for name in ENUMS:
        members = target.enum_members(name)
        if members is not None:
            out["enums"][name] = members
    for name in PROBE_SYMBOLS:
        v = target.symbol(name)
        if v is not None:
            out["symbols"][name] = v
    return out


class Struct(object):
    """Offsets of one struct's members as attributes, dots turned into
    underscores: G.gc_total, G.str_mask, TV.fr_func.  `size` is sizeof and
    `name` the type's name; members called size or name become size_, name_."""

    _RESERVED = frozenset(("size", "name", "has", "field", "_info", "_fields"))

    def __init__(self, info: TypeInfo) -> None:
        self._info = info
        self._fields = info.fields
        self.name = info.name
        self.size = info.size
        for path, f in info.fields.items():
            attr = path.replace(".", "_")
            if attr in self._RESERVED:
                attr += "_"
            setattr(self, attr, f.offset)

    def has(self, path: str) -> bool:
        return self._info.has(path)

    def field(self, path: str) -> Field:
        f = self._fields.get(path)
        return f if f is not None else self._info.field(path)

    def __getattr__(self, attr: str) -> int:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise NotLuaJITError("debug info for %s has no member '%s'"
                             % (self.__dict__.get("name"), attr))


class Layout(object):
    """Modes and offsets of one LuaJIT build, read once from debug info."""

    def __init__(self, target: Any) -> None:
        missing = [n for n in REQUIRED_TYPES if target.type_info(n) is None]
        if missing:
            if len(missing) == len(REQUIRED_TYPES):
                raise NotLuaJITError(
                    "no LuaJIT debug info: type lua_State is unknown (load a binary or "
                    "libluajit built with -g, or install its debug symbols)")
            raise NotLuaJITError("LuaJIT debug info is incomplete: missing %s" % ", ".join(missing))
        s = {n: Struct(target.type_info(n)) for n in REQUIRED_TYPES}
        for n in OPTIONAL_TYPES:
            info = target.type_info(n)
            s[n] = Struct(info) if info is not None else None
        self.s = s
        self.ptr_size = target.ptr_size
        self.L = s["lua_State"]
        self.G = s["global_State"]
        self.GCS = s["GCState"]
        self.TV = s["TValue"]
        self.str = s["GCstr"]
        self.tab = s["GCtab"]
        self.node = s["Node"]
        self.fnL = s["GCfuncL"]
        self.fnC = s["GCfuncC"]
        self.pt = s["GCproto"]
        self.uv = s["GCupval"]
        self.ud = s["GCudata"]
        self.cd = s["GCcdata"]
        self.GG = s["GG_State"]
        self.trace = s["GCtrace"]
        self.J = s["jit_State"]
        self.sbuf = s["SBuf"]

        self.ref_size = s["GCRef"].size
        self.mref_size = s["MRef"].size
        self.gc64 = self.ref_size == 8
        self.fr2 = self.TV.has("ftsz")
        self.dualnum = target.symbol("lj_lib_checknumber") is not None
        self.jit = self.GG.has("J")
        self.openresty = self.L.has("exdata")
        self.has_cur_L = self.G.has("cur_L")
        self.branch = "2.1" if self.has_cur_L else "2.0"
        # Tarantool's fork counts every allocation and free for its
        # metrics (lmisclib.h): GCState has allocated and freed.
        self.tarantool = self.G.has("gc.allocated") and self.G.has("gc.freed")
        self.fork = "OpenResty" if self.openresty else ("Tarantool" if self.tarantool else
                                                        "upstream")
        # String table shape.
        if self.G.has("str.tab"):
            self.strtab_kind = "str"
            self.o_strtab, self.o_strmask, self.o_strnum = (self.G.str_tab, self.G.str_mask,
                                                            self.G.str_num)
        elif self.G.has("strhash"):
            self.strtab_kind = "strhash"
            self.o_strtab, self.o_strmask, self.o_strnum = (self.G.strhash, self.G.strmask,
                                                            self.G.strnum)
        else:
            raise NotLuaJITError("global_State has neither str.tab nor strhash: "
                                 "unknown LuaJIT version")
        self.has_lightudseg = self.G.has("gc.lightudseg")
        # lj_str_size (padded to 4) came with g->str, the StrInternState
        # (R "Redesign and harden string interning", 2.1 of 2020); 2.0 and
        # older 2.1 (Tarantool's fork) size strings as sizestring: len + 1.
        self.str_rounded = self.strtab_kind == "str"
        # g->vmthref: the thread upstream 2.1 runs finalizers on (2.1 rolling).
        self.has_vmthref = self.G.has("vmthref")
        # 2.0 sets g->jit_L only while a trace runs; 2.1 has g->cur_L.
        self.has_jit_L = self.G.has("jit_L")
        self.has_jit_base = self.G.has("jit_base")
        self.has_ctype_state = self.G.has("ctype_state")
        # 2.0's SBuf is {buf, n, sz}; 2.1's {w, e, b, L}.
        self.sbuf_sized = self.sbuf.has("sz")
        # 2.0 chains 64-bit IR constants in J->k64; 2.1 keeps them in the IR.
        self.has_k64 = self.J is not None and self.J.has("k64")
        # 2.1 snapshots keep the machine-code offset of their exit (mcofs).
        ss = s["SnapShot"]
        self.snap_mcofs = ss is not None and ss.has("mcofs")
        self.gcstate_size = self.G.field("gc.total").size
        # Light userdata split (GC64 with segments, lj_obj.h LJ_LIGHTUD_BITS_*)
        self.lightud_seg_bits = 8
        self.lightud_lo_bits = 47 - 8

        bc = target.enum_members("BC_ISLT") or {}
        self.bc_names = {v: k for k, v in bc.items()}
        ff = target.enum_members("FF_LUA_") or {}
        self.ff_names = {v: k for k, v in ff.items() if v >= 2 and k != "FF__MAX"}
        self.gc_state_names = self._enum_names(target, GC_STATE_NAMES)
        self.vmstate_names = self._enum_names(target, VMSTATE_NAMES)
        if not self.vmstate_names:
            # Not every build keeps this anonymous enum in DWARF; these are
            # the values of lj_obj.h (LJ_VMST_INTERP = 0 ... stored negated).
            self.vmstate_names = {i: n for i, n in enumerate(VMSTATE_NAMES)}

    @staticmethod
    def _enum_names(target, names):
        out = {}
        for n in names:
            v = target.constant(n)
            if v is not None:
                out[v] = n
        return out

    # ---------------------------------------------------------------------
    def mode_name(self) -> str:
        return "GC64" if self.gc64 else "X64"

    def summary(self) -> Dict[str, Any]:
        return {
            "branch": self.branch, "fork": self.fork, "gc64": self.gc64, "fr2": self.fr2,
            "dualnum": self.dualnum, "jit": self.jit, "ptr_size": self.ptr_size,
            "ref_size": self.ref_size,
        }
