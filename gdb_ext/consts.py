"""The few genuine constants of LuaJIT that debug info does not carry.

Each mirrors a macro of the LuaJIT source (R = upstream 2.1 lj_obj.h); they
are the same in 2.0, 2.1, Debian's snapshot and OpenResty's fork.
"""

U32 = 0xFFFFFFFF

# Internal object tags, R lj_obj.h:260-274: #define LJ_TNIL (~0u) ...
LJ_TNIL = ~0 & U32
LJ_TFALSE = ~1 & U32
LJ_TTRUE = ~2 & U32
LJ_TLIGHTUD = ~3 & U32
LJ_TSTR = ~4 & U32
LJ_TUPVAL = ~5 & U32
LJ_TTHREAD = ~6 & U32
LJ_TPROTO = ~7 & U32
LJ_TFUNC = ~8 & U32
LJ_TTRACE = ~9 & U32
LJ_TCDATA = ~10 & U32
LJ_TTAB = ~11 & U32
LJ_TUDATA = ~12 & U32
LJ_TNUMX = ~13 & U32

# R lj_obj.h:276-281: LJ_TISNUM is 0xfffeffff on 64-bit without GC64, else LJ_TNUMX.
LJ_TISNUM_X64 = 0xFFFEFFFF
LJ_TISNUM_GC64 = LJ_TNUMX
ITYPE_MACROS = {
    LJ_TNIL: "LJ_TNIL", LJ_TFALSE: "LJ_TFALSE", LJ_TTRUE: "LJ_TTRUE",
    LJ_TLIGHTUD: "LJ_TLIGHTUD", LJ_TSTR: "LJ_TSTR", LJ_TUPVAL: "LJ_TUPVAL",
    LJ_TTHREAD: "LJ_TTHREAD", LJ_TPROTO: "LJ_TPROTO", LJ_TFUNC: "LJ_TFUNC",
    LJ_TTRACE: "LJ_TTRACE", LJ_TCDATA: "LJ_TCDATA", LJ_TTAB: "LJ_TTAB",
    LJ_TUDATA: "LJ_TUDATA", LJ_TNUMX: "LJ_TNUMX",
}

# The GC header's gct byte holds ~itype: str 4 ... udata 12.
GCT_STR = 4
GCT_UPVAL = 5
GCT_THREAD = 6
GCT_PROTO = 7
GCT_FUNC = 8
GCT_TRACE = 9
GCT_CDATA = 10
GCT_TAB = 11
GCT_UDATA = 12
# Every GC type once: (gct, the engine's name of the kind, lgcstat's word
# for it, the struct of its fixed header: what one object costs at least).
# The other tables of type names are made from this one.
GC_TYPES = (
    (GCT_STR, "str", "string", "GCstr"),
    (GCT_UPVAL, "upval", "upvalue", "GCupval"),
    (GCT_THREAD, "thread", "thread", "lua_State"),
    (GCT_PROTO, "proto", "prototype", "GCproto"),
    (GCT_FUNC, "func", "function", "GCfuncL"),
    (GCT_TRACE, "trace", "trace", "GCtrace"),
    (GCT_CDATA, "cdata", "cdata", "GCcdata"),
    (GCT_TAB, "table", "table", "GCtab"),
    (GCT_UDATA, "udata", "userdata", "GCudata"),
)
GCT_NAMES = {g: kind for g, kind, _, _ in GC_TYPES}          # gct -> kind
KIND_GCT = {kind: g for g, kind, _, _ in GC_TYPES}           # kind -> gct
GCT_TEXT = {g: text for g, _, text, _ in GC_TYPES}           # gct -> lgcstat's word
HEADER_STRUCT = {g: struct for g, _, _, struct in GC_TYPES}  # gct -> header struct
# The type a pointer argument points to -> the kind of GC object it names
# (None: any; its header tells).
POINTER_KINDS = dict({struct: kind for _, kind, _, struct in GC_TYPES}, GCfunc="func",
                     GCfuncC="func", GCobj=None, GChead=None)

# GC64 TValue split, R lj_obj.h: itype(o) = (uint32_t)(o->it64 >> 47),
# pointers are the low 47 bits (LJ_GCVMASK).
GC64_TAG_SHIFT = 47
GCVMASK = (1 << 47) - 1

# Fast-function ids, R lj_obj.h FF_LUA / FF_C (2+ are builtins).
FF_LUA = 0
FF_C = 1

# lua_State.status values, R lua.h: LUA_YIELD 1, LUA_ERRRUN 2, ...
LUA_OK = 0
LUA_YIELD = 1
THREAD_STATUS = {0: "ok", 1: "yield", 2: "errrun", 3: "errsyntax", 4: "errmem", 5: "errerr"}

# Udata types, R lj_obj.h UDTYPE_* (the enum is in DWARF only in newer 2.1).
UDTYPE_NAMES = {0: "userdata", 1: "io file", 2: "ffi clib", 3: "buffer"}

# Symbols of LuaJIT's assembler VM (buildvm names every global label of
# vm_<arch>.dasc lj_vm_*, lj_BC_*, lj_ff_*, lj_fff_*, lj_cont_*, lj_vmeta_*);
# the VM has no debug info, which tells it from C functions called lj_vm_*
# (lj_vmmath.c).
VM_CODE_PREFIXES = ("lj_BC_", "lj_vm_", "lj_ff_", "lj_fff_", "lj_cont_", "lj_vmeta_")
