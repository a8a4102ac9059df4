"""Target backend over gdb: a live process or a core file, the same code.

Only this module (and commands/) import gdb.  Memory is read with
Inferior.read_memory in blocks; types come from the DWARF gdb has loaded.
Nothing here writes to the inferior or calls functions in it.
"""
from typing import Any, Callable, Dict, List, Optional, Tuple
import os
import re

import gdb  # noqa: F401  (only importable inside gdb)

from ..layouts import buildid
from . import corefile
from .coredump import section_address
from ..errors import FaultError, NotLuaJITError
from ..layouts.layout import LUAJIT_SYMBOLS, TAG_ONLY_TYPES
from ..vm.state import STATE_REGISTERS, frame_where, register_candidates
from ..target import FLATTEN_DEPTH, Field, MachineFrame, Target, TypeInfo, TypeSource

_ADDR_RE = re.compile(r"0x[0-9a-fA-F]+")
_MAX_DEPTH = FLATTEN_DEPTH


def _flatten(t, base, prefix, out, depth):
    """Add every member of gdb struct/union type t to out (path -> Field)."""
    for f in t.fields():
        if f.bitpos is None or (hasattr(f, "is_base_class") and f.is_base_class):
            continue
        if f.bitsize:
            continue                       # bit-fields: not used by the engine
        ft = f.type
        st = ft.strip_typedefs()
        off = base + f.bitpos // 8
        if not f.name:                     # anonymous struct/union: inline it
            if st.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION) and depth < _MAX_DEPTH:
                _flatten(st, off, prefix, out, depth + 1)
            continue
        path = prefix + f.name
        count = None
        if st.code == gdb.TYPE_CODE_ARRAY:
            lo, hi = st.range()
            count = hi - lo + 1
        out[path] = Field(off - 0, st.sizeof, count, str(ft))
        if st.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION) and depth < _MAX_DEPTH:
            _flatten(st, off, path + ".", out, depth + 1)


def _struct_info(name: str, t: Any) -> Optional[TypeInfo]:
    """gdb type t (typedefs stripped) as a TypeInfo named name, when it is
    a struct or union; else None."""
    if t is None or t.code not in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
        return None
    fields = {}
    _flatten(t, 0, "", fields, 0)
    return TypeInfo(name, t.sizeof, fields)


class _ScopedTypes(TypeSource):
    """Structs as one compile unit's scope (a gdb block) names them: first
    the struct of a symbol of that unit and the structs its members point
    to (gdb's lookup of "struct malloc_state" finds LuaJIT's lj_alloc.c one
    even from glibc's block), then what the block's lookup finds."""

    def __init__(self, block: Any, sym_type: Any) -> None:
        self.block = block
        self._types = {}
        self._reach = {}
        self._collect(sym_type, 2)

    def _collect(self, t, depth):
        t = t.strip_typedefs()
        while t.code in (gdb.TYPE_CODE_PTR, gdb.TYPE_CODE_ARRAY):
            t = t.target().strip_typedefs()
        if t.code not in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION) or not t.tag or \
                t.tag in self._reach:
            return
        self._reach[t.tag] = t
        if depth > 0:
            for f in t.fields():
                self._collect(f.type, depth - 1)

    def type_info(self, name: str) -> Optional[TypeInfo]:
        if name not in self._types:
            t = self._reach.get(name)
            for n in (() if t is not None else (name, "struct " + name)):
                try:
                    t = gdb.lookup_type(n, self.block).strip_typedefs()
                    break
                except gdb.error:
                    continue
            self._types[name] = _struct_info(name, t)
        return self._types[name]


