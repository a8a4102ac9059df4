"""record's BPF sampler: a CPU-clock perf event on each thread of the
sampled processes runs bpfsample.bpf.c in that thread's context, which
copies the thread's registers, C stack and the VM's state into a ring
buffer; the process is never stopped.  This side loads the program with
libbpf (ctypes), hands it each process's VMs and the Layout's offsets
(procs map), opens the events, and reads the records back as the copies
the recorder decodes (recorder.Recorder.decode_copy).

The object is compiled at first use with clang into ljgdb's cache
(cbuild).  choose() loads it for record, or says in one line why the BPF
sampler cannot serve (no clang, no libbpf, no BTF, no privilege, a kernel
without ring buffers), and record then samples with ptrace; available()
only asks whether it can.  Every perf event and BPF
object is held by a file descriptor of this process: its end, even by
SIGKILL, detaches them all."""
import ctypes
import errno
import mmap
import os
import shutil
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import LjError
from ..cbuild import build, built_name, cache_dir
from .live import libc

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bpfsample.bpf.c")
MAX_VMS = 4
NONE = 0xffffffff
MAX_RECENT = 4
NREGS = 21
MAX_RANGES = 64
MAX_LS = 8
MAGIC = 0x4c4a4270
F_KERNEL, F_FULL, F_NOREGS = 1, 2, 4
# struct sample's header (bpfsample.bpf.c), up to its ranges, then its data
_HEAD = struct.Struct("<IIIIQ%dQIIQ" % NREGS)
_RANGE = struct.Struct("<QQQ")
_U64, _U32 = struct.Struct("=Q"), struct.Struct("=I")
DATA_OFFSET = _HEAD.size + MAX_RANGES * _RANGE.size + MAX_LS * 8
# stats map's counters
ST_FIRED, ST_WRITTEN, ST_LOST, ST_FULL, ST_OTHER = range(5)
RING_BYTES = 32 << 20
# perf_event_open
_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK = 1, 0
PERF_FLAG_FD_CLOEXEC = 8
PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_DISABLE, PERF_EVENT_IOC_SET_BPF = 0x2400, 0x2401, 0x40042408


class _VmConf(ctypes.Structure):
    _fields_ = [("G", ctypes.c_uint64 * MAX_VMS), ("nvms", ctypes.c_uint32),
                ("gg_off", ctypes.c_uint32), ("gg_size", ctypes.c_uint32),
                ("cur_L", ctypes.c_uint32), ("jit_L", ctypes.c_uint32),
                ("mainthref", ctypes.c_uint32), ("ref_size", ctypes.c_uint32),
                ("mref_size", ctypes.c_uint32), ("L_size", ctypes.c_uint32),
                ("L_stack", ctypes.c_uint32), ("L_stacksize", ctypes.c_uint32),
                ("L_cframe", ctypes.c_uint32), ("L_gct", ctypes.c_uint32),
                ("L_glref", ctypes.c_uint32), ("cfo_L", ctypes.c_uint32),
                ("cfo_prev", ctypes.c_uint32), ("gct_thread", ctypes.c_uint32),
                ("below", ctypes.c_uint32), ("above", ctypes.c_uint32),
                ("max_stack", ctypes.c_uint32)]


class _PerfAttr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("config", ctypes.c_uint64), ("sample_period", ctypes.c_uint64),
                ("sample_type", ctypes.c_uint64), ("read_format", ctypes.c_uint64),
                ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64)]


_SAMPLE_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_PRINT_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class Copy(object):
    """One record: tid, tgid, regs (the kernel's pt_regs, in the order of
    coredump.Arch.pr_regs' first NREGS), in_kernel (the event came while
    the thread was in the kernel: the registers it entered with), data
    (the bytes copied, every range's in order), key (the ranges' record,
    as bytes: equal for two copies of the same ranges), full (a copy did
    not fit); parts [(lo, size)] (the ranges copied, as data holds them)
    and tried [(lo, hi)] read from key when asked."""

    __slots__ = ("tid", "tgid", "time_ns", "regs", "in_kernel", "data", "key", "full")

    @property
    def parts(self) -> List[Tuple[int, int]]:
        return [(lo, got) for lo, _, got in _RANGE.iter_unpack(self.key) if got]

    @property
    def tried(self) -> List[Tuple[int, int]]:
        return [(lo, hi) for lo, hi, _ in _RANGE.iter_unpack(self.key)]

    @property
    def copied(self) -> List[Tuple[int, bytes]]:
        """[(lo, bytes)] of each range copied (bytes of their own)."""
        out, pos = [], 0
        for lo, n in self.parts:
            out.append((lo, bytes(self.data[pos:pos + n])))
            pos += n
        return out


