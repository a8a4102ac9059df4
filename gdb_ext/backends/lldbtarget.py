"""Target backend over lldb: a live process or a core, the same code (the
peer of gdbtarget).

Only this module (and commands/hosts/lldbhost) import lldb.  Memory is read with
SBProcess.ReadMemory in blocks; LuaJIT's types, enumerators and symbols
come from the DWARF and symbol tables lldb has loaded (SBType, SBTarget);
registers and frames from SBThread and SBFrame.  Nothing here writes to
the process, evaluates an expression or calls a function in it.
"""
import os
from typing import Any, Dict, List, Optional, Tuple

import lldb  # noqa: F401  (only importable inside lldb, or with its bindings)

from . import corefile
from .coredump import ARCHES, AT_SYSINFO_EHDR, Process, file_symbol_at
from ..errors import FaultError, NotLuaJITError
from ..target import FLATTEN_DEPTH, Field, MachineFrame, Target, TypeInfo, TypeSource
from ..vm.state import STATE_REGISTERS, frame_where, register_candidates

_RECORDS = (lldb.eTypeClassStruct, lldb.eTypeClassUnion, lldb.eTypeClassClass)


def _is_record(t: Any) -> bool:
    return t.IsValid() and t.GetTypeClass() in _RECORDS


_KEYWORDS = {lldb.eTypeClassStruct: "struct", lldb.eTypeClassClass: "struct",
             lldb.eTypeClassUnion: "union", lldb.eTypeClassEnumeration: "enum"}


def gdb_type_name(t: Any) -> str:
    """An SBType's name as gdb writes the same C type (str(gdb.Type)),
    which lldb spells otherwise: 'GCRef [39]' (lldb 'GCRef[39]'), 'struct
    malloc_segment *' (lldb leaves out the keyword), 'struct {...}' (lldb
    '(unnamed struct)')."""
    base, suffix = _declarator(t, "")
    if not suffix:
        return base
    return base + ("" if base.endswith("*") else " ") + suffix


def _qualifiers(t: Any) -> str:
    """'const ', 'volatile ' or both, as t's name starts with them."""
    words = (t.GetDisplayTypeName() or t.GetName() or "").split()
    quals = []
    for w in words:
        if w not in ("const", "volatile"):
            break
        quals.append(w)
    return "".join(q + " " for q in quals)


def _bare(t: Any) -> str:
    """t's name without its leading qualifiers.  (Not GetUnqualifiedType:
    on a typedef it gives the type the typedef names.)"""
    words = (t.GetName() or "").split()
    while words and words[0] in ("const", "volatile"):
        words.pop(0)
    return " ".join(words)


def _declarator(t: Any, inner: str) -> Tuple[str, str]:
    """(base type text, declarator text around `inner`) of t."""
    if not t.IsValid():
        return "void", inner
    quals = _qualifiers(t)
    if t.IsTypedefType() or t.GetTypeClass() == lldb.eTypeClassTypedef:
        return quals + _bare(t), inner
    tc = t.GetTypeClass()
    if tc in _KEYWORDS:
        name = _bare(t)
        for kw in ("struct ", "union ", "enum ", "class "):
            if name.startswith(kw):
                name = name[len(kw):]
        if not name or name.startswith("("):
            return quals + "%s {...}" % _KEYWORDS[tc], inner
        return quals + "%s %s" % (_KEYWORDS[tc], name), inner
    if tc == lldb.eTypeClassPointer:
        target = t.GetPointeeType()
        if target.IsValid() and target.GetTypeClass() in (lldb.eTypeClassArray,
                                                          lldb.eTypeClassFunction):
            return _declarator(target, "(*%s)" % inner)
        return _declarator(target, "*" + inner)
    if tc == lldb.eTypeClassArray:
        return _declarator(t.GetArrayElementType(), inner + "[%d]" % _array_count(t))
    if tc == lldb.eTypeClassFunction:
        args = t.GetFunctionArgumentTypes()
        names = [gdb_type_name(args.GetTypeAtIndex(i)) for i in range(args.GetSize())]
        return gdb_type_name(t.GetFunctionReturnType()), "%s(%s)" % (
            inner, ", ".join(names) if names else "void")
    return quals + (_bare(t) or "?"), inner


