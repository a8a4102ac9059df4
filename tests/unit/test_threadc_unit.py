"""gdb_ext.stack.threadc (threadc.c) on synthetic memory: what it decides
for each kind of lua_State, what it leaves to the Python scan, and shapes
it must never match.  The end-to-end tests (the same lthreads and lbt --all
with and without it, on many.lua) are in tests/e2e/test_threads_scale.py."""
import pytest

from ljgdb.gdb_ext import consts as C
from ljgdb.gdb_ext.layouts.layout import Layout
from ljgdb.gdb_ext.stack import threadc
from ljgdb.gdb_ext.vm.pages import PageCache
from support.synth import LAYOUTS, Heap

REL = 64            # the depth of the stacks with frames (bytes from L->stack to L->base)
SLOTS = 32


class _Lay(object):
    def __init__(self, lay):
        self.lay = lay


class _Scanner(object):
    """What threadc.scan takes from a ThreadScanner."""

    def __init__(self, t, main):
        self.vm = _Lay(Layout(t))
        lay = self.vm.lay
        self.exdata_off = lay.L.exdata if lay.openresty else None
        self.main, self.running, self.vmthread = main, None, None
        self.cshapes = threadc.Shapes()
        self.mem = PageCache(t)


def _thread(h, status, base_off, top_off, pattern=b"", stack=None):
    """A lua_State with its own stack (or the given address): L->base at
    base_off bytes into it, L->top at top_off; pattern: the stack's first
    bytes."""
    L = h.alloc(h.size("lua_State"))
    h.header("lua_State", L, C.GCT_THREAD)
    if stack is None:
        stack = h.alloc(8 * SLOTS)
        h.write(stack, pattern)
    h.put("lua_State", L, "status", status)
    h.put("lua_State", L, "stack", stack)
    h.put("lua_State", L, "stacksize", SLOTS)
    h.put("lua_State", L, "base", stack + base_off)
    h.put("lua_State", L, "top", stack + top_off)
    return L


@pytest.mark.parametrize("variant", LAYOUTS)
def test_each_kind_of_thread(variant):
    lib, why = threadc.load()
    assert lib is not None, why
    h = Heap(variant)
    fr2 = 1 if h.gc64 else 0
    bottom = 8 * (1 + fr2)                     # no frame below this
    pat = bytes(range(1, REL + 1))
    other = bytes(range(101, 101 + REL))
    Ls = [_thread(h, C.LUA_OK, bottom, bottom),                # dead
          _thread(h, C.LUA_OK, bottom, bottom + 8),            # fresh: suspended
          _thread(h, C.LUA_YIELD, REL, REL + 8, pat),          # the known shape
          _thread(h, C.LUA_YIELD, REL, REL + 8, other),        # another: Python's
          _thread(h, 2, REL, REL + 8, pat),                    # LUA_ERRRUN: Python's
          _thread(h, C.LUA_OK, REL, REL + 8, pat),             # 'normal': Python's
          _thread(h, C.LUA_YIELD, REL, REL + 8, stack=0x7f0000000000 if h.gc64
                  else 0x7f000000),                            # stack unreadable: Python's
          _thread(h, C.LUA_YIELD, REL - 8, REL, pat)]          # another depth: Python's
    main = _thread(h, C.LUA_OK, bottom, bottom + 8)            # idle
    Ls.append(main)
    sc = _Scanner(h.target(), main)
    first = 16 if fr2 else 8
    sc.cshapes.add(REL, [(REL - first - 8, REL)], pat[REL - first - 8:], [], ("the shape",))
    state, sizes, shapes, _ = threadc.scan(lib, sc, Ls)
    got = [(threadc.STATUS[s], k if s else None) for s, k in zip(state, shapes)]
    assert got == [("dead", -1), ("suspended", -1), ("suspended", 0), (None, None),
                   (None, None), (None, None), (None, None), (None, None), ("idle", -1)]
    assert [sz for sz, s in zip(sizes, state) if s] == [SLOTS] * 4


@pytest.mark.parametrize("variant", ("r21-gc64", "r21-x64"))
def test_a_shape_that_reads_past_base_matches_nothing(variant):
    """A shape whose regions (or FFI-callback words) lie past L->base
    would compare bytes the C code did not read: it is kept (the shapes'
    numbers stay the Python scan's) but matches no thread."""
    lib, why = threadc.load()
    assert lib is not None, why
    h = Heap(variant)
    pat = bytes(range(1, 2 * REL + 1))
    Ls = [_thread(h, C.LUA_YIELD, REL, REL + 8, pat) for _ in range(3)]
    sc = _Scanner(h.target(), 0)
    sc.cshapes.add(REL, [(0, REL)], pat[:REL], [], ("the good one",))
    # (added after it, so tried before it: a shape's chain is newest first)
    sc.cshapes.add(REL, [(0, REL + 8)], pat[:REL + 8], [], ("past base",))
    sc.cshapes.add(REL, [(0, REL)], pat[:REL], [REL], ("its callback word past base",))
    state, _, shapes, _ = threadc.scan(lib, sc, Ls)
    assert list(state) == [1, 1, 1] and shapes == [0, 0, 0]
