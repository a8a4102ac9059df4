"""LuaJIT's types, enumerators and symbols read from an ELF file's DWARF with
pyelftools, without gdb: the same TypeInfo shape the gdb backend gives
(gdbtarget._flatten), for layout profiles (gdb_ext/profile_io) and for
readers that run without gdb.

Only what the engine reads is indexed: struct, union and typedef names,
enumerators, and the symbol table."""
from typing import Any, Dict, List, Optional
from ..target import FLATTEN_DEPTH, Field, TypeInfo, TypeSource

_MAX_DEPTH = FLATTEN_DEPTH

_STRUCTS = ("DW_TAG_structure_type", "DW_TAG_union_type")
_QUALIFIERS = {"DW_TAG_const_type": "const", "DW_TAG_volatile_type": "volatile"}


class DwarfTypes(TypeSource):
    """Types of one ELF file with DWARF.  ptr_size, type_info, constant,
    enum_members and symbol answer as GdbTarget's do (a Layout reads it)."""

    def __init__(self, path: str, cu_name: Optional[str] = None) -> None:
        """cu_name: index only the first compile unit of that file name
        (glibc's malloc.c in libc's debug file: its 2000 units take
        seconds to index whole)."""
        from elftools.elf.elffile import ELFFile
        self.path = path
        self.cu_name = cu_name
        self._f = open(path, "rb")
        self.elf = ELFFile(self._f)
        if not self.elf.has_dwarf_info():
            raise ValueError("%s has no DWARF debug info" % path)
        self.dwarf = self.elf.get_dwarf_info()
        self.ptr_size = self.elf.elfclass // 8
        self.typedefs = {}      # name -> DIE
        self.tagged = {}        # struct/union tag -> DIE with a body
        self.enumerators = {}   # name -> (value, enumeration DIE)
        self._index()
        self._infos = {}

    def close(self) -> None:
        self._f.close()

    # --- index --------------------------------------------------------------
    def _index(self):
        for cu in self.dwarf.iter_CUs():
            if self.cu_name is not None:
                name = die_name(cu.get_top_DIE()) or ""
                if name != self.cu_name and not name.endswith("/" + self.cu_name):
                    continue
            for die in cu.iter_DIEs():
                tag = die.tag
                if tag == "DW_TAG_typedef":
                    name = die_name(die)
                    if name and name not in self.typedefs:
                        self.typedefs[name] = die
                elif tag in _STRUCTS:
                    name = die_name(die)
                    if name and "DW_AT_declaration" not in die.attributes and \
                            name not in self.tagged:
                        self.tagged[name] = die
                elif tag == "DW_TAG_enumerator":
                    name = die_name(die)
                    if name and name not in self.enumerators:
                        self.enumerators[name] = (die.attributes["DW_AT_const_value"].value,
                                                  die.get_parent())
            if self.cu_name is not None:
                break

    # --- type helpers -------------------------------------------------------
    @staticmethod
    def _type_of(die):
        return die.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in die.attributes \
            else None

    def _strip(self, die):
        """The DIE below typedefs and qualifiers; a declaration replaced by
        the definition of the same tag."""
        while die is not None and (die.tag == "DW_TAG_typedef" or die.tag in _QUALIFIERS):
            die = self._type_of(die)
        if die is not None and die.tag in _STRUCTS and "DW_AT_declaration" in die.attributes:
            die = self.tagged.get(die_name(die), die)
        return die

    def _sizeof(self, die):
        die = self._strip(die)
        if die is None:
            return 0
        if "DW_AT_byte_size" in die.attributes:
            return die.attributes["DW_AT_byte_size"].value
        if die.tag == "DW_TAG_array_type":
            n = 1
            for c in _counts(die):
                n *= c
            return n * self._sizeof(self._type_of(die))
        if die.tag == "DW_TAG_pointer_type":
            return self.elf.elfclass // 8
        return 0

    def type_name(self, die: Any) -> str:
        """The type as gdb writes it (str(gdb.Type)): 'GCRef', 'TValue *',
        'uint8_t [4]', 'struct lua_State *', 'void *(*)(void *, size_t)'."""
        base, suffix = self._declarator(die, "")
        if not suffix:
            return base
        return base + ("" if base.endswith("*") else " ") + suffix

    def _declarator(self, die, inner):
        """(base type text, declarator text around `inner`)."""
        if die is None:
            return "void", inner
        tag = die.tag
        if tag in ("DW_TAG_typedef", "DW_TAG_base_type"):
            return die_name(die), inner
        if tag in _STRUCTS or tag == "DW_TAG_enumeration_type":
            kw = {"DW_TAG_structure_type": "struct", "DW_TAG_union_type": "union",
                  "DW_TAG_enumeration_type": "enum"}[tag]
            name = die_name(die)
            return ("%s %s" % (kw, name) if name else "%s {...}" % kw), inner
        if tag in _QUALIFIERS:
            base, decl = self._declarator(self._type_of(die), inner)
            return "%s %s" % (_QUALIFIERS[tag], base), decl
        if tag == "DW_TAG_pointer_type":
            target = self._type_of(die)
            if target is not None and target.tag in ("DW_TAG_array_type",
                                                     "DW_TAG_subroutine_type"):
                return self._declarator(target, "(*%s)" % inner)
            return self._declarator(target, "*" + inner)
        if tag == "DW_TAG_array_type":
            dims = "".join("[%d]" % c for c in _counts(die))
            return self._declarator(self._type_of(die), inner + dims)
        if tag == "DW_TAG_subroutine_type":
            args = [self.type_name(self._type_of(c)) for c in die.iter_children()
                    if c.tag == "DW_TAG_formal_parameter"]
            if any(c.tag == "DW_TAG_unspecified_parameters" for c in die.iter_children()):
                args.append("...")
            ret = self.type_name(self._type_of(die))
            return ret, "%s(%s)" % (inner, ", ".join(args) if args else "void")
        return "?", inner

    # --- the Target interface --------------------------------------------------
    def type_info(self, name: str) -> Optional[TypeInfo]:
        if name in self._infos:
            return self._infos[name]
        die = self.typedefs.get(name)
        die = self._strip(die) if die is not None else self.tagged.get(name)
        info = None
        if die is not None and die.tag in _STRUCTS and "DW_AT_byte_size" in die.attributes:
            fields = {}
            self._flatten(die, 0, "", fields, 0)
            info = TypeInfo(name, die.attributes["DW_AT_byte_size"].value, fields)
        self._infos[name] = info
        return info

    def _flatten(self, die, base, prefix, out, depth):
        for m in die.iter_children():
            if m.tag != "DW_TAG_member":
                continue
            if "DW_AT_bit_size" in m.attributes:
                continue                       # bit-fields: not used by the engine
            ft = self._type_of(m)
            st = self._strip(ft)
            off = base + _member_offset(m)
            name = die_name(m)
            if not name:                       # anonymous struct/union: inline it
                if st is not None and st.tag in _STRUCTS and depth < _MAX_DEPTH:
                    self._flatten(st, off, prefix, out, depth + 1)
                continue
            path = prefix + name
            count = None
            if st is not None and st.tag == "DW_TAG_array_type":
                counts = _counts(st)
                count = counts[0] if counts else 0
            out[path] = Field(off, self._sizeof(ft), count, self.type_name(ft))
            if st is not None and st.tag in _STRUCTS and depth < _MAX_DEPTH:
                self._flatten(st, off, path + ".", out, depth + 1)

    def constant(self, name: str) -> Optional[int]:
        got = self.enumerators.get(name)
        return None if got is None else got[0]

    def enum_members(self, name: str) -> Optional[Dict[str, int]]:
        got = self.enumerators.get(name)
        if got is None:
            return None
        return {die_name(c): c.attributes["DW_AT_const_value"].value
                for c in got[1].iter_children() if c.tag == "DW_TAG_enumerator"}

    def enumerations(self) -> List[Dict[str, int]]:
        """Every enumeration with enumerators, as {name: value} dicts."""
        seen = set()
        out = []
        for _, parent in self.enumerators.values():
            if parent.offset in seen:
                continue
            seen.add(parent.offset)
            out.append({die_name(c): c.attributes["DW_AT_const_value"].value
                        for c in parent.iter_children() if c.tag == "DW_TAG_enumerator"})
        return out

    def symbol(self, name: str) -> Optional[int]:
        """A symbol's value from .symtab or .dynsym (None if absent)."""
        for sec in (".symtab", ".dynsym"):
            tab = self.elf.get_section_by_name(sec)
            if not hasattr(tab, "get_symbol_by_name"):
                continue        # absent, or without data (a debug file's .dynsym)
            syms = tab.get_symbol_by_name(name)
            if syms:
                return syms[0]["st_value"]
        return None


def die_name(die: Any) -> Optional[str]:
    a = die.attributes.get("DW_AT_name")
    if a is None:
        return None
    v = a.value
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _counts(array_die):
    out = []
    for c in array_die.iter_children():
        if c.tag != "DW_TAG_subrange_type":
            continue
        if "DW_AT_count" in c.attributes:
            out.append(c.attributes["DW_AT_count"].value)
        elif "DW_AT_upper_bound" in c.attributes:
            lo = c.attributes["DW_AT_lower_bound"].value if "DW_AT_lower_bound" in c.attributes \
                else 0
            out.append(c.attributes["DW_AT_upper_bound"].value - lo + 1)
        else:
            out.append(0)                  # a flexible array member: T x[]
    return out


def _member_offset(m):
    a = m.attributes.get("DW_AT_data_member_location")
    if a is None:
        return 0                            # a union member
    v = a.value
    if isinstance(v, int):
        return v
    # An old-style location expression: DW_OP_plus_uconst N.
    if v and v[0] == 0x23:
        n, shift = 0, 0
        for b in v[1:]:
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return n
    raise ValueError("member %s: location expression %r is not DW_OP_plus_uconst"
                     % (die_name(m), v))
