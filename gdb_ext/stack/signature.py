"""A crash's signature: what crash collectors group reports by, for a
thread stopped by a signal.  Three parts:

  signal    the signal's name as gdb and the kernel name it (SIGSEGV),
            or None where the stop was not a crash's signal
  C frame   the innermost machine frame that is not the VM's own code:
            the C function the Lua code called, or the library it was in
            (__pthread_kill_implementation under abort(); glibc's internal
            alias __GI_kill as kill); without a symbol (a stripped file),
            the file and the address in its own terms, as addr2line -e
            takes it (libfoo.so+0x630f7).  None ("the VM") when the thread
            was in LuaJIT's own code: the interpreter's handlers, a trace,
            or the C the VM runs on behalf of any bytecode (the allocator,
            the collector, string interning, table resizing, the JIT
            compiler), which says nothing about the crash that the Lua
            frames do not say better: a watchdog's SIGABRT lands in
            whichever handler was running.  "??" when no machine frame
            can be read.
  Lua       DEPTH frames of the running lua_State as lbt prints them
            ("app.lua:12", "[builtin#ipairs]", "C:myfunc"), from the
            innermost Lua function's: a builtin or C function it called
            is left out at the top (the crash's place in C is the C
            frame's part; a watchdog's SIGABRT may land inside tostring or
            between two bytecodes of the same line)

Two crashes with equal signatures are the same bug as far as a core can
tell: the same signal at the same place of the same Lua code.  Run-time
addresses are left out (they differ from process to process); lines, and
a file's own addresses, are kept.  The
key is one line of text, the same in `lbt --json` and in `triage`."""
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

from ..consts import VM_CODE_PREFIXES
from ..errors import CorruptError, FaultError
from ..layouts.layout import LUAJIT_SYMBOLS

if TYPE_CHECKING:  # for the annotations only
    from ..target import Target

# Innermost Lua frames in a signature.
DEPTH = 3
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
           7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2",
           13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD",
           18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
           23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
           28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}


# The signals whose default action writes a core (signal(7)): a crash's.
# SIGTRAP is left out: it is the debugger's own breakpoint stop, and a
# core gdb saves at a breakpoint says SIGTRAP.
CRASH_SIGNALS = frozenset((3, 4, 6, 7, 8, 11, 24, 25, 31))
# glibc's hidden alias of a public function (__GI_kill is kill): gdb names
# a glibc system call wrapper by its debug info's name (__GI_kill), lldb by
# its symbol (kill), so a signature names the function, not the alias.
GLIBC_ALIAS = "__GI_"


# LuaJIT's own code by name: the assembler VM (consts.VM_CODE_PREFIXES:
# lj_BC_*, lj_vm_*, lj_ff_* ...), every other function LuaJIT defines
# with external linkage (lj_*), its C API (lua_*, luaL_*, luaJIT_*,
# luaopen_*), and the static helpers of the files the VM runs on behalf of
# any bytecode, from LuaJIT's sources (2.0 and 2.1): lj_gc.c (the
# collector's steps), lj_alloc.c (its allocator), lj_str.c (interning),
# lj_tab.c (table resizing).  A compiler's suffix (.isra.0, .constprop.1,
# .part.0, .cold) is the same function.
VM_NAME_PREFIXES = ("lj_", "lua_", "luaL_", "luaJIT_", "luaopen_")
VM_STATIC_HELPERS = frozenset((
    # lj_gc.c
    "atomic", "gc_call_finalizer", "gc_clearweak", "gc_finalize", "gc_mark", "gc_mark_gcroot",
    "gc_mark_mmudata", "gc_mark_start", "gc_mark_uv", "gc_marktrace", "gc_mayclear",
    "gc_onestep", "gc_propagate_gray", "gc_shrink", "gc_sweep", "gc_sweepstr",
    "gc_traverse_frames", "gc_traverse_func", "gc_traverse_proto", "gc_traverse_tab",
    "gc_traverse_thread", "gc_traverse_trace", "propagatemark",
    # lj_alloc.c
    "add_segment", "alloc_sys", "alloc_trim", "direct_alloc", "direct_mmap", "direct_resize",
    "has_segment_link", "init_bins", "init_mmap", "init_top", "mmap_map32", "mmap_plain",
    "mmap_probe", "prepend_alloc", "release_unused_segments", "segment_holding",
    "tmalloc_large", "tmalloc_small",
    # lj_str.c
    "hash_dense", "hash_sparse", "str_fastcmp", "addchar", "addstr",
    # lj_tab.c
    "bestasize", "clearapart", "clearhpart", "countarray", "counthash", "countint", "hashkey",
    "hashmask", "keyindex", "newhpart", "newtab", "rehashtab", "resizetab", "unbound_search",
))
# Where the VM calls out of itself into code the Lua program called: a
# lua_CFunction (BC_FUNCC, FUNCCW) and an FFI call.  Code below such a
# frame that is not the VM's is the C function's own (or a library's).
CALL_OUT_PREFIXES = ("lj_BC_FUNCC", "lj_vm_ffi_call")


# lbt's texts of frames that are not Lua functions': builtins, C functions.
NOT_LUA_TEXTS = ("[", "C:")