def vm_conf(lay: Any, Gs: Sequence[int], arch: str, below: int, above: int,
            max_stack: int) -> _VmConf:
    """The procs map's value for a process: its VMs' global_States and
    every offset and size the program reads, from the Layout."""
    from ..vm.cframe import CFRAME_OFS
    from .. import consts as C
    if len(Gs) > MAX_VMS:
        raise LjError("the BPF sampler follows %d VMs of a process at most; this one has %d"
                      % (MAX_VMS, len(Gs)))
    c = _VmConf()
    for i, G in enumerate(Gs):
        c.G[i] = G
    c.nvms = len(Gs)
    c.gg_off, c.gg_size = lay.GG.g, lay.GG.size
    c.cur_L = lay.G.cur_L if lay.has_cur_L else NONE
    c.jit_L = lay.G.jit_L if not lay.has_cur_L and lay.has_jit_L else NONE
    c.mainthref = lay.G.mainthref
    c.ref_size, c.mref_size = lay.ref_size, lay.mref_size
    s = lay.L
    c.L_size, c.L_stack, c.L_stacksize, c.L_cframe = s.size, s.stack, s.stacksize, s.cframe
    c.L_gct, c.L_glref = s.gct, s.glref
    cfo = CFRAME_OFS.get((arch, lay.gc64))
    c.cfo_L, c.cfo_prev = (cfo["L"], cfo["prev"]) if cfo else (NONE, NONE)
    c.gct_thread = C.GCT_THREAD
    c.below, c.above, c.max_stack = below, above, max_stack
    return c


def _object_path() -> str:
    return os.path.join(cache_dir(), built_name(SOURCE, "bpfsample", "o"))


def _compile() -> str:
    clang = next((c for c in ("clang", "clang-19", "clang-16", "clang-14") if shutil.which(c)),
                 None)
    if clang is None:
        raise FileNotFoundError(errno.ENOENT, "no clang", "clang")
    machine = os.uname().machine
    inc = "/usr/include/%s-linux-gnu" % machine
    return build(SOURCE, _object_path(), lambda out: [
        clang, "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-I" + inc,
        "-c", SOURCE, "-o", out])


def _libbpf() -> ctypes.CDLL:
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    vp, i, u32, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p
    for name, res, args in (
            ("bpf_object__open_file", vp, [cp, vp]), ("bpf_object__load", i, [vp]),
            ("bpf_object__close", None, [vp]), ("bpf_object__find_map_by_name", vp, [vp, cp]),
            ("bpf_object__find_program_by_name", vp, [vp, cp]), ("bpf_map__fd", i, [vp]),
            ("bpf_program__fd", i, [vp]), ("bpf_map__set_max_entries", i, [vp, u32]),
            ("bpf_map_update_elem", i, [i, vp, vp, ctypes.c_uint64]),
            ("bpf_map_delete_elem", i, [i, vp]), ("bpf_map_lookup_elem", i, [i, vp, vp]),
            ("ring_buffer__new", vp, [i, _SAMPLE_CB, vp, vp]),
            ("ring_buffer__consume", i, [vp]), ("ring_buffer__free", None, [vp]),
            ("libbpf_num_possible_cpus", i, []), ("libbpf_set_print", vp, [vp])):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


_checked = None


def available() -> Tuple[bool, str]:
    """(True, "") where the BPF sampler can serve on this machine, else
    (False, why) in a few words; the object is compiled and loaded once to
    know (what the kernel refuses is only known by asking it)."""
    global _checked
    if _checked is None:
        try:
            Loader().close()
            _checked = (True, "")
        except LjError as e:
            _checked = (False, str(e))
    return _checked


