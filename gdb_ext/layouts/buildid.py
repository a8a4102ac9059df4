"""Whether a core file was written by the files loaded to read it: the
core keeps the first page of each ELF image the process had mapped, with
its GNU build-id note (corefile.build_ids), and the file holding LuaJIT
must have one of those build-ids.  The hosts (gdb, the core reader) say
which file they loaded, its build-id and where it is mapped; the check and
its one line are here; and reading a build-id from a block of ELF notes
(the core's image headers, a file's note sections), for both readers."""
from typing import Dict, Optional
import struct

# R elf.h NT_GNU_BUILD_ID, PT_NOTE
NT_GNU_BUILD_ID = 3
PT_NOTE = 4


def note_build_id(data: bytes) -> Optional[str]:
    """The build-id in a block of ELF notes, or None."""
    i = 0
    while i + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, i)
        d = i + 12 + ((namesz + 3) & ~3)
        if ntype == NT_GNU_BUILD_ID and data[i + 12:i + 12 + namesz].rstrip(b"\0") == b"GNU":
            return data[d:d + descsz].hex() or None
        i = d + ((descsz + 3) & ~3)
    return None


def file_build_id(path: str) -> Optional[str]:
    """The build-id of the ELF file at path (its PT_NOTE segments; 64-bit
    little-endian, the only ELF ljgdb reads), or None: no build-id, not
    such an ELF, or unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            if phentsize < 56 or phnum > 4096:
                return None
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(len(table) // phentsize):
                ptype, = struct.unpack_from("<I", table, i * phentsize)
                if ptype != PT_NOTE:
                    continue
                off, = struct.unpack_from("<Q", table, i * phentsize + 8)
                size, = struct.unpack_from("<Q", table, i * phentsize + 32)
                f.seek(off)
                bid = note_build_id(f.read(min(size, 1 << 16)))
                if bid:
                    return bid
    except OSError:
        return None
    return None


def image_at_or_below(core_ids: Dict[int, str], addr: int) -> Optional[int]:
    """The address of the nearest ELF image header at or below addr among
    core_ids ({mapped address: build-id}), or None."""
    below = [m for m in core_ids if m <= addr]
    return max(below) if below else None


def agrees(core_ids: Dict[int, str], build_id: Optional[str]) -> bool:
    """Whether a file of build_id may have written the core whose ELF
    images have core_ids ({mapped address: build-id}): True when it is
    among them, or when that cannot be told (no build-id, no image)."""
    return not build_id or not core_ids or build_id in core_ids.values()


def mismatch(core_ids: Dict[int, str], name: str, build_id: Optional[str], give: str, off: str,
             place: Optional[int] = None, loaded: str = "it has",
             process: Optional[str] = None) -> Optional[str]:
    """None when the file holding LuaJIT was among those that wrote the
    core (or when that cannot be told: no build-id, no ELF image in the
    core); else one line saying so and what to do.

    core_ids: {mapped address: build-id} of the core's ELF images; name:
    the file as the host names it; build_id: its build-id; give: how to
    load the right files with this host; off: how to turn the check off
    with this host; place: the address where the core holds an image in
    its place, or None; loaded: how the host got the file ("it has", "gdb
    loaded it with"); process: the core's process, when known."""
    if agrees(core_ids, build_id):
        return None
    msg = "the core file does not match %s: %s build-id %s" % (name, loaded, build_id)
    theirs = core_ids.get(place) if place is not None else None
    if theirs:
        msg += ", the core holds build-id %s in its place (at 0x%x)" % (theirs, place)
    else:
        msg += ", which none of the %d ELF files in the core has" % len(core_ids)
    if process:
        msg += " (the core's process: %s)" % process
    return "%s; %s, or %s to go on at your own risk" % (msg, give, off)
