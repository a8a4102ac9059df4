"""The narrow interface between the engine and whatever holds the memory.

A Target gives:
  read(addr, n) -> bytes         raises FaultError(address) when unreadable
  symbol(name) -> int or None    address of a global symbol
  symbolize(addr) -> str or None name of the function containing addr
  objfile_of(addr) -> str or None the program or shared library holding addr
  type_info(name) -> TypeInfo    a struct/union layout from debug info, or None
  constant(name) -> int or None  value of an enumerator from debug info
  enum_members(name) -> dict     every enumerator of the enum that has the
                                 enumerator `name`, or None
                                 (these three: the Target's TypeSource,
                                 target.types, below)
  mappings() -> list or None     [(start, end, perms)] of a live process's
                                 memory mappings ('r-xp'), None when unknown
  regions() -> list or None      [(start, end, writable, name)]: the memory
                                 a live process maps or a core holds
  machine_frames() -> list       the selected OS thread's machine frames,
                                 innermost first (MachineFrame: pc, function
                                 name, registers as the unwinder recovers
                                 them); [] when the backend has none
  arch                           'x86_64', 'aarch64', ...

Where LuaJIT's types come from is a TypeSource composed with the Target
(target.types): gdb's DWARF (backends.gdbtarget.GdbTypes), pyelftools'
DWARF (layouts.elfdwarf.DwarfTypes), a layout profile (layouts.profiles.
Profile) or a layout dictionary (DictTypes, below).  A backend gives memory,
symbols, registers, threads and frames, and chooses one.

Backends: GdbTarget (gdb_ext.backends.gdbtarget; a live process or a core,
same code), CoreTarget (gdb_ext.backends.coretarget, a core without gdb) and
SyntheticTarget (below; byte segments plus a layout dictionary, for unit
tests).  Reads go through a block cache; a Target is meant to live for one
command, so a live process that runs again is never seen through stale data.
"""
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
import struct

from .errors import FaultError

BLOCK = 4096
_BIG = 64 * 1024
# No single read is larger: every LuaJIT structure the engine reads at once
# is far smaller (a stack is at most 64 MB), and bigger sizes come from
# corrupt lengths.  Large parts (a table's array, a hash part) go in chunks.
MAX_READ = 256 << 20


def hexaddr(addr: int) -> str:
    """0x... for an address, -0x... for a (computed) negative one."""
    return "0x%x" % addr if addr >= 0 else "-0x%x" % -addr


# How deep nested struct members are listed in a TypeInfo (both backends).
FLATTEN_DEPTH = 4


class Field(object):
    __slots__ = ("offset", "size", "count", "type_name")

    def __init__(self, offset: int, size: int, count: Optional[int] = None,
                 type_name: Optional[str] = None) -> None:
        self.offset = offset
        self.size = size
        self.count = count          # number of elements for arrays, else None
        self.type_name = type_name

    def to_json(self) -> List[Any]:
        return [self.offset, self.size, self.count, self.type_name]


class TypeInfo(object):
    """Layout of one struct or union: its size and every member by dotted
    path ('gc.total', 'str.mask', 'fr.func'), members of anonymous structs
    and unions appearing under their own names."""

    def __init__(self, name: str, size: int, fields: Dict[str, Field]) -> None:
        self.name = name
        self.size = size
        self.fields = fields        # path -> Field

    def has(self, path: str) -> bool:
        return path in self.fields

    def field(self, path: str) -> Field:
        f = self.fields.get(path)
        if f is None:
            from .errors import NotLuaJITError
            raise NotLuaJITError("debug info for %s has no member '%s'" % (self.name, path))
        return f

    def offset(self, path: str) -> int:
        return self.field(path).offset

    def to_json(self) -> Dict[str, Any]:
        return {"size": self.size, "fields": {k: v.to_json() for k, v in self.fields.items()}}

    @classmethod
    def from_json(cls, name: str, d: Dict[str, Any]) -> 'TypeInfo':
        return cls(name, d["size"], {k: Field(*v) for k, v in d["fields"].items()})


class TypeSource(object):
    """Where LuaJIT's types come from: a struct's layout (TypeInfo), an
    enumerator's value, an enumeration's members; None for what it does not
    know.  This base knows nothing (a backend without debug info)."""

    def type_info(self, name: str) -> Optional[TypeInfo]:
        return None

    def constant(self, name: str) -> Optional[int]:
        return None

    def enum_members(self, name: str) -> Optional[Dict[str, int]]:
        return None