class Loader(object):
    """The BPF object loaded into the kernel: its maps and its program.
    LjError with the reason when it cannot be."""

    def __init__(self) -> None:
        if os.uname().machine != "x86_64":
            raise LjError("the BPF sampler is built for x86-64 only")
        if not os.path.exists("/sys/kernel/btf/vmlinux"):
            raise LjError("the kernel has no BTF (/sys/kernel/btf/vmlinux)")
        try:
            lib = self.lib = _libbpf()
        except OSError:
            raise LjError("no libbpf (libbpf.so.1: the libbpf1 package)")
        try:
            path = _compile()
        except FileNotFoundError:
            raise LjError("no clang to compile the BPF program")
        except Exception as e:      # (CalledProcessError, OSError)
            err = getattr(e, "stderr", b"") or b""
            first = err.decode(errors="replace").strip().splitlines()[:1]
            raise LjError("the BPF program could not be compiled (%s)"
                          % (first[0] if first else e))
        self.log = []
        self._print = _PRINT_CB(self._libbpf_print)
        lib.libbpf_set_print(ctypes.cast(self._print, ctypes.c_void_p))
        self.obj = lib.bpf_object__open_file(path.encode(), None)
        if not self.obj:
            raise LjError("libbpf could not open %s" % path)
        self.ncpus = max(1, lib.libbpf_num_possible_cpus())
        lib.bpf_map__set_max_entries(self._map("scratch"), self.ncpus)
        lib.bpf_map__set_max_entries(self._map("samples"), RING_BYTES)
        rc = lib.bpf_object__load(self.obj)
        if rc != 0:
            e = -rc if rc < 0 else ctypes.get_errno()
            self.close()
            raise LjError(self._refusal(e))
        self.prog_fd = lib.bpf_program__fd(lib.bpf_object__find_program_by_name(self.obj, b"ljgdb_sample"))
        self.procs_fd = lib.bpf_map__fd(self._map("procs"))
        self.stats_fd = lib.bpf_map__fd(self._map("stats"))
        self.ring_fd = lib.bpf_map__fd(self._map("samples"))
        self.recents_fd = lib.bpf_map__fd(self._map("recents"))

    def _map(self, name: str) -> int:
        return self.lib.bpf_object__find_map_by_name(self.obj, name.encode())

    def _libbpf_print(self, level: int, fmt: bytes, args: int) -> int:
        buf = ctypes.create_string_buffer(1 << 20)
        ctypes.CDLL(None).vsnprintf(buf, 1 << 20, fmt, ctypes.c_void_p(args))
        self.log.append(buf.value.decode(errors="replace").rstrip())
        return 0

    def _refusal(self, e: int) -> str:
        if e in (errno.EPERM, errno.EACCES):
            return "no privilege to load BPF programs (root, or CAP_BPF and CAP_PERFMON)"
        text = " ".join(self.log)
        if "ringbuf" in text.lower() or "map type" in text.lower():
            return "the kernel has no BPF ring buffers (5.8 and later have them)"
        last = [ln for ln in self.log if ln.strip()][-1:] or [os.strerror(e)]
        return "the kernel refused the BPF program (%s)" % last[0].strip()[:160]

    def close(self) -> None:
        if getattr(self, "obj", None):
            self.lib.bpf_object__close(self.obj)
            self.obj = None

    def stats(self) -> List[int]:
        """The stats map's counters, summed over the CPUs."""
        out = []
        for k in range(5):
            key = ctypes.c_uint32(k)
            vals = (ctypes.c_uint64 * self.ncpus)()
            if self.lib.bpf_map_lookup_elem(self.stats_fd, ctypes.byref(key), vals) != 0:
                out.append(0)
            else:
                out.append(sum(vals))
        return out


class Ring(object):
    """The ring buffer map read in place, as libbpf's ring_buffer reads it
    (its ringbuf.c), without a call into C for each record: the consumer
    position's page, mapped writable; the producer position's page and the
    data, mapped twice in a row so that a record that wraps is one slice.
    Each record has an 8-byte header: its length, with a busy bit (not
    committed yet) and a discard bit."""

    BUSY, DISCARD, HEADER = 1 << 31, 1 << 30, 8

    def __init__(self, fd: int, size: int) -> None:
        page = mmap.PAGESIZE
        self.mask = size - 1
        self.cons = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            self.prod = mmap.mmap(fd, page + 2 * size, access=mmap.ACCESS_READ, offset=page)
        except (OSError, ValueError):
            self.cons.close()
            raise
        self.page = page
        # (one aligned 8-byte store, never a torn one: the kernel reads it)
        self.cons_pos = ctypes.c_uint64.from_buffer(self.cons)
        self.view = memoryview(self.prod)
        self.pos = self.cons_pos.value
        self.backlog = 0            # bytes written since the last call, at its start

    def consume(self) -> List[memoryview]:
        """The records committed since the last call, in order, read in
        place: the kernel may write over the last call's records from
        this call on (they are handed back to it now), not before."""
        out = []
        prod, page, mask, view = self.prod, self.page, self.mask, self.view
        pos = self.pos
        self.cons_pos.value = pos
        end = _U64.unpack_from(prod, 0)[0]
        self.backlog = end - pos
        while pos < end:            # (a record written since: the next call's)
            at = page + (pos & mask)
            n = _U32.unpack_from(prod, at)[0]
            if n & self.BUSY:
                break               # (not committed yet: the next call's)
            size = n & ~(self.BUSY | self.DISCARD)
            if not n & self.DISCARD:
                out.append(view[at + self.HEADER:at + self.HEADER + size])
            pos += (size + self.HEADER + 7) & ~7
        self.pos = pos
        return out

    def close(self) -> None:
        del self.cons_pos
        self.cons.close()
        try:
            self.view.release()
            self.prod.close()
        except BufferError:
            pass        # (a record still held: unmapped when it is freed)


