"""Target backend over a core file without gdb (the core reader, python3 -m
ljgdb CORE ...): memory, threads and loaded files from gdb_ext.backends.coredump,
LuaJIT's layout from the DWARF of the file that holds LuaJIT (read once
with pyelftools and kept as a layout profile in a cache directory, by
build-id) or from a shipped layout profile (gdb_ext.layouts.profiles), as the gdb
backend takes one.  Nothing here imports gdb."""
import json
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Tuple

from ..layouts import buildid, profiles
from . import corefile
from ..consts import VM_CODE_PREFIXES
from ..errors import LjError, NotLuaJITError
from ..layouts.layout import LUAJIT_SYMBOLS
from ..vm.state import STATE_REGISTERS, frame_where, register_candidates
from ..target import MachineFrame, Target, TypeSource
from ..layouts.profiles import Profile

if TYPE_CHECKING:
    from ..layouts.layout import Layout
    from .coredump import Image, Process

# The frame chains kept by build-id are written at most this often (seconds).
SAVE_EVERY = 2.0


def cache_dir() -> str:
    """Where layouts read from DWARF are kept, by build-id."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "ljgdb", "layouts")


class CoreTarget(Target):
    """A core file read with gdb_ext.backends.coredump.Core (core: the
    coredump.Process; a live process's is live.LiveProcess, under
    live.LiveTarget, this class's subclass).  layout: the Profile
    (gdb_ext.layouts.profiles) LuaJIT's types come from; match: the ProfileMatch
    when that profile was chosen for a build without DWARF (its VM labels
    name code the symbol table does not), else None."""

    description = "core file"

    def __init__(self, core: 'Process', layout: Optional[Profile] = None, match: Any = None,
                 thread: int = 0) -> None:
        super().__init__()
        self.core = core
        self.layout = layout
        self.types = layout if layout is not None else TypeSource()
        self.match = match
        self.thread = thread
        self.arch = core.arch.name
        self._frames = None
        self.unwind_stop = None
        self._dwarf_blocks = {}      # file -> framevars.DwarfBlocks (not Target._blocks: memory)
        self._chains = {}            # Image -> {link-time pc (hex): chain}
        self._saved = {}             # Image -> when its chains were last saved
        self._unit_types = {}        # (DWARF file, compile unit) -> DwarfTypes (types_of)

    def read_raw(self, addr: int, n: int) -> bytes:
        self.touched(n)
        return self.core.read(addr, n)

    def process_id(self) -> Optional[int]:
        ids = [t.tid for t in self.core.threads if t.tid > 0]
        return min(ids) if ids else None

    def stop_signal(self) -> Optional[int]:
        """The selected thread's pr_cursig (NT_PRSTATUS): for a kernel core
        the signal that killed the process, in the thread it hit."""
        threads = self.core.threads
        return (threads[self.thread].signal or None) if self.thread < len(threads) else None

    def symbol(self, name: str) -> Optional[int]:
        addr = self.core.symbol(name)
        m = self.match
        if addr is None and m is not None and m.labels and m.base is not None:
            off = m.profile.symbol_offset(name)
            if off is not None:
                addr = m.base + off
        return addr

    def symbolize(self, addr: int) -> Optional[str]:
        name = self.core.symbolize(addr)
        m = self.match
        if name is None and m is not None and m.labels and m.base is not None:
            name = m.profile.symbol_at(addr - m.base)
        return name

    def objfile_of(self, addr: int) -> Optional[str]:
        return self.core.objfile_of(addr)

    def file_address(self, addr: int) -> Optional[Tuple[str, int]]:
        img = self.core.image_of(addr)
        # (The file read, as gdb and lldb name the file they read: a
        # library in a sysroot by its path there.)
        return (img.file, addr - img.bias) if img is not None and img.file else None

    def mapped(self, addr: int) -> Optional[Tuple[int, int, Any]]:
        return self.core.mapped(addr)

    def release_pages(self) -> None:
        self.core.release_pages()

    def regions(self) -> Optional[List[Tuple[int, int, bool, str]]]:
        return self.core.regions()

    def address_space(self) -> Optional[List[Tuple[int, int]]]:
        return corefile.address_spans(self.core.segments)

    def machine_frames(self, max_frames: int = 64) -> List[MachineFrame]:
        """The selected thread's frames as the unwind information (CFI) of
        the loaded files gives them, with a frame for each function
        inlined at a pc (as gdb shows them); the unwinder's reason for
        stopping early is kept in self.unwind_stop."""
        return [f[0] for f in self.frame_facts()[:max_frames]]

    def types_of(self, symbol: str, cu_name: str) -> Optional[Any]:
        addr = self.core.symbol(symbol)
        img = self.core.image_of(addr) if addr is not None else None
        path = img.dwarf_file() if img is not None else None
        if path is None:
            return None
        key = (path, cu_name)
        if key not in self._unit_types:
            from ..layouts.elfdwarf import DwarfTypes
            try:
                self._unit_types[key] = DwarfTypes(path, cu_name)
            except (OSError, ValueError):
                self._unit_types[key] = None
        return self._unit_types[key]

    def unwind_reader(self) -> Optional[Callable[[int, int], bytes]]:
        """Where the unwinder reads the stack: None, the core itself."""
        return None

    def select_thread(self, index: int) -> None:
        """Make thread `index` of the process the selected one; its machine
        frames are unwound anew when asked for."""
        self.thread = index
        self._frames = None

    def frame_facts(self) -> List[Tuple[Any, ...]]:
        """[(MachineFrame, variables, link-time pc, load bias, frame base,
        CFA)]: each frame with what framevars.read_variables needs."""
        if self._frames is not None:
            return self._frames
        from .framevars import register_reader
        self._frames = out = []
        threads = self.core.threads
        if not threads:
            self.unwind_stop = "the core has no thread"
            return out
        frames, self.unwind_stop = self.core.unwind(threads[self.thread].regs, 64,
                                                    self.unwind_reader())
        for i, (pc, regs) in enumerate(frames):
            # (A caller's pc is a return address: the call is before it.)
            lookup = pc if i == 0 else pc - 1
            cfa = frames[i + 1][1].get(self.core.arch.sp) if i + 1 < len(frames) else None
            img = self.core.image_of(lookup)
            bias = img.bias if img is not None else 0
            chain = self._chain(img, lookup - bias)
            reg = register_reader(frames, i)
            if not chain:
                name = self.symbolize(lookup)
                out.append((MachineFrame(len(out), pc, name, False, reg), (), lookup - bias,
                            bias, None, cfa))
                continue
            for name, variables, frame_base in chain:
                debug = not (name or "").startswith(VM_CODE_PREFIXES)
                out.append((MachineFrame(len(out), pc, name, debug, reg), variables,
                            lookup - bias, bias, frame_base, cfa))
        # (Saved at most every SAVE_EVERY seconds: a sampler meets new pcs
        # at every sample, and each save writes the whole document.)
        self.save_frames(SAVE_EVERY)
        return out

    def prepare_frames(self, addrs: Iterable[int], vm: Optional[int] = None) -> None:
        """What the first unwind through each of addrs would do, done now:
        its file's DWARF opened (pyelftools' import and the sections: 0.1
        to 0.3 s) and its compile unit read (0.05 to 0.15 s), where the
        cache does not know the frames at addr.  vm: an address in the
        VM's code, whose file's DWARF is opened and whose units at addrs
        are read in any case: the interpreter's pcs are new to the cache at
        many samples, and the C functions' beside them (the collector's, the
        C API's) at the first samples of a new place.  A sampler calls it
        before its first sample, whose decode would otherwise wait that
        long.  What was found is saved now, and the next save comes
        SAVE_EVERY seconds on (save_frames)."""
        home = self.core.image_of(vm) if vm is not None else None
        for addr in addrs:
            img = self.core.image_of(addr)
            if img is None:
                continue
            if img is home and _dwarf_file(img) is not None:
                self._blocks_of(img).chain(addr - img.bias)
            self._chain(img, addr - img.bias)
        self.save_frames(0.0)
        now = time.monotonic()
        for img in self._chains:
            self._saved[img] = now

    def save_frames(self, every: float = 0.0) -> None:
        """The frames found since the last save kept in the cache
        (_chain), for each file whose last save is `every` seconds old."""
        now = time.monotonic()
        for img, chains in self._chains.items():
            if chains.get(None) and now - self._saved.get(img, -every) >= every:
                chains.pop(None)
                self._saved[img] = now
                _save(img, "frames", chains)

    def _chain(self, img, vaddr):
        """framevars.DwarfBlocks.chain of img's DWARF at link-time address
        vaddr; the answers are kept by build-id (cache_dir()), as the same
        pcs come back core after core of one program."""
        if img is None or _dwarf_file(img) is None:
            return []
        chains = self._chains.get(img)
        if chains is None:
            chains = self._chains[img] = _load(img, "frames") or {}
        key = "%x" % vaddr
        if key not in chains:
            chains[key] = self._blocks_of(img).chain(vaddr)
            chains[None] = True         # (changed: to be saved)
        return chains[key]

    def _blocks_of(self, img):
        """framevars.DwarfBlocks of img's DWARF file (opened once)."""
        if img.path not in self._dwarf_blocks:
            from .framevars import DwarfBlocks
            self._dwarf_blocks[img.path] = DwarfBlocks(_dwarf_file(img))
        return self._dwarf_blocks[img.path]


