"""The core reader's unwinder at a pc in an arm64 PLT stub (memset@plt),
which no CFI describes: the caller returns to the link register with the
same stack pointer (a stub jumps through x16/x17 and touches neither).
Found by test_corereader's kernel cores at random moments (an arm64 core
taken in memset@plt, where gdb gave the frames and the reader had none)."""
import ljgdb  # noqa: F401
from ljgdb.gdb_ext.backends.coredump import AARCH64, X86_64, Process


class _Image(object):
    path = "host"
    bias = 0

    def find_fde(self, addr):
        return None             # (no CFI covers the PLT)


class _Stub(Process):
    def __init__(self, arch, names):
        self.arch = arch
        self.names = names
        self.missing = []

    def image_of(self, addr):
        return _Image()

    def symbolize(self, addr):
        return self.names.get(addr)

    def read(self, addr, n):
        raise AssertionError("a PLT step reads no memory")


def test_arm64_plt_stub_returns_to_lr():
    regs = {"pc": 0x401000, "sp": 0x7ff000, "x30": 0x402468, "x19": 7, "x29": 0x7ff100}
    frames, why = _Stub(AARCH64, {0x401000: "memset@plt"}).unwind(regs, 2)
    assert [pc for pc, _ in frames] == [0x401000, 0x402468]
    caller = frames[1][1]
    assert caller["sp"] == 0x7ff000 and caller["x19"] == 7 and caller["x29"] == 0x7ff100
    assert why == "stopped after 2 frames"


def test_no_such_step_elsewhere():
    # Not a PLT stub, or x86-64 (whose PLT has CFI): the walk says why it stops.
    regs = {"pc": 0x401000, "sp": 0x7ff000, "x30": 0x402468}
    frames, why = _Stub(AARCH64, {0x401000: "memset"}).unwind(regs, 2)
    assert len(frames) == 1 and why.startswith("no unwind information for 0x401000")
    frames, why = _Stub(X86_64, {0x401000: "memset@plt"}).unwind({"rip": 0x401000, "rsp": 1}, 2)
    assert len(frames) == 1 and why.startswith("no unwind information for 0x401000")