def _perf_event_open(attr: _PerfAttr, tid: int) -> int:
    nr = _NR_PERF_EVENT_OPEN[os.uname().machine]
    fd = libc().syscall(nr, ctypes.byref(attr), tid, -1, -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return fd


class BpfSampler(object):
    """Samples of the threads of processes at rate hz (CPU time), taken by
    the kernel.  add(pid, conf) before start(); read() gives the Copy
    records written since the last read."""

    def __init__(self, rate: float, loader: Optional[Loader] = None) -> None:
        """loader: one choose() loaded (else one is loaded here)."""
        self.rate = rate
        self.attr = _PerfAttr(type=PERF_TYPE_SOFTWARE, size=ctypes.sizeof(_PerfAttr),
                              config=PERF_COUNT_SW_CPU_CLOCK,
                              sample_period=max(1, int(1e9 / rate)))
        self.loader = loader or Loader()
        self.events = {}        # pid -> {tid: perf event fd}
        self._hints = {}        # tid -> the lua_States in the recents map
        self.pids = []
        self._got = []
        self.backlog = 0            # bytes the last read found written
        # (a thread's hint changed or a thread was added since the last
        # next_wait: the next read comes soon)
        self.learning = True
        self._final = {"fired": 0, "written": 0, "lost": 0, "full": 0, "other": 0}
        self.rb = None
        try:
            self.ring = Ring(self.loader.ring_fd, RING_BYTES)
        except (OSError, ValueError):
            # (libbpf's reader, record by record through a callback)
            self.ring = None
            self._cb = _SAMPLE_CB(self._on_record)
            self.rb = self.loader.lib.ring_buffer__new(self.loader.ring_fd, self._cb, None, None)
            if not self.rb:
                self.close()
                raise LjError("libbpf could not map the BPF ring buffer")

    def add(self, pid: int, conf: _VmConf) -> None:
        key = ctypes.c_uint32(pid)
        if self.loader.lib.bpf_map_update_elem(self.loader.procs_fd, ctypes.byref(key),
                                               ctypes.byref(conf), 0) != 0:
            raise LjError("the BPF sampler could not be told about process %d (%s)"
                          % (pid, os.strerror(ctypes.get_errno())))
        self.pids.append(pid)

    def hint(self, tid: int, Ls: Sequence[int]) -> None:
        """The lua_States thread tid ran lately (the first MAX_RECENT):
        copied at its next samples too, checked first as any candidate."""
        Ls = tuple(Ls[:MAX_RECENT])
        if self._hints.get(tid) == Ls:
            return
        self._hints[tid] = Ls
        self.learning = True
        key = ctypes.c_uint32(tid)
        val = (ctypes.c_uint64 * MAX_RECENT)(*Ls)
        self.loader.lib.bpf_map_update_elem(self.loader.recents_fd, ctypes.byref(key), val, 0)

    def start(self) -> None:
        """A CPU-clock event on every thread of each process (threads
        started later: watch())."""
        self.watch()

    def watch(self) -> None:
        """Events opened for the threads started since the last call, and
        closed for the threads that ended.  (Not with inherit, which would
        carry them into new threads by itself: on 6.18 a CPU-clock event
        with inherit stops firing in a thread that starts threads, 0
        samples of 400 asked: docs/luajit-facts.md.)  A thread that lives
        less than the time between two calls is not sampled."""
        for pid in self.pids:
            try:
                tids = set(int(t) for t in os.listdir("/proc/%d/task" % pid))
            except OSError:
                tids = set()
            mine = self.events.setdefault(pid, {})
            for tid in set(mine) - tids:
                os.close(mine.pop(tid))
            for tid in sorted(tids - set(mine)):
                try:
                    fd = _perf_event_open(self.attr, tid)
                except OSError as e:
                    if e.errno == errno.ESRCH:
                        continue            # (the thread ended)
                    raise LjError(_perf_refusal(e))
                mine[tid] = fd
                self.learning = True
                if libc().ioctl(fd, PERF_EVENT_IOC_SET_BPF, self.loader.prog_fd) != 0:
                    raise LjError("the BPF program could not be attached to a perf event (%s)"
                                  % os.strerror(ctypes.get_errno()))

    def stop(self) -> None:
        """No more samples: the events disabled (read() then gives the last
        records)."""
        for mine in self.events.values():
            for fd in mine.values():
                libc().ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)

    def _on_record(self, ctx: Any, data: int, size: int) -> int:
        self._got.append(ctypes.string_at(data, size))
        return 0

    def read(self) -> List[Copy]:
        """The records written since the last read, decoded into Copy; a
        Copy's data is valid until the next read (it may be the ring's own
        memory)."""
        if self.ring is not None:
            got = self.ring.consume()
            self.backlog = self.ring.backlog
        else:
            self.loader.lib.ring_buffer__consume(self.rb)
            got, self._got = self._got, []
            self.backlog = sum(len(b) + Ring.HEADER for b in got)
        return [c for c in (parse_record(b) for b in got) if c is not None]

    def next_wait(self, elapsed: float, least: float, most: float) -> float:
        """How long the ring buffer can be left before the next read, from
        what the last read found written in the `elapsed` seconds before
        it: as long as fills a quarter of the ring at that pace, within
        [least, most] seconds.  (Each wake-up costs the reader more than
        its records do at 100 Hz: on this VM a bare wake-up from a sleep
        is 50-90 µs of CPU, the reader's loop about 360 µs.)  `least` while
        the sampler learns: a thread added or a thread's lua_States changed
        since the last call (on 2.0 a coroutine's samples need them)."""
        if self.learning:
            self.learning = False
            return least
        if self.backlog <= 0:
            return most
        return max(least, min(most, elapsed * (RING_BYTES / 4) / self.backlog))

    def stats(self) -> Dict[str, int]:
        """The program's counters (kept from the last read after close)."""
        if self.loader.obj is None:
            return self._final
        v = self.loader.stats()
        self._final = {"fired": v[ST_FIRED], "written": v[ST_WRITTEN], "lost": v[ST_LOST],
                       "full": v[ST_FULL], "other": v[ST_OTHER]}
        return self._final

    def close(self) -> None:
        if self.loader.obj is not None:
            self.stats()
        for mine in self.events.values():
            for fd in mine.values():
                os.close(fd)
        self.events = {}
        if getattr(self, "rb", None):
            self.loader.lib.ring_buffer__free(self.rb)
            self.rb = None
        if getattr(self, "ring", None) is not None:
            self.ring.close()
            self.ring = None
        self.loader.close()


