"""A few facts read straight from an ELF core file, without gdb.

  segments(path)   the PT_LOAD program headers: where each piece of the
                   process's memory is in the file
  build_ids(path)  the GNU build-ids of the ELF images whose first page the
                   core holds (Linux and gdb's gcore both keep it), by the
                   address they were mapped at
  file_offset(segs, addr)  the offset in the file of a memory address

gdb cannot tell whether a core was written by the binary it loaded with it:
when the two differ, memory it does not find in the core it reads from the
binary.  The build-ids in the core answer it.  Only the ELF headers, the
program headers and a few pages are read; a truncated or damaged file gives
what could be read.
"""
from typing import Dict, Iterable, List, Optional, TYPE_CHECKING, Tuple, Union
import os
import struct

from ..layouts.buildid import note_build_id

if TYPE_CHECKING:  # for the annotations only
    from mmap import mmap

PT_LOAD = 1
PT_NOTE = 4
_EHDR = struct.Struct("<4sBBBBB7xHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_MAX_PHNUM = 1 << 16


class Segment(object):
    __slots__ = ("vaddr", "memsz", "offset", "filesz", "flags")

    def __init__(self, vaddr: int, memsz: int, offset: int, filesz: int, flags: int) -> None:
        self.vaddr, self.memsz, self.offset, self.filesz, self.flags = \
            vaddr, memsz, offset, filesz, flags

    @property
    def writable(self) -> bool:
        return bool(self.flags & 2)

    def __repr__(self) -> str:
        return "Segment(0x%x+0x%x @0x%x/0x%x)" % (self.vaddr, self.memsz, self.offset, self.filesz)


def phdrs(data: Union[bytes, 'mmap'], base: int = 0) -> List[Tuple[int, int, int, int, int, int]]:
    """(type, flags, offset, vaddr, filesz, memsz) of the program headers of
    the ELF image starting at data[base:] (64-bit little-endian only)."""
    if len(data) < base + _EHDR.size or data[base:base + 4] != b"\x7fELF":
        return []
    f = _EHDR.unpack_from(data, base)
    if f[1] != 2 or f[2] != 1:          # ELFCLASS64, ELFDATA2LSB
        return []
    phoff, phentsize, phnum = f[10], f[14], f[15]
    if phentsize < _PHDR.size or phnum > _MAX_PHNUM:
        return []
    out = []
    for i in range(phnum):
        o = base + phoff + i * phentsize
        if o + _PHDR.size > len(data):
            break
        p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = _PHDR.unpack_from(data, o)
        out.append((p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz))
    return out


def segments(path: str) -> List[Segment]:
    """[Segment] of the core's PT_LOAD headers, in file order."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF":
            return []
        phoff = struct.unpack_from("<Q", head, 0x20)[0]
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(0)
        data = f.read(phoff + phentsize * min(phnum, _MAX_PHNUM))
    return [Segment(v, m, o, fs, fl) for t, fl, o, v, fs, m in phdrs(data) if t == PT_LOAD]


def address_spans(segs: Iterable[Segment]) -> List[Tuple[int, int]]:
    """[(start, end)] of every segment with memory, bytes in the file or
    not: the address space the process had mapped."""
    return [(sg.vaddr, sg.vaddr + sg.memsz) for sg in segs if sg.memsz]


def file_offset(segs: Iterable[Segment], addr: int) -> Optional[int]:
    """Offset in the core file of memory address addr, or None when the
    core does not hold that byte."""
    for s in segs:
        if s.vaddr <= addr < s.vaddr + s.filesz:
            return s.offset + (addr - s.vaddr)
    return None


def build_ids(path: str, page: int = 65536) -> Dict[int, str]:
    """{mapped address: build-id} of each ELF image whose header page the
    core holds.  Empty when the file cannot be read as a core."""
    out = {}
    try:
        segs = segments(path)
        with open(path, "rb") as f:
            for s in segs:
                if s.filesz < 64:
                    continue
                f.seek(s.offset)
                data = f.read(min(s.filesz, page))
                if data[:4] != b"\x7fELF":
                    continue
                for t, _, off, _, fsz, _ in phdrs(data):
                    if t == PT_NOTE and off + fsz <= len(data):
                        bid = note_build_id(data[off:off + fsz])
                        if bid:
                            out[s.vaddr] = bid
                            break
    except (OSError, struct.error):
        return {}
    return out


def truncation(path: str) -> Optional[Tuple[int, int]]:
    """(bytes in the file, bytes its program headers need) when the core
    file is shorter than its segments say (a copy cut short, a disk that
    filled up); else None."""
    try:
        size = os.path.getsize(path)
        need = max([s.offset + s.filesz for s in segments(path)] or [0])
    except (OSError, struct.error):
        return None
    return (size, need) if size < need else None
