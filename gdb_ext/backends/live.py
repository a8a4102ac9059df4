"""Target backend over a running Linux process without gdb (python3 -m
ljgdb --pid PID ...): the core reader's code over live memory.

  threads      /proc/PID/task
  registers    ptrace: PTRACE_SEIZE and PTRACE_INTERRUPT of every thread,
               waitpid for the stop, PTRACE_GETREGSET (NT_PRSTATUS), then
               PTRACE_DETACH; only while LiveProcess.stopped() holds them
  memory       pread of /proc/PID/mem, else process_vm_readv
  files        /proc/PID/maps (through /proc/PID/root/<path> when the file
               at <path> is not the one mapped: another mount namespace)
  layout, C frames, symbols
               as the core reader has them (coredump.Process: the ELF files,
               the CFI unwinder; coretarget: DWARF with pyelftools, separate
               debug files, layout profiles by build-id)

It never writes to the process: the ptrace requests above are the only
ones it makes.  A PTRACE_SEIZE stop delivers no signal; a signal that
arrives while a thread is held is passed on at the detach, and a thread
that was stopped (SIGSTOP) is left stopped."""
import contextlib
import ctypes
import errno
import os
import signal
import struct
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, TYPE_CHECKING

from ..errors import CorruptError, FaultError, LjError
from .coredump import AARCH64, X86_64, Process
from ..target import Thread
from .coretarget import CoreTarget, find_luajit, open_target
from .ptstop import Stopper, StopFailed, load

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Layout

PTRACE_DETACH = 17
PTRACE_GETREGSET = 0x4204
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_EVENT_STOP = 128
NT_PRSTATUS = 1
WALL = 0x40000000               # __WALL: wait for threads too
YAMA_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"
# How long a thread may take to stop after PTRACE_INTERRUPT.
STOP_TIMEOUT = 5.0
# reads of a VM's changing fields when it is found without a stop (vmfind.check_state)
RUNNING_TRIES = 8