class GdbTypes(TypeSource):
    """LuaJIT's types from the DWARF gdb has loaded; where gdb knows no such
    type or enumerator, from fallback() (a TypeSource or None: the active
    layout profile, for a LuaJIT without debug info)."""

    def __init__(self, fallback: Callable[[], Optional[TypeSource]] = lambda: None) -> None:
        self.fallback = fallback
        self._types = {}

    def type_info(self, name: str) -> Optional[TypeInfo]:
        if name in self._types:
            return self._types[name]
        info = None
        try:
            t = gdb.lookup_type(name).strip_typedefs()
        except gdb.error:
            t = None
            if name in TAG_ONLY_TYPES:
                # A struct known by its tag only (lj_alloc.c's).
                try:
                    t = gdb.lookup_type("struct " + name).strip_typedefs()
                except gdb.error:
                    t = None
        if t is not None:
            info = _struct_info(name, t)
        else:
            prof = self.fallback()
            info = prof.type_info(name) if prof is not None else None
        self._types[name] = info
        return info

    def constant(self, name: str) -> Optional[int]:
        try:
            v = gdb.parse_and_eval(name)
        except gdb.error:
            prof = self.fallback()
            return prof.constant(name) if prof is not None else None
        if v.type.strip_typedefs().code != gdb.TYPE_CODE_ENUM:
            return None
        return int(v)

    def enum_members(self, name: str) -> Optional[Dict[str, int]]:
        try:
            t = gdb.parse_and_eval(name).type.strip_typedefs()
        except gdb.error:
            prof = self.fallback()
            return prof.enum_members(name) if prof is not None else None
        if t.code != gdb.TYPE_CODE_ENUM:
            return None
        return {f.name: int(f.enumval) for f in t.fields()}


_symbols = {}      # (program, number of objfiles) -> {name: address or None}