def frame_candidates(target: 'CoreTarget', lay: 'Layout') -> List[Tuple[str, int, str]]:
    """Candidate state pointers from the selected thread's frames, as
    gdbtarget.frame_candidates takes them from gdb: in each frame, its C
    variables of type lua_State * or global_State * (gdb_ext.backends.framevars),
    then in the VM's frames its registers; up to the first frame without a
    name outside the shared libraries (a JIT trace: no unwind information;
    a nameless function inside a library unwinds by its CFI)."""
    from .framevars import read_variables
    out = []
    regs = STATE_REGISTERS.get(target.arch, ())
    for mf, variables, vaddr, bias, frame_base, cfa in target.frame_facts():
        for name, kind, v in read_variables(variables, vaddr, mf.reg, cfa, frame_base, bias,
                                            target.read, target.ptr_size,
                                            target.core.arch.dwarf_regs):
            out.append((kind, v, frame_where(mf.level, mf.name, name)))
        if mf.name is None or mf.name.startswith(("lj_vm_", "lj_BC_")):
            out.extend(register_candidates(lay, regs, mf.reg, mf.level, mf.name))
        if mf.name is None and target.core.library_of(mf.pc) is None:
            break
    return out


def _dwarf_file(img):
    """The file with img's DWARF (its separate debug file, or itself), or None."""
    return img.dwarf_file()