class DictTypes(TypeSource):
    """Types from a layout dictionary (testprogs/dump_layout.py's JSON:
    "types", "constants", "enums")."""

    def __init__(self, layout_json: Dict[str, Any]) -> None:
        self.types = {k: TypeInfo.from_json(k, v) for k, v in layout_json["types"].items()}
        self.constants = dict(layout_json.get("constants", {}))
        self.enums = dict(layout_json.get("enums", {}))

    def type_info(self, name: str) -> Optional[TypeInfo]:
        return self.types.get(name)

    def constant(self, name: str) -> Optional[int]:
        return self.constants.get(name)

    def enum_members(self, name: str) -> Optional[Dict[str, int]]:
        return self.enums.get(name)


class Thread(object):
    """One OS thread as a core or a stop gives it: tid, regs (gdb's register
    names), signal (pr_cursig), pc.  (Here, below the backends that make
    them and the sampler that decodes a copy into one.)"""

    def __init__(self, tid: int, regs: Dict[str, int], signal: int, pc: Optional[int]) -> None:
        self.tid, self.regs, self.signal, self.pc = tid, regs, signal, pc

    def __repr__(self) -> str:
        return "Thread(%d pc=0x%x)" % (self.tid, self.pc)


class MachineFrame(object):
    """One machine (C or assembler) frame of an OS thread, as an unwinder
    recovers it.  level 0 is the innermost.  name is the function or
    nearest symbol (None if unknown); has_debug tells whether debug info
    describes the function (LuaJIT's assembler VM has symbols but none).
    reg(name) is a register's value in this frame, or None when the unwinder
    cannot recover it; in outer frames only callee-saved registers are
    meaningful, and the engine reads only those there."""

    __slots__ = ("level", "pc", "name", "has_debug", "_regs")

    def __init__(self, level: int, pc: int, name: Optional[str] = None, has_debug: bool = False,
                 regs: Any = None) -> None:
        self.level = level
        self.pc = pc
        self.name = name
        self.has_debug = has_debug
        self._regs = regs if regs is not None else {}

    def reg(self, name: str) -> Optional[int]:
        r = self._regs
        if callable(r):
            return r(name)
        return r.get(name)

    def __repr__(self) -> str:
        return "MachineFrame(#%d 0x%x %s)" % (self.level, self.pc, self.name)