def is_vm_function(name: Optional[str]) -> bool:
    """Whether a machine frame's function is LuaJIT's own (VM_NAME_PREFIXES,
    VM_STATIC_HELPERS)."""
    if not name:
        return False
    base = name.split(".", 1)[0]
    return base.startswith(VM_NAME_PREFIXES) or base in VM_STATIC_HELPERS


def signal_text(signo: Optional[int]) -> Optional[str]:
    """Linux's name of a signal number (SIG34 ... for the real-time ones,
    as gdb names them); None for none (0, or not known)."""
    if not signo or signo < 0:
        return None
    return SIGNALS.get(signo, "SIG%d" % signo)


def crash_signature(signo: Optional[int], c_frame: Optional[str],
                    frames: Sequence[str], depth: int = DEPTH) -> Dict[str, Any]:
    """The signature document: {"signal", "c_frame", "lua": [`depth`
    frames' texts from the innermost Lua function's], "key"}.  frames:
    lbt's frame texts, innermost first; c_frame None: the VM's own code.
    A signal that is not a crash's (CRASH_SIGNALS: a debugger's stop, a
    SIGSTOP) counts as none."""
    sig = signal_text(signo) if signo in CRASH_SIGNALS else None
    k = 0
    while k < len(frames) and frames[k].startswith(NOT_LUA_TEXTS):
        k += 1
    lua = list(frames[k if k < len(frames) else 0:][:depth])
    c = c_frame
    if c is not None and c.startswith(GLIBC_ALIAS):
        c = c[len(GLIBC_ALIAS):]
    key = "%s in %s | %s" % (sig or "no signal", "the VM" if c is None else c,
                             " < ".join(lua) if lua else "no Lua frame")
    return {"signal": sig, "c_frame": c, "lua": lua, "key": key}


def thread_signature(t: 'Target', frames: Sequence[str]) -> Dict[str, Any]:
    """crash_signature of t's selected OS thread: its stop signal and its
    C frame (c_frame_of) from the machine frames the backend gives, with
    `frames` (lbt's texts of the Lua thread it runs; none when it runs no
    Lua)."""
    try:
        mframes = t.machine_frames(MAX_MACHINE_FRAMES)
    except (FaultError, CorruptError):
        mframes = []
    return crash_signature(t.stop_signal(), c_frame_of(t, mframes), frames)


# Machine frames a signature looks through for the VM's edge.
MAX_MACHINE_FRAMES = 64


def c_frame_of(t: 'Target', mframes: Sequence[Any]) -> Optional[str]:
    """The signature's C frame (module docstring) of machine frames
    mframes, innermost first: "??" when there is none; else, up to the
    innermost frame of the VM's own code (the assembler VM, or code no
    file holds: a trace), the innermost frame that is not LuaJIT's, where
    the VM called out to it (CALL_OUT_PREFIXES); None when the thread was
    in the VM's own work.  A thread outside any VM (no such frame) gives
    its innermost frame, as before the VM was folded out."""
    if not mframes:
        return "??"
    lj_file = _Lazy(lambda: _luajit_file(t))
    edge = None
    for i, m in enumerate(mframes):
        if (m.name or "").startswith(VM_CODE_PREFIXES) or _vm_nameless(t, m, lj_file):
            edge = i
            break
    if edge is None:
        return _frame_text(t, mframes[0])
    inner = mframes[:edge]
    # A nameless edge may call out too: a trace calls an FFI function
    # directly, and a stripped file's call-out frame has no name.
    called_out = (not mframes[edge].name or mframes[edge].name.startswith(CALL_OUT_PREFIXES)) \
        and inner and not is_vm_function(inner[-1].name)
    if not called_out:
        return None
    for m in inner:
        if not is_vm_function(m.name):
            return _frame_text(t, m)
    return None


def _frame_text(t, m):
    return m.name or file_place(t, m.pc) or "??"


def _vm_nameless(t, m, lj_file):
    """A frame without a name in code no file holds (a trace's), or in
    the file that holds LuaJIT when it is stripped (the interpreter's
    handlers then have no symbol either)."""
    if m.name:
        return False
    got = t.file_address(m.pc)
    if got is None:
        return True
    return lj_file.value is not None and os.path.realpath(got[0]) == lj_file.value


class _Lazy(object):
    """A value worked out when first asked for (the file that holds
    LuaJIT: only a nameless frame in a file needs it)."""

    def __init__(self, make):
        self._make = make
        self._done = False
        self._value = None

    @property
    def value(self):
        if not self._done:
            self._value, self._done = self._make(), True
        return self._value


def _luajit_file(t):
    """The real path of the file that holds LuaJIT, or None."""
    for name in LUAJIT_SYMBOLS:
        try:
            addr = t.symbol(name)
            # (file_address: the file by its sections, as for a nameless
            # frame; gdb's objfile_of needs debug info in a program)
            got = t.file_address(addr) if addr is not None else None
        except (FaultError, CorruptError):
            got = None
        path = got[0] if got else None
        if path:
            return os.path.realpath(path)
    return None


def file_place(t: 'Target', pc: int) -> Optional[str]:
    """FILE+0xADDR for code without a symbol: the name of the file the
    backend read (the file itself, not a link to it, so that every backend
    names it alike) and pc as an address of that file's own; None where no
    file holds pc."""
    got = t.file_address(pc)
    if got is None:
        return None
    path, vaddr = got
    return "%s+0x%x" % (os.path.basename(os.path.realpath(path)), vaddr)
