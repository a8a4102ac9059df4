"""gdb_ext.backends.coredump (a core file read without gdb) against real gdb on real
cores of real LuaJIT builds.

Each core is loaded in gdb, which prints what it sees: every thread's frames
(pc, name, the registers an unwinder recovers), `info symbol` of each pc,
`print &name` of a few symbols, `info sharedlibrary`, `info proc mappings`,
the core's sections and a few bytes of program text.  Core must see the same.
Where gdb goes on past a frame without CFI by its heuristics (JIT-compiled
code), Core must stop there and say why.  Every expected value comes from
gdb (or, for the segments, from pyelftools), never from Core.
"""
import json
import os
import re
import signal
import time

import pytest

from support.stop import LUA_DIR, Stop, manifest, qemu_target, run_gdb
from support import moments

from gdb_ext.backends.coredump import Core  # noqa: E402
from gdb_ext.errors import FaultError  # noqa: E402

NAMES = ("lua_pcall", "ljgdb_break", "lj_vm_pcall", "ljgdb_break_count", "malloc",
         "pthread_join", "ljgdb_no_such_symbol")
REGS0 = ("rax rbx rcx rdx rsi rdi rbp rsp r8 r9 r10 r11 r12 r13 r14 r15 rip eflags cs ss ds es "
         "fs gs fs_base gs_base orig_rax").split()
OUTER = ("rip", "rsp", "rbp", "rbx", "r12", "r13", "r14", "r15")
# arm64 (qemu's cores of the guest): x30 is the link register, x29 the frame pointer.
A64_REGS0 = ["x%d" % i for i in range(31)] + ["sp", "pc", "cpsr"]
A64_OUTER = ("pc", "sp", "x30") + tuple("x%d" % i for i in range(19, 30))


def regs_of(variant):
    """(registers of frame 0, registers of every frame) compared."""
    if manifest()[variant].get("arch") == "arm64":
        return A64_REGS0, A64_OUTER
    return REGS0, OUTER


# Runs inside gdb: everything the test compares, as JSON between markers.
GDB_SCRIPT = r'''
import json
import re
import gdb

def run(cmd):
    try:
        return gdb.execute(cmd, to_string=True)
    except gdb.error as e:
        return "error: %s" % e

def reg(frame, name):
    try:
        v = frame.read_register(name)
        return None if v.is_optimized_out else int(v) & 0xffffffffffffffff
    except (gdb.error, ValueError):
        return None

cfg = json.loads(CONFIG)
out = {"threads": [], "info_symbol": {}, "solib": {}, "symbols": {}, "x": {}}
for th in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
    th.switch()
    f = gdb.newest_frame()
    regs0 = {r: reg(f, r) for r in cfg["regs0"]}
    frames = []
    while f is not None and len(frames) < 80:
        # An inlined call shares its caller's machine frame; a tail call's frame
        # is one gdb makes up from DWARF call site info: neither is on the stack.
        if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            frames.append({"pc": f.pc(), "name": f.name(),
                           "sigtramp": f.type() == gdb.SIGTRAMP_FRAME,
                           "regs": {r: reg(f, r) for r in cfg["outer"]}})
        last, f = f, f.older()
    out["threads"].append({"lwp": th.ptid[1], "regs0": regs0, "frames": frames,
                           "stop": gdb.frame_stop_reason_string(last.unwind_stop_reason())})
    for fr in frames:
        out["info_symbol"][str(fr["pc"])] = run("info symbol 0x%x" % fr["pc"])
        out["solib"][str(fr["pc"])] = gdb.solib_name(fr["pc"])
for name in cfg["names"]:
    out["symbols"][name] = run("print &%s" % name)
for name in cfg["names"][:-1]:
    m = re.search(r"\) (0x[0-9a-f]+)", out["symbols"][name])
    if m:
        for addr in (int(m.group(1), 16), (int(m.group(1), 16) | 0xfff) - 7):
            out["x"][str(addr)] = run("x/16xb 0x%x" % addr)
out["x"]["0"] = run("x/16xb 0")
out["sharedlibrary"] = run("info sharedlibrary")
out["mappings"] = run("info proc mappings")
out["sections"] = run("maint info sections")
out["progspace"] = gdb.current_progspace().filename
gdb.write("\n@@JSON@@" + json.dumps(out) + "@@END@@\n")
'''