def _array_count(t: Any) -> int:
    """The number of elements of array type t (its outermost dimension);
    0 for a flexible array member."""
    elem = t.GetArrayElementType()
    size = elem.GetByteSize() if elem.IsValid() else 0
    return t.GetByteSize() // size if size else 0


def _flatten(t: Any, base: int, prefix: str, out: Dict[str, Field], depth: int) -> None:
    """Add every member of record type t to out (path -> Field), as
    gdbtarget._flatten does with gdb's types: bit-fields left out, the
    members of an anonymous struct or union under their own names."""
    for i in range(t.GetNumberOfFields()):
        f = t.GetFieldAtIndex(i)
        if f.IsBitfield():
            continue
        ft = f.GetType()
        st = ft.GetCanonicalType()
        off = base + f.GetOffsetInBytes()
        name = f.GetName()
        if not name:
            if _is_record(st) and depth < FLATTEN_DEPTH:
                _flatten(st, off, prefix, out, depth + 1)
            continue
        path = prefix + name
        count = _array_count(st) if st.GetTypeClass() == lldb.eTypeClassArray else None
        out[path] = Field(off, st.GetByteSize(), count, gdb_type_name(ft))
        if _is_record(st) and depth < FLATTEN_DEPTH:
            _flatten(st, off, path + ".", out, depth + 1)


# The enumerators of one set of modules (LldbTypes._enumerators).
_ENUMS = {}
# The structs found in the module that holds LuaJIT, by its path and UUID
# (LldbTypes.type_info): a Target is made per command, and reading lua_State
# and its neighbours' members again cost lldb 2 ms a command.
_FIRST_TYPES = {}


class LldbTypes(TypeSource):
    """LuaJIT's types and enumerators from the DWARF of the modules lldb
    has loaded (sbtarget: an lldb.SBTarget), the module that holds LuaJIT
    first."""

    def __init__(self, sbtarget: Any, first: Optional[Any] = None) -> None:
        self.sbt = sbtarget
        self.first = first          # the SBModule with LuaJIT, searched first
        self._types = {}
        self._enums = None          # enumerator -> (value, {enumerator: value})
        self._kept = None           # _FIRST_TYPES' entry of the first module

    def _first_types(self) -> Dict[str, TypeInfo]:
        if self._kept is None:
            self._kept = {}
            if self.first is not None and self.first.IsValid():
                key = (self.first.GetFileSpec().fullpath, self.first.GetUUIDString())
                if key[0] and key[1]:
                    if key not in _FIRST_TYPES:
                        _FIRST_TYPES.clear()
                        _FIRST_TYPES[key] = {}
                    self._kept = _FIRST_TYPES[key]
        return self._kept

    def _modules(self) -> List[Any]:
        mods = [self.sbt.GetModuleAtIndex(i) for i in range(self.sbt.GetNumModules())]
        if self.first is not None and self.first.IsValid():
            mods = [self.first] + [m for m in mods if m != self.first]
        return mods

    def type_info(self, name: str) -> Optional[TypeInfo]:
        if name not in self._types:
            kept = self._first_types()
            info = kept.get(name)
            if info is None:
                for i, mod in enumerate(self._modules()):
                    t = mod.FindFirstType(name)
                    if t.IsValid():
                        t = t.GetCanonicalType()
                        if _is_record(t):
                            fields = {}
                            _flatten(t, 0, "", fields, 0)
                            info = TypeInfo(name, t.GetByteSize(), fields)
                            if i == 0 and mod == self.first:
                                kept[name] = info
                            break
            self._types[name] = info
        return self._types[name]

    def _enumerators(self) -> Dict[str, Tuple[int, Dict[str, int]]]:
        """Every enumerator of the loaded modules' DWARF.  Kept across
        commands (a Target is made per command) for the same modules, by
        their paths and UUIDs: walking every enumeration type of a module
        takes lldb about a third of a second."""
        if self._enums is None:
            mods = self._modules()
            key = tuple((m.GetFileSpec().fullpath, m.GetUUIDString()) for m in mods)
            self._enums = _ENUMS.get(key)
            if self._enums is None:
                self._enums = {}
                for mod in mods:
                    enums = mod.GetTypes(lldb.eTypeClassEnumeration)
                    for i in range(enums.GetSize()):
                        members = enums.GetTypeAtIndex(i).GetEnumMembers()
                        values = {}
                        for j in range(members.GetSize()):
                            m = members.GetTypeEnumMemberAtIndex(j)
                            values[m.GetName()] = m.GetValueAsSigned()
                        for k, v in values.items():
                            self._enums.setdefault(k, (v, values))
                _ENUMS.clear()
                _ENUMS[key] = self._enums
        return self._enums

    def constant(self, name: str) -> Optional[int]:
        got = self._enumerators().get(name)
        return got[0] if got is not None else None

    def enum_members(self, name: str) -> Optional[Dict[str, int]]:
        got = self._enumerators().get(name)
        return dict(got[1]) if got is not None else None


