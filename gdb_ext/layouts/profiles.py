"""Layout profiles (written by python3 -m ljgdb.profile) found and read: what
a LuaJIT build without debug info lacks, for the build with that build-id.

Profiles are looked for in the directories of $LJGDB_PROFILES (separated by
':') and in the package's own profiles/ directory (the shipped set, made by
testprogs/make_profiles.py) and its library/ (versions' profiles, made by
testprogs/profile_library.py from their sources, gzipped);
LJGDB_PROFILES=none turns them all off.  The VM's symbols are
kept as offsets from an exported symbol (the anchor), so they hold wherever
the file is loaded."""
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
import bisect
import json
import os
import re

from ..consts import VM_CODE_PREFIXES
from ..errors import CorruptError, FaultError, NotLuaJITError
from ..target import TypeInfo, TypeSource

_cache = {}


def profile_dirs() -> List[str]:
    """The directories of $LJGDB_PROFILES, then the shipped set; none at
    all when $LJGDB_PROFILES is 'none'."""
    env = os.environ.get("LJGDB_PROFILES", "")
    if env == "none":
        return []
    dirs = [d for d in env.split(":") if d]
    here = os.path.dirname(os.path.abspath(__file__))
    # The checkout keeps the shipped set in pkg/profiles; the installed
    # package has it beside gdb_ext.
    for d in (os.path.join(here, "..", "..", "pkg", "profiles"),
              os.path.join(here, "..", "..", "profiles")):
        if os.path.isdir(d):
            dirs.append(os.path.normpath(d))
            if os.path.isdir(os.path.join(d, "library")):
                dirs.append(os.path.normpath(os.path.join(d, "library")))
    return dirs


def _load(path: str) -> Optional[Dict[str, Any]]:
    """A profile file's document (.json, or .json.gz), or None."""
    try:
        if path.endswith(".gz"):
            import gzip
            with gzip.open(path, "rt") as f:
                return json.load(f)
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError, EOFError):
        return None


def by_build_id() -> Dict[str, 'Profile']:
    """{build-id: Profile} of every profile in profile_dirs() (read once per
    set of directories)."""
    dirs = tuple(profile_dirs())
    found = _cache.get(dirs)
    if found is None:
        found = {}
        for d in dirs:
            try:
                names = sorted(os.listdir(d))
            except OSError:
                continue
            for n in names:
                if not n.endswith((".json", ".json.gz")):
                    continue
                path = os.path.join(d, n)
                doc = _load(path)
                if not isinstance(doc, dict):
                    continue
                bid = doc.get("build_id")
                if bid and bid not in found:
                    found[bid] = Profile(doc, path)
        _cache.clear()
        _cache[dirs] = found
    return found


