"""gdb_ext.stack.vmstack on synthetic memory: where the walk of the running
thread starts, from the interpreter's registers as an unwinder gives them
(Target.machine_frames), GC64 and X64.  The end-to-end tests are
tests/e2e/test_moments.py."""
import pytest

from ljgdb.gdb_ext.layouts.layout import Layout
from ljgdb.gdb_ext.vm.objects import Thread
from ljgdb.gdb_ext.vm.state import make_vm
from ljgdb.gdb_ext.target import MachineFrame
from ljgdb.gdb_ext.stack.vmstack import locate
from support.synth import Heap

VARIANTS = ("r21-gc64", "r21-x64")
INTERP = ~0         # LJ_VMST_INTERP, stored negated in g->vmstate


class World(object):
    """A main thread running Lua function B (at slot 20), called from Lua
    function A (at slot 10), called from a C function at the bottom."""

    def __init__(self, variant):
        h = self.h = Heap(variant)
        self.G, self.L = h.new_state(stack_slots=48)
        h.put("global_State", self.G, "gc.total", 1 << 20)
        h.put("global_State", self.G, "vmstate", INTERP)
        self.fr2 = "ftsz" in h.types["TValue"].fields
        f = h.types["lua_State"].fields["stack"]
        self.stack = int.from_bytes(h.mem[self.L - h.base + f.offset:][:f.size], "little")
        self.A, ptA = h.new_lua_func(b"@a.lua", 10)
        self.B, ptB = h.new_lua_func(b"@b.lua", 20)
        self.bcA = ptA + h.size("GCproto")
        self.bcB = ptB + h.size("GCproto")
        for pt, bc in ((ptA, self.bcA), (ptB, self.bcB)):
            h.put("GCproto", pt, "sizebc", 4)
            for i in range(4):      # CALL-like instructions: A operand 5
                h.write(bc + 4 * i, (0x00000500 | 0x42).to_bytes(4, "little"))
        cf = h.new_c_func(1, 0x401000)
        self.baseC = self.stack + 8 * (1 + self.fr2) + 8 * self.fr2
        self.baseA = self.stack + 8 * 10
        # B's link returns into A after A's instruction 2; A's slots: 5
        # operands below B's frame (bc_a = 5: B's frame is A's base + 5 + 1 + FR2 slots).
        self.baseB = self.baseA + 8 * (5 + 1 + self.fr2)
        self.frame(self.baseC, cf, ((self.baseC - self.stack) & ~7) | 1)      # FRAME_C
        self.frame(self.baseA, self.A, ((self.baseA - self.baseC) | 1))        # a C frame delta
        self.frame(self.baseB, self.B, self.bcA + 8)                           # Lua link into A
        h.put("lua_State", self.L, "base", self.baseC)      # stale: the C function's
        h.put("lua_State", self.L, "top", self.baseC)

    def frame(self, base, fn, link):
        h = self.h
        if self.fr2:
            h.write_tv(base - 16, h.tv_gc("func", fn))
            h.write(base - 8, (link & ((1 << 64) - 1)).to_bytes(8, "little"))
        else:
            h.write(base - 8, (fn | ((link & 0xFFFFFFFF) << 32)).to_bytes(8, "little"))

    def start(self, frames):
        t = self.h.target()
        t.frames = frames
        lay = Layout(t)
        vm = make_vm(t, lay, self.L)
        self.dispatch = vm.GG + lay.GG.dispatch
        return locate(vm, Thread(vm, self.L), frames)

    def vmframe(self, name, level=0, **regs):
        t = self.h.target()
        lay = Layout(t)
        gg = self.G - lay.GG.g
        regs.setdefault("r14", gg + lay.GG.dispatch)
        return MachineFrame(level, 0x500000 + level, name, False, regs)


