"""A Linux x86-64 or arm64 ELF core file read without gdb: memory, threads and their
registers, the ELF files the process had mapped, their symbols, and an
unwinder for machine frames driven by the files' call frame information.

Memory is what gdb shows of a core: the bytes the core holds, else the
pages of mapped files it left out (program text, read-only data), read
from the files on disk through the core's NT_FILE note.  Files are found
by their paths under `sysroot`; a separate debug file by build-id under
`debug_dirs`.  Frames are unwound with .eh_frame (looked up through
.eh_frame_hdr) and .debug_frame only: where there is no CFI (JIT-compiled
code in anonymous memory) the walk stops and says so, it never guesses.
"""
import bisect
import mmap
import os
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import corefile
from ..layouts.buildid import note_build_id
from ..errors import FaultError
from ..target import Thread

PT_LOAD, PT_DYNAMIC, PT_NOTE, PT_PHDR = 1, 2, 4, 6
NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_FILE = 1, 3, 6, 0x46494c45
AT_PHDR, AT_ENTRY, AT_EXECFN, AT_SYSINFO_EHDR = 3, 9, 31, 33
DT_DEBUG = 21
SHF_ALLOC, SHF_TLS = 2, 0x400
PAGE = 4096


class Arch(object):
    """What the reader needs of a machine, registers named as gdb names
    them.  pr_regs: NT_PRSTATUS's pr_reg (the kernel's struct
    user_regs_struct, or arm64's user_pt_regs), in order; dwarf_regs: the
    DWARF register numbers (psABI); pc, sp: the program counter and the
    stack pointer (the CFA of the frame below); callee_saved: kept from
    frame to frame where the CFI says nothing; ra_same: a return address
    column the CFI gives no rule for keeps its value (arm64: the link
    register of a leaf function) rather than ending the walk."""

    def __init__(self, name: str, machine: int, pr_regs: Sequence[str], dwarf_regs: Sequence[str],
                 pc: str, sp: str, callee_saved: Sequence[str], ra_same: bool) -> None:
        self.name, self.machine, self.pr_regs, self.dwarf_regs = name, machine, pr_regs, dwarf_regs
        self.pc, self.sp, self.callee_saved, self.ra_same = pc, sp, callee_saved, ra_same

    def dwarf_name(self, n: int) -> Optional[str]:
        return self.dwarf_regs[n] if 0 <= n < len(self.dwarf_regs) else None


X86_64 = Arch("x86_64", 62, ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax "
                             "rip cs eflags rsp ss fs_base gs_base ds es fs gs").split(),
              # (16, rip, is the return address column)
              "rax rdx rcx rbx rsi rdi rbp rsp r8 r9 r10 r11 r12 r13 r14 r15 rip".split(),
              "rip", "rsp", ("rbx", "rbp", "r12", "r13", "r14", "r15"), False)
AARCH64 = Arch("aarch64", 183, ["x%d" % i for i in range(31)] + ["sp", "pc", "cpsr"],
               # (30, x30 the link register, is the return address column)
               ["x%d" % i for i in range(31)] + ["sp"],
               "pc", "sp", tuple("x%d" % i for i in range(19, 30)), True)
ARCHES = {a.machine: a for a in (X86_64, AARCH64)}
# A signed return address (arm64 pointer authentication, after
# DW_CFA_AARCH64_negate_ra_state) has its signature above the user address
# bits: Linux gives user space at most 48 bits of address.
USER_VA_MASK = (1 << 48) - 1
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")