class Profile(TypeSource):
    """One layout profile: TypeInfo, enumerators (the TypeSource of a build
    without DWARF) and the VM's symbols."""

    def __init__(self, doc: Dict[str, Any], path: str) -> None:
        self.doc = doc
        self.path = path
        self.build_id = doc.get("build_id")
        vm = doc.get("vm_symbols") or {}
        self.anchor = vm.get("anchor")
        self.offsets = vm.get("offsets") or {}
        self.vm_begin = vm.get("begin")
        pairs = sorted((off, name) for name, off in self.offsets.items()
                       if name.startswith(VM_CODE_PREFIXES) and self.vm_begin is not None and
                       off >= self.vm_begin)
        self._offs = [p[0] for p in pairs]
        self._names = [p[1] for p in pairs]
        self.vm_end = vm.get("end")
        self.code_sha256 = vm.get("code_sha256")
        self.version = doc.get("version")
        self.arch = doc.get("arch")
        self._enum_of = None        # enumerator -> its enumeration (enum_members)
        self._layout_key = None     # (layout_key)

    def layout_key(self) -> str:
        """What this profile says about memory (types, constants,
        enumerations, flags), as one string: equal for two builds whose
        structures are laid out alike (the enumerations in any order: the
        DWARF reader meets them in the order of the build's units)."""
        key = self._layout_key
        if key is None:
            enums = sorted(json.dumps(e, sort_keys=True) for e in self.doc.get("enumerations", ()))
            key = self._layout_key = json.dumps(
                [self.doc.get(k) for k in ("types", "constants", "enums", "flags", "ptr_size",
                                           "arch")] + [enums], sort_keys=True)
        return key

    def describe(self) -> str:
        return "%s (%s, build-id %s)" % (os.path.basename(self.path),
                                         self.version or "version unknown", self.build_id)

    def type_info(self, name: str) -> Optional[TypeInfo]:
        d = self.doc.get("types", {}).get(name)
        return TypeInfo.from_json(name, d) if d is not None else None

    def constant(self, name: str) -> Optional[int]:
        return self.doc.get("constants", {}).get(name)

    def enum_members(self, name: str) -> Optional[Dict[str, int]]:
        """The enumeration that has enumerator `name`, whole."""
        idx = self._enum_of
        if idx is None:
            idx = self._enum_of = {}
            for members in self.doc.get("enumerations", ()):
                for k in members:
                    idx.setdefault(k, members)
        m = idx.get(name) or self.doc.get("enums", {}).get(name)
        return dict(m) if m is not None else None

    def symbol_offset(self, name: str) -> Optional[int]:
        return self.offsets.get(name)

    def symbol_at(self, off: int) -> Optional[str]:
        """The VM symbol at or before offset `off` from the anchor, when off
        lies in the VM's code (before its recorded end); else None."""
        if not self._offs or self.vm_begin is None or off < self.vm_begin:
            return None
        if self.vm_end is not None and off >= self.vm_end:
            return None
        i = bisect.bisect_right(self._offs, off) - 1
        return self._names[i]


# LuaJIT's version string as it stands in a binary (luajit.h LUAJIT_VERSION).
VERSION_RE = re.compile(rb"LuaJIT 2\.[0-9][0-9A-Za-z.\-]*")


def file_version(path: str) -> Optional[str]:
    """LuaJIT's version string in the file at path, or None."""
    try:
        with open(path, "rb") as f:
            m = VERSION_RE.search(f.read())
    except OSError:
        return None
    return m.group(0).decode() if m else None


def by_version(version: str, arch: str) -> List[Profile]:
    """The profiles of builds with this version string and architecture."""
    return [p for p in by_build_id().values() if p.version == version and p.arch == arch]


def _branch(version: str) -> str:
    """'LuaJIT 2.1' of 'LuaJIT 2.1.ROLLING' (the major version)."""
    return ".".join(version.split(".")[:2])


def by_branch(version: str, arch: str) -> List[Profile]:
    """The profiles of builds of the same major version (2.0, 2.1) and
    architecture as this version string, in their files' order."""
    head = _branch(version) + "."
    return sorted((p for p in by_build_id().values()
                   if (p.version or "").startswith(head) and p.arch == arch),
                  key=lambda p: p.path)


def _names(fits: List[Tuple[Profile, List[Any]]]) -> List[str]:
    """The profiles' file names, without the .json(.gz) ending."""
    return [re.sub(r"\.json(\.gz)?$", "", os.path.basename(p.path)) for p, _ in fits]


def consistent(candidates: Iterable[Profile],
               states_under: Callable[[Profile], List[Any]]) -> List[Tuple[Profile, List[Any]]]:
    """[(profile, VMs)] of the candidates under whose layout the process
    holds a consistent VM: states_under(profile) gives the VMs found
    (frames, memory search; each with its G) with that profile's layout, or
    raises when the layout does not fit."""
    out = []
    for p in candidates:
        try:
            states = states_under(p)
        except (NotLuaJITError, FaultError, CorruptError):
            continue
        if states:
            out.append((p, states))
    return out