def _perf_refusal(e: OSError) -> str:
    if e.errno in (errno.EACCES, errno.EPERM):
        try:
            with open("/proc/sys/kernel/perf_event_paranoid") as f:
                level = f.read().strip()
        except OSError:
            level = "?"
        return ("perf events of the process are refused (perf_event_paranoid is %s; root or "
                "CAP_PERFMON samples at any level)" % level)
    return "a perf event could not be opened (%s)" % os.strerror(e.errno)


def parse_record(b: bytes) -> Optional[Copy]:
    """A ring buffer record (bytes, or a memoryview of the ring: its
    data is then one too, valid until the next read) as a Copy; None when
    it is not one."""
    if len(b) < DATA_OFFSET:
        return None
    h = _HEAD.unpack_from(b, 0)
    if h[0] != MAGIC:
        return None
    c = Copy()
    c.tid, c.tgid, flags, c.time_ns = h[1], h[2], h[3], h[4]
    c.in_kernel = bool(flags & F_KERNEL)
    c.full = bool(flags & F_FULL)
    c.regs = None if flags & F_NOREGS else h[5:5 + NREGS]
    n = min(h[5 + NREGS], MAX_RANGES)
    c.key = bytes(b[_HEAD.size:_HEAD.size + n * _RANGE.size])
    got = sum(r[2] for r in _RANGE.iter_unpack(c.key))
    c.data = b[DATA_OFFSET:DATA_OFFSET + got]
    return c


def choose(asked: Optional[str], nonblocking: bool) -> Tuple[Optional[Loader], Optional[str]]:
    """(the BPF object loaded, for BpfSampler, or None to sample with
    ptrace; the line that says why not when the user did not ask for
    ptrace) for --sampler ASKED (None: the default, BPF where this machine
    allows it).  The loading is the check: the object is loaded once.
    LjError when BPF was asked for and cannot serve."""
    if asked == "ptrace" or nonblocking:
        return None, None
    if asked is None and os.environ.get("LJGDB_SAMPLER") == "python":
        return None, None
    try:
        return Loader(), None
    except LjError as e:
        why = str(e)
    if asked == "bpf":
        raise LjError("--sampler bpf: %s" % why)
    return None, "sampling with ptrace stops: the BPF sampler cannot serve here: %s" % why