_ARCHES = {"x86_64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = None


def libc() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.ptrace.restype = ctypes.c_long
        lib.ptrace.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
        lib.process_vm_readv.restype = ctypes.c_ssize_t
        lib.process_vm_readv.argtypes = (ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                                         ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.c_ulong)
        _libc = lib
    return _libc


def ptrace(request: int, tid: int, addr: int = 0, data: int = 0) -> int:
    """libc's ptrace; OSError(errno) when it fails."""
    ctypes.set_errno(0)
    r = libc().ptrace(request, tid, addr, data)
    if r == -1:
        e = ctypes.get_errno()
        if e:
            raise OSError(e, os.strerror(e))
    return r


def proc_status(pid: int, tid: Optional[int] = None) -> Dict[str, str]:
    """/proc/PID/status (or /proc/PID/task/TID/status) as {field: value},
    {} when it cannot be read."""
    out = {}
    try:
        with open("/proc/%d/status" % pid if tid is None else
                  "/proc/%d/task/%d/status" % (pid, tid)) as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def comm(pid: int) -> str:
    """The process's name (/proc/PID/comm), '?' when it cannot be read."""
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def children(pids: Sequence[int]) -> List[int]:
    """The child processes of pids (/proc/PID/task/TID/children), and
    theirs, in order."""
    out = []
    todo = list(pids)
    while todo:
        pid = todo.pop(0)
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for k in kids:
                if k not in out and k not in pids:
                    out.append(k)
                    todo.append(k)
    return out


def refusal(pid: int, err: OSError) -> str:
    """The one line that says why ptrace refused process pid, and what to do."""
    tracer = proc_status(pid).get("TracerPid", "0")
    if tracer not in ("", "0"):
        return ("process %d is already traced by process %s (%s; TracerPid in /proc/%d/status): "
                "a process has one tracer at a time; detach that one first"
                % (pid, tracer, comm(int(tracer)), pid))
    try:
        with open(YAMA_SCOPE) as f:
            scope = f.read()
    except OSError:
        scope = None
    line = yama_refusal(pid, err, scope)
    if line:
        return line
    return ("ptrace of process %d refused (%s)%s: run as the process's user or as root (a process "
            "of another user, a setuid program, or no CAP_SYS_PTRACE in this container)"
            % (pid, err.strerror, _owners(pid)))


def _owners(pid: int) -> str:
    """', it runs as user X and this is user Y' when they differ."""
    uid = (proc_status(pid).get("Uid") or "").split()[:1]
    if not uid or int(uid[0]) == os.getuid():
        return ""
    return ", it runs as user %s and this is user %s" % (_user(int(uid[0])), _user(os.getuid()))


def _user(uid: int) -> str:
    import pwd
    try:
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return "uid %d" % uid


def yama_refusal(pid: int, err: OSError, scope: Optional[str]) -> Optional[str]:
    """The line for a ptrace refused under Yama, given the text of
    /proc/sys/kernel/yama/ptrace_scope (None: no Yama); None when the
    scope (0, or none) is not why."""
    scope = scope.strip() if scope is not None else None
    what = {"1": "only a process's ancestors may trace it",
            "2": "only a process with CAP_SYS_PTRACE may trace",
            "3": "no process may trace"}.get(scope)
    if not what:
        return None
    return ("ptrace of process %d refused (%s): /proc/sys/kernel/yama/ptrace_scope is %s, so "
            "%s; %s"
            % (pid, err.strerror, scope, what,
               "not even root, and the setting cannot be lowered until the machine restarts; "
               "what is left is a core the kernel writes (python3 -m ljgdb CORE BINARY COMMAND)"
               if scope == "3" else "run as root (or with CAP_SYS_PTRACE), or set it to 0 "
               "(sysctl kernel.yama.ptrace_scope=0)"))


_ELF_MACHINES = {0x3e: "x86_64", 0xb7: "aarch64", 0x28: "arm", 0x08: "mips", 0x15: "ppc64",
                 0xf3: "riscv", 0x16: "s390x", 0x03: "i386"}


def _elf_machine(path: str) -> Optional[str]:
    """The machine an ELF file is built for (e_machine), None if not ELF."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return _ELF_MACHINES.get(struct.unpack_from("<H", head, 18)[0], "machine 0x%x" % head[18])


def emulator_refusal(pid: int, exe: str, maps: List[Tuple[int, int, str, int, int, str]],
                     machine: str) -> Optional[str]:
    """The line for qemu-user (its /proc/PID/exe a qemu-* program, as with
    binfmt_misc): the process is the emulator, for the machine `machine`,
    and ptrace gives the emulator's registers, not the guest's; None for
    any other process."""
    name = os.path.basename(exe)
    if not name.startswith("qemu-"):
        return None
    guests = [n for _, _, _, _, inode, n in maps if inode and n.startswith("/") and n != exe]
    guest = next(((n, m) for n, m in ((n, _elf_machine(n)) for n in dict.fromkeys(guests))
                  if m not in (None, machine)), None)
    return ("process %d is %s (qemu-user) running %s: ptrace reads qemu's own %s registers, "
            "not the emulated ones, so --pid cannot; start the program under %s -g SOCKET and "
            "attach gdb-multiarch with ljgdb (target remote SOCKET), or read a core qemu writes "
            "(SIGABRT: qemu_<program>_<date>_<pid>.core) with python3 -m ljgdb --sysroot DIR "
            "CORE PROGRAM COMMAND"
            % (pid, name, "the %s program %s" % (guest[1], guest[0]) if guest else
               "another machine's program", machine, name))


def _ours_or_gone(pid: int, tid: int) -> bool:
    """Whether thread tid of pid, which PTRACE_SEIZE refused, is one this
    process traces already (a thread that exited while held, still listed
    in /proc until it is reaped) or a thread that is ending (zombie)."""
    status = proc_status(pid, tid)
    return status.get("TracerPid") == str(os.getpid()) or \
        status.get("State", "")[:1] in ("Z", "X", "")


def read_maps(pid: int) -> List[Tuple[int, int, str, int, int, str]]:
    """[(start, end, perms, offset, inode, name)] of /proc/PID/maps."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 5:
                continue
            lo, _, hi = parts[0].partition("-")
            name = parts[5].rstrip("\n") if len(parts) > 5 else ""
            out.append((int(lo, 16), int(hi, 16), parts[1], int(parts[2], 16), int(parts[4]),
                        name))
    return out


class LiveProcess(Process):
    """A running process, read in place: memory, mapped files and symbols at
    any time; threads and their registers only inside stopped()."""

    def __init__(self, pid: int, debug_dirs: Tuple[str, ...] = ("/usr/lib/debug",)) -> None:
        self.pid = pid
        self.what = "process %d" % pid
        if not os.path.isdir("/proc/%d/task" % pid):
            raise LjError("no process %d (no /proc/%d)" % (pid, pid))
        machine = os.uname().machine
        self.arch = _ARCHES.get(machine)
        if self.arch is None:
            raise LjError("--pid reads x86-64 and arm64 processes; this machine is %s"
                          % machine)
        try:
            self.maps = read_maps(pid)
            exe = os.readlink("/proc/%d/exe" % pid)
            with open("/proc/%d/auxv" % pid, "rb") as f:
                auxv = f.read()
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                raise LjError(refusal(pid, e))
            raise LjError("cannot read process %d: %s" % (pid, e.strerror or e))
        emulated = emulator_refusal(pid, exe, self.maps, machine)
        if emulated:
            raise LjError(emulated)
        self._mem_fd = None
        self._no_mem = False            # /proc/PID/mem could not be opened: process_vm_readv
        self._sigwait = False           # _wait sleeps in sigtimedwait (stopped() blocked SIGCHLD)
        self.held_seconds = None        # how long the last stopped() held the process
        self.stop_wait = None           # of which waiting for the threads to stop
        self._stopper = None            # ptstop.Stopper; False: none (c_sampler_why)
        self._follows = []
        self.c_sampler_why = ""
        self.threads = []               # Thread of each OS thread, inside stopped() only
        self.files = [(s, e, off, name) for s, e, _, off, inode, name in self.maps
                      if inode and name.startswith("/")]
        self._inodes = {name: inode for _, _, _, _, inode, name in self.maps if inode}
        self.auxv = {}
        for k, v in struct.iter_unpack("<QQ", auxv[:len(auxv) - len(auxv) % 16]):
            if k == 0:
                break
            self.auxv[k] = v
        self.psargs = ""
        self._init_files(None, "/", debug_dirs)
        self.executable = self._disk(exe)
        self._load_images()

    # --- files ----------------------------------------------------------------
    def _disk(self, name: str) -> str:
        """The file mapped as `name`: at that path when it is the same file
        (inode), else through /proc/PID/root (another mount namespace), or
        /proc/PID/map_files for a file deleted since it was mapped."""
        inode = self._inodes.get(name)
        try:
            if inode is None or os.stat(name).st_ino == inode:
                return name
        except OSError:
            pass
        if name.endswith(" (deleted)"):
            first = min((s, e) for s, e, _, _, _, n in self.maps if n == name)
            return "/proc/%d/map_files/%x-%x" % (self.pid, first[0], first[1])
        return "/proc/%d/root%s" % (self.pid, name)

    # --- memory ---------------------------------------------------------------
    def read(self, addr: int, n: int) -> bytes:
        """n bytes at addr; FaultError at the first byte that cannot be read.
        pread of /proc/PID/mem (a third of process_vm_readv's time through
        ctypes), else process_vm_readv where /proc/PID/mem cannot be
        opened."""
        if n <= 0:
            return b""
        if self._mem_fd is None and not self._no_mem:
            try:
                self._mem_fd = os.open("/proc/%d/mem" % self.pid, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._no_mem = True
        if self._mem_fd is not None:
            try:
                data = os.pread(self._mem_fd, n, addr)
            except (OSError, OverflowError):
                raise FaultError("cannot access memory at 0x%x" % addr, addr)
            got = len(data)
        else:
            buf = ctypes.create_string_buffer(n)
            local = _Iovec(ctypes.cast(buf, ctypes.c_void_p), n)
            remote = _Iovec(addr, n)
            got = libc().process_vm_readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote),
                                          1, 0)
            if got < 0:
                raise FaultError("cannot access memory at 0x%x" % addr, addr)
            data = buf.raw
        if got < n:
            raise FaultError("cannot access memory at 0x%x" % (addr + got), addr + got)
        return data

    def gatherer(self, spans: List[Tuple[int, int]]) -> Callable[[], Optional[bytes]]:
        """Target.gatherer's reader: every span in one process_vm_readv
        (one system call, where a pread a span would make one each)."""
        total = sum(n for _, n in spans)
        buf = ctypes.create_string_buffer(max(1, total))
        local = _Iovec(ctypes.cast(buf, ctypes.c_void_p), total)
        remote = (_Iovec * max(1, len(spans)))(*[_Iovec(a, n) for a, n in spans])
        lib, pid, count = libc(), self.pid, len(spans)

        def gather() -> Optional[bytes]:
            if lib.process_vm_readv(pid, ctypes.byref(local), 1, remote, count, 0) != total:
                return None
            return buf.raw[:total]
        return gather if total else (lambda: b"")

    def regions(self) -> List[Tuple[int, int, bool, str]]:
        """Every mapping, as gdb's `info proc mappings` lists them."""
        return [(s, e, "w" in perms, name) for s, e, perms, _, _, name in self.maps]

    def mappings(self) -> List[Tuple[int, int, str]]:
        return [(s, e, perms) for s, e, perms, _, _, _ in self.maps]

    def reread_maps(self) -> List[Tuple[int, int, str]]:
        """mappings() after reading /proc/PID/maps again (memory mapped
        since the process was opened; the files and their symbols stay
        those read then); OSError when it cannot be read."""
        self.maps = read_maps(self.pid)
        return self.mappings()

    def close(self) -> None:
        if self._mem_fd is not None:
            os.close(self._mem_fd)
            self._mem_fd = None

    # --- threads --------------------------------------------------------------
    def task_ids(self) -> List[int]:
        """The OS threads, as gdb numbers them: the main thread first."""
        try:
            tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % self.pid) if t.isdigit())
        except OSError:
            raise LjError("process %d is gone" % self.pid)
        return sorted(tids, key=lambda t: t != self.pid)

    @contextlib.contextmanager
    def stopped(self, tids: Optional[List[int]] = None) -> Iterator["LiveProcess"]:
        """Every thread held by ptrace (seized and interrupted), its registers
        in self.threads; on leaving, every thread detached (in `finally`),
        with the signal it was about to take, if one came meanwhile.
        tids: task_ids() as the caller just listed them (the first to seize;
        the list is made again once all are stopped, for threads started
        since)."""
        held = {}       # tid -> signal to pass on at the detach (None: not seen stopped yet)
        start = time.monotonic()
        self.stop_wait = None           # from the first interrupts to their stops
        old_mask = self._block_sigchld()
        try:
            tids = self._seize_all(held, tids)
            pc = self.arch.pc
            threads = []
            for tid in tids:
                regs = self._regs(tid) if tid in held else None
                if regs is not None:
                    threads.append(Thread(tid, regs, 0, regs[pc]))
            self.threads = threads
            if not self.threads:
                raise LjError("process %d has no thread left to read" % self.pid)
            yield self
        finally:
            self.threads = []
            for tid in list(held):
                if held[tid] is None:           # (seized, not seen to stop: wait a moment)
                    self._wait(tid, held, time.time() + 1.0)
                sig = held.pop(tid)
                try:
                    ptrace(PTRACE_DETACH, tid, 0, sig or 0)
                except OSError:
                    pass        # (exited; or never stopped: the kernel detaches when we exit)
            self._unblock_sigchld(old_mask)
            self.held_seconds = time.monotonic() - start

    @contextlib.contextmanager
    def sigchld_blocked(self) -> Iterator[bool]:
        """SIGCHLD blocked in this thread while inside, where that is
        safe (_block_sigchld); yields whether it is (a wait for a stop may
        sleep in sigtimedwait).  Inside another one, the mask is left as
        it is: a sampler holds one around all its samples (setting the
        mask twice a sample cost about 100 us of CPU after a 10 ms sleep)."""
        if self._sigwait:
            yield True
            return
        old_mask = self._block_sigchld()
        try:
            yield old_mask is not None
        finally:
            self._unblock_sigchld(old_mask)

    def _unblock_sigchld(self, old_mask: Optional[Set[int]]) -> None:
        if old_mask is not None:
            self._sigwait = False
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

    def stop_and_copy(self, ranges: List[Tuple[int, int]], below: int, above: int,
                      follows: Sequence[Tuple[int, ...]] = ()
                      ) -> Optional[Tuple[Dict[int, Tuple[Optional[str], bool]],
                                          List[Tuple[int, bytes]], List[Tuple[int, int]]]]:
        """One stop made by the C sampler (ptstop): the threads listed and
        their scheduling states read, every thread held, its registers read
        into self.threads, the ranges [(lo, hi)] and each thread's stack
        from below its stack pointer to above it copied, and the objects
        whose address is read at the stop (follows: as Stopper.follow takes
        them), every thread let go; held_seconds and stop_wait as stopped()
        sets them.  ({tid: (state letter before the stop, on a CPU)},
        [(lo, bytes read from lo)], [(lo, hi) tried]), or None when there
        is no C sampler (c_sampler_why says why) or this stop is beyond it
        (more threads than it holds): stop in Python then.  LjError as
        stopped() raises it."""
        stopper = self._c_stopper(below, above, follows)
        if stopper is None:
            return None
        with self.sigchld_blocked() as sigwait:
            try:
                st = stopper.stop(ranges, sigwait)
            except StopFailed as e:
                return self._stop_failed(e)
        self.held_seconds, self.stop_wait = st.held, st.wait
        self.threads, states, copied, tried = self._stopped_copy(st, ranges)
        return states, copied, tried

    def stops_and_copies(self, ranges: List[Tuple[int, int]], below: int, above: int,
                         follows: Sequence[Tuple[int, ...]], due: Sequence[float]
                         ) -> Optional[Tuple[List[Tuple[Any, ...]], Optional[LjError], bool]]:
        """Stops as stop_and_copy makes one, at each of the times due
        (time.monotonic's), made by the C sampler in one call: ([(threads,
        states, copied, tried, held seconds, stop wait)] of the stops made,
        the LjError that ended them or None, whether the stop after them is
        to be made alone: it was beyond the batch (more threads than its
        buffers hold, or no process_vm_readv)), or None when there is no C
        sampler.  Fewer stops than asked and neither: a signal came in a
        sleep (Ctrl-C)."""
        stopper = self._c_stopper(below, above, follows)
        if stopper is None:
            return None
        with self.sigchld_blocked() as sigwait:
            got, failed = stopper.batch(ranges, sigwait, due)
        out = []
        try:
            for st in got:
                out.append(self._stopped_copy(st, ranges) + (st.held, st.wait))
            if failed is not None:
                self._stop_failed(failed)
        except LjError as e:
            return out, e, False
        return out, None, failed is not None

    def _c_stopper(self, below: int, above: int, follows: Sequence[Tuple[int, ...]]
                   ) -> Optional[Stopper]:
        """The C sampler (built or loaded at first use), following follows;
        None when there is none (c_sampler_why says why)."""
        if self._stopper is None:
            lib, why = load()
            if lib is None:
                self._stopper, self.c_sampler_why = False, why
            else:
                sp = "rsp" if self.arch is X86_64 else "sp"
                self._stopper = Stopper(lib, self.pid, self.arch.pr_regs, sp, below, above,
                                        STOP_TIMEOUT)
        if self._stopper is False:
            return None
        if list(follows) != self._follows:
            self._follows = list(follows)
            self._stopper.follow(self._follows)
        return self._stopper

    def _stop_failed(self, e: StopFailed) -> None:
        """A failed C stop: None where the stop is to be made in Python
        (no process_vm_readv, more threads than the C sampler holds), else
        the LjError that says why."""
        if e.errno == errno.ENOSYS:     # (no process_vm_readv: /proc/PID/mem in Python)
            self._stopper, self.c_sampler_why = False, "no process_vm_readv"
            return None
        if e.errno == errno.E2BIG:
            return None
        if e.errno == errno.ESRCH and e.tid == 0:
            raise LjError("process %d is gone" % self.pid)
        if e.errno == errno.ETIMEDOUT:
            raise LjError("thread %d of process %d did not stop in %.0f s after "
                          "PTRACE_INTERRUPT" % (e.tid, self.pid, STOP_TIMEOUT))
        raise LjError(refusal(self.pid, OSError(e.errno, os.strerror(e.errno))))

    def _stopped_copy(self, st: Any, ranges: List[Tuple[int, int]]) -> Tuple[Any, ...]:
        """(threads, {tid: (state, on a CPU)}, [(lo, bytes)], [(lo, hi) tried])
        of a C stop's ptstop.Stopped."""
        pc = self.arch.pc
        threads = [Thread(tid, regs, 0, regs[pc]) for tid, regs in st.threads]
        if not threads:
            raise LjError("process %d has no thread left to read" % self.pid)
        tried = list(ranges) + st.followed + [(lo, hi) for lo, hi, _ in st.stacks.values()]
        return (threads, st.states,
                st.ranges + [(lo, data) for lo, _, data in st.stacks.values()], tried)

    def _block_sigchld(self) -> Optional[Set[int]]:
        """Block SIGCHLD in this thread for _wait's sleep (the old mask), or
        None where that could take a SIGCHLD this program wants: it has a
        handler of its own, or keeps SIGCHLD blocked already (for a
        sigwait of its own), or the platform has no pthread_sigmask."""
        try:
            if signal.getsignal(signal.SIGCHLD) not in (signal.SIG_DFL, signal.SIG_IGN):
                return None
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        except (AttributeError, ValueError, OSError):
            return None
        if signal.SIGCHLD in old:
            return None         # (it was blocked: the mask is as it was)
        self._sigwait = True
        return old

    def _seize_all(self, held: Dict[int, Optional[int]],
                   tids: Optional[List[int]] = None) -> List[int]:
        """Seize and interrupt each thread until no new one appears, then wait
        for each to stop; the last listing of the threads (task_ids order).
        tids: the first listing, when the caller has just made it."""
        for _ in range(100):
            if tids is None:
                tids = self.task_ids()
            new = [t for t in tids if t not in held]
            if not new:
                break
            tids = None
            for tid in new:
                try:
                    ptrace(PTRACE_SEIZE, tid, 0, 0)
                except OSError as e:
                    if e.errno == errno.ESRCH or _ours_or_gone(self.pid, tid):
                        continue        # (exited meanwhile, or still listed, ours, as it exits)
                    raise LjError(refusal(self.pid, e))
                held[tid] = None
                try:
                    ptrace(PTRACE_INTERRUPT, tid, 0, 0)
                except OSError:
                    pass
            deadline = time.time() + STOP_TIMEOUT
            asked = time.monotonic()
            for tid in new:
                if tid in held and held[tid] is None:
                    self._wait(tid, held, deadline)
                    if tid in held and held[tid] is None:
                        raise LjError("thread %d of process %d did not stop in %.0f s after "
                                      "PTRACE_INTERRUPT" % (tid, self.pid, STOP_TIMEOUT))
            if self.stop_wait is None:
                self.stop_wait = time.monotonic() - asked
        return tids if tids is not None else self.task_ids()

    def _wait(self, tid: int, held: Dict[int, Optional[int]], deadline: float) -> None:
        """waitpid for tid's stop: held[tid] becomes the signal to pass on at
        the detach (0 for an interrupt or group stop); tid leaves held when
        it exited."""
        spins = 0
        while True:
            try:
                got, status = os.waitpid(tid, WALL | os.WNOHANG)
            except ChildProcessError:
                held.pop(tid, None)
                return
            if got == tid:
                if os.WIFSTOPPED(status):
                    # A PTRACE_EVENT_STOP (our interrupt, or a group stop) has
                    # no signal to deliver; a signal-delivery stop has one.
                    held[tid] = 0 if status >> 16 == PTRACE_EVENT_STOP else os.WSTOPSIG(status)
                else:
                    held.pop(tid, None)         # exited or killed
                return
            now = time.time()
            if now >= deadline:
                return
            if self._sigwait:
                # Each ptrace stop sends the tracer a SIGCHLD, blocked since
                # before the interrupt (stopped()): one that comes after the
                # waitpid above is pending, and this returns at once; the
                # thread sleeps meanwhile (a busy thread may take a timer
                # tick to stop: milliseconds on some VMs).  At most 2 ms at
                # a time: another thread of this program could take it.
                signal.sigtimedwait((signal.SIGCHLD,), min(0.002, deadline - now))
                continue
            # A running thread stops within microseconds of the interrupt
            # (the kernel kicks its CPU): yield first, sleep only later.
            spins += 1
            if spins < 2000:
                os.sched_yield()
            else:
                time.sleep(0.0005)

    def _regs(self, tid: int) -> Optional[Dict[str, int]]:
        names = self.arch.pr_regs
        buf = ctypes.create_string_buffer(8 * len(names))
        iov = _Iovec(ctypes.cast(buf, ctypes.c_void_p), len(buf))
        try:
            ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, ctypes.addressof(iov))
        except OSError:
            return None
        n = min(len(names), iov.len // 8)
        return dict(zip(names, struct.unpack_from("<%dQ" % n, buf.raw)))


class LiveTarget(CoreTarget):
    """The core reader's Target over a LiveProcess (self.core), meant to live
    for one command while the process is stopped()."""

    description = "live process"

    def process_id(self) -> Optional[int]:
        return self.core.pid

    def clear_cache(self) -> None:
        """Forget what was read: memory, and the selected thread's machine
        frames (a running process moves on)."""
        super().clear_cache()
        self._frames = None

    def unwind_reader(self) -> Callable[[int, int], bytes]:
        """The unwinder reads the stack through this target's block cache,
        where a sampler's copy made at the stop is (recorder.copy_moment):
        the process has run on since."""
        return self.read

    def mappings(self) -> List[Tuple[int, int, str]]:
        return self.core.mappings()

    def address_space(self) -> List[Tuple[int, int]]:
        return [(s, e) for s, e, _ in self.core.mappings()]

    def gatherer(self, spans: List[Tuple[int, int]]) -> Callable[[], Optional[bytes]]:
        return self.core.gatherer(spans)


def open_process(pid: int, luajit: bool = True) -> LiveProcess:
    """The LiveProcess of pid, or LjError: no such process, ptrace or /proc
    refused, no LuaJIT in its files (when luajit: lmalloc reads glibc's
    heap of any process)."""
    proc = LiveProcess(pid)
    if luajit:
        find_luajit(proc)       # (its image's symbols read now, not while the process is held)
    return proc


def sampling_target(proc: LiveProcess, stop: bool = True
                    ) -> Tuple[LiveTarget, 'Layout', List[int]]:
    """What a sampler of proc needs: a LiveTarget of it (its cache cleared
    when the process runs again), LuaJIT's layout, and the global_States
    of its VMs.  stop: found at one stop (find_vms: the VMs each
    thread's frames name, and the memory search's); else without stopping
    the process, by the memory search alone (vmfind.list_states reads the
    process as it runs: a global_State and its main thread name each
    other, which a torn read does not fake)."""
    from ..layouts.layout import Layout
    from ..vm.vmfind import list_states
    if not stop:
        t = open_live_target(proc, 0)
        lay = Layout(t)
        states, _ = list_states(t, lay, [], tries=RUNNING_TRIES)
        t.clear_cache()
        return t, lay, [s.G for s in states]
    with proc.stopped():
        t = open_live_target(proc, 0)
        lay = Layout(t)
        Gs = find_vms(t, lay, len(proc.threads))
    t.clear_cache()
    return t, lay, Gs


def find_vms(t: "LiveTarget", lay: 'Layout', nthreads: int) -> List[int]:
    """The global_States of every VM in the process, t's process held:
    the ones each thread's frames name, and the memory search's (a VM that
    runs no code now, in a thread idle at this moment)."""
    from .coretarget import frame_candidates
    from ..vm.vmfind import list_states
    cands = []
    keep = t.thread
    try:
        for i in range(nthreads):
            t.select_thread(i)
            t.clear_cache()
            try:
                cands.extend(frame_candidates(t, lay))
            except (FaultError, CorruptError):
                pass
    finally:
        t.select_thread(keep)
        t.clear_cache()
    states, _ = list_states(t, lay, cands)
    return [s.G for s in states]


def open_live_target(proc: LiveProcess, thread: int = 0) -> LiveTarget:
    """The LiveTarget of a process inside proc.stopped(); thread: the index
    of the selected thread in proc.threads."""
    return open_target(proc, thread, LiveTarget)