def _static_dispatch(prof: Profile, G: int,
                     read: Callable[[int, int], bytes]) -> Optional[List[int]]:
    """The static copy of the dispatch table of the global_State G as
    prof's layout places it (R lj_dispatch.c lj_dispatch_init:
    disp[GG_LEN_DDISP+i] = lj_vm_asm_begin + lj_bc_ofs[i] for the first
    BC_FUNCF opcodes; hooks never patch it, and the JIT's mode only its
    hot-counting loops: HOTLOOP_OPS): its BC_FUNCF entries; [] when that
    memory cannot be read; None when the profile lacks what places it."""
    gg = prof.type_info("GG_State")
    funcf = prof.constant("BC_FUNCF")
    if gg is None or funcf is None:
        return None
    disp, g = gg.fields.get("dispatch"), gg.fields.get("g")
    if disp is None or g is None or not disp.count or disp.count <= funcf:
        return None
    size = disp.size // disp.count
    static = G - g.offset + disp.offset + (disp.count - funcf) * size
    try:
        data = read(static, funcf * size)
    except Exception:       # any backend's read failure: nothing to check from here
        return []
    return [int.from_bytes(data[i * size:(i + 1) * size], "little") for i in range(funcf)]


def dispatch_plausible(prof: Profile, G: int, read: Callable[[int, int], bytes]) -> Optional[bool]:
    """Whether, under prof's layout, G's static dispatch table holds what
    one VM's handlers give: addresses away from zero, nearly all distinct
    (each bytecode has its own label), all within twice the profile's VM
    code size of each other, whichever version's VM they are.  A layout
    that misplaces the table (a build without the JIT has no jit_State
    before it) reads other memory there.  None when the profile cannot tell."""
    entries = _static_dispatch(prof, G, read)
    if entries is None or prof.vm_begin is None or prof.vm_end is None:
        return None
    if not entries:
        return False
    lo, hi = min(entries), max(entries)
    return (lo > 0xffff and hi - lo < 2 * (prof.vm_end - prof.vm_begin) and
            2 * len(set(entries)) > len(entries))


# The loops whose static dispatch entries lj_dispatch_update rewrites with
# the JIT's mode (R lj_dispatch.c): while the JIT is off (jit.off(), or
# while recording) they hold their non-counting twins (IFORL, IITERL,
# lj_vm_IITERN, ILOOP), not their own labels.
HOTLOOP_OPS = frozenset(("BC_FORL", "BC_ITERL", "BC_ITERN", "BC_LOOP"))


def dispatch_base(prof: Profile, G: int, read: Callable[[int, int], bytes]) -> Optional[int]:
    """The anchor address under which prof's VM labels name the VM of the
    global_State G, found through its static dispatch table
    (_static_dispatch), or None.

    When every bytecode's handler (but HOTLOOP_OPS') lies at the profile's
    offset of its label lj_BC_<op> from one base, the VM's code is laid out as the profile's:
    the same VM object placed elsewhere (linked in another order, or with
    other C compiler options; its calls into C code then differ, so its
    bytes do not match the profile's digest)."""
    entries = _static_dispatch(prof, G, read)
    ops = prof.enum_members("BC_ISLT") or {}
    if not entries or not ops:
        return None
    names = {v: k for k, v in ops.items()}
    base = None
    for i, entry in enumerate(entries):
        if names.get(i) in HOTLOOP_OPS:
            continue
        off = prof.symbol_offset("lj_" + names.get(i, "?"))
        if off is None:
            return None
        here = entry - off
        if base is None:
            base = here
        elif here != base:
            return None
    return base


class ProfileMatch(object):
    """The profile in use: how it was chosen, where its anchor symbol is,
    and whether the VM's code labels hold (this file's code is the
    profile's)."""

    def __init__(self, profile: Profile, base: Optional[int], how: str, labels: bool) -> None:
        self.profile = profile
        self.base = base
        self.how = how
        self.labels = labels


def code_matches(prof: Profile, base: int, read: Callable[[int, int], bytes]) -> bool:
    """The VM's machine code in memory is the profile's (its sha256);
    read(addr, n) gives memory or raises."""
    import hashlib
    if base is None or prof.code_sha256 is None or prof.vm_begin is None or prof.vm_end is None:
        return False
    try:
        data = read(base + prof.vm_begin, prof.vm_end - prof.vm_begin)
    except Exception:       # any backend's read failure: then the labels do not hold
        return False
    return hashlib.sha256(data).hexdigest() == prof.code_sha256


