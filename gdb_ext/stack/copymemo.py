"""Decoding a sampler's copy once for every copy that reads the same.

The BPF sampler sends a copy of a thread's registers and memory at every
sample (recorder.Recorder.decode_copy), and a busy program is sampled in
the same few places again and again: decoding each copy anew is most of
record's CPU.  A decode is a function of the bytes it reads, so a Watch
notes, while a copy is decoded, every read the decode makes:

  the copy      each (address, size) read from the copy's blocks, as
                slices of the copy's bytes joined in order;
  registers     which of the thread's registers were read (Regs), a
                register an unwound caller frame carries unchanged counted
                only when that frame's value is read;
  the process   each read beyond the copy, made at the decode (prototypes,
                closures, traces: recorder's module docstring), and its
                bytes.

A later copy of the same shape (the same thread, the same ranges copied and
tried, the same lua_States hinted) whose noted slices, registers and
process reads all read the same bytes decodes to the same stack: the memo
gives that stack without decoding (the process reads are read again, each
time, exactly as the decode read them).  A decode that read a range only
partly in the copy, or that dropped its thread, is not kept."""
import operator
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ..errors import FaultError
from ..target import BLOCK

# Copies kept at most, in all (a busy loop needs a few dozen: the pcs of its
# innermost instructions); past it the memo starts again.
LIMIT = 1024
# Where few copies read as one decoded before (an interpreter's registers
# differ at every sample), noting a decode's reads costs more than it
# saves: after WINDOW lookups with less than a quarter found, the memo
# rests (is not used) for REST lookups, twice as long after each window
# that fails again, up to MAX_REST.
WINDOW, REST, MAX_REST = 256, 1024, 1 << 16


class Regs(dict):
    """A thread's registers that note, in `seen`, the names of those read.
    origin: for an unwound caller's registers, {name: the thread's register
    it carries unchanged, or None (a value the unwinder computed)}; None
    for the thread's own registers."""

    def __init__(self, values: Dict[str, Any], seen: Set[str],
                 origin: Optional[Dict[str, Optional[str]]] = None) -> None:
        dict.__init__(self, values)
        self.seen = seen
        self.origin = origin

    def _note(self, k: str) -> None:
        if self.origin is None:
            self.seen.add(k)
        else:
            o = self.origin.get(k)
            if o is not None:
                self.seen.add(o)

    def _source(self, k: str) -> Optional[str]:
        return k if self.origin is None else self.origin.get(k)

    def __getitem__(self, k: str) -> Any:
        self._note(k)
        return dict.__getitem__(self, k)

    def get(self, k: str, default: Any = None) -> Any:
        self._note(k)
        return dict.get(self, k, default)

    def __setitem__(self, k: str, v: Any) -> None:
        if self.origin is None:
            self.origin = {n: n for n in dict.keys(self)}
        self.origin[k] = None
        dict.__setitem__(self, k, v)

    def _all(self) -> None:
        for k in dict.keys(self):
            self._note(k)

    def keys(self):
        self._all()
        return dict.keys(self)

    def values(self):
        self._all()
        return dict.values(self)

    def items(self):
        self._all()
        return dict.items(self)

    def __iter__(self):
        self._all()
        return dict.__iter__(self)

    def plain(self) -> Dict[str, Any]:
        """The values as a dict, nothing noted (dict(self) and dict.copy
        would note every register: they iterate)."""
        return dict(zip(dict.keys(self), dict.values(self)))

    def copy(self) -> 'Regs':
        origin = None if self.origin is None else dict(self.origin)
        return Regs(self.plain(), self.seen, origin)

    def carry(self, names: Iterable[str]) -> 'Regs':
        """An unwound caller's registers holding these registers' values
        for names, each noted when the caller's value is read."""
        names = list(names)
        return Regs({n: dict.get(self, n) for n in names}, self.seen,
                    {n: self._source(n) for n in names})


