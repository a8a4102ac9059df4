"""A walk of a Lua stack takes over the outer frames of the last walk of
the same stack when nothing they were made from changed (frames._Earlier:
a profile samples deep stacks whose outer frames stay put), and never
when something did: on synthetic memory (no gdb), stacks of C-function
frames, each linked to the one below it as a call from C (FRAME_C)."""
import pytest

import ljgdb  # noqa: F401
from ljgdb.gdb_ext.layouts.layout import Layout
from ljgdb.gdb_ext.stack.frames import FRAME_C, FrameWalker
from ljgdb.gdb_ext.vm.objects import Thread
from ljgdb.gdb_ext.vm.state import VM

from support.synth import Heap

SLOTS = 64


class Stack(object):
    """A lua_State whose stack holds a frame for each function of funcs
    (outermost first); walk() walks it as a new sample would (a fresh
    target and VM object over the same VM caches)."""

    def __init__(self, variant):
        self.h = h = Heap(variant)
        self.G, self.L = h.new_state(stack_slots=SLOTS)
        h.put("global_State", self.G, "gc.total", 1 << 20)
        self.fr2 = "ftsz" in h.types["TValue"].fields
        f = h.types["lua_State"].fields["stack"]
        self.stack = int.from_bytes(h.mem[self.L - h.base + f.offset:][:f.size], "little")
        self.caches = {}

    def frames(self, funcs):
        """Frame i's link slot at bot + 8 + step * i, a call from C whose
        link goes down to the frame below (the outermost: to the bottom)."""
        h = self.h
        step = 16 if self.fr2 else 8
        bot = self.stack + 8 * self.fr2
        prev = bot
        for i, fn in enumerate(funcs):
            link = bot + 8 + step * i
            ftsz = (link - prev) | FRAME_C
            if self.fr2:
                h.write_tv(link - 8, h.tv_gc("func", fn))
                h.write(link, ftsz.to_bytes(8, "little"))
            else:
                h.write(link, (fn | (ftsz << 32)).to_bytes(8, "little"))
            prev = link
        h.put("lua_State", self.L, "base", prev + 8)
        h.put("lua_State", self.L, "top", prev + 8)

    def walk(self):
        t = self.h.target()
        vm = VM(t, Layout(t), self.G, caches=self.caches)
        frames, err = FrameWalker(vm, Thread(vm, self.L)).walk()
        assert err is None
        return frames


def cfuncs(frames):
    return [fr.fn.cfunc for fr in frames]


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64"])
def test_outer_frames_taken_over_only_when_unchanged(variant):
    s = Stack(variant)
    fns = [s.h.new_c_func(1, 0x401000 + 0x10 * i) for i in range(6)]
    s.frames(fns[:5])
    first = s.walk()
    assert cfuncs(first) == [0x401040, 0x401030, 0x401020, 0x401010, 0x401000]
    assert [fr.level for fr in first] == [0, 1, 2, 3, 4]

    # The same stack again: the innermost frame is made anew, the outer
    # four are the first walk's.
    again = s.walk()
    assert cfuncs(again) == cfuncs(first)
    assert again[0] is not first[0] and all(a is b for a, b in zip(again[1:], first[1:]))

    # The innermost frame calls another: the old frames, one level further out.
    s.frames(fns[:5] + [fns[5]])
    deeper = s.walk()
    assert cfuncs(deeper) == [0x401050] + cfuncs(first)
    assert [fr.level for fr in deeper] == [0, 1, 2, 3, 4, 5]

    # A frame far below changes (another function in its slot): nothing
    # older than the change is taken over from before.
    s.frames([fns[0], fns[5], fns[2], fns[3], fns[4]])
    changed = s.walk()
    assert cfuncs(changed) == [0x401040, 0x401030, 0x401020, 0x401050, 0x401000]

    # The same slots, but a function's memory now holds another C function:
    # it is read again, not taken from the earlier walk.
    s.walk()
    s.h.put("GCfuncC", fns[5], "f", 0x402000)
    reused = s.walk()
    assert cfuncs(reused) == [0x401040, 0x401030, 0x401020, 0x402000, 0x401000]


@pytest.mark.parametrize("variant", ["r21-gc64"])
def test_a_walk_cut_short_is_not_kept(variant):
    """A walk stopped by max_frames is no earlier walk to take frames from."""
    s = Stack(variant)
    fns = [s.h.new_c_func(1, 0x401000 + 0x10 * i) for i in range(4)]
    s.frames(fns)
    t = s.h.target()
    vm = VM(t, Layout(t), s.G, caches=s.caches)
    frames, _ = FrameWalker(vm, Thread(vm, s.L)).walk(2)
    assert len(frames) == 2 and not vm.cache("walks")
    assert cfuncs(s.walk()) == [0x401030, 0x401020, 0x401010, 0x401000]
    assert vm.cache("walks")