class _ModuleTypes(LldbTypes):
    """The structs of one module: those a variable's type reaches (its
    own, and the ones its members point to, two levels down), then the
    module's others by name (lldb.SBModule.FindFirstType)."""

    def __init__(self, sbtarget: Any, module: Any, var_type: Any) -> None:
        LldbTypes.__init__(self, sbtarget, module)
        self._reach = {}
        self._collect(var_type, 2)

    def _collect(self, t: Any, depth: int) -> None:
        t = t.GetCanonicalType()
        while t.IsPointerType() or t.IsArrayType():
            t = (t.GetPointeeType() if t.IsPointerType() else t.GetArrayElementType()) \
                .GetCanonicalType()
        name = _bare(t).split(" ", 1)[-1]      # (without "struct ")
        if not _is_record(t) or not name or name in self._reach:
            return
        self._reach[name] = t
        if depth > 0:
            for i in range(t.GetNumberOfFields()):
                self._collect(t.GetFieldAtIndex(i).GetType(), depth - 1)

    def _modules(self) -> List[Any]:
        return [self.first]

    def type_info(self, name: str) -> Optional[TypeInfo]:
        t = self._reach.get(name)
        if t is None:
            return LldbTypes.type_info(self, name)
        if name not in self._types:
            fields = {}
            _flatten(t, 0, "", fields, 0)
            self._types[name] = TypeInfo(name, t.GetByteSize(), fields)
        return self._types[name]