class Watch(object):
    """Notes the reads of one decode of a copy on target t (module
    docstring).  copied: the copy's [(lo, bytes)], whole blocks, as the
    target's block cache holds them; regs: the thread's registers (use
    self.regs in their place).  Inside `with`, t.read and t.read_raw are
    this watch's and t.watched is this watch; self.live: reads beyond the
    copy are the process's (the decode) rather than refused (the copy's
    check)."""

    def __init__(self, t: Any, copied: List[Tuple[int, bytes]], regs: Dict[str, int]) -> None:
        self.t = t
        self.offsets = {}           # copy block -> its offset in the joined copy
        off = 0
        for lo, data in copied:
            for k in range(0, len(data) - BLOCK + 1, BLOCK):
                self.offsets.setdefault(lo + k, off + k)
            off += len(data)
        self.seen = set()
        self.regs = Regs(regs, self.seen)
        self.slices = []            # (offset in the joined copy, size)
        self.process = {}           # (address, size) -> bytes, or None (a fault)
        self.partial = False        # a read partly in the copy
        self.live = False
        self._bulk = []             # (address, bytes, live, [slot addresses used])
        self._depth = 0

    def __enter__(self) -> 'Watch':
        t = self.t
        read, raw = t.read, t.read_raw
        self._read = read

        def watched_read(addr: int, n: int, what: Optional[str] = None) -> bytes:
            self._depth += 1
            try:
                data = read(addr, n, what)
            except FaultError:
                self._note(addr, n, None)
                raise
            finally:
                self._depth -= 1
            self._note(addr, n, data)
            return data

        def watched_raw(addr: int, n: int) -> bytes:
            if self._depth:
                return raw(addr, n)         # (a block of a read noted above)
            try:
                data = raw(addr, n)
            except FaultError:
                self._note(addr, n, None, outside=True)
                raise
            self._note(addr, n, data, outside=True)
            return data
        t.read, t.read_raw, t.watched = watched_read, watched_raw, self
        return self

    def __exit__(self, *exc: Any) -> None:
        del self.t.read
        del self.t.read_raw
        del self.t.watched

    def unnoted(self, addr: int, n: int) -> int:
        """The n-byte word at addr, not noted: a bound a decode checks
        sizes against, never shown (VM.size_bound)."""
        self._depth += 1
        try:
            return int.from_bytes(self._read(addr, n), "little")
        finally:
            self._depth -= 1

    def bulk(self, addr: int, n: int, what: Optional[str] = None) -> Tuple[bytes, List[int]]:
        """n bytes at addr read at once for speed, noted only where the
        reader says it used them: (the bytes, the list to append each
        8-byte word's address used to).  FaultError as t.read."""
        self._depth += 1
        try:
            data = self._read(addr, n, what)
        finally:
            self._depth -= 1
        used = []
        self._bulk.append((addr, data, self.live, used))
        return data, used

    def _note(self, addr: int, n: int, data: Optional[bytes], outside: bool = False,
              live: Optional[bool] = None) -> None:
        if n <= 0:
            return
        live = self.live if live is None else live
        if not outside:
            first, last = addr & ~(BLOCK - 1), (addr + n - 1) & ~(BLOCK - 1)
            if first == last:
                off = self.offsets.get(first)
                if off is not None:
                    self.slices.append((off + addr - first, n))
                elif live:
                    self.process[(addr, n)] = data
                return
            inside = [b in self.offsets for b in range(first, last + 1, BLOCK)]
            if all(inside):
                end = addr + n
                for b in range(first, last + 1, BLOCK):
                    lo, hi = max(addr, b), min(end, b + BLOCK)
                    self.slices.append((self.offsets[b] + lo - b, hi - lo))
                return
            if any(inside):
                self.partial = True
                return
        if live:
            self.process[(addr, n)] = data

    def entry(self, result: Any, joined: bytes) -> Optional['Entry']:
        """The memo's entry for this decode's result, or None when it
        cannot be kept (a read partly in the copy, a read of the process
        that failed)."""
        for addr, data, live, used in self._bulk:
            for a in set(used):
                self._note(a, 8, data[a - addr:a - addr + 8], live=live)
        self._bulk = []
        if self.partial or any(d is None for d in self.process.values()):
            return None
        return Entry(tuple(sorted(self.seen)), _spans(self.slices), joined,
                     self.regs.plain(), _spans(list(self.process)), self.process, result)


def _spans(pieces: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """[(start, size)] made [(start, end)], sorted, those that overlap or
    touch made one."""
    out = []
    for a, n in sorted(pieces):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], a + n)
        else:
            out.append([a, a + n])
    return [(a, b) for a, b in out]


