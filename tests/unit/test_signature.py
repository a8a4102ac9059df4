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