class LldbTarget(Target):
    """The selected target and process of an lldb debugger (live or core)."""

    def __init__(self, debugger: Any) -> None:
        super().__init__()
        self.debugger = debugger
        self.sbt = debugger.GetSelectedTarget()
        if not self.sbt.IsValid():
            raise NotLuaJITError("no target: load a program with 'target create' and a process "
                                 "or core")
        self.process = self.sbt.GetProcess()
        self.ptr_size = self.sbt.GetAddressByteSize() or 8
        triple = self.sbt.GetTriple() or ""
        self.arch = "x86_64" if triple.startswith("x86_64") else (
            "aarch64" if triple.startswith(("aarch64", "arm64")) else triple.split("-")[0])
        self.description = ("core file" if self.is_core() else
                            "process %d" % self.process.GetProcessID())
        self.luajit_module = self._luajit_module()     # (an SBModule, or None)
        self.types = LldbTypes(self.sbt, self.luajit_module)
        self._symbols = {}
        self._own_frames = {}       # thread id -> _OwnFrames (None: lldb's frames)
        self.match = None           # the layout profile's ProfileMatch, without DWARF
        self.profile_failure = None
        if self.types.type_info("lua_State") is None and self.process.IsValid():
            self._choose_profile()

    def _choose_profile(self) -> None:
        """Without LuaJIT's DWARF: a layout profile for the module that
        holds LuaJIT, by its build-id, else by its version string and the
        memory (layouts.profiles.choose, as the other backends do)."""
        from ..layouts import profiles
        from ..layouts.layout import Layout
        from ..vm.vmfind import list_states
        mods = [self.sbt.GetModuleAtIndex(i) for i in range(self.sbt.GetNumModules())]
        ids = [(m.GetUUIDString() or "").replace("-", "").lower() for m in mods]
        first = self.luajit_module
        path = first.GetFileSpec().fullpath if first is not None and first.IsValid() else None

        def states_under(prof):
            t = _ProfileTarget(self, prof)
            lay = Layout(t)
            return list_states(t, lay, frame_candidates(t, lay))[0]
        self.match, self.profile_failure = profiles.choose(
            ids, path, self.arch, states_under, self._anchor_address, self.read_raw)
        if self.match is not None:
            self.types = self.match.profile

    def _anchor_address(self, prof: Any) -> Optional[int]:
        return self._lookup(prof.anchor)

    def is_core(self) -> bool:
        return self.process.IsValid() and self.process.GetPluginName() == "elf-core"

    def core_path(self) -> Optional[str]:
        """The file name of the loaded core, or None."""
        if not self.is_core():
            return None
        f = self.process.GetCoreFile()
        return f.fullpath if f.IsValid() and f.fullpath else None

    def luajit_build_id(self) -> Optional[Tuple[str, str]]:
        """(file name, build-id in hex) of the module that holds LuaJIT, or
        None when lldb gives none."""
        mod = self.luajit_module
        if mod is None or not mod.IsValid():
            return None
        uuid = (mod.GetUUIDString() or "").replace("-", "").lower()
        return (mod.GetFileSpec().fullpath, uuid) if uuid else None

    def _luajit_module(self) -> Optional[Any]:
        for name in ("lua_newstate", "luaL_newstate", "lua_pcall"):
            ctxs = self.sbt.FindFunctions(name)
            for i in range(ctxs.GetSize()):
                mod = ctxs.GetContextAtIndex(i).GetModule()
                if mod.IsValid():
                    return mod
        return None

    def process_id(self) -> Optional[int]:
        if not self.process.IsValid():
            return None
        ids = [self.process.GetThreadAtIndex(i).GetThreadID()
               for i in range(self.process.GetNumThreads())]
        ids = [i for i in ids if i > 0]
        return min(ids) if ids else (self.process.GetProcessID() or None)

    def stop_signal(self) -> Optional[int]:
        th = self.thread()
        if th is None or th.GetStopReason() != lldb.eStopReasonSignal:
            return None
        return th.GetStopReasonDataAtIndex(0) or None

    def read_raw(self, addr: int, n: int) -> bytes:
        if not self.process.IsValid():
            raise FaultError("cannot access memory at 0x%x: no process or core" % addr, addr)
        if addr < 0 or addr + n > (1 << 64):
            raise FaultError("address 0x%x is out of range" % addr, addr)
        err = lldb.SBError()
        data = self.process.ReadMemory(addr, n, err)
        if err.Success() and data is not None and len(data) == n:
            return bytes(data)
        if self.is_core():
            # A core leaves out the files' read-only pages (code, constant
            # tables): gdb reads those from the files, and so does this.
            err = lldb.SBError()
            a = self.sbt.ResolveLoadAddress(addr)
            if a.IsValid() and a.GetSection().IsValid():
                data = self.sbt.ReadMemory(a, n, err)
                if err.Success() and data is not None and len(data) == n:
                    return bytes(data)
        raise FaultError("cannot access memory at 0x%x" % addr, addr)

    def symbol(self, name: str) -> Optional[int]:
        if name not in self._symbols:
            addr = self._lookup(name)
            m = self.match
            if addr is None and m is not None and m.labels and m.base is not None:
                off = m.profile.symbol_offset(name)
                addr = None if off is None else m.base + off
            self._symbols[name] = addr
        return self._symbols[name]

    def _lookup(self, name: str) -> Optional[int]:
        ctxs = self.sbt.FindSymbols(name)
        for i in range(ctxs.GetSize()):
            sym = ctxs.GetContextAtIndex(i).GetSymbol()
            if not sym.IsValid() or sym.GetName() != name:
                continue
            start = sym.GetStartAddress()
            addr = start.GetLoadAddress(self.sbt)
            if addr == lldb.LLDB_INVALID_ADDRESS and not self.process.IsValid():
                addr = start.GetFileAddress()       # (no process: the link-time address, as gdb)
            if addr != lldb.LLDB_INVALID_ADDRESS:
                return addr
        return None

    def symbolize(self, addr: int) -> Optional[str]:
        """The function holding addr (the inlined one where the code is
        inlined, as gdb's innermost block names it), else the symbol, else
        the VM's label from the layout profile."""
        name = self._symbolize(addr)
        m = self.match
        if name is None and m is not None and m.labels and m.base is not None:
            name = m.profile.symbol_at(addr - m.base)
        return name

    def _symbolize(self, addr: int) -> Optional[str]:
        a = self.sbt.ResolveLoadAddress(addr)
        if not a.IsValid():
            return None
        ctx = self.sbt.ResolveSymbolContextForAddress(
            a, lldb.eSymbolContextFunction | lldb.eSymbolContextBlock |
            lldb.eSymbolContextSymbol)
        inlined = ctx.GetBlock().GetContainingInlinedBlock()
        if inlined.IsValid() and inlined.GetInlinedName():
            return inlined.GetInlinedName()
        fn = ctx.GetFunction()
        if fn.IsValid() and real_name(fn.GetName()):
            return fn.GetName()
        return symbol_name(a, ctx.GetSymbol())

    def types_of(self, symbol: str, cu_name: str) -> Optional[TypeSource]:
        """The types of the module that defines the variable `symbol`, as
        its type reaches them first (glibc's struct malloc_state from
        main_arena: LuaJIT's lj_alloc.c has one of its own), or None where
        lldb has no debug info of it."""
        found = self.sbt.FindGlobalVariables(symbol, 1)
        v = found.GetValueAtIndex(0) if found.GetSize() else None
        mod = v.GetAddress().GetModule() if v is not None and v.GetAddress().IsValid() else None
        if mod is None or not mod.IsValid():
            return None
        return _ModuleTypes(self.sbt, mod, v.GetType())

    def objfile_of(self, addr: int) -> Optional[str]:
        a = self.sbt.ResolveLoadAddress(addr)
        mod = a.GetModule() if a.IsValid() else None
        if mod is None or not mod.IsValid():
            return None
        return mod.GetFileSpec().fullpath

    def file_address(self, addr: int) -> Optional[Tuple[str, int]]:
        a = self.sbt.ResolveLoadAddress(addr)
        mod = a.GetModule() if a.IsValid() else None
        if mod is None or not mod.IsValid() or not mod.GetFileSpec().fullpath:
            return None
        path = mod.GetFileSpec().fullpath
        vaddr = a.GetFileAddress()
        if path.endswith("[vdso]") or vaddr == lldb.LLDB_INVALID_ADDRESS:
            return None
        return path, vaddr

    def thread(self) -> Optional[Any]:
        if not self.process.IsValid():
            return None
        th = self.process.GetSelectedThread()
        return th if th.IsValid() else None

    def machine_frames(self, max_frames: int = 64) -> List[MachineFrame]:
        """The selected thread's frames, innermost first, with a frame for
        each function inlined at a pc (as gdb shows them): unwound by
        ljgdb's own CFI unwinder (the core reader's, coredump.Process.unwind)
        from the registers lldb gives for the innermost frame, as gdb's
        unwinder gives them (lldb's own can stop short inside the
        allocator, where gdb's goes on); lldb's frames where that unwinder
        cannot run (a machine it does not know)."""
        th = self.thread()
        if th is None:
            return []
        frames = _OwnFrames.of(self, th)
        if frames is not None:
            return frames.machine_frames(max_frames)
        return [machine_frame(th.GetFrameAtIndex(i), i)
                for i in range(min(th.GetNumFrames(), max_frames))]

    def address_space(self) -> Optional[List[Tuple[int, int]]]:
        path = self.core_path()
        if path is not None:
            return corefile.address_spans(corefile.segments(path))
        return Target.address_space(self)

    def regions(self) -> Optional[List[Tuple[int, int, bool, str]]]:
        """A live process's mappings with their names, or a core's PT_LOAD
        segments that hold memory (as gdbtarget gives them)."""
        path = self.core_path()
        if path is not None:
            return [(sg.vaddr, sg.vaddr + sg.memsz, sg.writable, "core segment")
                    for sg in corefile.segments(path) if sg.filesz]
        rows = self._regions()
        return None if rows is None else [(a, b, "w" in perms, name) for a, b, perms, name in rows]

    def mappings(self) -> Optional[List[Tuple[int, int, str]]]:
        rows = self._regions()
        return None if rows is None else [(a, b, perms) for a, b, perms, _ in rows]

    def _regions(self) -> Optional[List[Tuple[int, int, str, str]]]:
        """A live process's mappings [(start, end, perms, name)], or None
        on a core (as gdb, which knows no permissions there)."""
        if not self.process.IsValid() or self.is_core():
            return None
        regions = self.process.GetMemoryRegions()
        out = []
        info = lldb.SBMemoryRegionInfo()
        for i in range(regions.GetSize()):
            if not regions.GetMemoryRegionAtIndex(i, info) or not info.IsMapped():
                continue
            perms = "%s%s%sp" % ("r" if info.IsReadable() else "-",
                                 "w" if info.IsWritable() else "-",
                                 "x" if info.IsExecutable() else "-")
            out.append((info.GetRegionBase(), info.GetRegionEnd(), perms, info.GetName() or ""))
        return out