def _cache_path(img, kind):
    return os.path.join(cache_dir(), "%s.%s.json" % (img.build_id, kind)) \
        if img.build_id else None


def _load(img, kind):
    """The JSON document kept for img's build, or None."""
    path = _cache_path(img, kind)
    if path and os.path.exists(path):
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            pass
    return None


def _save(img, kind, doc):
    path = _cache_path(img, kind)
    if not path:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = "%s.%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except OSError:
        pass        # no cache: read again next time


def _cached(img, kind, make):
    """make()'s JSON document for img, kept in cache_dir() by build-id."""
    doc = _load(img, kind)
    if doc is None:
        doc = make()
        _save(img, kind, doc)
    return doc


# --------------------------------------------------------------------------
# Opening a core: the files, LuaJIT's image and its layout.

def luajit_image(core: 'Process') -> Optional[Tuple[str, 'Image']]:
    """(symbol, Image) of the loaded file that holds LuaJIT, or None."""
    for name in LUAJIT_SYMBOLS:
        addr = core.symbol(name)
        if addr is None:
            continue
        path = core.objfile_of(addr)
        for img in core.images:
            if img.path == path:
                return name, img
    return None


def dwarf_layout(img: 'Image') -> Optional[Profile]:
    """The Profile of LuaJIT's layout from the DWARF of img (its separate
    debug file or itself), read once per build-id (cache_dir()); None when
    neither has DWARF, nor a debuginfod server (DEBUGINFOD_URLS) has its
    debug file."""
    src = _dwarf_file(img)
    if src is None and img.build_id:
        from . import debuginfod
        fetched = debuginfod.debuginfo(img.build_id)
        if fetched is not None:
            img.use_debug_file(fetched)
            src = _dwarf_file(img)
    if src is None:
        return None

    def make():
        from ..layouts.writer import make_profile
        return make_profile(src, img.file if src != img.file else None)
    # ("layout2": the types lheap reads were added; older files lack them.)
    doc = _cached(img, "layout2", make)
    return profiles.Profile(doc, src)


def find_luajit(core: 'Process') -> Tuple[str, 'Image']:
    """luajit_image(core), or NotLuaJITError naming the files looked in."""
    found = luajit_image(core)
    if found is None:
        raise NotLuaJITError("no LuaJIT in %s's files: none of %s is among the symbols "
                             "of %s" % (core.what, ", ".join(LUAJIT_SYMBOLS[:3]), ", ".join(
                                 img.path for img in core.images) or "its files"))
    return found


def open_target(core: 'Process', thread: int = 0, cls: type = CoreTarget) -> CoreTarget:
    """The CoreTarget (or the subclass cls) of a coredump.Process, a core
    or a live process (its thread index `thread` the selected one):
    LuaJIT's layout from DWARF, else from a layout profile (by build-id,
    else by version string and the memory), else NotLuaJITError saying
    what is missing."""
    name, img = find_luajit(core)
    lay = dwarf_layout(img)
    if lay is not None:
        return cls(core, lay, thread=thread)
    from ..layouts.layout import Layout
    from ..vm.vmfind import list_states

    def states_under(prof):
        t = cls(core, prof, thread=thread)
        lo = Layout(t)
        return list_states(t, lo, frame_candidates(t, lo))[0]

    def anchor(prof):
        return core.symbol(prof.anchor) if prof.anchor else None
    match, why = profiles.choose([i.build_id for i in core.images], img.file, core.arch.name,
                                 states_under, anchor, core.read)
    if match is None:
        raise LjError(
            "LuaJIT is in %s (it has the symbol %s) but without debug info%s; give the core "
            "reader the file with its DWARF (a -g build, or install its debug file under "
            "/usr/lib/debug), or put the layout profile of this build%s (python3 -m "
            "ljgdb.profile on its debug file) in a directory named by $LJGDB_PROFILES"
            % (img.path, name, ", and %s" % why if why else "",
               " (build-id %s)" % img.build_id if img.build_id else ""))
    return cls(core, match.profile, match, thread)


def core_mismatch(core: 'Process', path: str, give: str, off: str) -> Optional[str]:
    """None when the file holding LuaJIT is the one the core at path was
    written with (or when that cannot be told); else buildid.mismatch's
    line naming both build-ids (give, off: the host's remedies)."""
    found = luajit_image(core)
    if found is None or not found[1].build_id:
        return None
    img = found[1]
    return buildid.mismatch(corefile.build_ids(path), img.path, img.build_id, give, off,
                            place=img.start)
