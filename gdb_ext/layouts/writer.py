"""Write a layout profile of a LuaJIT build: what ljgdb reads from DWARF,
read here with pyelftools (no gdb), as one JSON document (the reading side
is layouts/profiles.py; the command line is pkg/profile.py,
python3 -m ljgdb.profile BINARY_OR_DEBUG_FILE [--binary STRIPPED_FILE] [-o OUT.json]).

The profile holds every struct and union the engine reads (flattened as the
gdb backend flattens them), the enumerators it names, the build's flags
(GC64, FR2, DUALNUM, JIT, fork, branch), LuaJIT's version string, the
build-id, and the VM's symbols as offsets from an exported symbol (a
stripped binary keeps its exported symbols).  Struct layouts depend on the
LuaJIT source and the layout flags only, not on the compiler's
optimisation; the offsets of the VM's code hold for that very build.
"""
from typing import Any, Dict, Optional
import os
import re

from .. import consts
from . import layout
from .buildid import note_build_id
from .elfdwarf import DwarfTypes
from .profiles import VERSION_RE

FORMAT = 1
# Exported symbols an offset may be taken from, in order of preference (every
# LuaJIT build exports the C API).
ANCHORS = ("lua_pcall", "luaL_newstate", "lua_newstate")
# Symbols kept as offsets from the anchor: the VM's code labels
# (consts.VM_CODE_PREFIXES) and these.
VM_SYMBOLS = ("lj_ir_mode", "lj_lib_checknumber", "lj_state_growstack", "lj_gc_step",
              "lj_trace_exit", "lj_snap_restore", "main_cord")


def build_id(elf: Any) -> Optional[str]:
    """The GNU build-id of a pyelftools ELFFile, from its note sections."""
    for sec in elf.iter_sections():
        if sec.header["sh_type"] == "SHT_NOTE" and sec.header["sh_size"]:
            bid = note_build_id(sec.data())
            if bid:
                return bid
    return None


def version_string(elf: Any) -> Optional[str]:
    """LuaJIT's version string ("LuaJIT 2.1.1700206165") from the read-only
    data, or None (luajit.h LUAJIT_VERSION; jit.version returns it)."""
    for name in (".rodata", ".rodata.str1.1", ".rodata.str1.8"):
        sec = elf.get_section_by_name(name)
        if sec is None or sec.header["sh_type"] == "SHT_NOBITS":
            continue
        m = VERSION_RE.search(sec.data())
        if m:
            return m.group(0).decode()
    return None


def make_profile(path: str, binary: Optional[str] = None) -> Dict[str, Any]:
    """The profile of the build whose DWARF is in `path`; `binary`: the
    stripped file itself, when `path` is its separate debug file (its
    version string is in the binary's read-only data, which the debug file
    does not keep)."""
    types = DwarfTypes(path)
    try:
        t = types
        lay = layout.Layout(t)
        bid = build_id(types.elf)
        version = version_string(types.elf)
        from elftools.elf.elffile import ELFFile
        if binary is not None:
            with open(binary, "rb") as f:
                elf = ELFFile(f)
                if build_id(elf) != bid:
                    raise ValueError("%s has build-id %s, %s has %s: not its debug file"
                                     % (binary, build_id(elf), path, bid))
                version = version_string(elf) or version
        doc = {"format": FORMAT, "file": os.path.basename(binary or path),
               "build_id": bid, "version": version,
               "arch": {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}.get(
                   types.elf["e_machine"], types.elf["e_machine"]),
               "ptr_size": t.ptr_size, "flags": dict(lay.summary(), fork=lay.fork)}
        doc.update(layout.engine_tables(t))
        # Every enumerator, and every enumeration whole (the engine asks for
        # ones by name: JIT_P_*, REF_BIAS, CT_*, UDTYPE_*, LJ_TRLINK_*...).
        doc["constants"] = {name: v for name, (v, _) in types.enumerators.items()}
        doc["enumerations"] = types.enumerations()
        doc["vm_symbols"] = vm_symbols(types.elf)
        # (A debug file has no code: the digest is the stripped binary's.)
        with open(binary or path, "rb") as f:
            doc["vm_symbols"]["code_sha256"] = code_digest(ELFFile(f), doc["vm_symbols"])
        return doc
    finally:
        types.close()


def code_digest(elf: Any, vm: Dict[str, Any]) -> Optional[str]:
    """sha256 of the assembler VM's machine code (the bytes from its first
    label to its end), which tells a build whose code is this one's; None
    when the file does not hold the code (a debug file)."""
    import hashlib
    anchor = None
    for name in (".dynsym", ".symtab"):
        sec = elf.get_section_by_name(name)
        if hasattr(sec, "get_symbol_by_name") and vm.get("anchor"):
            syms = sec.get_symbol_by_name(vm["anchor"])
            if syms and syms[0]["st_value"]:
                anchor = syms[0]["st_value"]
                break
    if anchor is None or vm.get("begin") is None or vm.get("end") is None:
        return None
    lo, hi = anchor + vm["begin"], anchor + vm["end"]
    for sec in elf.iter_sections():
        start = sec["sh_addr"]
        if start <= lo and hi <= start + sec["sh_size"] and sec["sh_type"] != "SHT_NOBITS":
            data = sec.data()[lo - start:hi - start]
            return hashlib.sha256(data).hexdigest()
    return None


MAPPING_SYMBOL = re.compile(r"^\$[adtx](\.|$)")


def vm_symbols(elf: Any) -> Dict[str, Any]:
    """{"anchor": exported symbol, "offsets": {symbol: address - anchor's},
    "begin", "end": the assembler VM's extent, from the anchor} for the VM's
    labels and VM_SYMBOLS of .symtab (empty when the file has none)."""
    VM_CODE_PREFIXES = consts.VM_CODE_PREFIXES
    # (A debug file's .dynsym has no data: no symbols to read there.)
    dyn, tab = [s if hasattr(s, "get_symbol_by_name") else None
                for s in (elf.get_section_by_name(".dynsym"), elf.get_section_by_name(".symtab"))]
    anchor = None
    for name in ANCHORS:
        for sec in (dyn, tab):
            if sec is None:
                continue
            syms = sec.get_symbol_by_name(name)
            if syms and syms[0]["st_value"]:
                anchor = (name, syms[0]["st_value"])
                break
        if anchor:
            break
    out = {"anchor": anchor[0] if anchor else None, "offsets": {}, "begin": None, "end": None}
    if anchor is None or tab is None:
        return out
    syms = []
    for sym in tab.iter_symbols():
        # (arm64's mapping symbols $x and $d mark code and data, no label)
        if sym["st_value"] and sym["st_info"]["type"] not in ("STT_SECTION", "STT_FILE") and \
                not MAPPING_SYMBOL.match(sym.name):
            syms.append((sym["st_value"], sym.name))
    begin = next((v for v, n in syms if n == "lj_vm_asm_begin"), None)
    # The assembler VM: from lj_vm_asm_begin to the first symbol after it
    # that is none of its labels (C functions called lj_vm_* lie elsewhere).
    end = None
    if begin is not None:
        end = min((v for v, n in syms if v > begin and not n.startswith(VM_CODE_PREFIXES)),
                  default=None)
        out["begin"] = begin - anchor[1]
        out["end"] = end - anchor[1] if end is not None else None
    for value, name in syms:
        if name in VM_SYMBOLS or (name.startswith(VM_CODE_PREFIXES) and begin is not None and
                                  begin <= value and (end is None or value < end)):
            out["offsets"][name] = value - anchor[1]
    return out