class GdbTarget(Target):
    """The selected inferior of gdb (live or core)."""

    def __init__(self) -> None:
        super().__init__()
        inf = gdb.selected_inferior()
        if inf is None or not inf.is_valid():
            raise NotLuaJITError("no inferior: load a program with 'file' and a process or core")
        self.inferior = inf
        self.ptr_size = gdb.lookup_type("void").pointer().sizeof
        self.description = "process %d" % inf.pid if inf.pid else "core or exec file"
        self.types = GdbTypes(active_profile)
        try:
            name = inf.architecture().name()
        except (gdb.error, AttributeError):
            name = ""
        self.arch = "x86_64" if "x86-64" in name else ("aarch64" if "aarch64" in name else name)

    def process_id(self) -> Optional[int]:
        try:
            ids = [th.ptid[1] for th in self.inferior.threads() if th.ptid[1] > 0]
        except gdb.error:
            ids = []
        return min(ids) if ids else (self.inferior.pid or None)

    def stop_signal(self) -> Optional[int]:
        """$_siginfo's si_signo: gdb's record of the selected thread's last
        stop (a core's NT_SIGINFO); on a core without that note (qemu-user
        writes none), $_exitsignal, the signal gdb read from the core's
        NT_PRSTATUS when it loaded it.  Reading them runs nothing in the
        process."""
        for expr in ("$_siginfo.si_signo",) + (("$_exitsignal",) if is_core() else ()):
            try:
                v = gdb.parse_and_eval(expr)
                if v.type.code != gdb.TYPE_CODE_VOID:
                    return int(v) or None
            except (gdb.error, RuntimeError, ValueError):
                pass
        return None

    def read_raw(self, addr: int, n: int) -> bytes:
        try:
            return self.inferior.read_memory(addr, n).tobytes()
        except gdb.MemoryError as e:
            m = _ADDR_RE.search(str(e))
            bad = int(m.group(0), 16) if m else addr
            raise FaultError("cannot access memory at 0x%x" % bad, bad)
        except gdb.error as e:
            raise FaultError("cannot read memory at 0x%x: %s" % (addr, e), addr)
        except OverflowError:
            raise FaultError("address 0x%x is out of range" % addr, addr)

    def symbol(self, name: str) -> Optional[int]:
        """The address of a symbol, or None; looked up once while the same
        files are loaded (a failed lookup costs gdb milliseconds)."""
        try:
            stamp = (gdb.current_progspace().filename, len(gdb.objfiles()))
        except (gdb.error, RuntimeError):
            stamp = None
        cache = _symbols.get(stamp)
        if cache is None:
            _symbols.clear()
            cache = _symbols[stamp] = {}
        if name not in cache:
            cache[name] = self._lookup(name)
        return cache[name]

    def types_of(self, symbol: str, cu_name: str) -> Optional[TypeSource]:
        try:
            sym = gdb.lookup_static_symbol(symbol) or gdb.lookup_global_symbol(symbol)
            block = sym.symtab.static_block() if sym is not None and sym.symtab else None
        except (gdb.error, RuntimeError, AttributeError):
            block = None
        return _ScopedTypes(block, sym.type) if block is not None else None

    def _lookup(self, name):
        addr = self._lookup_gdb(name)
        if addr is None:
            m = active_match()
            if m is not None and m.labels and m.base is not None and \
                    m.profile.symbol_offset(name) is not None:
                addr = m.base + m.profile.symbol_offset(name)
        return addr

    def _lookup_gdb(self, name):
        try:
            sym = gdb.lookup_global_symbol(name) or gdb.lookup_static_symbol(name)
        except gdb.error:
            sym = None
        if sym is not None:
            try:
                v = sym.value()
                if v.address is not None:
                    return int(v.address)
                return int(v)
            except (gdb.error, TypeError, ValueError):
                pass
        try:
            return int(gdb.parse_and_eval("(unsigned long)&'%s'" % name))
        except gdb.error:
            return None

    def objfile_of(self, addr: int) -> Optional[str]:
        try:
            name = gdb.solib_name(addr)
        except (gdb.error, RuntimeError, OverflowError):
            return None
        if name:
            return name
        try:
            return gdb.current_progspace().filename if gdb.block_for_pc(addr) else None
        except (gdb.error, RuntimeError):
            return None

    def symbolize(self, addr: int) -> Optional[str]:
        name = self._symbolize_gdb(addr)
        return name if name is not None else vm_symbol_at(addr)

    def _symbolize_gdb(self, addr):
        try:
            block = gdb.block_for_pc(addr)
        except (gdb.error, RuntimeError):
            block = None
        while block is not None:
            if block.function is not None:
                return block.function.name
            block = block.superblock
        try:
            text = gdb.execute("info symbol 0x%x" % addr, to_string=True)
        except gdb.error:
            return None
        if text.startswith("No symbol"):
            return None
        name = text.split(" in section ")[0].strip()
        return name.split(" + ")[0] if name else None

    def machine_frames(self, max_frames: int = 64) -> List[MachineFrame]:
        """The selected thread's frames as gdb's unwinder sees them (it uses
        the unwind info LuaJIT emits for its assembler VM too), innermost
        first; registers are read lazily, None where gdb cannot recover one."""
        out = []
        try:
            frame = gdb.newest_frame()
        except gdb.error:
            return out
        while frame is not None and len(out) < max_frames:
            m = machine_frame(frame, len(out))
            if m is None:
                break
            out.append(m)
            try:
                frame = frame.older()
            except gdb.error:
                break
        return out

    def _proc_mappings(self):
        """[(start, end, perms, file name)] of a live process from gdb's
        `info proc mappings` (it has a Perms column since gdb 12); None on a
        core, where gdb knows only file-backed mappings and no permissions."""
        inf = self.inferior
        conn = getattr(inf, "connection", None)
        if not inf.pid or (conn is not None and conn.type == "core"):
            return None
        try:
            text = gdb.execute("info proc mappings", to_string=True)
        except gdb.error:
            return None
        out = []
        has_perms = False
        for line in text.splitlines():
            f = line.split()
            if "Perms" in f:
                has_perms = True
                continue
            if has_perms and len(f) >= 5 and f[0].startswith("0x"):
                try:
                    out.append((int(f[0], 16), int(f[1], 16), f[4], f[5] if len(f) > 5 else ""))
                except ValueError:
                    continue
        return out if has_perms else None

    def file_address(self, addr: int) -> Optional[Tuple[str, int]]:
        """By `info files`: the sections of the program and of each
        library at their run-time addresses, as gdb read them (a library
        from the sysroot; on a core without NT_FILE, as qemu-user writes
        them, too), and the section's address in that file."""
        try:
            text = gdb.execute("info files", to_string=True)
        except gdb.error:
            return None
        exe, in_exec = None, False
        for line in text.splitlines():
            if line.startswith("Local "):
                in_exec = line.startswith("Local exec file:")
                continue
            m = re.match(r"\s*`(.*)', file type", line)
            if m and in_exec and exe is None:
                exe = m.group(1)
                continue
            m = re.match(r"\s*0x([0-9a-f]+) - 0x([0-9a-f]+) is (\S+)(?: in (.+))?$", line)
            if not m or not in_exec or not int(m.group(1), 16) <= addr < int(m.group(2), 16):
                continue
            path = m.group(4) or exe
            if path is None:
                return None
            base = section_address(path, m.group(3))
            return None if base is None else (path, addr - int(m.group(1), 16) + base)
        return None

    def mappings(self) -> Optional[List[Tuple[int, int, str]]]:
        """A live process's mappings [(start, end, perms)], or None."""
        rows = self._proc_mappings()
        return None if rows is None else [(a, b, perms) for a, b, perms, _ in rows]

    def address_space(self) -> Optional[List[Tuple[int, int]]]:
        if is_core():
            path = core_path()
            return corefile.address_spans(corefile.segments(path)) if path else None
        return Target.address_space(self)

    def regions(self) -> Optional[List[Tuple[int, int, bool, str]]]:
        """A live process's mappings with their file names (info proc
        mappings), or a core's PT_LOAD segments that hold memory (a core
        leaves out file-backed read-only pages: those have no bytes)."""
        if is_core():
            path = core_path()
            if not path:
                return None
            return [(sg.vaddr, sg.vaddr + sg.memsz, sg.writable, "core segment")
                    for sg in corefile.segments(path) if sg.filesz]
        rows = self._proc_mappings()
        return None if rows is None else [(a, b, "w" in perms, name) for a, b, perms, name in rows]