class Target(object):
    """Base class: block cache and typed helpers over read_raw(); LuaJIT's
    types from self.types (a TypeSource the backend chooses)."""

    types = TypeSource()
    ptr_size = 8
    little_endian = True
    description = "target"
    arch = "x86_64"

    def __init__(self) -> None:
        self._blocks = {}
        self.reads = 0              # raw reads, for benchmarks

    # --- to implement in a backend -------------------------------------
    def read_raw(self, addr: int, n: int) -> bytes:
        raise NotImplementedError

    def process_id(self) -> Optional[int]:
        """The process's id (its main thread's, the lowest thread id), live
        or from its core, or None when unknown."""
        return None

    def stop_signal(self) -> Optional[int]:
        """The number of the signal that stopped the selected thread (a
        core's: the one that killed the process), or None when it was not
        a signal's stop or the backend cannot tell."""
        return None

    def symbol(self, name: str) -> Optional[int]:
        return None

    def symbolize(self, addr: int) -> Optional[str]:
        return None

    def prepare_frames(self, addrs: Iterable[int], vm: Optional[int] = None) -> None:
        """Ready, before a sampler's first sample, what unwinding through
        addrs and the VM's code at vm needs (a backend that unwinds by
        itself: its debug info)."""

    def save_frames(self) -> None:
        """What unwinding learnt kept for the next session (a backend that
        caches its debug info's answers)."""

    def objfile_of(self, addr: int) -> Optional[str]:
        """The file (program or shared library) whose code holds addr, or None."""
        return None

    def file_address(self, addr: int) -> Optional[Tuple[str, int]]:
        """(file, address in the file's own ELF terms) of a process address
        the file's mapping holds (what addr2line -e FILE takes), or None
        (no file holds it: a JIT trace's code, the stack; or not known)."""
        return None

    def mappings(self) -> Optional[List[Tuple[int, int, str]]]:
        return None

    def regions(self) -> Optional[List[Tuple[int, int, bool, str]]]:
        """[(start, end, writable, name)] of the process's memory that can be
        read (a live process's mappings, a core's segments), or None when
        the backend cannot tell."""
        maps = self.mappings()
        if maps is None:
            return None
        return [(s, e, "w" in perms, "") for s, e, perms in maps]

    def address_space(self) -> Optional[List[Tuple[int, int]]]:
        """[(start, end)] of every mapping of the process, with or without
        bytes (a live process's mappings, all of a core's segments), or
        None when the backend cannot tell: what a new mapping must avoid."""
        maps = self.mappings()
        return None if maps is None else [(s, e) for s, e, _ in maps]

    def machine_frames(self, max_frames: int = 64) -> List[MachineFrame]:
        return []

    # --- types: the TypeSource's --------------------------------------
    def type_info(self, name: str) -> Optional[TypeInfo]:
        return self.types.type_info(name)

    def types_of(self, symbol: str, cu_name: str) -> Optional[TypeSource]:
        """The types of the file that defines `symbol`, as its compile unit
        `cu_name` declares them (glibc's, for its allocator's structs:
        LuaJIT's lj_alloc.c has a struct malloc_state of its own), or None
        where its debug info is not at hand."""
        return None

    def constant(self, name: str) -> Optional[int]:
        return self.types.constant(name)

    def enum_members(self, name: str) -> Optional[Dict[str, int]]:
        return self.types.enum_members(name)

    def mapped(self, addr: int) -> Optional[Tuple[int, int, Any]]:
        """(start, end, buffer) of memory around addr that the backend holds
        in place (a core's segment through its mmap), for walks that read
        millions of small objects; None when it has none (then they read
        through pages)."""
        return None

    # Bytes read through the target since release_pages() last ran: with
    # RELEASE_EVERY set (the DAP server sets it: a long session), a walk
    # over all of a core's memory lets go of its pages every RELEASE_EVERY
    # bytes, so that the pages the process holds stay those of the last
    # stretch (a core of 500 MB is not 500 MB of this process).  0, the
    # default: never (a command that goes over the whole heap comes back
    # to pages it let go of, and lgcstat on a core of 10^7 objects took
    # three times as long).
    RELEASE_EVERY = 0
    _touched = 0

    def release_pages(self) -> None:
        """Let go of the resident pages of memory the backend holds in
        place and can read again (a core's mmap: the kernel reads them
        from the file again when asked); nothing for other backends."""

    def touched(self, n: int) -> None:
        """n more bytes read (a backend's read_raw).  The pieces a page
        cache takes in place (mapped()) it counts itself, as it must also
        drop them when the pages go (PageCache._place)."""
        if not self.RELEASE_EVERY:
            return
        self._touched += n
        if self._touched >= self.RELEASE_EVERY:
            self._touched = 0
            self.release_pages()

    # --- reading ---------------------------------------------------------
    # A sampler's copymemo.Watch while it notes every read of a decode
    # (readers that read a block at once for speed tell it what they use).
    watched = None

    def gatherer(self, spans: List[Tuple[int, int]]) -> Callable[[], Optional[bytes]]:
        """A reader of spans [(address, size)] as they are at each call,
        joined, or None when one cannot be read: the same small reads made
        again and again (a sampler's copymemo), which a backend may make
        in one call."""
        def gather() -> Optional[bytes]:
            try:
                return b"".join(bytes(self.read_raw(a, n)) for a, n in spans)
            except FaultError:
                return None
        return gather

    def clear_cache(self) -> None:
        self._blocks.clear()

    def _block(self, base):
        b = self._blocks.get(base)
        if b is None:
            self.reads += 1
            b = self.read_raw(base, BLOCK)
            if len(self._blocks) > 16384:   # 64 MB of cache at most
                self._blocks.clear()
            self._blocks[base] = b
        return b

    def read(self, addr: int, n: int, what: Optional[str] = None) -> bytes:
        """n bytes at addr as bytes.  Raises FaultError naming the address."""
        if n < 0 or addr < 0 or addr + n > (1 << 64):
            raise FaultError("cannot read %d bytes at %s" % (n, hexaddr(addr)), addr, what)
        if n > MAX_READ:
            raise FaultError("refusing to read %d bytes at 0x%x at once (more than %d MB: a "
                             "corrupt length?)" % (n, addr, MAX_READ >> 20), addr, what)
        if n == 0:
            return b""
        first = addr & ~(BLOCK - 1)
        last = (addr + n - 1) & ~(BLOCK - 1)
        # A big read goes past the cache, unless the cache holds all of it
        # (a sampler's copy of the moment: the process has run on since).
        if n >= _BIG and not all(b in self._blocks for b in range(first, last + 1, BLOCK)):
            try:
                self.reads += 1
                return bytes(self.read_raw(addr, n))
            except FaultError as e:
                raise FaultError("cannot read %d bytes at 0x%x" % (n, addr), e.address, what)
        try:
            if first == last:
                b = self._block(first)
                off = addr - first
                return bytes(b[off:off + n])
            parts = []
            base = first
            while base <= last:
                parts.append(self._block(base))
                base += BLOCK
            data = b"".join(bytes(p) for p in parts)
            off = addr - first
            return data[off:off + n]
        except FaultError:
            # A block may straddle the end of a mapping: try the exact range.
            try:
                self.reads += 1
                return bytes(self.read_raw(addr, n))
            except FaultError as e:
                raise FaultError("cannot access memory at 0x%x" % e.address, e.address, what)

    def u8(self, addr: int, what: Optional[str] = None) -> int:
        return self.read(addr, 1, what)[0]

    def u16(self, addr: int, what: Optional[str] = None) -> int:
        return struct.unpack("<H", self.read(addr, 2, what))[0]

    def u32(self, addr: int, what: Optional[str] = None) -> int:
        return struct.unpack("<I", self.read(addr, 4, what))[0]

    def i32(self, addr: int, what: Optional[str] = None) -> int:
        return struct.unpack("<i", self.read(addr, 4, what))[0]

    def u64(self, addr: int, what: Optional[str] = None) -> int:
        return struct.unpack("<Q", self.read(addr, 8, what))[0]

    def f64(self, addr: int, what: Optional[str] = None) -> float:
        return struct.unpack("<d", self.read(addr, 8, what))[0]

    def ptr(self, addr: int, what: Optional[str] = None) -> int:
        if self.ptr_size == 8:
            return self.u64(addr, what)
        return self.u32(addr, what)

    def uint(self, addr: int, size: int, what: Optional[str] = None) -> int:
        return int.from_bytes(self.read(addr, size, what), "little")

    def cstring(self, addr: int, limit: int = 4096, what: Optional[str] = None) -> bytes:
        """A NUL-terminated string of at most `limit` bytes."""
        out = b""
        while len(out) < limit:
            chunk = min(256, limit - len(out))
            try:
                data = self.read(addr + len(out), chunk, what)
            except FaultError:
                if chunk == 1:
                    raise
                data = self.read(addr + len(out), 1, what)
            i = data.find(b"\0")
            if i >= 0:
                return out + data[:i]
            out += data
        return out