def gdb_view(variant, core, workdir):
    """What gdb sees of the core (the JSON of GDB_SCRIPT) and its whole output."""
    script = os.path.join(workdir, "view.py")
    regs0, outer = regs_of(variant)
    cfg = {"regs0": regs0, "outer": outer, "names": NAMES}
    with open(script, "w") as f:
        f.write("CONFIG = %r\n" % json.dumps(cfg) + GDB_SCRIPT)
    m = manifest()[variant]
    args = ["-ex", "set backtrace past-main on", "-ex", "set backtrace past-entry on"]
    if m.get("arch") == "arm64":
        text = run_gdb(qemu_target(m) + args + ["-ex", "core-file " + core, "-x", script],
                       cwd=workdir, gdb="gdb-multiarch")
    else:
        text = run_gdb(args + ["-ex", "core-file " + core, "-x", script, m["host"]], cwd=workdir)
    m = re.search(r"@@JSON@@(.*)@@END@@", text)
    assert m, text[-3000:]
    return json.loads(m.group(1)), text


def kernel_core(variant, shape, workdir):
    """A core the kernel writes when SIGABRT kills moments.lua (shape) at a
    moment in its loop."""
    os.makedirs(workdir, exist_ok=True)
    exp, core = os.path.join(workdir, "expected.txt"), os.path.join(workdir, "core")
    p = moments._start(manifest()[variant], shape, exp, workdir, core=True)
    moments._wait_ready(exp, p)
    time.sleep(0.05)
    p.send_signal(signal.SIGABRT)
    p.wait(timeout=60)
    if manifest()[variant].get("arch") == "arm64":
        return moments._qemu_core(workdir)      # (the guest's, as qemu writes it)
    assert os.path.exists(core), moments.kernel_cores_possible()
    return core


# (variant, what): how each core is made.
CASES = {
    "nest": ("r21-gc64", "in ljgdb_break, C and Lua nested (lua_call, gsub, sort, pcall)"),
    "jit": ("r20-x64", "in ljgdb_break called through the FFI from a JIT trace"),
    "crash": ("or-gc64", "at a SIGSEGV in C code the VM called (gcore at the signal)"),
    "handler": ("r21-x64", "in ljgdb_break run as a signal handler: __restore_rt's frame"),
    "plt": ("deb-x64", "at memcpy@plt, a PLT entry (a CFA expression), from Lua's gsub"),
    "clone3": ("r20-x64", "in clone3 (under io.popen) past its CFI: gdb goes on by heuristics"),
    "threads": ("or-x64", "two OS threads: main waits in pthread_join, the other stops"),
    "kernel": ("r21-gc64", "a kernel core (SIGABRT) of the interpreter's loop"),
    "kernel-jit": ("deb-gc64", "a kernel core (SIGABRT) of a loop that runs a trace"),
    # arm64 under qemu-user: the cores qemu writes of the guest.
    "a64-nest": ("r21-arm64", "arm64: in ljgdb_break, C and Lua nested"),
    "a64-crash": ("or-arm64", "arm64: at a SIGSEGV in C code the VM called"),
    "a64-kernel": ("or-arm64", "arm64: SIGABRT to qemu in the interpreter's loop"),
    "a64-kernel-jit": ("r21-arm64", "arm64: SIGABRT to qemu in a loop that runs a trace"),
}
_cores = {}


@pytest.fixture(scope="module")
def cores(tmp_path_factory):
    def get(case):
        if case not in _cores:
            variant = CASES[case][0]
            work = str(tmp_path_factory.mktemp(case))
            host = manifest()[variant]["host"]
            if case.startswith(("kernel", "a64-kernel")):
                if moments.kernel_cores_possible() and not case.startswith("a64"):
                    pytest.skip(moments.kernel_cores_possible())
                core = kernel_core(variant, "jit" if case.endswith("jit") else "interp", work)
            elif case == "threads":
                core = Stop(variant, "idle.lua", [], work, env={"LJGDB_IDLE": "1"}).core
            elif case == "handler":
                # Make ljgdb_break the SIGUSR1 handler, go on to the first
                # instruction of lua_gettop (ljgdb_ccall calls it) and deliver
                # SIGUSR1 there: the breakpoint stops again in the handler.  The
                # interrupted frame's pc is a function's first byte: its CFI is
                # found at pc, not pc - 1 (which is in another function).
                core = Stop(variant, "bt.lua", [], work, args=["nest"], live_prelude=[
                    "call (void *)signal(10, ljgdb_break)", "tbreak *lua_gettop", "continue",
                    "signal SIGUSR1"]).core
            elif case == "clone3":
                core = Stop(variant, "bt.lua", [], work, args=["popen"], live_prelude=[
                    "catch syscall clone3", "continue"]).core
            elif case == "plt":
                core = Stop(variant, "bt.lua", [], work, args=["nest"], live_prelude=[
                    "break 'memcpy@plt'", "continue"]).core
            else:
                what = case[4:] if case.startswith("a64-") else case
                core = Stop(variant, "bt.lua", [], work, args=[what],
                            stop_on="SIGSEGV" if what == "crash" else "break").core
            view, text = gdb_view(variant, core, work)
            _cores[case] = (host, core, view, text)
        return _cores[case]
    return get