def machine_frame(frame: 'gdb.Frame', level: int) -> Optional[MachineFrame]:
    """The MachineFrame of gdb.Frame frame (at level), or None when gdb
    cannot read it."""
    try:
        pc = frame.pc()
        name = frame.name() or vm_symbol_at(pc)
        fn = frame.function()
        # OpenResty's buildvm gives the assembler VM line info
        # pointing into its .dasc source: that is not C debug info.
        has_debug = fn is not None and not (fn.symtab is not None and
                                            fn.symtab.filename.endswith(".dasc"))
    except (gdb.error, RuntimeError):
        return None
    return MachineFrame(level, pc, name, has_debug, _register_reader(frame))


def _register_reader(frame):
    cache = {}

    def read(name):
        if name not in cache:
            try:
                v = frame.read_register(name)
                cache[name] = None if v.is_optimized_out else int(v) & 0xFFFFFFFFFFFFFFFF
            except (gdb.error, ValueError, RuntimeError):
                cache[name] = None
        return cache[name]
    return read


def _arch_state_registers():
    try:
        name = gdb.selected_inferior().architecture().name()
    except (gdb.error, AttributeError):
        return ()
    return STATE_REGISTERS.get("x86_64" if "x86-64" in name else
                               "aarch64" if "aarch64" in name else name, ())


def frame_candidates(lay: Any, max_frames: int = 64) -> List[Tuple[str, int, str]]:
    """Candidate state pointers from the stack: ('L' or 'G', address, where),
    innermost frame first, up to the first frame without a name outside
    the shared libraries (past it gdb unwinds by guessing).  Reads symbols
    and registers only."""
    out = []
    try:
        frame = gdb.selected_frame()
    except gdb.error:
        return out
    regs = _arch_state_registers()
    level = 0
    while frame is not None and level < max_frames:
        try:
            num = frame.level()              # gdb's own frame number
        except (AttributeError, gdb.error):
            num = level
        fname = None
        try:
            fname = frame.name()
        except gdb.error:
            pass
        try:
            block = frame.block()
        except (RuntimeError, gdb.error):
            block = None
        while block is not None:
            for sym in block:
                if not (sym.is_argument or sym.is_variable):
                    continue
                try:
                    t = sym.type.strip_typedefs()
                    if t.code != gdb.TYPE_CODE_PTR:
                        continue
                    target = t.target().strip_typedefs()
                    tag = target.tag or target.name
                    if tag not in ("lua_State", "global_State"):
                        continue
                    addr = int(sym.value(frame))
                except (gdb.error, RuntimeError, ValueError, TypeError):
                    continue
                if addr:
                    out.append(("L" if tag == "lua_State" else "G", addr,
                                frame_where(num, fname, sym.name)))
            if block.function is not None:
                break
            block = block.superblock
        if fname is None or fname.startswith("lj_vm_") or fname.startswith("lj_BC_"):
            out.extend(register_candidates(lay, regs, _register_reader(frame), num, fname))
        try:
            in_library = fname is None and gdb.solib_name(frame.pc()) is not None
        except (gdb.error, RuntimeError):
            in_library = False
        if fname is None and not in_library:
            # Code without a symbol outside the shared libraries (a JIT
            # trace) has no unwind information: gdb's frames beyond it are
            # guesses.  (A nameless function inside a library, such as libc
            # without its symbols under qemu's sysroot, unwinds by the
            # library's .eh_frame; coretarget.frame_candidates does the same.)
            break
        try:
            frame = frame.older()
        except gdb.error:
            break
        level += 1
    return out