class LldbProcess(Process):
    """The files lldb has loaded, as the core reader's Process has them
    (their symbols, their unwind information), over the memory lldb reads:
    what ljgdb's own unwinder needs.  Kept from command to command while
    the loaded modules are the same (key); `target` is the Target of the
    command at hand (its reads)."""

    what = "the process"

    def __init__(self, target: 'LldbTarget', arch: Any, key: Tuple[Any, ...]) -> None:
        self.arch = arch
        self.key = key
        self.target = target
        self._init_files(None, "/", ("/usr/lib/debug",))
        self.files, self.auxv, self.psargs = [], {}, ""
        self._fmaps, self._fmap_starts = [], []
        exe = target.sbt.GetExecutable().fullpath
        images, vdso = [], None
        for path, header in key:
            if path.endswith("[vdso]"):
                vdso = header
            elif header is not None and os.path.isfile(path):
                img = self.image_with_header(path, header)
                if img is not None:
                    images.append(img)
        self.exe_image = next((i for i in images if i.path == exe), None)
        if vdso is not None:
            self.auxv[AT_SYSINFO_EHDR] = vdso
            img = self._vdso()
            if img is not None:
                images.append(img)
        self.images = images
        self._by_start = sorted(images, key=lambda i: i.start)
        self._starts = [i.start for i in self._by_start]

    def read(self, addr: int, n: int) -> bytes:
        return self.target.read_raw(addr, n)

    def regions(self) -> List[Tuple[int, int, bool, str]]:
        return self.target.regions() or []


