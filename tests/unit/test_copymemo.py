"""A sampler's copy is decoded again only when it reads differently from
one decoded before (copymemo): on synthetic memory, a decode that reads a
register, words of the copy, a word of the process and a few slots of a
stack read at once.  The memo gives its result for a copy that differs
only where the decode did not read, and never when a byte, a register or
a word of the process it read differs."""
import struct

import ljgdb  # noqa: F401
from ljgdb.gdb_ext.errors import FaultError
from ljgdb.gdb_ext.stack.copymemo import CopyMemo, Regs, Watch
from ljgdb.gdb_ext.target import BLOCK, Target

COPY = 0x10000          # two blocks copied
STACK = COPY + BLOCK    # a stack in the second block
HEAP = 0x40000          # the process's memory, read at the decode


class Memory(Target):
    """The process: its memory now, in whole blocks."""

    def __init__(self, mem):
        super().__init__()
        self.mem = mem

    def read_raw(self, addr, n):
        base = addr & ~(BLOCK - 1)
        if base not in self.mem or (addr + n - 1) & ~(BLOCK - 1) != base:
            raise FaultError("cannot access memory at 0x%x" % addr, addr)
        off = addr - base
        return bytes(self.mem[base][off:off + n])


def block(words):
    b = bytearray(BLOCK)
    for off, v in words.items():
        struct.pack_into("<Q", b, off, v)
    return b


def decode(t, regs):
    """What the decoder of a copy does, in small: a register, two words of
    the copy (one through the other), the process's word they name, and
    two of eight stack slots read in one block."""
    base = regs["rsp"]
    link = t.u64(base + 8)
    target = t.u64(link)
    w = t.watched
    data, used = w.bulk(STACK, 64) if w else (t.read(STACK, 64), [])
    slots = []
    for i in (1, 3):
        used.append(STACK + 8 * i)
        slots.append(struct.unpack_from("<Q", data, 8 * i)[0])
    return (regs["rip"], link, t.u64(target), tuple(slots))


ORDER = ("rax", "rbx", "rip", "rsp")


class Run(object):
    def __init__(self):
        self.memo = CopyMemo(ORDER)
        heap = block({0: 111, 8: 222})
        self.t = Memory({HEAP: heap})
        self.copy = [block({8: COPY + 0x100, 0x100: HEAP}),
                     block({8: 5, 24: 7, 40: 9})]
        self.regs = {"rip": 0x1234, "rsp": COPY, "rbx": 1, "rax": 2}

    def copied(self):
        return [(COPY, bytes(self.copy[0]) + bytes(self.copy[1]))]

    def watch(self):
        """The copy in the target's block cache, as the recorder puts it
        there, and a Watch of it."""
        copied = self.copied()
        self.t.clear_cache()
        for lo, data in copied:
            for k in range(0, len(data), BLOCK):
                self.t._blocks[lo + k] = data[k:k + BLOCK]
        return Watch(self.t, copied, self.regs), copied[0][1]

    def full(self):
        """A decode, watched, its entry kept; its result."""
        w, joined = self.watch()
        with w:
            w.live = True
            got = decode(self.t, w.regs)
        e = w.entry(got, joined)
        assert e is not None
        self.memo.keep(("shape",), e)
        return got

    def again(self):
        copied = self.copied()
        regs = tuple(self.regs[n] for n in ORDER)
        return self.memo.find(("shape",), regs, copied[0][1], self.t.gatherer)


def test_the_same_copy_is_not_decoded_again():
    r = Run()
    got = r.full()
    assert got == (0x1234, COPY + 0x100, 111, (5, 7))
    assert r.again() == got
    assert (r.memo.hits, r.memo.misses) == (1, 0)


def test_bytes_and_registers_not_read_change_nothing():
    r = Run()
    got = r.full()
    struct.pack_into("<Q", r.copy[0], 16, 99)       # a word next to one read
    struct.pack_into("<Q", r.copy[1], 16, 99)       # a slot of the stack not used
    r.regs["rax"] = 3
    r.t.mem[HEAP][8] = 5                            # the process, past the word read
    assert r.again() == got


def test_any_byte_read_that_differs_is_decoded_again():
    for change in ("copy", "slot", "register", "process"):
        r = Run()
        r.full()
        if change == "copy":
            struct.pack_into("<Q", r.copy[0], 0x100, HEAP + 8)
        elif change == "slot":
            struct.pack_into("<Q", r.copy[1], 24, 8)
        elif change == "register":
            r.regs["rip"] += 1
        else:
            r.t.mem[HEAP][0] = 112
        assert r.again() is None, change
        assert r.full() != (0x1234, COPY + 0x100, 111, (5, 7)), change


def test_a_process_read_that_fails_now_is_a_miss():
    r = Run()
    r.full()
    del r.t.mem[HEAP]
    assert r.again() is None


def test_a_carried_register_counts_when_the_caller_reads_it():
    seen = set()
    regs = Regs({"rip": 1, "rsp": 2, "rbx": 3, "rbp": 4}, seen)
    caller = regs.carry(["rbx", "rbp"])
    caller["rsp"] = 10                 # computed by the unwinder: no register of the thread
    assert seen == set()
    assert caller["rsp"] == 10 and seen == set()
    assert caller.get("rbp") == 4
    assert seen == {"rbp"}
    grand = caller.carry(["rbx", "rbp", "rsp"])
    assert grand["rbx"] == 3 and grand["rsp"] == 10
    assert seen == {"rbp", "rbx"}
    assert sorted(regs.copy().plain()) == ["rbp", "rbx", "rip", "rsp"] and seen == {"rbp", "rbx"}
    list(regs)                          # all of them, when they are all looked at
    assert seen == {"rbp", "rbx", "rip", "rsp"}


def test_a_read_partly_in_the_copy_is_not_kept():
    r = Run()
    w, joined = r.watch()
    with w:
        w.live = True
        try:
            r.t.read(COPY + 2 * BLOCK - 8, 16)      # the copy's last word and beyond
        except FaultError:
            pass
    assert w.entry("x", joined) is None


def test_the_memo_rests_where_copies_are_seldom_found_again():
    from ljgdb.gdb_ext.stack import copymemo
    memo = CopyMemo(ORDER)
    regs = (0, 0, 0, 0)
    for i in range(copymemo.WINDOW):
        assert memo.in_use()
        assert memo.find(("shape", i), regs, b"", None) is None
    rested = 0
    while not memo.in_use():
        rested += 1
    assert rested == copymemo.REST
    for i in range(copymemo.WINDOW):        # a second window that fails: twice as long
        memo.find(("shape", i), regs, b"", None)
    rested = 0
    while not memo.in_use():
        rested += 1
    assert rested == 2 * copymemo.REST
    r = Run()                               # a window that finds: the rest is short again
    r.memo = memo
    r.full()
    for _ in range(copymemo.WINDOW):
        assert r.again() is not None
    for i in range(copymemo.WINDOW):
        memo.find(("shape", i), regs, b"", None)
    rested = 0
    while not memo.in_use():
        rested += 1
    assert rested == copymemo.REST
