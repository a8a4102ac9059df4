"""The FFI's C types (g->ctype_state: CTState.tab[], R lj_ctype.h), named
as LuaJIT names them (R lj_ctype.c lj_ctype_repr: what tostring(ffi.typeof
(x)) shows inside ctype<...>), and a cdata's value read by its type.

A CType is {info, size, sib, next, name}: info's top 4 bits are the kind
(CT_NUM, CT_STRUCT, CT_PTR, CT_ARRAY, ...: enumerators of the build), its
low 16 bits the child type's id; a struct's fields are a chain of CT_FIELD
entries through sib, each with its name, its offset in size and its type
as child.  The CTF_* flags are lj_ctype.h's #defines (no debug info has
them); they are the same in every version.
"""
from typing import Optional, TYPE_CHECKING, Tuple
import struct

from ..errors import CorruptError
from .gcobj import number_text, str_text

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .objects import Cdata
    from .state import VM

CTF_BOOL, CTF_FP, CTF_CONST, CTF_VOLATILE = 0x08000000, 0x04000000, 0x02000000, 0x01000000
CTF_UNSIGNED, CTF_VLA = 0x00800000, 0x00100000
CTF_REF = CTF_UNION = 0x00800000
CTF_VECTOR, CTF_COMPLEX = 0x08000000, 0x04000000
CTMASK_NUM, CTMASK_CID = 0xF0000000, 0xFFFF
CTSIZE_INVALID = 0xFFFFFFFF
_KINDS = ("NUM", "STRUCT", "PTR", "ARRAY", "VOID", "ENUM", "FUNC", "TYPEDEF", "ATTRIB",
          "FIELD", "BITFIELD", "CONSTVAL", "EXTERN", "KW")


class NoFFIState(CorruptError):
    """The VM has no ctype table (no FFI state yet, or none in the layout)."""


def ctypes_of(vm: 'VM') -> 'CTypes':
    """The CTypes of vm, read once per command (vm.cache)."""
    cache = vm.cache("ctypes")
    ct = cache.get("table")
    if ct is None:
        ct = cache["table"] = CTypes(vm)
    return ct