def _getter(items: List[Any]) -> Callable[[Any], Tuple[Any, ...]]:
    """itemgetter that always gives a tuple (itemgetter of one item gives
    the item)."""
    if not items:
        return lambda x: ()
    g = operator.itemgetter(*items)
    return g if len(items) > 1 else (lambda x: (g(x),))


class Entry(object):
    """A decode kept: the register names read and their values, the slices
    of the joined copy read and their bytes, the spans of the process read
    and their bytes, the result.  gather: set by CopyMemo.find (the
    target's reader of those spans)."""

    __slots__ = ("names", "reg_values", "copy_of", "copy_values", "spans", "process",
                 "gather", "result")

    def __init__(self, names: Tuple[str, ...], slices: List[Tuple[int, int]], joined: bytes,
                 regs: Dict[str, int], spans: List[Tuple[int, int]],
                 process: Dict[Tuple[int, int], bytes], result: Any) -> None:
        self.names = names
        self.reg_values = tuple(regs.get(n) for n in names)
        self.copy_of = _getter([slice(a, b) for a, b in slices])
        self.copy_values = tuple(bytes(v) for v in self.copy_of(joined))
        self.spans = [(a, b - a) for a, b in spans]
        whole = []
        for a, b in spans:
            buf = bytearray(b - a)
            for (addr, n), data in process.items():
                if a <= addr and addr + n <= b:
                    buf[addr - a:addr - a + n] = data
            whole.append(bytes(buf))
        self.process = b"".join(whole)
        self.gather = None
        self.result = result


class CopyMemo(object):
    """The stacks of copies decoded before, by shape (module docstring)."""

    def __init__(self, order: Sequence[str]) -> None:
        """order: the registers' names, in the order of the values find()
        is given."""
        self.index = {n: i for i, n in enumerate(order)}
        self.shapes = {}            # shape -> [(register names, their getter, {values: [Entry]})]
        self.size = 0
        self.hits = 0
        self.misses = 0
        self.maps = None            # the mappings the entries were decoded with
        self.looks = self.found = 0     # in this window
        self.resting = 0                # lookups left to rest
        self.rest = REST

    def in_use(self) -> bool:
        """Whether to look a copy up and note its decode (False while the
        memo rests: module constants)."""
        if self.resting:
            self.resting -= 1
            return False
        return True

    def _counted(self, found: bool) -> None:
        self.looks += 1
        self.found += found
        if self.looks >= WINDOW:
            if self.found * 4 < self.looks:
                self.resting = self.rest
                self.rest = min(MAX_REST, 2 * self.rest)
                self.clear()
            else:
                self.rest = REST
            self.looks = self.found = 0

    def find(self, shape: Any, regs: Sequence[int], joined: bytes,
             gatherer: Callable[[List[Tuple[int, int]]], Callable[[], Optional[bytes]]]
             ) -> Optional[Any]:
        """The result of a copy of this shape that reads as this one does
        (registers in self.index's order, joined copy (bytes or a
        memoryview), the process now:
        gatherer(spans) gives a reader of spans [(address, size)] joined,
        Target.gatherer), or None."""
        for _, regs_of, by_values in self.shapes.get(shape, ()):
            try:
                values = regs_of(regs)
            except IndexError:
                continue
            for e in by_values.get(values, ()):
                if e.copy_of(joined) != e.copy_values:
                    continue
                if e.gather is None:
                    e.gather = gatherer(e.spans)
                if e.gather() == e.process:
                    self.hits += 1
                    self._counted(True)
                    return e.result
        self.misses += 1
        self._counted(False)
        return None

    def keep(self, shape: Any, e: Entry) -> None:
        if self.size >= LIMIT:
            self.clear()
        groups = self.shapes.setdefault(shape, [])
        for names, _, by_values in groups:
            if names == e.names:
                break
        else:
            if any(n not in self.index for n in e.names):
                return          # (a register find() is not given: never found)
            by_values = {}
            groups.append((e.names, _getter([self.index[n] for n in e.names]), by_values))
        by_values.setdefault(e.reg_values, []).insert(0, e)
        self.size += 1

    def clear(self) -> None:
        self.shapes.clear()
        self.size = 0