def _map(path):
    """A read-only mmap of a whole file (b"" when it is empty)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _cstr(data, off):
    end = data.find(b"\0", off)
    return bytes(data[off:end if end >= 0 else len(data)]).decode("utf-8", "surrogateescape")


def _notes(data):
    """(name, type, desc) of each note in a block of ELF notes."""
    i = 0
    while i + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, i)
        d = i + 12 + ((namesz + 3) & ~3)
        if d + descsz > len(data):
            return
        yield bytes(data[i + 12:i + 12 + namesz]).rstrip(b"\0"), ntype, bytes(data[d:d + descsz])
        i = d + ((descsz + 3) & ~3)


def leb128(d: Sequence[int], p: int, signed: bool = False) -> Tuple[int, int]:
    """A LEB128 number at d[p]: (value, next p)."""
    v = shift = 0
    while True:
        b = d[p]
        p += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return (v - (1 << shift) if signed and b & 0x40 else v), p


def uleb128(d: Sequence[int], p: int) -> Tuple[int, int]:
    return leb128(d, p)


def sleb128(d: Sequence[int], p: int) -> Tuple[int, int]:
    return leb128(d, p, True)


_ENC = {0x02: "<H", 0x03: "<I", 0x04: "<Q", 0x0a: "<h", 0x0b: "<i", 0x0c: "<q", 0x00: "<Q"}


def _encoded(d, p, enc, vaddr_of, datarel=0):
    """A DW_EH_PE-encoded pointer at d[p]: (value, next p).  vaddr_of(p) is
    the address of byte p (for pc-relative values)."""
    if enc == 0xff:                                 # DW_EH_PE_omit
        return None, p
    fmt = enc & 0x0f
    if fmt == 0x01:
        v, q = uleb128(d, p)
    elif fmt == 0x09:
        v, q = sleb128(d, p)
    elif fmt in _ENC:
        v = struct.unpack_from(_ENC[fmt], d, p)[0]
        q = p + struct.calcsize(_ENC[fmt])
    else:
        raise ValueError("pointer encoding 0x%x" % enc)
    app = enc & 0x70
    if app == 0x10:
        v += vaddr_of(p)
    elif app == 0x30:
        v += datarel
    return v & 0xffffffffffffffff, q


class _Elf(object):
    """The parts of one ELF file (or in-memory image) this module reads:
    program and section headers, symbols, call frame information."""

    def __init__(self, data):
        self.data = data
        self.phdrs = corefile.phdrs(data)
        self.sections = {}              # name -> (index, type, addr, offset, size, link)
        self.raw_sections = []
        self.alloc = []                 # (addr, end, index) of allocated sections
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        entsize, num, strndx = struct.unpack_from("<HHH", data, 0x3a)
        if not shoff or entsize < _SHDR.size or shoff + num * entsize > len(data) or \
                strndx >= num:
            return
        raw = [_SHDR.unpack_from(data, shoff + i * entsize) for i in range(num)]
        names = raw[strndx][4]
        for i, (name, typ, flags, addr, off, size, link, _, _, _) in enumerate(raw):
            self.sections.setdefault(_cstr(data, names + name), (i, typ, addr, off, size, link))
            if flags & SHF_ALLOC and not flags & SHF_TLS and size:
                self.alloc.append((addr, addr + size, i))
        self.alloc.sort()
        self.raw_sections = raw

    def build_id(self):
        for t, _, off, _, fsz, _ in self.phdrs:
            if t == PT_NOTE:
                bid = note_build_id(self.data[off:off + fsz])
                if bid:
                    return bid
        return None

    def section_bytes(self, name):
        """(bytes, vaddr) of a section that has contents, or None."""
        s = self.sections.get(name)
        if s is None or s[1] == 8 or s[3] + s[4] > len(self.data):      # SHT_NOBITS
            return None
        return bytes(self.data[s[3]:s[3] + s[4]]), s[2]

    def may_name(self, name):
        """False when no symbol table of this file can name `name` (bytes):
        it is in none of their string tables (a search of the bytes, much
        cheaper than reading the tables); True when it may."""
        for table in (".symtab", ".dynsym"):
            s = self.sections.get(table)
            if s is None or s[5] >= len(self.raw_sections):
                continue
            off, size = self.raw_sections[s[5]][4], self.raw_sections[s[5]][5]
            # (String tables share tails: "name\0" may end a longer string.)
            if self.data.find(name + b"\0", off, off + size) >= 0:
                return True
        return False

    def symbols(self, name):
        """(value, size, name, section index, global?) of the defined code and
        data symbols of the symbol table `name` ('.symtab', '.dynsym')."""
        s = self.sections.get(name)
        if s is None or s[3] + s[4] > len(self.data) or s[5] >= len(self.raw_sections):
            return []
        stroff = self.raw_sections[s[5]][4]
        out = []
        for nm, info, _, shndx, value, size in _SYM.iter_unpack(
                self.data[s[3]:s[3] + s[4] - s[4] % _SYM.size]):
            typ = info & 0xf
            if nm == 0 or shndx == 0 or shndx >= 0xff00 or typ not in (0, 1, 2, 10):
                continue
            name = _cstr(self.data, stroff + nm)
            if typ == 0 and name[:1] == "$":    # arm64's mapping symbols ($x, $d): no names
                continue
            out.append((value, size, name, shndx, info >> 4 != 0))
        return out

    def plt_symbols(self):
        """gdb's "name@plt" symbols (of size 0): each PLT entry that jumps
        through a GOT slot that a JUMP_SLOT, GLOB_DAT or IRELATIVE
        relocation names."""
        dyn = self.sections.get(".dynsym")
        if dyn is None or dyn[5] >= len(self.raw_sections):
            return []
        machine = struct.unpack_from("<H", self.data, 18)[0]
        # (JUMP_SLOT, GLOB_DAT), IRELATIVE of x86-64 and of arm64
        named, irelative = ((1026, 1025), 1032) if machine == 183 else ((6, 7), 37)
        strs, slots, out = self.raw_sections[dyn[5]][4], {}, []
        for rel in (".rela.plt", ".rela.dyn"):
            s = self.sections.get(rel)
            if s is None or s[1] == 8:
                continue
            rela = self.data[s[3]:s[3] + s[4] // 24 * 24]
            for off, info, add in struct.iter_unpack("<QQq", rela):
                if info & 0xffffffff in named and 0 < info >> 32 < dyn[4] // 24:
                    nm = struct.unpack_from("<I", self.data, dyn[3] + 24 * (info >> 32))[0]
                    slots[off] = _cstr(self.data, strs + nm)
                elif info == irelative:             # (an ifunc)
                    slots[off] = "*ABS*+0x%x" % add
        for sec in (".plt", ".plt.sec", ".plt.got"):
            s = self.sections.get(sec)
            if s is None or s[1] == 8:
                continue
            idx, _, addr, off, size, _ = s
            step = self.raw_sections[idx][9] or 16
            for e in range(0, size - step + 1, step):
                entry = bytes(self.data[off + e:off + e + step])
                slot = _a64_plt_slot(entry, addr + e) if machine == 183 else None
                k = entry.find(b"\xff\x25")             # jmp *slot(%rip)
                if machine != 183 and 0 <= k <= step - 6:
                    slot = addr + e + k + 6 + struct.unpack_from("<i", entry, k + 2)[0]
                if slot in slots:
                    out.append((addr + e, 0, slots[slot] + "@plt", idx, False))
        return out

    def section_of(self, vaddr):
        """Index of the allocated section holding vaddr (they do not overlap), or None."""
        i = bisect.bisect_right(self.alloc, (vaddr, 1 << 64)) - 1
        if i >= 0 and vaddr < self.alloc[i][1]:
            return self.alloc[i][2]
        return None


def _a64_plt_slot(entry, addr):
    """The GOT slot an arm64 PLT entry at addr loads its target from
    (`adrp x16, page; ldr x17, [x16, #off]; ...; br x17`), or None."""
    if len(entry) < 8:
        return None
    adrp, ldr = struct.unpack_from("<II", entry)
    if adrp & 0x9f00001f != 0x90000010 or ldr & 0xffc003ff != 0xf9400211:
        return None
    imm = ((adrp >> 5 & 0x7ffff) << 2 | adrp >> 29 & 3) << 12
    if imm >> 32:
        imm -= 1 << 33
    return (addr & ~0xfff) + imm + (ldr >> 10 & 0xfff) * 8


class _SymbolSet(object):
    """The symbols of one file, for lookups by name and by address."""

    def __init__(self, elf, tables):
        self.elf = elf
        self.by_name = {}
        by_sec = {}
        seen = set()
        for table in tables:
            for value, size, name, shndx, glob in (elf.plt_symbols() if table == "plt" else
                                                   elf.symbols(table)):
                if name not in self.by_name or (glob and not self.by_name[name][1]):
                    self.by_name[name] = (value, glob)      # a global wins over a local
                if (value, name, shndx) not in seen:
                    seen.add((value, name, shndx))
                    by_sec.setdefault(shndx, []).append((value, name, size))
        self.by_sec = {}
        for shndx, ents in by_sec.items():
            ents.sort()
            self.by_sec[shndx] = ([e[0] for e in ents], ents)

    def at(self, vaddr):
        """(value, name) of the symbol that holds vaddr, as gdb picks it: in
        vaddr's section, the last (by address, then name) symbol at or below
        it with a size that covers it; a symbol of size 0 above that one, if
        there is one, wins over a sized symbol that does not cover vaddr."""
        sec = self.elf.section_of(vaddr)
        if sec not in self.by_sec:
            return None
        addrs, ents = self.by_sec[sec]
        i = bisect.bisect_right(addrs, vaddr) - 1
        zero = None
        while i >= 0:
            value, name, size = ents[i]
            if size == 0:
                zero = zero or (value, name)
                i -= 1
                continue
            return (value, name) if vaddr < value + size else zero
        return zero


_file_symbols = {}      # ELF file -> its _SymbolSet, or False when it cannot be read


def section_address(path: str, name: str) -> Optional[int]:
    """The ELF address of section `name` of the file at path, or None (no
    such file or section)."""
    try:
        s = _Elf(_map(path)).sections.get(name)
    except (OSError, ValueError, struct.error):
        return None
    return None if s is None else s[2]


def file_symbol_at(path: str, vaddr: int) -> Optional[str]:
    """The symbol of ELF file `path` (.symtab, .dynsym, PLT entries) that
    holds its link-time address vaddr, as gdb picks it (_SymbolSet.at), or
    None: for a debugger that picks otherwise among symbols at one address
    (lldb)."""
    ss = _file_symbols.get(path)
    if ss is None:
        try:
            ss = _SymbolSet(_Elf(_map(path)), (".symtab", ".dynsym", "plt"))
        except (OSError, ValueError, struct.error):
            ss = False
        _file_symbols[path] = ss
    hit = ss.at(vaddr) if ss else None
    return hit[1] if hit else None


class _Cfi(object):
    """The FDEs of one section of call frame information (.eh_frame or
    .debug_frame), found by address."""

    def __init__(self, data, vaddr, eh, hdr=None):
        self.d, self.vaddr, self.eh = data, vaddr, eh
        self.hdr = hdr                  # (.eh_frame_hdr bytes, vaddr) or None
        self.cies = {}
        self.index = None               # sorted [(pc_begin, pc_end, offset)] when scanned

    def _at(self, p):
        return self.vaddr + p

    def _entry(self, off):
        """(id field offset, id value, body start, end) of the entry at off, or None."""
        d = self.d
        if off + 4 > len(d):
            return None
        length = struct.unpack_from("<I", d, off)[0]
        p, wide = off + 4, False
        if length == 0xffffffff:
            length = struct.unpack_from("<Q", d, p)[0]
            p, wide = p + 8, True
        if length == 0 or p + length > len(d):
            return None
        cid = struct.unpack_from("<Q" if wide else "<I", d, p)[0]
        return p, cid, p + (8 if wide else 4), p + length, wide

    def cie(self, off):
        c = self.cies.get(off)
        if c is not None:
            return c
        d, e = self.d, self._entry(off)
        if e is None:
            raise ValueError("no CIE at offset 0x%x" % off)
        _, _, p, end, _ = e
        version = d[p]
        aug_end = d.index(b"\0", p + 1)
        aug = bytes(d[p + 1:aug_end]).decode("ascii", "replace")
        p = aug_end + 1
        if version >= 4:
            p += 2                      # address_size, segment_selector_size
        code_align, p = uleb128(d, p)
        data_align, p = sleb128(d, p)
        if version == 1:
            ra, p = d[p], p + 1
        else:
            ra, p = uleb128(d, p)
        c = {"code": code_align, "data": data_align, "ra": ra, "enc": 0, "signal": "S" in aug,
             "z": aug.startswith("z")}
        if c["z"]:
            n, p = uleb128(d, p)
            q, after = p, p + n
            for ch in aug[1:]:
                if ch == "R":
                    c["enc"], q = d[q], q + 1
                elif ch == "L":
                    q += 1
                elif ch == "P":
                    enc = d[q]
                    _, q = _encoded(d, q + 1, enc & 0x7f, self._at)
            p = after
        c["init"] = (p, end)
        self.cies[off] = c
        return c

    def fde(self, off):
        """(cie, pc_begin, pc_end, (instructions start, end)) of the FDE at off."""
        e = self._entry(off)
        if e is None:
            return None
        idp, cid, p, end, wide = e
        if self.eh:
            if cid == 0:
                return None
            cie = self.cie(idp - cid)
        else:
            if cid == (0xffffffffffffffff if wide else 0xffffffff):
                return None
            cie = self.cie(cid)
        d, enc = self.d, cie["enc"]
        begin, p = _encoded(d, p, enc, self._at)
        size, p = _encoded(d, p, enc & 0x0f, self._at)
        if cie["z"]:
            n, p = uleb128(d, p)
            p += n
        return cie, begin, begin + size, (p, end)

    def find(self, vaddr):
        """The FDE that covers vaddr (an address of the ELF file), or None."""
        if self.hdr is not None and self.index is None:
            r = self._find_hdr(vaddr)
            if r != "scan":
                return r
        if self.index is None:
            self._scan()
        i = bisect.bisect_right(self.index, (vaddr, 1 << 64)) - 1
        while i >= 0 and vaddr < self.index[i][1]:
            if self.index[i][0] <= vaddr:
                return self.fde(self.index[i][2])
            i -= 1
        return None

    def _find_hdr(self, vaddr):
        """Binary search of .eh_frame_hdr's sorted table; "scan" when the
        table's encoding is not the usual one."""
        h, hv = self.hdr
        if len(h) < 4 or h[0] != 1 or h[3] != 0x3b:
            return "scan"
        at = (lambda p: hv + p)
        _, p = _encoded(h, 4, h[1], at, hv)
        count, p = _encoded(h, p, h[2], at, hv)
        if count is None or p + 8 * count > len(h):
            return "scan"
        lo, hi = 0, count
        while lo < hi:
            mid = (lo + hi) // 2
            if struct.unpack_from("<i", h, p + 8 * mid)[0] + hv <= vaddr:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return None
        fde_addr = struct.unpack_from("<i", h, p + 8 * (lo - 1) + 4)[0] + hv
        f = self.fde(fde_addr - self.vaddr)
        return f if f is not None and f[1] <= vaddr < f[2] else None

    def _scan(self):
        out = []
        off = 0
        while True:
            e = self._entry(off)
            if e is None:
                break
            try:
                f = self.fde(off)
            except (ValueError, IndexError, struct.error):
                f = None
            if f is not None and f[2] > f[1]:
                out.append((f[1], f[2], off))
            off = e[3]
        out.sort()
        self.index = out