class CTypes(object):
    """The ctype table of one VM."""

    def __init__(self, vm: 'VM') -> None:
        self.vm = vm
        lay = vm.lay
        self.cts_s, self.ct_s = lay.s.get("CTState"), lay.s.get("CType")
        cts = vm.t.uint(vm.G + lay.G.ctype_state, lay.mref_size, "g->ctype_state") if \
            lay.has_ctype_state else 0
        if not cts or self.cts_s is None or self.ct_s is None:
            raise NoFFIState("no FFI state (g->ctype_state)")
        self.tab = vm.t.ptr(cts + self.cts_s.tab, "CTState.tab")
        self.top = vm.t.u32(cts + self.cts_s.top, "CTState.top")
        t = vm.t
        self.kind = {}
        for name in _KINDS:
            v = t.constant("CT_" + name)
            if v is not None:
                self.kind[v] = name
        if "NUM" not in self.kind.values():
            raise CorruptError("debug info lacks the CT_* enumerators (lj_ctype.h)")
        self.hassize = t.constant("CT_HASSIZE")     # kinds up to it have a size
        self.cta_qual = t.constant("CTA_QUAL")
        self.ctid_ctypeid = t.constant("CTID_CTYPEID")
        self.ptr_size = lay.ptr_size

    def get(self, cid: int) -> Tuple[str, int, int, int, int]:
        """(kind name, info, size, sib, name address) of ctype cid."""
        if not 0 <= cid < self.top:
            raise CorruptError("ctype id %d is past the ctype table (%d entries)"
                               % (cid, self.top))
        s = self.ct_s
        rec = self.vm.t.read(self.tab + cid * s.size, s.size, "CType %d" % cid)

        def u(name, n):
            f = s.field(name)
            return int.from_bytes(rec[f.offset:f.offset + min(n, f.size)], "little")
        info = u("info", 4)
        return (self.kind.get(info >> 28, "?"), info, u("size", 4), u("sib", 2),
                u("name", self.vm.lay.ref_size))

    def _name(self, addr):
        return str_text(self.vm, addr, 1 << 10).decode("latin-1")

    # --- lj_ctype_repr ------------------------------------------------------
    def repr(self, cid: int) -> str:
        """The type's text, as lj_ctype_repr writes it."""
        pre, app = [], []          # prepended pieces (reversed), appended
        st = {"needsp": False}

        def prepstr(text):
            if st["needsp"]:
                pre.append(" ")
            st["needsp"] = True
            pre.append(text)

        def prepc(c):
            pre.append(c)

        def prepnum(n):
            pre.append(str(n))
            st["needsp"] = False

        def prepqual(info):
            if info & CTF_VOLATILE:
                prepstr("volatile")
            if info & CTF_CONST:
                prepstr("const")

        def preptype(name_addr, qual, word, this):
            if name_addr:
                prepstr(self._name(name_addr))
            else:
                if st["needsp"]:
                    prepc(" ")
                prepnum(this)
                st["needsp"] = True
            prepstr(word)
            prepqual(qual)

        def paren(ptrto):
            """A pointer to an array or a function: (*) around what
            came before; returns the new ptrto (False)."""
            if ptrto:
                prepc("(")
                app.append(")")
            return False

        qual = 0
        ptrto = False
        for _ in range(64):
            kind, info, size, _sib, name = self.get(cid)
            if kind == "NUM":
                if info & CTF_BOOL:
                    prepstr("bool")
                elif info & CTF_FP:
                    prepstr("double" if size == 8 else "float" if size == 4 else
                            "long double")
                elif size == 1:
                    # x86-64 and arm64 Linux: char is signed on x86-64
                    # (CTF_UCHAR 0), unsigned on arm64.
                    uchar = CTF_UNSIGNED if self.vm.t.arch == "aarch64" else 0
                    if not ((info ^ uchar) & CTF_UNSIGNED):
                        prepstr("char")
                    elif uchar:
                        prepstr("signed char")
                    else:
                        prepstr("unsigned char")
                elif size < 8:
                    prepstr("int" if size == 4 else "short")
                    if info & CTF_UNSIGNED:
                        prepstr("unsigned")
                else:
                    prepstr("_t")
                    prepnum(size * 8)
                    prepstr("int")
                    if info & CTF_UNSIGNED:
                        prepc("u")
                prepqual(qual | info)
                break
            if kind == "VOID":
                prepstr("void")
                prepqual(qual | info)
                break
            if kind == "STRUCT":
                preptype(name, qual, "union" if info & CTF_UNION else "struct", cid)
                break
            if kind == "ENUM":
                if cid == self.ctid_ctypeid:
                    prepstr("ctype")
                    break
                preptype(name, qual, "enum", cid)
                break
            if kind == "ATTRIB":
                if (info >> 16) & 255 == self.cta_qual:
                    qual |= size
            elif kind == "PTR":
                if info & CTF_REF:
                    prepc("&")
                else:
                    prepqual(qual | info)
                    if self.ptr_size == 8 and size == 4:
                        prepstr("__ptr32")
                    prepc("*")
                qual = 0
                ptrto = True
                st["needsp"] = True
            elif kind == "ARRAY":
                if info & (CTMASK_NUM | CTF_VECTOR | CTF_COMPLEX) == info & CTMASK_NUM:
                    st["needsp"] = True
                    ptrto = paren(ptrto)
                    app.append("[")
                    if size != CTSIZE_INVALID:
                        csize = self.get(info & CTMASK_CID)[2]
                        app.append(str(size // csize if csize else 0))
                    elif info & CTF_VLA:
                        app.append("?")
                    app.append("]")
                elif info & CTF_COMPLEX:
                    if size == 8:
                        prepstr("float")
                    prepstr("complex")
                    break
                else:
                    prepstr(")))")
                    prepnum(size)
                    prepstr("__attribute__((vector_size(")
            elif kind == "FUNC":
                st["needsp"] = True
                ptrto = paren(ptrto)
                app.append("(")
                app.append(")")
            else:
                raise CorruptError("ctype %d: kind %s in a type" % (cid, kind))
            cid = info & CTMASK_CID
        return "".join(reversed(pre)) + "".join(app)

    # --- values ---------------------------------------------------------------
    def raw(self, cid: int) -> Tuple[str, int, int, int, int, int]:
        """(kind, info, size, sib, name, cid) past attributes and typedefs
        (R lj_ctype.h ctype_raw)."""
        for _ in range(64):
            kind, info, size, sib, name = self.get(cid)
            if kind not in ("ATTRIB", "TYPEDEF"):
                return kind, info, size, sib, name, cid
            cid = info & CTMASK_CID
        raise CorruptError("ctype %d: attribute chain too long" % cid)

    def value(self, cid: int, addr: int, size: Optional[int] = None, depth: int = 2,
              limit: int = 16) -> Optional[str]:
        """A cdata payload's value as text: numbers as Lua writes them
        (64-bit integers with LL/ULL, as tostring of such a cdata), bool,
        pointers as addresses, arrays and structs in braces (up to `limit`
        elements, `depth` levels), else None."""
        t = self.vm.t
        kind, info, csize, sib, _name, cid = self.raw(cid)
        if kind == "NUM":
            data = t.read(addr, csize, "cdata payload")
            if info & CTF_BOOL:
                return "true" if any(data) else "false"
            if info & CTF_FP:
                if csize == 8:
                    return number_text(struct.unpack("<d", data)[0])
                if csize == 4:
                    return number_text(struct.unpack("<f", data)[0])
                return None
            v = int.from_bytes(data, "little", signed=not info & CTF_UNSIGNED)
            if csize == 8:
                return "%d%s" % (v, "ULL" if info & CTF_UNSIGNED else "LL")
            return "%d" % v
        if kind == "ENUM":
            return "%d" % int.from_bytes(t.read(addr, 4, "cdata payload"), "little",
                                         signed=True)
        if kind == "PTR":
            p = t.uint(addr, csize if csize in (4, 8) else self.ptr_size, "cdata pointer")
            return "NULL" if not p else "0x%x" % p
        if depth <= 0:
            return "{...}"
        if kind == "ARRAY" and info & (CTMASK_NUM | CTF_VECTOR | CTF_COMPLEX) == \
                info & CTMASK_NUM:
            child = info & CTMASK_CID
            esize = self.raw(child)[2]
            if csize == CTSIZE_INVALID:
                if size is None:
                    return None
                csize = size
            n = csize // esize if esize else 0
            items = [self.value(child, addr + i * esize, None, depth - 1, limit)
                     for i in range(min(n, limit))]
            if n > limit:
                items.append("... (%d elements)" % n)
            return "{%s}" % ", ".join(x if x is not None else "?" for x in items)
        if kind == "STRUCT":
            items = []
            f = sib
            n = 0
            while f and n < 256:
                fkind, finfo, foff, fsib, fname = self.get(f)
                if fkind == "FIELD":
                    if len(items) >= limit:
                        items.append("...")
                        break
                    v = self.value(finfo & CTMASK_CID, addr + foff, None, depth - 1, limit)
                    label = self._name(fname) if fname else None
                    items.append("%s = %s" % (label, v if v is not None else "?") if label
                                 else (v if v is not None else "?"))
                elif fkind == "BITFIELD":
                    items.append("%s = ?" % (self._name(fname) if fname else "?"))
                f = fsib
                n += 1
            return "{%s}" % ", ".join(items)
        return None


def cdata_text(vm: 'VM', cd: 'Cdata') -> Tuple[str, Optional[str]]:
    """(the type's text, the value's text or None) of objects.Cdata cd;
    ("?", None) when the FFI state cannot be read."""
    from ..errors import FaultError
    try:
        ct = ctypes_of(vm)
        typ = ct.repr(cd.ctypeid)
    except (FaultError, CorruptError):
        return "?", None
    try:
        return typ, ct.value(cd.ctypeid, cd.payload, cd.size)
    except (FaultError, CorruptError):
        return typ, None


def ctype_object(vm: 'VM', cd: 'Cdata') -> Optional[Tuple[str, int]]:
    """For a ctype object (what ffi.typeof returns: a cdata of type
    CTID_CTYPEID whose payload is a CTypeID), (LuaJIT's tostring of it,
    "ctype<int64_t>", and that CTypeID); None for any other cdata."""
    ct = ctypes_of(vm)
    if ct.ctid_ctypeid is None or cd.ctypeid != ct.ctid_ctypeid:
        return None
    cid = vm.t.u32(cd.payload, "ctype object's CTypeID")
    return "ctype<%s>" % ct.repr(cid), cid