@pytest.mark.parametrize("variant", VARIANTS)
def test_interpreter_registers_give_the_innermost_frame(variant):
    w = World(variant)
    s = w.start([w.vmframe("lj_BC_ADDVN", rdx=w.baseB, rbx=w.bcB + 8)])
    assert (s.base, s.pc, s.warning, s.show) == (w.baseB, w.bcB + 8, None, "all")


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_return_that_loaded_pc_runs_the_frame_below(variant):
    """In BC_RET, PC is loaded from the frame's link before BASE moves
    down: the frame below (A) is the one that runs."""
    w = World(variant)
    s = w.start([w.vmframe("lj_BC_RET1", rdx=w.baseB, rbx=w.bcA + 8)])
    assert (s.base, s.pc, s.warning) == (w.baseA, w.bcA + 8, None)


@pytest.mark.parametrize("variant", VARIANTS)
def test_base_and_pc_that_do_not_match_say_so(variant):
    w = World(variant)
    s = w.start([w.vmframe("lj_BC_ADDVN", rdx=w.baseB, rbx=w.bcA + 4)])
    assert s.show == "none" and "do not form a frame" in s.warning and "lj_BC_ADDVN" in s.warning


@pytest.mark.parametrize("variant", VARIANTS)
def test_registers_of_another_vm_are_not_used(variant):
    w = World(variant)
    s = w.start([w.vmframe("lj_BC_ADDVN", rdx=w.baseB, rbx=w.bcB + 8, r14=0x1234)])
    assert s.show == "none" and "another VM" in s.warning


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_leaf_helper_keeps_only_the_innermost_frame(variant):
    """lj_tab_len is called without storing L->base: the innermost frame's
    function and line are known from PC (and L->base's frame holds it), the
    frames below it are not."""
    w = World(variant)
    w.h.put("lua_State", w.L, "base", w.baseB)
    helper = MachineFrame(0, 0x400100, "lj_tab_len", True, {})
    s = w.start([helper, w.vmframe("lj_BC_LEN", level=1, rbx=w.bcB + 12)])
    assert (s.base, s.pc, s.show) == (None, w.bcB + 12, "top")
    assert "lj_tab_len" in s.warning and "without storing L->base" in s.warning


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_helper_that_stores_base_uses_l_base(variant):
    w = World(variant)
    w.h.put("lua_State", w.L, "base", w.baseB)
    helper = MachineFrame(0, 0x400100, "lj_tab_newkey", True, {})
    s = w.start([helper, w.vmframe("lj_BC_TSETS", level=1, rbx=w.bcB + 12)])
    assert (s.base, s.pc, s.warning, s.show) == (None, w.bcB + 12, None, "all")


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_machine_frames_in_the_interpreter_is_honest(variant):
    w = World(variant)
    s = w.start([])
    assert s.show == "none" and "registers" in s.warning


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_leaf_helper_finds_base_saved_in_rb(variant):
    """Around lj_tab_len the VM keeps BASE in RB (rbp, callee-saved: the
    unwinder recovers it in the VM's frame): the whole stack is known."""
    w = World(variant)
    helper = MachineFrame(0, 0x400100, "lj_tab_len", True, {})
    s = w.start([helper, w.vmframe("lj_BC_LEN", level=1, rbx=w.bcB + 12, rbp=w.baseB)])
    assert (s.base, s.pc, s.warning, s.show) == (w.baseB, w.bcB + 12, None, "all")
    # RB holding something else (a function) is not taken for BASE.
    w.h.put("lua_State", w.L, "base", w.baseB)
    s = w.start([helper, w.vmframe("lj_BC_LEN", level=1, rbx=w.bcB + 12, rbp=w.A)])
    assert s.show == "top" and "without storing L->base" in s.warning


def code_world(variant, code_at, code, symbols):
    """A World whose VM code `code` lies at heap address code_at (a block
    allocated by the caller) with the given symbols."""
    w = World(variant)
    w.h.write(code_at, code)
    t = w.h.target(symbols=symbols)
    return w, t


def start_on(w, t, frames):
    t.frames = frames
    vm = make_vm(t, Layout(t), w.L)
    return locate(vm, Thread(vm, w.L), frames)