# --------------------------------------------------------------------------
# What gdb has loaded: probes that let a command say what is missing.  They
# read symbols, gdb's own tables and (for the build-id) a few bytes of the
# core; none of them touches a live process.


def luajit_symbol() -> Optional[Tuple[str, Optional[str]]]:
    """(name, file) of a LuaJIT function in the loaded program's symbol
    table (ELF symbols are enough: they survive `strip -g`), or None."""
    for name in LUAJIT_SYMBOLS:
        try:
            addr = int(gdb.parse_and_eval("(unsigned long)&'%s'" % name))
        except (gdb.error, ValueError):
            continue
        where = None
        try:
            info = gdb.execute("info symbol 0x%x" % addr, to_string=True)
            if " of " in info:
                where = info.rsplit(" of ", 1)[1].strip()
        except gdb.error:
            pass
        return name, where or gdb.current_progspace().filename
    return None


def selected_thread_running() -> bool:
    """True when the selected thread is running (non-stop or `run &`):
    its registers and frames cannot be read, and its memory is changing."""
    try:
        th = gdb.selected_thread()
    except gdb.error:
        return False
    if th is None or not th.is_valid():
        return False
    try:
        return th.is_running()
    except gdb.error:
        return False


def is_core() -> bool:
    inf = gdb.selected_inferior()
    conn = getattr(inf, "connection", None)
    return conn is not None and conn.type == "core"


def remote_connection() -> Optional[str]:
    """The type of the selected inferior's connection ('remote',
    'extended-remote') when it is a debugging stub (qemu-user's, a
    gdbserver), whose process id names no process of this machine; None
    for a process gdb runs here and for a core."""
    conn = getattr(gdb.selected_inferior(), "connection", None)
    return conn.type if conn is not None and conn.type not in ("native", "core") else None


_CORE_RE = re.compile(r"Local core dump file:\s*`(.+?)', file type")
_core_ids = {}


def core_path() -> Optional[str]:
    """The file name of the loaded core, or None."""
    try:
        text = gdb.execute("info target", to_string=True)
    except gdb.error:
        return None
    m = _CORE_RE.search(text)
    return m.group(1) if m else None


def core_truncation() -> Optional[Tuple[int, int]]:
    """(bytes there, bytes needed) when the loaded core file is cut short."""
    if not is_core():
        return None
    path = core_path()
    return corefile.truncation(path) if path else None


def _luajit_objfile():
    """The objfile that holds LuaJIT's code (the separate debug file's
    owner when there is one), or None."""
    for name in LUAJIT_SYMBOLS:
        try:
            sym = gdb.lookup_global_symbol(name)
        except gdb.error:
            sym = None
        if sym is None or sym.symtab is None:
            continue
        obj = sym.symtab.objfile
        owner = getattr(obj, "owner", None)
        return owner or obj
    return None


def core_mismatch(give: str, off: str) -> Optional[str]:
    """On a core: None when the core was written by the loaded LuaJIT binary
    (or when that cannot be told); else buildid.mismatch's line saying
    which binary gdb has and which one the core names (give, off: the
    host's remedies)."""
    if not is_core():
        return None
    obj = _luajit_objfile()
    if obj is None or not getattr(obj, "build_id", None):
        return None
    path = core_path()
    if path is None:
        return None
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
    except OSError:
        return None
    ids = _core_ids.get(key)
    if ids is None:
        _core_ids.clear()
        ids = _core_ids[key] = corefile.build_ids(path)
    if buildid.agrees(ids, obj.build_id):
        return None                 # (before asking gdb for the process)
    exe = None
    try:
        for line in gdb.execute("info proc", to_string=True).splitlines():
            if line.startswith("exe = "):
                # The whole command line ('nginx: worker process'), unquoted.
                exe = line[6:].strip()
                if len(exe) >= 2 and exe[0] == exe[-1] == "'":
                    exe = exe[1:-1]
    except gdb.error:
        pass
    # The image the core holds in LuaJIT's place: for the executable, the
    # lowest-mapped one (a program is mapped below its libraries); for a
    # library, the nearest ELF header at or below one of its functions
    # (gdb maps a library where the core's link map says).
    place = None
    is_exe = obj.filename == gdb.current_progspace().filename
    if is_exe:
        place = min(ids)
    else:
        for name in LUAJIT_SYMBOLS:
            try:
                a = int(gdb.parse_and_eval("(unsigned long)&'%s'" % name))
            except gdb.error:
                continue
            place = buildid.image_at_or_below(ids, a)
            break
    return buildid.mismatch(ids, "%s %s" % ("the binary" if is_exe else "the library",
                                            obj.filename),
                            obj.build_id, give, off, place=place, loaded="gdb loaded it with",
                            process=exe)


