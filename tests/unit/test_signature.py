"""gdb_ext.stack.signature: what makes two crashes' signatures equal."""
from gdb_ext.stack.signature import crash_signature, signal_text


def test_key_names_signal_function_and_frames():
    frames = ["[builtin#ffi.meta.__index]", "app.lua:28", "app.lua:40", "app.lua:47"]
    s = crash_signature(11, "lj_cconv_ct_ct", frames)
    assert s == {"signal": "SIGSEGV", "c_frame": "lj_cconv_ct_ct",
                 "lua": ["[builtin#ffi.meta.__index]", "app.lua:28", "app.lua:40"],
                 "key": "SIGSEGV in lj_cconv_ct_ct | [builtin#ffi.meta.__index] < app.lua:28 "
                        "< app.lua:40"}


def test_only_a_crash_signal_counts():
    # SIGTRAP is a debugger's breakpoint, SIGSTOP an attach: not a crash.
    for signo in (None, 0, 5, 19, 2):
        assert crash_signature(signo, "f", ["a.lua:1"])["signal"] is None
    for signo, name in ((6, "SIGABRT"), (7, "SIGBUS"), (4, "SIGILL"), (8, "SIGFPE"),
                        (31, "SIGSYS")):
        assert crash_signature(signo, "f", [])["signal"] == name
    assert crash_signature(None, None, [])["key"] == "no signal in ?? | no Lua frame"


def test_glibc_alias_is_its_function():
    assert crash_signature(6, "__GI_kill", [])["c_frame"] == "kill"
    assert crash_signature(6, "__GI___pthread_kill", [])["c_frame"] == "__pthread_kill"
    assert crash_signature(6, "__pthread_kill_implementation", [])["c_frame"] == \
        "__pthread_kill_implementation"


def test_signal_names_as_gdb():
    assert signal_text(34) == "SIG34" and signal_text(11) == "SIGSEGV" and signal_text(0) is None


class _Frames(object):
    """A target stopped by SIGSEGV at pc, with no name for its frame there,
    whose file_address answers `place`."""

    def __init__(self, pc, place):
        from gdb_ext.target import MachineFrame
        self.frames = [MachineFrame(0, pc, None, False, lambda name: None)]
        self.place = place

    def machine_frames(self, n):
        return self.frames[:n]

    def stop_signal(self):
        return 11

    def file_address(self, addr):
        return self.place


def test_nameless_c_frame_by_file_and_address(tmp_path):
    from gdb_ext.stack.signature import thread_signature
    real = tmp_path / "libfoo.so.1.2.3"
    real.write_bytes(b"")
    link = tmp_path / "libfoo.so.1"
    link.symlink_to(real.name)
    # The file's own name (the kernel's, not the loader's link), the address in its terms.
    s = thread_signature(_Frames(0x7f0000012345, (str(link), 0x12345)), ["a.lua:1"])
    assert s["c_frame"] == "libfoo.so.1.2.3+0x12345", s
    assert s["key"] == "SIGSEGV in libfoo.so.1.2.3+0x12345 | a.lua:1"
    # No file holds it (a JIT trace's code): not known.
    assert thread_signature(_Frames(0x1000, None), [])["c_frame"] == "??"