class Image(object):
    """One ELF file the process mapped.  path: its name as the dynamic
    loader (and gdb) names it; file: the file read on disk; bias: runtime
    address minus ELF address; start, end: the mapped range; build_id;
    debug_path: the separate debug file found by build-id, or None."""

    def __init__(self, path: str, file: Optional[str], elf: Any, bias: int, start: int, end: int,
                 debug_dirs: Sequence[str], sysroot: str) -> None:
        self.path, self.file, self.elf, self.bias = path, file, elf, bias
        self.start, self.end = start, end
        self.build_id = elf.build_id()
        self.debug_path = None
        self._debug = None
        if self.build_id and len(self.build_id) > 2:
            for d in debug_dirs:
                for base in ([d] if sysroot in ("", "/") else [_under(sysroot, d), d]):
                    p = os.path.join(base, ".build-id", self.build_id[:2],
                                     self.build_id[2:] + ".debug")
                    if self.debug_path is None and os.path.isfile(p):
                        self.debug_path = p
        self._syms = None
        self._cfi = None

    def __repr__(self) -> str:
        return "Image(%s 0x%x-0x%x bias 0x%x)" % (self.path, self.start, self.end, self.bias)

    def debug_elf(self) -> Any:
        if self._debug is None and self.debug_path:
            try:
                self._debug = _Elf(_map(self.debug_path))
            except (OSError, ValueError, struct.error):
                self.debug_path = None
        return self._debug

    def use_debug_file(self, path: str) -> None:
        """Take path (a debuginfod server's copy) as the separate debug file."""
        self.debug_path, self._debug, self._syms = path, None, None

    def dwarf_file(self) -> Optional[str]:
        """The file with the image's DWARF (its separate debug file, or
        itself), or None: from the section headers already read."""
        dbg = self.debug_elf()
        if dbg is not None and ".debug_info" in dbg.sections:
            return self.debug_path
        return self.file if self.file and ".debug_info" in self.elf.sections else None

    def may_define(self, name: str) -> bool:
        """False when the image's symbol tables cannot have `name` (see
        _Elf.may_name): symbol() then need not read them."""
        if self._syms is not None:
            return True
        raw = (name[:-4] if name.endswith("@plt") else name).encode("utf-8", "surrogateescape")
        dbg = self.debug_elf()
        return self.elf.may_name(raw) or (dbg is not None and dbg.may_name(raw))

    def symbol_sets(self) -> List[Any]:
        """[main file's .symtab, .dynsym and PLT entries, separate debug file's .symtab]."""
        if self._syms is None:
            self._syms = [_SymbolSet(self.elf, (".symtab", ".dynsym", "plt"))]
            dbg = self.debug_elf()
            if dbg is not None:
                self._syms.append(_SymbolSet(dbg, (".symtab",)))
        return self._syms

    def cfi(self) -> List[Any]:
        """The image's CFI sections, in the order they are searched."""
        if self._cfi is None:
            self._cfi = []
            eh = self.elf.section_bytes(".eh_frame")
            if eh is not None:
                self._cfi.append(_Cfi(eh[0], eh[1], True, self.elf.section_bytes(".eh_frame_hdr")))
            for elf in (self.elf, self.debug_elf()):
                df = elf.section_bytes(".debug_frame") if elf is not None else None
                if df is not None:
                    self._cfi.append(_Cfi(df[0], df[1], False))
        return self._cfi

    def find_fde(self, addr: int) -> Optional[Tuple[Any, Any]]:
        """(cfi section, fde) covering runtime address addr, or None."""
        for cfi in self.cfi():
            try:
                f = cfi.find(addr - self.bias)
            except (ValueError, IndexError, struct.error):
                f = None
            if f is not None:
                return cfi, f
        return None