def choose(build_ids: Iterable[str], luajit_file: Optional[str], arch: str,
           states_under: Callable[[Profile], List[Any]],
           anchor_address: Callable[[Profile], Optional[int]],
           read: Callable[[int, int], bytes]) -> Tuple[Optional['ProfileMatch'], Optional[str]]:
    """(ProfileMatch or None, why none fits though profiles have the
    version, or None).  build_ids: of the loaded files; luajit_file: the
    file that holds LuaJIT's code (or None); states_under(profile): the VMs
    found under that layout; anchor_address(profile): where its anchor
    symbol is; read(addr, n): memory."""
    known = by_build_id()
    for bid in build_ids:
        if bid and bid in known:
            prof = known[bid]
            return ProfileMatch(prof, anchor_address(prof), "the build-id %s" % bid, True), None
    if luajit_file is None:
        return None, None
    version = file_version(luajit_file)
    cands = by_version(version, arch) if version else []
    named = bool(cands)
    if not cands and version:
        # A version string that names no release the profiles have: a
        # tree without git says 2.1.ROLLING (lupa's bundled LuaJIT, a
        # tarball of a snapshot), or a release newer than the library.
        # Every profile of the same branch and architecture is a
        # candidate; the memory decides, as below.
        cands = by_branch(version, arch)
    if not cands:
        return None, None
    # A global_State may look consistent under a layout that differs after
    # it (GG_State without the JIT's state): the dispatch table must be
    # where the layout puts it.
    fits = [(p, states) for p, states in consistent(cands, states_under)
            if any(dispatch_plausible(p, st.G, read) is not False for st in states)]
    same_vm = False
    if not named and len({p.layout_key() for p, _ in fits}) > 1:
        # Nearby releases fit alike: the ones whose VM is laid out as this
        # process's (each bytecode's handler at the profile's offset of its
        # label, through the static dispatch table: the same interpreter)
        # decide, when they agree.
        vm_fits = [(p, st) for p, st in fits
                   if any(dispatch_base(p, x.G, read) is not None for x in st)]
        if vm_fits and len({p.layout_key() for p, _ in vm_fits}) == 1:
            fits, same_vm = vm_fits, True
    if len({p.layout_key() for p, _ in fits}) != 1:
        if not named:
            return None, (
                "LuaJIT's version string %r names no release the %d layout profile%s of %s "
                "for %s have, and the process's memory fits %s" % (
                    version, len(cands), "" if len(cands) == 1 else "s", _branch(version), arch,
                    "none of them" if not fits else "%d of them, laid out in %d ways (%s): no "
                    "one layout is sure" % (len(fits), len({p.layout_key() for p, _ in fits}),
                                            ", ".join(_names(fits)))))
        return None, (
            "%d layout profile%s %s LuaJIT's version string %r, but the process's memory fits "
            "%s" % (len(cands), "" if len(cands) == 1 else "s",
                    "has" if len(cands) == 1 else "have", version,
                    "none of them" if not fits else "%d of them (%s): no one layout is sure" % (
                        len(fits), ", ".join(os.path.basename(p.path) for p, _ in fits))))
    # Several profiles may fit with one layout (builds of versions whose
    # structures did not change): the layout is sure, and the VM's labels
    # are those of the profile whose code the process holds, if any.
    if named:
        how = ("the version string %r and a global_State consistent under its layout (of %d "
               "profiles with that version%s)" % (
                   version, len(cands), "" if len(fits) == 1 else
                   "; %d fit, all laid out alike" % len(fits)))
    else:
        how = ("the memory, LuaJIT's version string %r naming no release the profiles have: "
               "of the %d profiles of %s for %s tried, the process's memory (a consistent "
               "global_State, a plausible dispatch table%s) fits %d, all laid out alike (%s)" % (
                   version, len(cands), _branch(version), arch,
                   ", every bytecode's handler where the profile puts it" if same_vm else "",
                   len(fits), ", ".join(_names(fits))))
    for prof, states in fits:
        base = anchor_address(prof)
        if code_matches(prof, base, read):
            return ProfileMatch(prof, base, how, True), None
        for st in states:
            moved = dispatch_base(prof, st.G, read)
            if moved is not None:
                return ProfileMatch(prof, moved, how + "; its VM code found at 0x%x through the "
                                    "dispatch table" % (moved + prof.vm_begin), True), None
    prof = fits[0][0]
    return ProfileMatch(prof, anchor_address(prof), how, False), None