_syscalls = {}


def syscall_names() -> Dict[int, str]:
    """System call number -> name for the selected inferior's architecture,
    from gdb's own tables (its data directory's syscalls/*.xml, which
    `catch syscall` reads); {} when gdb has none."""
    try:
        arch = gdb.selected_inferior().architecture().name()
    except (gdb.error, AttributeError):
        arch = "i386:x86-64"
    fname = "amd64-linux.xml" if "x86-64" in arch else \
        "aarch64-linux.xml" if "aarch64" in arch else None
    if fname is None:
        return {}
    if fname not in _syscalls:
        names = {}
        path = os.path.join(os.path.dirname(gdb.PYTHONDIR), "syscalls", fname)
        try:
            with open(path) as f:
                for m in re.finditer(r'<syscall name="([^"]+)" number="(\d+)"', f.read()):
                    names[int(m.group(2))] = m.group(1)
        except OSError:
            pass
        _syscalls[fname] = names
    return _syscalls[fname]


# --------------------------------------------------------------------------
# Layout profiles (gdb_ext.layouts.profiles) for a LuaJIT without debug info: the one
# whose build-id is a loaded file's, else the one with its version string
# under whose layout the process holds a consistent VM.

_active = {}


def active_match() -> Any:
    """The ProfileMatch for the loaded files when gdb has no DWARF for
    LuaJIT's types, else None; chosen once per set of files."""
    try:
        objfiles = [o for o in gdb.objfiles() if o.is_valid()]
    except (gdb.error, RuntimeError):
        return None
    stamp = tuple(o.filename for o in objfiles)
    if stamp in _active:
        return _active[stamp]
    _active.clear()
    _active[stamp] = None           # (while it is being chosen)
    try:
        has_dwarf = gdb.lookup_type("lua_State") is not None
    except gdb.error:
        has_dwarf = False
    match = None if has_dwarf else _choose(objfiles)
    _active[stamp] = match
    return match


def active_profile() -> Optional[TypeSource]:
    m = active_match()
    return m.profile if m is not None else None


def _anchor_address(prof):
    try:
        return int(gdb.parse_and_eval("(unsigned long)&'%s'" % prof.anchor))
    except gdb.error:
        return None


_why_none = [None]      # why no profile was chosen by version string, if one had it


def profile_failure() -> Optional[str]:
    """Why no layout profile fits though one has this LuaJIT's version
    string (for the one-line error), or None."""
    return _why_none[0] if active_match() is None else None


def _read_memory(addr, n):
    return gdb.selected_inferior().read_memory(addr, n).tobytes()


def _choose(objfiles):
    from ..layouts import profiles
    from ..layouts.layout import Layout
    from ..vm.vmfind import list_states

    def states_under(prof):
        t = _ProfileTarget(prof)
        lay = Layout(t)
        return list_states(t, lay, frame_candidates(lay))[0]
    found = luajit_symbol()
    match, _why_none[0] = profiles.choose(
        [getattr(o, "build_id", None) for o in objfiles], found[1] if found else None,
        GdbTarget().arch, states_under, _anchor_address, _read_memory)
    return match


class _ProfileTarget(GdbTarget):
    """The process, with LuaJIT's types from one profile (to try it)."""

    def __init__(self, prof):
        super().__init__()
        self.prof = prof
        self.types = prof

    def symbol(self, name):
        off = self.prof.symbol_offset(name)
        if off is None:
            return None
        base = _anchor_address(self.prof)
        return None if base is None else base + off


def vm_symbol_at(pc: Optional[int]) -> Optional[str]:
    """The VM's code label at pc from the active profile (a LuaJIT without
    symbols), or None."""
    m = active_match()
    if m is None or not m.labels or m.base is None or pc is None:
        return None
    return m.profile.symbol_at(pc - m.base)