def _under(sysroot, path):
    return os.path.join(sysroot, path.lstrip("/")) if sysroot not in ("", "/") else path


def _carried(regs, names):
    """A caller's registers holding the callee's values of names (the
    callee-saved registers, until the CFI says where they were saved): a
    register set that notes its reads (copymemo.Regs) gives one that notes
    a carried register only when the caller's value is read."""
    carry = getattr(regs, "carry", None)
    if carry is not None:
        return carry(names)
    return {n: regs.get(n) for n in names}


class _Unwound(Exception):
    """Ends a walk with a reason."""


class Process(object):
    """What a core and a live process share: the ELF files the process
    mapped (program, libraries, vDSO), their symbols, and the unwinder
    over the process's memory.  A subclass sets arch, threads (Thread),
    files ([(start, end, file offset, name)] of each file-backed mapping,
    as NT_FILE or /proc/PID/maps give them), auxv and psargs, gives read(),
    then calls _load_images().  what: how messages name it ('the core',
    'process 1234')."""

    what = "the process"
    _uread = None           # the unwinder's memory reader (unwind(read=...))
    _rules_at = None        # lookup address -> its unwind rules (_step)

    def _init_files(self, executable, sysroot, debug_dirs):
        self.executable = executable
        self.sysroot, self.debug_dirs = sysroot, tuple(debug_dirs)
        self._maps = {}                 # path on disk -> mmap (None: unreadable)
        self.missing = []               # files it names that are not on disk
        self._exe_nt = None             # the name the program is mapped as

    def read(self, addr: int, n: int) -> bytes:
        """n bytes of memory at addr, or FaultError."""
        raise NotImplementedError

    def mapped(self, addr: int) -> Optional[Tuple[int, int, Any]]:
        """(start, end, buffer) of memory held in place around addr, or None."""
        return None

    def release_pages(self) -> None:
        """Let go of the pages of memory held in place (none here)."""

    def regions(self) -> List[Tuple[int, int, bool, str]]:
        """[(start, end, writable, name)] of the memory that can be read."""
        raise NotImplementedError

    # --- images ---------------------------------------------------------------
    def _disk(self, name):
        """The path to open for a file the process mapped as `name`."""
        if name == self._exe_nt and self.executable:
            return self.executable
        return _under(self.sysroot, name)

    def _file_map(self, name):
        """The mmap of the file mapped as `name`, or None when it cannot be
        read or is an ELF file of another machine."""
        if name not in self._maps:
            disk = self._disk(name)
            try:                        # (regular files only: never a device)
                data = _map(disk) if os.path.isfile(disk) else None
            except (OSError, ValueError):
                data = None
            self._maps[name] = None if self._foreign(data, disk) else data
        return self._maps[name]

    def _foreign(self, data, disk):
        """True when data (the file at disk) is an ELF file built for another
        machine than the core's (an x86-64 library where an arm64 core names
        its own, read without the right --sysroot): it is named among the
        files not found, and not read."""
        if data is None or len(data) < 20 or data[:4] != b"\x7fELF" or \
                struct.unpack_from("<H", data, 18)[0] == self.arch.machine:
            return False
        self.missing.append("%s (built for another machine)" % disk)
        return True

    def _load_images(self):
        """The program and libraries: from NT_FILE (each mapped ELF file), in
        the dynamic loader's order; without NT_FILE, from AT_PHDR and the
        loader's list.  Then the vDSO."""
        self._fmaps = sorted(self.files)        # [(start, end, offset, name)] for reads
        self._fmap_starts = [f[0] for f in self._fmaps]
        entry = self.auxv.get(AT_ENTRY)
        self._exe_nt = next((n for s, e, _, n in self.files
                             if entry is not None and s <= entry < e), None)
        if not self.executable:
            for cand in (self._exe_nt, self._auxv_string(AT_EXECFN), self.psargs.split(" ")[0]):
                if cand and os.path.isfile(self._disk(cand)):
                    self.executable = self._disk(cand)
                    break
        groups = {}
        for s, e, off, name in self.files:
            groups.setdefault(name, []).append((s, e, off))
        self.missing = [self._disk(n) for n in groups      # (the libraries among them)
                        if n.startswith("/") and ".so" in os.path.basename(n) and
                        not os.path.exists(self._disk(n))]
        images = [img for img in (self._image(n, maps) for n, maps in groups.items()) if img]
        exe = next((i for i in images if i.path == self._exe_nt), None) if self._exe_nt else None
        if exe is None and not self.files and self.executable:
            exe = self._image_at(self.executable, self.executable, None)
        if exe is not None:
            exe.path = self.executable
            images = [i for i in images if i is not exe]
        order = []
        for name, l_addr, l_ld in (self._link_map(exe) if exe is not None else []):
            img = next((i for i in images if i not in order and _dynamic(i) == l_ld), None)
            if img is None and name and not self.files:
                img = self._image_at(name, _under(self.sysroot, name), l_addr)
                if img is not None:
                    images.append(img)
                elif not os.path.exists(_under(self.sysroot, name)):
                    self.missing.append(_under(self.sysroot, name))
            if img is not None and name:
                img.path = _under(self.sysroot, name)       # (as gdb names it)
                order.append(img)
        rest = sorted((i for i in images if i not in order), key=lambda i: i.start)
        self.images = ([exe] if exe is not None else []) + order + rest
        self.exe_image = exe
        vdso = self._vdso()
        if vdso is not None:
            self.images.append(vdso)
        self._by_start = sorted(self.images, key=lambda i: i.start)
        self._starts = [i.start for i in self._by_start]
        if not self.files:              # no NT_FILE: the images' segments stand in for it
            for img in self.images:
                for t, _, off, va, fsz, _ in (img.elf.phdrs if img.file else ()):
                    if t == PT_LOAD and fsz:
                        self._maps[img.file] = img.elf.data
                        self._fmaps.append((img.bias + va - va % PAGE, img.bias + va + fsz,
                                            off - va % PAGE, img.file))
            self._fmaps.sort()
            self._fmap_starts = [f[0] for f in self._fmaps]

    def _image(self, name, maps):
        """An Image of the file mapped as `name` at the NT_FILE ranges `maps`."""
        data = self._file_map(name)
        if data is None or data[:4] != b"\x7fELF":
            return None
        try:
            elf = _Elf(data)
        except struct.error:
            return None
        s, _, off = min(maps, key=lambda m: m[2])
        for t, _, p_off, p_vaddr, p_fsz, _ in elf.phdrs:
            if t == PT_LOAD and p_off - p_vaddr % PAGE == off:
                bias = s - (p_vaddr - p_vaddr % PAGE)
                return Image(name, self._disk(name), elf, bias, min(m[0] for m in maps),
                             max(m[1] for m in maps), self.debug_dirs, self.sysroot)
        return None

    def _elf_at(self, disk):
        """The _Elf of the file at disk, or None (unreadable, not ELF, or
        built for another machine)."""
        try:
            data = _map(disk)
            if self._foreign(data, disk):
                return None
            return _Elf(data)
        except (OSError, ValueError, struct.error):
            return None

    def image_with_header(self, path: str, header: int) -> Optional[Image]:
        """The Image of the file at path whose ELF header the process has
        mapped at address `header` (a debugger's list of loaded modules
        gives that), or None."""
        elf = self._elf_at(path)
        first = [p for p in elf.phdrs if p[0] == PT_LOAD and p[2] == 0] if elf else []
        if not first:
            return None
        return self._image_at(path, path, header - (first[0][3] - first[0][3] % PAGE), elf)

    def _image_at(self, name, disk, bias, elf=None):
        """An Image of a file not in NT_FILE, loaded at bias (None: from
        AT_PHDR); elf: the file's _Elf, when read already."""
        elf = elf or self._elf_at(disk)
        if elf is None:
            return None
        loads = [p for p in elf.phdrs if p[0] == PT_LOAD]
        if not loads:
            return None
        if bias is None:
            phdr = [p for p in elf.phdrs if p[0] == PT_PHDR]
            if not phdr or AT_PHDR not in self.auxv:
                return None
            bias = self.auxv[AT_PHDR] - phdr[0][3]
        start = min(p[3] for p in loads) // PAGE * PAGE + bias
        end = max(p[3] + p[5] for p in loads) + bias
        return Image(name, disk, elf, bias, start, end, self.debug_dirs, self.sysroot)

    def _vdso(self):
        base = self.auxv.get(AT_SYSINFO_EHDR)
        try:
            head = self.read(base, 64) if base else b""
            if head[:4] != b"\x7fELF":
                return None
            shoff = struct.unpack_from("<Q", head, 0x28)[0]
            entsize, num = struct.unpack_from("<HH", head, 0x3a)
            elf = _Elf(self.read(base, max(shoff + entsize * num, 64)))
        except (FaultError, struct.error):
            return None
        loads = [p for p in elf.phdrs if p[0] == PT_LOAD]
        if not loads:
            return None
        bias = base - loads[0][3] // PAGE * PAGE
        end = max(p[3] + p[5] for p in loads) + bias
        return Image("[vdso]", None, elf, bias, base, end, (), "/")

    def _auxv_string(self, key):
        try:
            return self.cstring(self.auxv[key]) if key in self.auxv else None
        except FaultError:
            return None

    def _link_map(self, exe):
        """[(name, l_addr, l_ld)] of the dynamic loader's list of loaded
        objects (r_debug.r_map through the program's DT_DEBUG), or []."""
        out = []
        try:
            dyn = [p for p in exe.elf.phdrs if p[0] == PT_DYNAMIC]
            if not dyn:
                return out
            a, r_debug = exe.bias + dyn[0][3], 0
            for i in range(dyn[0][4] // 16):
                tag, val = struct.unpack("<qQ", self.read(a + 16 * i, 16))
                if tag == 0:
                    break
                if tag == DT_DEBUG:
                    r_debug = val
            lm = struct.unpack("<Q", self.read(r_debug + 8, 8))[0] if r_debug else 0
            seen = set()
            while lm and lm not in seen and len(out) < 4096:
                seen.add(lm)
                l_addr, l_name, l_ld, l_next = struct.unpack("<QQQQ", self.read(lm, 32))
                out.append((self.cstring(l_name) if l_name else "", l_addr, l_ld))
                lm = l_next
        except FaultError:
            pass
        return out

    def cstring(self, addr: int, limit: int = 4096) -> bytes:
        """The NUL-terminated string at addr (at most `limit` bytes)."""
        out = b""
        while len(out) < limit:
            try:
                chunk = self.read(addr + len(out), 64)
            except FaultError:
                chunk = self.read(addr + len(out), 1)
            k = chunk.find(b"\0")
            if k >= 0:
                return (out + chunk[:k]).decode("utf-8", "surrogateescape")
            out += chunk
        return out.decode("utf-8", "surrogateescape")

    # --- symbols --------------------------------------------------------------
    def image_of(self, addr: int) -> Optional[Image]:
        """The Image whose mapped range holds addr, or None."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._by_start[i].end:
            return self._by_start[i]
        return None

    def objfile_of(self, addr: int) -> Optional[str]:
        """The program or library file holding addr (not the vDSO: no file)."""
        img = self.image_of(addr)
        return img.path if img is not None and img.file else None

    def library_of(self, addr: int) -> Optional[str]:
        """The shared library holding addr (not the program, not the
        vDSO), as gdb.solib_name answers, or None."""
        img = self.image_of(addr)
        return img.path if img is not None and img.file and img is not self.exe_image else None

    def symbol(self, name: str) -> Optional[int]:
        """Runtime address of a symbol: the program first, then the
        libraries in load order; None when no file defines it."""
        for img in self.images:
            if not img.may_define(name):
                continue
            for ss in img.symbol_sets():
                if name in ss.by_name:
                    return ss.by_name[name][0] + img.bias
        return None

    def symbolize(self, addr: int) -> Optional[str]:
        """The symbol holding addr as gdb's `info symbol` names it, or None."""
        img = self.image_of(addr)
        if img is None:
            return None
        best = None
        for ss in img.symbol_sets():
            hit = ss.at(addr - img.bias)
            if hit is not None and (best is None or hit[0] > best[0]):
                best = hit
        return best[1] if best else None

    # --- unwinding ------------------------------------------------------------
    def unwind(self, regs: Dict[str, int], max_frames: int = 64,
               read: Optional[Callable[[int, int], bytes]] = None
               ) -> Tuple[List[Tuple[Optional[int], Dict[str, int]]], Optional[str]]:
        """(frames, stop_reason): [(pc, regs)] innermost first from regs, and
        None when the walk reached the outermost frame, else why it stopped.
        read(addr, n): where the stack's words are read (default self.read;
        a live process's sampler gives the copy it made at the stop)."""
        self._uread = read or self.read
        pcn, spn = self.arch.pc, self.arch.sp
        # (regs.copy(): a copymemo.Regs stays one, noting what is read)
        frames = [(regs.get(pcn), regs.copy())]
        if frames[0][0] is None:
            return frames, "the registers have no pc"
        above_signal = True             # frame 0's pc is not a return address
        seen = set()
        while len(frames) < max_frames:
            pc, cur = frames[-1]
            try:
                nxt, signal = self._step(pc, cur, pc if above_signal else pc - 1)
            except _Unwound as e:
                return frames, str(e)
            except FaultError as e:
                return frames, "cannot read memory at 0x%x while unwinding" % e.address
            except (IndexError, ValueError, struct.error):
                return frames, "the unwind information for 0x%x is malformed" % pc
            if nxt is None or not nxt[pcn]:
                return frames, None
            key = (nxt[pcn], nxt[spn])
            if key in seen:
                return frames, "the frame above 0x%x is the same frame again (corrupt stack?)" % pc
            seen.add(key)
            frames.append((nxt[pcn], nxt))
            above_signal = signal
        return frames, "stopped after %d frames" % max_frames

    def _step(self, pc, regs, lookup):
        """(the caller's registers or None at the outermost frame, whether
        this frame is a signal frame)."""
        # The rules at an address, worked out once (a profiler unwinds
        # from the same addresses again and again; the files do not change).
        cache = self._rules_at
        if cache is None:
            cache = self._rules_at = {}
        got = cache.get(lookup)
        if got is None:
            img = self.image_of(lookup)
            if img is None:
                raise _Unwound("no unwind information for 0x%x (not in a mapped ELF file%s)" % (
                    pc, "; not found: %s" % ", ".join(self.missing) if self.missing else ""))
            found = img.find_fde(lookup)
            if found is None:
                plt = self._plt_step(pc, regs, lookup)
                if plt is not None:
                    return plt, False
                raise _Unwound("no unwind information for 0x%x (in %s)" % (pc, img.path))
            cfi, (cie, begin, _, ins) = found
            got = (cfi, cie) + tuple(_run_cfa(cfi, cie, begin, ins, lookup - img.bias))
            if len(cache) >= 65536:
                cache.clear()
            cache[lookup] = got
        cfi, cie, cfa_rule, rules, ra_signed = got
        arch = self.arch
        if cfa_rule[0] == "reg":
            base = regs.get(arch.dwarf_name(cfa_rule[1]))
            if base is None:
                raise _Unwound("cannot compute the frame address of 0x%x: register %s unknown"
                               % (pc, arch.dwarf_name(cfa_rule[1])))
            cfa = (base + cfa_rule[2]) & 0xffffffffffffffff
        else:
            cfa = self._eval(cfi.d[cfa_rule[1]:cfa_rule[2]], regs, None)
        out = _carried(regs, arch.callee_saved)
        out[arch.sp] = cfa
        out[arch.pc] = None
        ra = cie["ra"]
        if ra not in rules:
            if not arch.ra_same:
                raise _Unwound("no return address rule for 0x%x" % pc)
            rules = dict(rules)
            rules[ra] = ("same", None)
        for reg, (how, arg) in rules.items():
            name = arch.dwarf_name(reg) if reg != ra else arch.pc
            if name is None:
                continue
            if how == "offset":
                val = struct.unpack("<Q", self._uread((cfa + arg) & 0xffffffffffffffff, 8))[0]
            elif how == "val_offset":
                val = (cfa + arg) & 0xffffffffffffffff
            elif how == "register":
                val = regs.get(arch.dwarf_name(arg))
            elif how in ("expr", "val_expr"):
                val = self._eval(cfi.d[arg[0]:arg[1]], regs, cfa)
                if how == "expr":
                    val = struct.unpack("<Q", self._uread(val, 8))[0]
            elif how == "same":
                val = regs.get(arch.dwarf_name(reg))
            else:
                val = None              # undefined
            if reg == ra and val is not None:
                if ra_signed:
                    val &= USER_VA_MASK
                if arch.ra_same:        # (arm64: the caller's lr is what it returns to)
                    out[arch.dwarf_name(ra)] = val
            out[name] = val
        if out[arch.pc] is None:
            return None, cie["signal"]
        return out, cie["signal"]

    def _plt_step(self, pc, regs, lookup):
        """The caller's registers when the interrupted pc is in an arm64 PLT
        stub (memset@plt), which no CFI describes: a stub touches neither
        the stack nor the link register (it jumps through x16/x17), so the
        caller returns to lr with the same stack pointer.  None elsewhere
        (a PLT pc cannot be a return address, and x86-64's PLT has CFI)."""
        arch = self.arch
        if arch.name != "aarch64" or lookup != pc or \
                not (self.symbolize(pc) or "").endswith("@plt"):
            return None
        lr = regs.get("x30")
        if not lr:
            return None
        out = _carried(regs, arch.callee_saved)
        out[arch.sp] = regs.get(arch.sp)
        out["x30"] = lr
        out[arch.pc] = lr & USER_VA_MASK
        return out

    def _eval(self, expr, regs, push):
        """Value of a DWARF expression (the few operations CFI uses)."""
        st = [] if push is None else [push]
        p, mask = 0, 0xffffffffffffffff
        while p < len(expr):
            op = expr[p]
            p += 1
            if 0x30 <= op <= 0x4f:                      # DW_OP_lit<n>
                st.append(op - 0x30)
            elif 0x70 <= op <= 0x8f or op == 0x92:      # DW_OP_breg<n>, bregx
                reg = op - 0x70
                if op == 0x92:
                    reg, p = uleb128(expr, p)
                off, p = sleb128(expr, p)
                val = regs.get(self.arch.dwarf_name(reg)) if self.arch.dwarf_name(reg) else None
                if val is None:
                    raise _Unwound("CFI expression reads register %d, which is not known" % reg)
                st.append((val + off) & mask)
            elif op == 0x06:                            # deref
                st.append(struct.unpack("<Q", self._uread(st.pop(), 8))[0])
            elif op == 0x23:                            # plus_uconst
                v, p = uleb128(expr, p)
                st.append((st.pop() + v) & mask)
            elif op in _CONSTS:                         # const<n>u, const<n>s
                st.append(struct.unpack_from(_CONSTS[op], expr, p)[0] & mask)
                p += struct.calcsize(_CONSTS[op])
            elif op in (0x10, 0x11):                    # constu, consts
                v, p = (uleb128 if op == 0x10 else sleb128)(expr, p)
                st.append(v & mask)
            elif op in _BINOPS:
                b, a = st.pop(), st.pop()
                st.append(_BINOPS[op](a, b) & mask)
            elif op == 0x12:                            # dup
                st.append(st[-1])
            elif op == 0x13:                            # drop
                st.pop()
            elif op == 0x16:                            # swap
                st[-1], st[-2] = st[-2], st[-1]
            else:
                raise _Unwound("CFI expression operation 0x%x is not supported" % op)
        if not st:
            raise _Unwound("empty CFI expression")
        return st[-1]


class Core(Process):
    """A core file: memory and threads from the core; its mapped ELF
    images, symbols and unwinding as Process reads them."""

    what = "the core"

    def __init__(self, path: str, executable: Optional[str] = None, sysroot: str = "/",
                 debug_dirs: Sequence[str] = ("/usr/lib/debug",)) -> None:
        self.path = path
        self._ids = None            # {mapped address: build-id} (corefile.build_ids), when asked
        self._init_files(executable, sysroot, debug_dirs)
        try:
            self._m = _map(path)
        except OSError as e:
            raise ValueError("cannot read %s: %s" % (path, e.strerror or e))
        h = bytes(self._m[:64])
        if len(h) < 64 or h[:4] != b"\x7fELF":
            raise ValueError("%s is not an ELF file" % path)
        if h[4] != 2 or h[5] != 1:
            raise ValueError("%s is not a 64-bit little-endian ELF file" % path)
        e_type, machine = struct.unpack_from("<HH", h, 16)
        if e_type != 4:
            raise ValueError("%s is an ELF file but not a core file (ELF type %d)" % (path, e_type))
        self.arch = ARCHES.get(machine)
        if self.arch is None:
            arch = {3: "an i386", 40: "a 32-bit ARM"}.get(machine, "a machine %d" % machine)
            raise ValueError("%s is %s core file: the core reader reads x86-64 and arm64 cores "
                             "only; open it in gdb (gdb-multiarch) with ljgdb" % (path, arch))
        size = len(self._m)
        self.segments = corefile.segments(path)
        mem = sorted((s.vaddr, s.vaddr + min(s.filesz, max(0, size - s.offset)), s.offset)
                     for s in self.segments if s.filesz)
        self._mem = [m for m in mem if m[1] > m[0]]
        self._mv = None
        self._mem_starts = [m[0] for m in self._mem]
        self.threads, self.files, self.auxv, self.psargs = [], [], {}, ""
        for t, _, off, _, fsz, _ in corefile.phdrs(self._m):
            if t == PT_NOTE:
                for name, ntype, desc in _notes(self._m[off:off + fsz]):
                    if name == b"CORE":
                        self._note(ntype, desc)
        self._load_images()

    def _disk(self, name):
        """Process._disk's path; for a file not there, with DEBUGINFOD_URLS
        set, a debuginfod server's copy of the file of the build-id the
        core holds in its first page (debuginfod.executable)."""
        disk = Process._disk(self, name)
        if os.path.exists(disk):
            return disk
        from . import debuginfod
        if not debuginfod.urls():
            return disk
        if self._ids is None:
            self._ids = corefile.build_ids(self.path)
        start = min((s for s, _, off, n in self.files if n == name and off == 0), default=None)
        got = debuginfod.executable(self._ids[start]) if start in self._ids else None
        return got or disk

    # --- notes ----------------------------------------------------------------
    def _note(self, ntype, desc):
        names = self.arch.pr_regs
        if ntype == NT_PRSTATUS and len(desc) >= 112 + len(names) * 8:
            regs = dict(zip(names, struct.unpack_from("<%dQ" % len(names), desc, 112)))
            self.threads.append(Thread(struct.unpack_from("<i", desc, 32)[0], regs,
                                       struct.unpack_from("<h", desc, 12)[0], regs[self.arch.pc]))
        elif ntype == NT_FILE and len(desc) >= 16:
            count, page = struct.unpack_from("<QQ", desc, 0)
            if 16 + 24 * count > len(desc):
                return
            names = desc[16 + 24 * count:].split(b"\0")
            for i in range(min(count, len(names))):
                s, e, pgoff = struct.unpack_from("<QQQ", desc, 16 + 24 * i)
                self.files.append((s, e, pgoff * page,
                                   names[i].decode("utf-8", "surrogateescape")))
        elif ntype == NT_AUXV:
            for k, v in struct.iter_unpack("<QQ", desc[:len(desc) - len(desc) % 16]):
                if k == 0:
                    break
                self.auxv[k] = v
        elif ntype == NT_PRPSINFO and len(desc) >= 136:
            self.psargs = _cstr(desc[56:136], 0)

    # --- memory ---------------------------------------------------------------
    def read(self, addr: int, n: int) -> bytes:
        """n bytes of memory at addr.  Raises FaultError at the first byte
        neither the core nor a mapped file holds."""
        i = bisect.bisect_right(self._mem_starts, addr) - 1
        if i >= 0:
            s, e, off = self._mem[i]
            if addr + n <= e:
                return self._m[off + addr - s:off + addr - s + n]
        parts = []
        a, end = addr, addr + n
        while a < end:
            piece = self._piece(a, end)
            if not piece:
                raise FaultError("cannot access memory at 0x%x" % a, a)
            parts.append(piece)
            a += len(piece)
        return b"".join(parts)

    def release_pages(self) -> None:
        """The core's pages this process holds dropped (MADV_DONTNEED on
        its read-only mapping of the file: the next read of them faults
        them in again from the page cache or the file)."""
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if advice is not None and isinstance(self._m, mmap.mmap):
            try:
                self._m.madvise(advice)
            except OSError:
                pass

    def mapped(self, addr: int) -> Optional[Tuple[int, int, Any]]:
        """(start, end, memoryview) of the core's bytes around addr (one
        PT_LOAD segment's, read in place through the mmap), or None when
        the core holds no byte at addr."""
        i = bisect.bisect_right(self._mem_starts, addr) - 1
        if i < 0 or addr >= self._mem[i][1]:
            return None
        s, e, off = self._mem[i]
        if self._mv is None:
            self._mv = memoryview(self._m)
        return s, e, self._mv[off:off + e - s]

    def _piece(self, a, end):
        """The bytes from a on (up to end) that one source holds."""
        i = bisect.bisect_right(self._mem_starts, a) - 1
        if i >= 0 and a < self._mem[i][1]:
            s, e, off = self._mem[i]
            return self._m[off + a - s:off + min(end, e) - s]
        if i + 1 < len(self._mem):
            end = min(end, self._mem[i + 1][0])   # the core's bytes come first
        j = bisect.bisect_right(self._fmap_starts, a) - 1
        if j < 0 or a >= self._fmaps[j][1]:
            return None
        s, e, off, name = self._fmaps[j]
        data = self._file_map(name)
        if data is None:
            return None
        return data[off + a - s:off + min(end, e) - s]

    def regions(self) -> List[Tuple[int, int, bool, str]]:
        """[(start, end, writable, "core segment")] of the PT_LOAD segments
        that hold bytes."""
        return [(s.vaddr, s.vaddr + s.memsz, s.writable, "core segment")
                for s in self.segments if s.filesz]


_CONSTS = {0x08: "<B", 0x09: "<b", 0x0a: "<H", 0x0b: "<h", 0x0c: "<I", 0x0d: "<i", 0x0e: "<Q",
           0x0f: "<q"}


def _signed(v):
    return v - (1 << 64) if v >> 63 else v


_BINOPS = {
    0x1a: lambda a, b: a & b, 0x1c: lambda a, b: a - b, 0x1e: lambda a, b: a * b,
    0x21: lambda a, b: a | b, 0x22: lambda a, b: a + b, 0x24: lambda a, b: a << (b & 63),
    0x25: lambda a, b: a >> (b & 63), 0x27: lambda a, b: a ^ b,
    0x29: lambda a, b: int(a == b), 0x2a: lambda a, b: int(_signed(a) >= _signed(b)),
    0x2b: lambda a, b: int(_signed(a) > _signed(b)),
    0x2c: lambda a, b: int(_signed(a) <= _signed(b)),
    0x2d: lambda a, b: int(_signed(a) < _signed(b)), 0x2e: lambda a, b: int(a != b),
}


def _dynamic(img):
    dyn = [p for p in img.elf.phdrs if p[0] == PT_DYNAMIC]
    return img.bias + dyn[0][3] if dyn else None


def _run_cfa(cfi, cie, begin, ins, target):
    """(CFA rule, {register: (how, argument)}, whether the return address
    is signed) at ELF address target: the CIE's initial instructions, then
    the FDE's up to target.  A CFA rule is ("reg", register, offset) or
    ("expr", start, end) in cfi.d."""
    d = cfi.d
    state = {"cfa": ("reg", 7, 8), "regs": {}, "signed": False}
    init = {}

    def run(p, end, loc, limit):
        stack = []
        regs = state["regs"]
        while p < end:
            op = d[p]
            p += 1
            hi, lo = op & 0xc0, op & 0x3f
            if hi == 0x40:                              # advance_loc
                loc += lo * cie["code"]
                if loc > limit:
                    return
                continue
            if hi == 0x80:                              # offset
                off, p = uleb128(d, p)
                regs[lo] = ("offset", off * cie["data"])
                continue
            if hi == 0xc0:                              # restore
                _restore(regs, init, lo)
                continue
            if op in (0x02, 0x03, 0x04):                # advance_loc1/2/4
                fmt = {2: "<B", 3: "<H", 4: "<I"}[op]
                loc += struct.unpack_from(fmt, d, p)[0] * cie["code"]
                p += struct.calcsize(fmt)
                if loc > limit:
                    return
            elif op == 0x01:                            # set_loc
                loc, p = _encoded(d, p, cie["enc"], cfi._at)
                if loc > limit:
                    return
            elif op in (0x05, 0x11, 0x14, 0x15, 0x2f):  # offset_extended(_sf), val_offset(_sf)
                reg, p = uleb128(d, p)
                off, p = (sleb128 if op in (0x11, 0x15) else uleb128)(d, p)
                off = -off if op == 0x2f else off
                regs[reg] = ("val_offset" if op in (0x14, 0x15) else "offset", off * cie["data"])
            elif op in (0x06, 0x07, 0x08):              # restore_extended, undefined, same_value
                reg, p = uleb128(d, p)
                if op == 0x06:
                    _restore(regs, init, reg)
                else:
                    regs[reg] = ("undefined" if op == 0x07 else "same", None)
            elif op == 0x09:                            # register
                reg, p = uleb128(d, p)
                reg2, p = uleb128(d, p)
                regs[reg] = ("register", reg2)
            elif op == 0x0a:                            # remember_state
                stack.append((state["cfa"], dict(regs), state["signed"]))
            elif op == 0x0b:                            # restore_state
                if stack:
                    state["cfa"], saved, state["signed"] = stack.pop()
                    regs.clear()
                    regs.update(saved)
            elif op in (0x0c, 0x12):                    # def_cfa, def_cfa_sf
                reg, p = uleb128(d, p)
                off, p = (uleb128 if op == 0x0c else sleb128)(d, p)
                state["cfa"] = ("reg", reg, off * (cie["data"] if op == 0x12 else 1))
            elif op == 0x0d:                            # def_cfa_register
                reg, p = uleb128(d, p)
                state["cfa"] = ("reg", reg, state["cfa"][2] if state["cfa"][0] == "reg" else 0)
            elif op in (0x0e, 0x13):                    # def_cfa_offset(_sf)
                off, p = (uleb128 if op == 0x0e else sleb128)(d, p)
                if state["cfa"][0] == "reg":
                    off = off * (cie["data"] if op == 0x13 else 1)
                    state["cfa"] = ("reg", state["cfa"][1], off)
            elif op == 0x0f:                            # def_cfa_expression
                n, p = uleb128(d, p)
                state["cfa"] = ("expr", p, p + n)
                p += n
            elif op in (0x10, 0x16):                    # expression, val_expression
                reg, p = uleb128(d, p)
                n, p = uleb128(d, p)
                regs[reg] = ("expr" if op == 0x10 else "val_expr", (p, p + n))
                p += n
            elif op == 0x2e:                            # GNU_args_size
                _, p = uleb128(d, p)
            elif op == 0x2d:                            # AARCH64_negate_ra_state
                state["signed"] = not state["signed"]
            elif op != 0x00:                            # nop
                raise _Unwound("CFA instruction 0x%x is not supported" % op)

    run(cie["init"][0], cie["init"][1], begin, 1 << 64)
    init.update(state["regs"])
    run(ins[0], ins[1], begin, target)
    return state["cfa"], state["regs"], state["signed"]


def _restore(regs, init, reg):
    if reg in init:
        regs[reg] = init[reg]
    else:
        regs.pop(reg, None)