@pytest.mark.parametrize("variant", VARIANTS)
def test_right_after_a_c_call_base_comes_from_l_base(variant):
    """After `call lj_tab_new` returns, rdx is whatever the callee left
    (here a pointer to another frame of the stack): BASE comes from L->base,
    which the VM stored before the call."""
    w = World(variant)
    code = w.h.alloc(64)
    helper = w.h.alloc(16)
    w.h.write(code, b"\xe8" + (helper - (code + 5)).to_bytes(4, "little", signed=True))
    w.h.put("lua_State", w.L, "base", w.baseB)
    t = w.h.target(symbols={"lj_tab_new": helper, "lj_BC_TNEW": code})
    lay = Layout(t)
    f = MachineFrame(0, code + 5, "lj_BC_TNEW", False,
                     {"r14": w.G - lay.GG.g + lay.GG.dispatch, "rdx": w.baseA, "rbx": w.bcB + 12})
    s = start_on(w, t, [f])
    assert (s.base, s.pc, s.warning) == (None, w.bcB + 12, None)
    assert "not loaded yet after a C call" in s.how


@pytest.mark.parametrize("variant", VARIANTS)
def test_reload_of_base_from_l_base(variant):
    """At `mov BASE, L:RB->base` the VM is about to take L->base as BASE."""
    w = World(variant)
    code = w.h.alloc(64)
    off = w.h.types["lua_State"].fields["base"].offset
    w.h.write(code, (b"\x48" if w.fr2 else b"") + bytes([0x8b, 0x55, off]))
    w.h.put("lua_State", w.L, "base", w.baseB)
    t = w.h.target(symbols={"lj_BC_CAT": code - 16})
    lay = Layout(t)
    regs = {"r14": w.G - lay.GG.g + lay.GG.dispatch, "rdx": w.baseA, "rbx": w.bcB + 12}
    s = start_on(w, t, [MachineFrame(0, code, "lj_BC_CAT", False, dict(regs, rbp=w.L))])
    assert (s.base, s.pc, s.warning) == (None, w.bcB + 12, None)
    # With RB not this thread, the reload is not this thread's BASE.
    s = start_on(w, t, [MachineFrame(0, code, "lj_BC_CAT", False, dict(regs, rbp=0x1234))])
    assert s.base != w.baseB or s.warning


@pytest.mark.parametrize("variant", VARIANTS)
def test_code_that_stores_l_base_on_entry_uses_it(variant):
    """BC_TNEW stores L->base first thing (mov L:RB, SAVE_L; mov
    L:RB->base, BASE); X64's VM then passes an argument in BASE's register.
    Here B calls itself: a stale L->base could be either frame, so only
    the store on entry makes it this one's."""
    w = World(variant)
    w.frame(w.baseA, w.B, (w.baseA - w.baseC) | 1)
    w.frame(w.baseB, w.B, w.bcB + 8)
    code = w.h.alloc(64)
    off = w.h.types["lua_State"].fields["base"].offset
    rex = b"\x48" if w.fr2 else b""
    save_l = 16 if w.fr2 else 24
    entry = rex + bytes([0x8b, 0x6c, 0x24, save_l]) + rex + bytes([0x89, 0x55, off])
    w.h.write(code, entry + b"\x90" * 8)
    w.h.put("lua_State", w.L, "base", w.baseB)
    t = w.h.target(symbols={"lj_BC_TNEW": code})
    lay = Layout(t)
    regs = {"r14": w.G - lay.GG.g + lay.GG.dispatch, "rdx": 3, "rbx": w.bcB + 12}
    s = start_on(w, t, [MachineFrame(0, code + len(entry) + 2, "lj_BC_TNEW", False, regs)])
    assert (s.base, s.pc, s.warning) == (None, w.bcB + 12, None)
    # Before the store, L->base is not known to be this frame's.
    s = start_on(w, t, [MachineFrame(0, code + 2, "lj_BC_TNEW", False, regs)])
    assert s.warning is not None