class _OwnFrames(object):
    """The machine frames of one lldb thread by ljgdb's unwinder
    (coredump.Process.unwind over an LldbProcess), from the registers lldb
    gives for the thread's innermost frame; each frame named, and its
    inlined functions found, by lldb's symbol context of its pc."""

    _process = None         # the LldbProcess kept from command to command

    @classmethod
    def of(cls, outer: 'LldbTarget', th: Any) -> Optional['_OwnFrames']:
        tid = th.GetThreadID()
        if tid not in outer._own_frames:
            arch = next((a for a in ARCHES.values() if a.name == outer.arch), None)
            regs = _innermost_registers(th, arch) if arch is not None else None
            if not regs or regs.get(arch.pc) is None or regs.get(arch.sp) is None:
                outer._own_frames[tid] = None
            else:
                key = tuple(_module_places(outer.sbt))
                proc = cls._process
                if proc is None or proc.key != key or proc.arch is not arch:
                    proc = _OwnFrames._process = LldbProcess(outer, arch, key)
                proc.target = outer
                outer._own_frames[tid] = cls(proc, outer, regs)
        return outer._own_frames[tid]

    def __init__(self, proc: LldbProcess, outer: 'LldbTarget', regs: Dict[str, int]) -> None:
        self.proc, self.outer, self.regs = proc, outer, regs
        self.unwind_stop = None
        self._frames = None

    def machine_frames(self, max_frames: int) -> List[MachineFrame]:
        if self._frames is None:
            from .framevars import register_reader
            frames, self.unwind_stop = self.proc.unwind(self.regs, 64, self.outer.read)
            self._frames = out = []
            for i, (pc, _) in enumerate(frames):
                # (A caller's pc is a return address: the call is before it.)
                lookup = pc if i == 0 else pc - 1
                reg = register_reader(frames, i)
                for name, debug in self._names(lookup):
                    out.append(MachineFrame(len(out), pc, name, debug, reg))
        return self._frames[:max_frames]

    def _names(self, addr: int) -> List[Tuple[Optional[str], bool]]:
        """[(name, has debug info)] of the functions at addr, innermost
        first: the inlined ones, then the one they are inlined in (as gdb
        gives each a frame); the symbol alone without debug info."""
        outer = self.outer
        a = outer.sbt.ResolveLoadAddress(addr)
        ctx = outer.sbt.ResolveSymbolContextForAddress(
            a, lldb.eSymbolContextFunction | lldb.eSymbolContextBlock |
            lldb.eSymbolContextSymbol) if a.IsValid() else None
        fn = ctx.GetFunction() if ctx is not None else None
        if fn is None or not fn.IsValid() or not real_name(fn.GetName()):
            return [(outer.symbolize(addr), False)]
        debug = _c_debug_info(fn)
        out = []
        b = ctx.GetBlock().GetContainingInlinedBlock()
        while b.IsValid() and len(out) < 64:
            out.append((b.GetInlinedName(), debug))
            b = b.GetParent().GetContainingInlinedBlock()
        out.append((fn.GetName(), debug))
        return out


