"""A sampling profile of a process's Lua and C stacks, as data.

One sample is the stack of each OS thread that runs Lua at one moment:
its machine frames, where each of the VM's frames is replaced by the Lua
frames that entry into the VM runs (backtrace.vm_entry), innermost first.
A thread counts when it was on a CPU at the sample (running or runnable,
also inside a system call: the kernel's scheduling state, see sampling.py);
with off-CPU samples, a sleeping thread counts too, with the system call
it waits in as its innermost frame.  The SampledStacks sum them into folded
stacks and into self and total counts per function, and counts the thread
samples it did not keep, by reason."""
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, TYPE_CHECKING, Tuple
from .backtrace import Backtracer, vm_entry
from ..errors import CorruptError, FaultError
from .vmstack import is_vm_code

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..target import MachineFrame
    from ..vm.state import VM

# The syscall register of x86-64 Linux: the number of the system call a
# stopped thread is inside, -1 in user code.  (It names the call; whether
# the thread was on a CPU is its scheduling state's to say.)
SYSCALL_REG = {"x86_64": "orig_rax", "aarch64": None}


def thread_stack(vm: 'VM', mframes: List['MachineFrame'],
                 walked: Optional[Set[int]] = None) -> Optional[List[Tuple[Any, ...]]]:
    """The stack of the OS thread whose machine frames are mframes
    (innermost first) as frame keys, innermost first: Backtracer.frame_key's
    keys for Lua frames, ('M', name or None, pc) for machine frames.  None
    when the thread runs no Lua of this VM.  After a trace's machine code,
    which no unwind info describes, the unwinder's frames are left out.
    walked, when given, receives the lua_States whose stacks were walked.
    CorruptError when an entry's Lua frames are not known at all (its
    warning says why): the caller counts the thread as unreadable."""
    bt = Backtracer(vm)
    keys = []
    lua = False
    after_leaf = False
    seen = set()
    for m in mframes:
        if after_leaf and not m.name:
            continue        # the unwinder's misreading after a leaf helper of the VM
        after_leaf = False
        entry = None
        if is_vm_code(m) or not (m.name or m.has_debug):
            try:
                entry = vm_entry(bt, m)
            except (FaultError, CorruptError):
                entry = None
        if entry is not None and (entry.L, entry.cframe) in seen:
            continue        # an unwinder's second frame for one entry into the VM
        if entry is None:
            keys.append(("M", m.name, m.pc))
            continue
        if not entry.frames and entry.warning:
            # (Not a stack of C frames alone: the Lua frames of this entry
            # are there but not known, e.g. lj_vm_exit_interp before it
            # sets the interpreter's state.)
            raise CorruptError(entry.warning)
        seen.add((entry.L, entry.cframe))
        lua = True
        after_leaf = entry.leaf
        keys.extend([f.key if f.key is not None else bt.frame_key(f) for f in entry.frames])
        if not is_vm_code(m):
            break
    if walked is not None:
        walked.update(seen_L for seen_L, _ in seen)
    return keys if lua else None


# What a system call that waited returns when a signal or a ptrace stop
# takes the thread out of it, to be made again after (linux/errno.h:
# ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK),
# in the register that holds the return value, as a ptrace stop shows it
# (the kernel makes the call again only once the thread runs on).
RESTARTING = frozenset((1 << 64) - n for n in (512, 513, 514, 516))


def taken_out_of_a_wait(regs: Dict[str, int], arch: str) -> bool:
    """Whether a thread's registers at a ptrace stop show a system call
    that the stop took it out of while it waited: on x86-64, a system call
    number in orig_rax (-1 in user code) and -ERESTART* in rax.  A thread
    the kernel lists as runnable with such registers was asleep: an
    earlier stop took it out of its call, and it has not run since to make
    the call again (docs/luajit-facts.md); it is not on a CPU.  (aarch64's
    NT_PRSTATUS has no system call number: x0 alone could be user data,
    so the answer there is False.)"""
    if arch != "x86_64":
        return False
    nr = regs.get("orig_rax")
    return nr is not None and nr < 1 << 63 and regs.get("rax") in RESTARTING


def in_syscall(m0: 'MachineFrame', arch: str = "x86_64") -> Optional[int]:
    """The number of the system call the thread whose innermost machine
    frame is m0 is stopped in, or None when it was in user code."""
    reg = SYSCALL_REG.get(arch)
    if reg is None:
        return None
    v = m0.reg(reg)
    if v is None or v >= 1 << 63:
        return None
    return v


def function_key(key: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """The function a frame key belongs to (for the top table): a Lua
    frame's function is its prototype, whatever the line, under the name
    its caller gave it (one function called under two names is two)."""
    if key[0] == "L":
        return ("LF", key[1], key[3])
    if key[0] == "M":
        return ("M", key[1]) if key[1] else key
    return key


# Why a thread's sample was not kept, in the order a summary names them.
NO_LUA = "no Lua"
OFF_CPU = "off-CPU"
UNREADABLE = "unreadable"
NO_STATE = "state unknown"
DROP_REASONS = (NO_LUA, OFF_CPU, UNREADABLE, NO_STATE)


class Stack(tuple):
    """A stack as SampledStacks counts it, its hash worked out once: a
    copy decoded again (copymemo) counts the same stack object again."""

    def __new__(cls, items: Iterable[Tuple[Any, ...]]) -> 'Stack':
        self = tuple.__new__(cls, items)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._hash


class SampledStacks(object):
    """Stacks counted: stacks maps a stack (keys outermost first) to its
    count; samples counts the samples taken, threads the thread stacks
    kept, dropped the thread samples left out by reason (DROP_REASONS)."""

    def __init__(self) -> None:
        self.stacks = {}
        self.samples = 0
        self.threads = 0
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self._same = {}         # each stack counted: its first Stack object
        self.last = None        # the stack add() counted last

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def add(self, keys: Sequence[Tuple[Any, ...]]) -> None:
        """One thread's stack, innermost first."""
        stack = Stack(reversed(keys))
        self.add_stack(self._same.setdefault(stack, stack))

    def add_stack(self, stack: 'Stack') -> None:
        """One thread's stack as add() counted it before (self.last)."""
        self.stacks[stack] = self.stacks.get(stack, 0) + 1
        self.threads += 1
        self.last = stack

    def top(self) -> List[Tuple[Tuple[Any, ...], int, int]]:
        """[(function key, self count, total count)], most self first:
        self counts the stacks a function is innermost in, total those it
        is anywhere in (once per stack)."""
        selfc = {}
        total = {}
        for stack, n in self.stacks.items():
            if not stack:
                continue
            fk = function_key(stack[-1])
            selfc[fk] = selfc.get(fk, 0) + n
            for f in set(function_key(k) for k in stack):
                total[f] = total.get(f, 0) + n
        rows = [(f, selfc.get(f, 0), t) for f, t in total.items()]
        rows.sort(key=lambda r: (-r[1], -r[2], str(r[0])))
        return rows
