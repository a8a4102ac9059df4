"""Build synthetic LuaJIT memory images for engine unit tests.

Struct layouts come from tests/data/layout-*.json, which
testprogs/dump_layout.py wrote from the DWARF of real builds; the value
encodings follow LuaJIT's lj_obj.h (see ../shared/LUAJIT-NOTES.md, section 1).
"""
import json
import os
import struct

from ljgdb.gdb_ext.target import SyntheticTarget, TypeInfo

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
# The builds whose layouts tests/data holds (the engine's unit tests run on each).
LAYOUTS = ("r21-gc64", "r21-x64", "r20-x64", "r21-dualnum", "r21-arm64", "or-arm64")

ITYPE = {"nil": 0, "false": 1, "true": 2, "lightud": 3, "str": 4, "upval": 5, "thread": 6,
         "proto": 7, "func": 8, "trace": 9, "cdata": 10, "table": 11, "udata": 12}


def load_layout(variant):
    with open(os.path.join(DATA, "layout-%s.json" % variant)) as f:
        return json.load(f)


class Heap(object):
    def __init__(self, variant, base=0x10000000):
        self.js = load_layout(variant)
        self.types = {k: TypeInfo.from_json(k, v) for k, v in self.js["types"].items()}
        self.base = base
        self.mem = bytearray()
        self.gc64 = self.types["GCRef"].size == 8
        self.ref = self.types["GCRef"].size

    # --- raw memory --------------------------------------------------------
    def alloc(self, size, align=16):
        pad = (-len(self.mem)) % align
        self.mem += b"\0" * (pad + size)
        return self.base + len(self.mem) - size

    def write(self, addr, data):
        off = addr - self.base
        self.mem[off:off + len(data)] = data

    def put(self, tname, obj, path, value):
        f = self.types[tname].fields[path]
        self.write(obj + f.offset, (value & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, "little"))

    def size(self, tname):
        return self.types[tname].size

    def target(self, **kw):
        return SyntheticTarget(self.js, [(self.base, bytes(self.mem))], **kw)

    # --- TValues (lj_obj.h encodings) --------------------------------------
    def tv_prim(self, kind):
        it = ~ITYPE[kind] & 0xFFFFFFFF
        if self.gc64:
            return ((it & 0x1FFFF) << 47) | ((1 << 47) - 1)
        return (it << 32) | 0xFFFFFFFF

    def tv_gc(self, kind, addr):
        it = ~ITYPE[kind] & 0xFFFFFFFF
        if self.gc64:
            return ((it & 0x1FFFF) << 47) | addr
        return (it << 32) | addr

    @staticmethod
    def tv_num(x):
        return struct.unpack("<Q", struct.pack("<d", x))[0]

    def tv_int(self, i):
        tisnum = 0xFFFFFFF2 if self.gc64 else 0xFFFEFFFF
        if self.gc64:
            return ((tisnum & 0x1FFFF) << 47) | (i & 0xFFFFFFFF)
        return (tisnum << 32) | (i & 0xFFFFFFFF)

    def write_tv(self, addr, raw):
        self.write(addr, struct.pack("<Q", raw))

    # --- objects -------------------------------------------------------------
    def header(self, tname, addr, gct):
        self.put(tname, addr, "gct", gct)

    def new_str(self, data):
        s = self.size("GCstr")
        addr = self.alloc(s + len(data) + 1)
        self.header("GCstr", addr, 4)
        self.put("GCstr", addr, "len", len(data))
        self.write(addr + s, data + b"\0")
        return addr

    def new_tab(self, array=(), pairs=(), metatable=0):
        """array: raw TValues for slots 0..n-1; pairs: (raw key, raw value)."""
        addr = self.alloc(self.size("GCtab"))
        self.header("GCtab", addr, 11)
        if array:
            arr = self.alloc(8 * len(array))
            for i, raw in enumerate(array):
                self.write_tv(arr + 8 * i, raw)
            self.put("GCtab", addr, "array", arr)
            self.put("GCtab", addr, "asize", len(array))
        n = 1
        while n < len(pairs):
            n *= 2
        nsz = self.size("Node")
        node = self.alloc(nsz * n)
        nd = self.types["Node"]
        for i in range(n):
            k, v = pairs[i] if i < len(pairs) else (self.tv_prim("nil"), self.tv_prim("nil"))
            self.write_tv(node + i * nsz + nd.fields["key"].offset, k)
            self.write_tv(node + i * nsz + nd.fields["val"].offset, v)
        self.put("GCtab", addr, "node", node)
        self.put("GCtab", addr, "hmask", n - 1)
        self.put("GCtab", addr, "metatable", metatable)
        return addr

    def new_lua_func(self, chunkname, firstline, nparams=0):
        pt = self.alloc(self.size("GCproto") + 16)
        self.header("GCproto", pt, 7)
        self.put("GCproto", pt, "chunkname", self.new_str(chunkname))
        self.put("GCproto", pt, "firstline", firstline)
        self.put("GCproto", pt, "numparams", nparams)
        fn = self.alloc(self.size("GCfuncL"))
        self.header("GCfuncL", fn, 8)
        self.put("GCfuncL", fn, "ffid", 0)
        self.put("GCfuncL", fn, "pc", pt + self.size("GCproto"))
        return fn, pt

    def new_c_func(self, ffid, cfunc):
        fn = self.alloc(self.size("GCfuncC"))
        self.header("GCfuncC", fn, 8)
        self.put("GCfuncC", fn, "ffid", ffid)
        self.put("GCfuncC", fn, "f", cfunc)
        return fn

    def new_state(self, stack_slots=32):
        """A GG_State-like block: global_State G and its main lua_State L
        with a stack; returns (G, L)."""
        gg = self.alloc(self.size("GG_State"))
        gg_t = self.types["GG_State"]
        L = gg + gg_t.fields["L"].offset
        G = gg + gg_t.fields["g"].offset
        self.header("lua_State", L, 6)
        self.put("lua_State", L, "glref", G)
        self.put("global_State", G, "mainthref", L)
        if "cur_L" in self.types["global_State"].fields:
            self.put("global_State", G, "cur_L", L)
        stack = self.alloc(8 * stack_slots)
        for i in range(stack_slots):
            self.write_tv(stack + 8 * i, self.tv_prim("nil"))
        self.put("lua_State", L, "stack", stack)
        self.put("lua_State", L, "stacksize", stack_slots)
        self.put("lua_State", L, "base", stack + 16)
        self.put("lua_State", L, "top", stack + 16)
        self.put("global_State", G, "vmstate", ~1)          # C
        self.put("global_State", G, "gc.total", 12345)
        return G, L