def _module_places(sbt: Any) -> List[Tuple[str, Optional[int]]]:
    """(path, load address of the ELF header) of each module lldb has loaded."""
    out = []
    for i in range(sbt.GetNumModules()):
        m = sbt.GetModuleAtIndex(i)
        a = m.GetObjectFileHeaderAddress()
        load = a.GetLoadAddress(sbt) if a.IsValid() else lldb.LLDB_INVALID_ADDRESS
        out.append((m.GetFileSpec().fullpath or "",
                    None if load == lldb.LLDB_INVALID_ADDRESS else load))
    return out


# lldb's names of the registers the kernel's (and so the core reader's) differ.
_LLDB_NAMES = {"eflags": "rflags", "x29": "fp", "x30": "lr"}


def _innermost_registers(th: Any, arch: Any) -> Dict[str, int]:
    """The registers of thread th's innermost frame, named as the core
    reader names them (coredump.Arch.pr_regs); those lldb lacks left out."""
    f = th.GetFrameAtIndex(0)
    out = {}
    if not f.IsValid():
        return out
    for name in arch.pr_regs:
        v = f.FindRegister(name)
        if not v.IsValid() or v.GetValue() is None:
            v = f.FindRegister(_LLDB_NAMES.get(name, name))
        if v.IsValid() and v.GetValue() is not None:
            out[name] = v.GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF
    return out


# lldb names code without a symbol (a function of a stripped file that its
# unwind information delimits) ___lldb_unnamed_symbolN; gdb gives no name.
_UNNAMED = "___lldb_unnamed_symbol"


def real_name(name: Optional[str]) -> Optional[str]:
    """name, or None for lldb's made-up names of code without a symbol."""
    return None if not name or name.startswith(_UNNAMED) else name