def symbol_name(info):
    """The symbol's name in `info symbol` output, None for no symbol."""
    m = re.match(r"(.*?)(?: \+ \d+)? in section ", info)
    return m.group(1) if m else None


def gdb_file(view, pc):
    """The file gdb says holds pc (a library, or the program), or None."""
    solib = view["solib"][str(pc)]
    if solib is None and " of %s" % view["progspace"] in view["info_symbol"][str(pc)]:
        solib = view["progspace"]
    return solib


def fde_covers(view, path, addr):
    """Whether the ELF file `path` has CFI (an FDE of .eh_frame or
    .debug_frame, read with pyelftools) for the runtime address addr; the
    load address from gdb's `info proc mappings`."""
    from elftools.elf.elffile import ELFFile
    from elftools.dwarf.callframe import FDE
    rows = [r for r in mapping_rows(view) if os.path.realpath(r[3]) == os.path.realpath(path)]
    with open(path, "rb") as f:
        elf = ELFFile(f)
        first = min(s["p_vaddr"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
        bias = min(r[0] for r in rows if r[2] == 0) - (first & ~0xfff)
        dwarf = elf.get_dwarf_info()
        entries = list(dwarf.EH_CFI_entries()) if dwarf.has_EH_CFI() else []
        entries += list(dwarf.CFI_entries()) if dwarf.has_CFI() else []
    return any(isinstance(e, FDE) and e.header["initial_location"] <= addr - bias <
               e.header["initial_location"] + e.header["address_range"] for e in entries)


def mapping_rows(view):
    """gdb's `info proc mappings` of the core: [(start, end, offset, path)]."""
    rows = re.findall(r"^\s*(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+(/\S.*)$",
                      view["mappings"], re.M)
    return [(int(s, 16), int(e, 16), int(o, 16), p) for s, e, o, p in rows]


def no_cfi(view, pc):
    """gdb's frame at pc is in no file (JIT-compiled code): gdb unwinds it
    by heuristics, Core must stop there."""
    info = view["info_symbol"][str(pc)]
    return view["solib"][str(pc)] is None and info.startswith("No symbol matches")


@pytest.mark.parametrize("case", sorted(CASES))
def test_threads_frames_and_symbols(cores, case):
    host, core_path, view, text = cores(case)
    m = manifest()[CASES[case][0]]
    core = Core(core_path, executable=host, sysroot=m.get("sysroot", "/"))
    regs0, outer = regs_of(CASES[case][0])
    # Threads in gdb's order, the first one the one gdb selects.
    assert [t.tid for t in core.threads] == [t["lwp"] for t in view["threads"]]
    sig = re.search(r"Program terminated with signal (SIG[A-Z0-9]+)", text)
    assert core.threads[0].signal == (signal.Signals[sig.group(1)].value if sig else 0)
    checked = 0
    for th, g in zip(core.threads, view["threads"]):
        for r in regs0:
            assert th.regs[r] == g["regs0"][r], (case, th.tid, r)
        frames, why = core.unwind(th.regs)
        gf = g["frames"]
        cut = next((i for i, f in enumerate(gf) if no_cfi(view, f["pc"])), None)
        want = gf if cut is None else gf[:cut + 1]
        where = "%s thread %d: core %s (%s), gdb %s (%s)" % (
            case, th.tid, [hex(pc) for pc, _ in frames], why,
            ["%s %s" % (hex(f["pc"]), f["name"]) for f in gf], g["stop"])
        if len(frames) < len(want):
            # Core stopped early: only where the file has no CFI for the
            # frame (gdb went on by heuristics, as at clone3's syscall).
            i = len(frames) - 1
            lookup = want[i]["pc"] - (0 if i == 0 or want[i - 1]["sigtramp"] else 1)
            path = gdb_file(view, want[i]["pc"])
            assert path and not fde_covers(view, path, lookup), where
            want, cut = want[:i + 1], i
        assert [pc for pc, _ in frames] == [f["pc"] for f in want], where
        if cut is not None:
            assert why and "no unwind information for 0x%x" % gf[cut]["pc"] in why, where
        elif g["stop"] == "outermost":
            assert why is None, where
        else:
            assert why, where
        for i, ((pc, regs), f) in enumerate(zip(frames, want)):
            for r in outer:
                assert regs.get(r) == f["regs"][r], (where, i, r)
            info = view["info_symbol"][str(pc)]
            assert core.symbolize(pc) == symbol_name(info), (where, i, info)
            assert core.objfile_of(pc) == gdb_file(view, pc), (where, i, info)
            checked += 1
    assert checked >= 1
    for name in NAMES:
        m = re.search(r"\) (0x[0-9a-f]+)", view["symbols"][name])
        assert core.symbol(name) == (int(m.group(1), 16) if m else None), \
            (name, view["symbols"][name])


@pytest.mark.parametrize("case", ["nest", "kernel", "threads"])
def test_memory_files_images(cores, case):
    from elftools.elf.elffile import ELFFile
    host, core_path, view, _ = cores(case)
    core = Core(core_path)          # the program found from the core itself
    assert os.path.realpath(core.executable) == os.path.realpath(host)
    with open(core_path, "rb") as f:
        loads = [(s["p_vaddr"], s["p_vaddr"] + s["p_memsz"], bool(s["p_flags"] & 2))
                 for s in ELFFile(f).iter_segments() if s["p_type"] == "PT_LOAD" and
                 s["p_filesz"]]
    assert [r[:3] for r in core.regions()] == loads
    assert {r[3] for r in core.regions()} == {"core segment"}
    # gdb's sections of the core that have contents start where the regions do.
    core_part = view["sections"].split("Core file:", 1)[1]
    starts = {int(m.group(1), 16) for m in re.finditer(
        r"(0x[0-9a-f]+)->0x[0-9a-f]+ at 0x[0-9a-f]+: load\S* .*HAS_CONTENTS", core_part)}
    assert starts == {r[0] for r in core.regions()}
    # Bytes as gdb reads them: some from the core, some (program text the
    # core left out) from the files on disk; unreadable memory faults.
    absent = 0
    for addr, out in view["x"].items():
        addr = int(addr)
        if addr == 0:
            assert "Cannot access memory at address 0x0" in out
            with pytest.raises(FaultError) as e:
                core.read(0, 16)
            assert e.value.address == 0
            continue
        bad = re.search(r"Cannot access memory at address (0x[0-9a-f]+)", out)
        if bad:                     # (past the end of the program's data)
            with pytest.raises(FaultError) as e:
                core.read(addr, 16)
            assert e.value.address == int(bad.group(1), 16)
            continue
        want = bytes(int(b, 16) for b in re.findall(r"\b0x([0-9a-f]{2})\b", out))
        assert len(want) == 16, out
        assert core.read(addr, 16) == want, (hex(addr), out)
        absent += not any(s <= addr < e for s, e, _ in loads)
    assert absent, "no text read from the files: every address is in the core"
    # NT_FILE as gdb lists it.
    assert core.files == mapping_rows(view)
    # The program, then the libraries in gdb's order; debug files where gdb found debug info.
    libs = re.findall(r"^0x[0-9a-f]+\s+0x[0-9a-f]+\s+Yes( \(\*\))?\s+(/\S+)$",
                      view["sharedlibrary"], re.M)
    images = [i for i in core.images if i.path != "[vdso]"]
    assert images[0].path == core.executable
    assert [i.path for i in images[1:]] == [p for _, p in libs]
    for img, (star, _) in zip(images[1:], libs):
        assert (img.debug_path is not None) == (not star), (img.path, img.debug_path)
        assert img.start <= img.bias + 0x1000 and img.build_id


def test_read_speed(cores):
    """Reads of 4 KB blocks (the block cache's size) and of 8 bytes, from
    the core and from a file, are cheap."""
    host, core_path, view, _ = cores("nest")
    core = Core(core_path, executable=host)
    stack = core.threads[0].regs["rsp"] & ~0xfff
    text = core.symbol("malloc") & ~0xfff
    t = time.time()
    for i in range(50000):
        core.read(stack, 4096)
        core.read(text + (i & 0xff) * 8, 8)
    assert time.time() - t < 5


def test_not_a_core(tmp_path):
    host = manifest()["r21-gc64"]["host"]
    lua = os.path.join(LUA_DIR, "bt.lua")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for path, why in ((host, "not a core file"), (lua, "not an ELF file"),
                      (str(empty), "not an ELF file"), (str(tmp_path / "missing"), "cannot read")):
        with pytest.raises(ValueError) as e:
            Core(path)
        msg = str(e.value)
        assert why in msg and "\n" not in msg and msg.count(". ") == 0, msg