class SyntheticTarget(Target):
    """Memory made of (address, bytes) segments plus a layout dictionary
    (as written by testprogs/dump_layout.py from a real build's DWARF)."""

    description = "synthetic memory"

    def __init__(self, layout_json: Dict[str, Any], segments: Iterable[Tuple[int, bytes]] = (),
                 symbols: Optional[Dict[str, int]] = None) -> None:
        super().__init__()
        self.types = DictTypes(layout_json)
        self._symbols = dict(layout_json.get("symbols", {}))
        self._symbols.update(symbols or {})
        self.ptr_size = layout_json.get("ptr_size", 8)
        self.arch = layout_json.get("arch", "x86_64")
        self.frames = []            # MachineFrame list, set by a test
        self.segments = []
        for addr, data in segments:
            self.add(addr, data)

    def add(self, addr: int, data: bytes) -> None:
        self.segments.append((addr, bytearray(data)))
        self.segments.sort(key=lambda s: s[0])
        self.clear_cache()

    def read_raw(self, addr: int, n: int) -> bytes:
        for base, data in self.segments:
            if base <= addr and addr + n <= base + len(data):
                return bytes(data[addr - base:addr - base + n])
        # Report the first address that is not covered.
        a = addr
        while a < addr + n:
            for base, data in self.segments:
                if base <= a < base + len(data):
                    a = base + len(data)
                    break
            else:
                raise FaultError("cannot access memory at 0x%x" % a, a)
        raise FaultError("cannot access memory at 0x%x" % addr, addr)

    def symbol(self, name: str) -> Optional[int]:
        return self._symbols.get(name)

    def symbolize(self, addr: int) -> Optional[str]:
        """The name of the symbol at exactly addr (no offsets here)."""
        for name, a in self._symbols.items():
            if a == addr:
                return name
        return None

    def machine_frames(self, max_frames: int = 64) -> List[MachineFrame]:
        return list(self.frames[:max_frames])

    def regions(self) -> Optional[List[Tuple[int, int, bool, str]]]:
        return [(base, base + len(data), True, "segment") for base, data in self.segments]