def symbol_name(addr: Any, sym: Any) -> Optional[str]:
    """The name of the code at SBAddress addr, whose SBSymbol is sym, as
    gdb names it: where several symbols share an address (the VM's empty
    handlers of a build without the JIT: lj_BC_JFUNCV at lj_BC_FUNCC's
    address), gdb names the one whose ELF size covers it, and lldb, which
    gives each the size up to the next symbol, either; so the ELF file's
    own symbol table decides (coredump.file_symbol_at)."""
    mod = addr.GetModule()
    if mod.IsValid() and mod.GetFileSpec().fullpath:
        name = file_symbol_at(mod.GetFileSpec().fullpath, addr.GetFileAddress())
        if name:
            return name
    return real_name(sym.GetName()) if sym.IsValid() else None


class _ProfileTarget(LldbTarget):
    """The process, with LuaJIT's types from one profile (to try it)."""

    def __init__(self, outer: LldbTarget, prof: Any) -> None:
        Target.__init__(self)
        self.debugger, self.sbt, self.process = outer.debugger, outer.sbt, outer.process
        self.ptr_size, self.arch, self.description = outer.ptr_size, outer.arch, outer.description
        self._symbols = {}
        self._own_frames = {}
        self.match = None
        self.types = prof
        self.prof = prof
        self.base = outer._anchor_address(prof)

    def symbol(self, name: str) -> Optional[int]:
        off = self.prof.symbol_offset(name)
        return None if off is None or self.base is None else self.base + off


def machine_frame(f: Any, level: int) -> MachineFrame:
    """The MachineFrame of lldb.SBFrame f at level."""
    fn = f.GetFunction()
    name = f.GetFunctionName() if fn.IsValid() else \
        symbol_name(f.GetPCAddress(), f.GetSymbol()) or real_name(f.GetFunctionName())
    return MachineFrame(level, f.GetPC(), name, fn.IsValid() and _c_debug_info(fn),
                        _register_reader(f))


def _c_debug_info(fn: Any) -> bool:
    """Whether lldb.SBFunction fn is described by C debug info: OpenResty's
    buildvm gives the assembler VM line info in its .dasc source, which is
    not."""
    path = fn.GetStartAddress().GetLineEntry().GetFileSpec().GetFilename()
    return not (path or "").endswith(".dasc")


def _register_reader(f: Any) -> Any:
    cache = {}

    def read(name: str) -> Optional[int]:
        if name not in cache:
            v = f.FindRegister(name)
            cache[name] = v.GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF \
                if v.IsValid() and v.GetValue() is not None else None
        return cache[name]
    return read


def frame_candidates(t: LldbTarget, lay: Any, max_frames: int = 64) -> List[Tuple[str, int, str]]:
    """Candidate state pointers from the selected thread's frames, from the
    selected one out, as gdbtarget.frame_candidates takes them from gdb:
    each frame's variables and arguments of type lua_State * or
    global_State *, then in the VM's frames its registers; up to the first
    frame without a name outside the shared libraries (a JIT trace)."""
    out = []
    th = t.thread()
    if th is None:
        return out
    regs = STATE_REGISTERS.get(t.arch, ())
    exe = t.sbt.GetExecutable()
    start = th.GetSelectedFrame().GetFrameID()
    for num in range(start, min(th.GetNumFrames(), start + max_frames)):
        f = th.GetFrameAtIndex(num)
        m = machine_frame(f, num)
        fname = m.name
        variables = f.GetVariables(True, True, False, True)
        for i in range(variables.GetSize()):
            v = variables.GetValueAtIndex(i)
            ty = v.GetType().GetCanonicalType()
            if not ty.IsPointerType():
                continue
            tag = ty.GetPointeeType().GetCanonicalType().GetName() or ""
            tag = tag.replace("struct ", "")
            if tag not in ("lua_State", "global_State"):
                continue
            addr = v.GetValueAsUnsigned()
            if addr and v.GetError().Success():
                out.append(("L" if tag == "lua_State" else "G", addr,
                            frame_where(num, fname, v.GetName())))
        if fname is None or fname.startswith(("lj_vm_", "lj_BC_")):
            out.extend(register_candidates(lay, regs, m.reg, num, fname))
        mod = f.GetModule()
        in_library = mod.IsValid() and mod.GetFileSpec() != exe
        if fname is None and not in_library:
            break
    return out