@pytest.mark.parametrize("variant", VARIANTS)
def test_running_thread_while_cur_l_lags_a_coroutine_switch(variant):
    """X64's ff_coroutine_resume runs the resumer's code for a few
    instructions while g->cur_L still names the coroutine: the running
    thread is the one in the VM's C frame (SAVE_L) whose L->cframe it is."""
    w = World(variant)
    h = w.h
    co = h.alloc(h.size("lua_State"))
    h.header("lua_State", co, 6)
    h.put("lua_State", co, "glref", w.G)
    h.put("lua_State", co, "status", 1)                 # LUA_YIELD
    h.put("global_State", w.G, "cur_L", co)
    cframe = h.alloc(64)
    h.write(cframe + (16 if w.fr2 else 24), w.L.to_bytes(h.ref, "little"))   # SAVE_L
    h.put("lua_State", w.L, "cframe", cframe)
    t = h.target()
    lay = Layout(t)
    regs = {"r14": w.G - lay.GG.g + lay.GG.dispatch, "rsp": cframe, "rdx": w.baseB}
    t.frames = [MachineFrame(0, 0x500000, "lj_ff_coroutine_resume", False, regs)]
    vm = make_vm(t, lay, None, [("G", w.G, "test")])
    assert vm.L == w.L and "C frame" in vm.L_source
    assert vm.running_L == w.L
    # Any other C frame: g->cur_L stands.
    h.put("lua_State", w.L, "cframe", cframe + 16)
    t = h.target()
    t.frames = [MachineFrame(0, 0x500000, "lj_ff_coroutine_resume", False, regs)]
    vm = make_vm(t, Layout(t), None, [("G", w.G, "test")])
    assert vm.L == co and vm.running_L == co


@pytest.mark.parametrize("variant", VARIANTS)
def test_error_landing_pad_takes_l_base(variant):
    """vm_unwind_ff_eh, before it loads BASE: lj_err_unwind has set L->base
    to the frame of the pcall that caught the error."""
    w = World(variant)
    w.h.put("lua_State", w.L, "base", w.baseB)
    s = w.start([w.vmframe("lj_vm_unwind_ff_eh", rdx=3, rbx=0x77)])
    assert (s.base, s.pc, s.warning, s.show) == (None, None, None, "all")


@pytest.mark.parametrize("variant", VARIANTS)
def test_landing_pad_writing_over_the_pcall_frame(variant):
    """vm_unwind_ff_eh with the VM state still C: PC holds the pcall's
    return pc, and false already covers its frame's function slot."""
    w = World(variant)
    w.h.put("global_State", w.G, "vmstate", ~1)         # LJ_VMST_C
    w.h.put("lua_State", w.L, "base", w.baseB)
    w.h.write_tv(w.baseB - 8 * (1 + w.fr2), w.h.tv_prim("false"))
    s = w.start([w.vmframe("lj_vm_unwind_ff_eh", rdx=w.baseB, rbx=w.bcA + 8)])
    assert (s.base, s.pc, s.warning) == (w.baseA, w.bcA + 8, None)


@pytest.mark.parametrize("variant", VARIANTS)
def test_outer_vm_frame_without_its_dispatch_register(variant):
    """An outer VM frame whose r14 the unwinder did not recover through the
    C code below it: its C frame's SAVE_L is this VM's thread, so the
    frame is this VM's; the C frame of another VM is not."""
    w = World(variant)
    h = w.h
    w.h.put("lua_State", w.L, "base", w.baseB)
    cframe = h.alloc(64)
    h.write(cframe + (16 if w.fr2 else 24), w.L.to_bytes(h.ref, "little"))
    helper = MachineFrame(0, 0x400100, "lj_tab_newkey", True, {})
    s = w.start([helper, w.vmframe("lj_BC_TSETS", level=1, rbx=w.bcB + 12, r14=0x1234,
                                   rsp=cframe)])
    assert (s.base, s.pc, s.warning, s.show) == (None, w.bcB + 12, None, "all")
    other = h.alloc(64)             # SAVE_L of no thread of this VM
    s = w.start([helper, w.vmframe("lj_BC_TSETS", level=1, rbx=w.bcB + 12, r14=0x1234,
                                   rsp=other)])
    assert s.show == "none" and "another VM" in s.warning
