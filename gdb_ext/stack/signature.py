"""A crash's signature: what crash collectors group reports by, for a
thread stopped by a signal.  Three parts:

  signal    the signal's name as gdb and the kernel name it (SIGSEGV),
            or None where the stop was not a crash's signal
  C frame   the name of the innermost machine frame (the function the
            thread was in: lj_alloc_malloc, __pthread_kill_implementation;
            glibc's internal alias __GI_kill as kill); without a symbol (a
            stripped file), the file and the address in its own terms,
            as addr2line -e takes it (worker+0x630f7);
            "??" in code no file holds (a JIT trace's)
  Lua       the innermost DEPTH frames of the running lua_State as lbt
            prints them ("app.lua:12", "[builtin#ipairs]", "C:myfunc")

Two crashes with equal signatures are the same bug as far as a core can
tell: the same signal at the same place of the same Lua code.  Run-time
addresses are left out (they differ from process to process); lines, and
a file's own addresses, are kept.  The
key is one line of text, the same in `lbt --json` and in `triage`."""
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

from ..errors import CorruptError, FaultError

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


def signal_text(signo: Optional[int]) -> Optional[str]:
    """Linux's name of a signal number (SIG34 ... for the real-time ones,
    as gdb names them); None for none (0, or not known)."""
    if not signo or signo < 0:
        return None
    return SIGNALS.get(signo, "SIG%d" % signo)


def crash_signature(signo: Optional[int], c_frame: Optional[str],
                    frames: Sequence[str], depth: int = DEPTH) -> Dict[str, Any]:
    """The signature document: {"signal", "c_frame", "lua": [the innermost
    `depth` frames' texts], "key"}.  frames: lbt's frame texts, innermost
    first.  A signal that is not a crash's (CRASH_SIGNALS: a debugger's
    stop, a SIGSTOP) counts as none."""
    sig = signal_text(signo) if signo in CRASH_SIGNALS else None
    lua = list(frames[:depth])
    c = c_frame or "??"
    if c.startswith(GLIBC_ALIAS):
        c = c[len(GLIBC_ALIAS):]
    key = "%s in %s | %s" % (sig or "no signal", c, " < ".join(lua) if lua else "no Lua frame")
    return {"signal": sig, "c_frame": c, "lua": lua, "key": key}


def thread_signature(t: 'Target', frames: Sequence[str]) -> Dict[str, Any]:
    """crash_signature of t's selected OS thread: its stop signal and its
    innermost machine frame as the backend gives them, with `frames` (lbt's
    texts of the Lua thread it runs; none when it runs no Lua)."""
    try:
        mframes = t.machine_frames(1)
    except (FaultError, CorruptError):
        mframes = []
    name = mframes[0].name if mframes else None
    if mframes and not name:
        name = file_place(t, mframes[0].pc)
    return crash_signature(t.stop_signal(), name, frames)


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
