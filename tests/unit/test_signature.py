"""gdb_ext.stack.signature: what makes two crashes' signatures equal."""
from gdb_ext.stack.signature import crash_signature, signal_text


def test_key_names_signal_function_and_frames():
    frames = ["[builtin#ffi.meta.__index]", "app.lua:28", "app.lua:40", "app.lua:47"]
    s = crash_signature(11, "libfoo_get", frames)
    assert s == {"signal": "SIGSEGV", "c_frame": "libfoo_get",
                 "lua": ["app.lua:28", "app.lua:40", "app.lua:47"],
                 "key": "SIGSEGV in libfoo_get | app.lua:28 < app.lua:40 < app.lua:47"}
    # From the innermost Lua function's frame; only builtins: as they are.
    assert crash_signature(6, None, ["C:f", "[builtin#pcall]", "a.lua:1", "[builtin#xpcall]",
                                     "a.lua:2"])["lua"] == ["a.lua:1", "[builtin#xpcall]",
                                                            "a.lua:2"]
    assert crash_signature(6, None, ["[builtin#print]"])["lua"] == ["[builtin#print]"]


def test_only_a_crash_signal_counts():
    # SIGTRAP is a debugger's breakpoint, SIGSTOP an attach: not a crash.
    for signo in (None, 0, 5, 19, 2):
        assert crash_signature(signo, "f", ["a.lua:1"])["signal"] is None
    for signo, name in ((6, "SIGABRT"), (7, "SIGBUS"), (4, "SIGILL"), (8, "SIGFPE"),
                        (31, "SIGSYS")):
        assert crash_signature(signo, "f", [])["signal"] == name
    assert crash_signature(None, "??", [])["key"] == "no signal in ?? | no Lua frame"
    # No C frame of its own: the thread was in the VM's own code.
    assert crash_signature(6, None, ["a.lua:1"])["key"] == "SIGABRT in the VM | a.lua:1"


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

    def symbol(self, name):
        return None


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
    # No file holds it (a JIT trace's code): the VM's.
    assert thread_signature(_Frames(0x1000, None), [])["c_frame"] is None


class _Stack(object):
    """Machine frames by (name, file): files are given for nameless frames;
    LuaJIT is in /lj/libluajit.so."""

    def __init__(self, frames):
        from gdb_ext.target import MachineFrame
        self.files = {}
        self.frames = []
        for i, (name, path) in enumerate(frames):
            self.frames.append(MachineFrame(i, 0x1000 * (i + 1), name, False, lambda r: None))
            self.files[0x1000 * (i + 1)] = path

    def file_address(self, addr):
        path = "/lj/libluajit.so" if addr == 0x99 else self.files.get(addr)
        return (path, addr) if path else None

    def symbol(self, name):
        return 0x99 if name == "luaL_newstate" else None


def test_the_vm_is_folded_out_of_the_c_frame():
    """The C frame is the innermost frame that is not LuaJIT's own, where
    the VM called out to code the Lua program called; the VM's own work
    (a handler, a trace, the collector, a builtin's C) is "the VM"."""
    from gdb_ext.stack.signature import c_frame_of
    lua = [("lua_pcall", None), ("main", None)]
    cases = [
        ([("lj_BC_ADDVN", None)] + lua, None),
        ([("propagatemark", None), ("gc_onestep.isra.0", None), ("lj_gc_step", None),
          ("lj_BC_TNEW", None)] + lua, None),
        ([(None, None)] + lua, None),                              # a trace
        ([("lj_cconv_ct_ct", None), ("lj_cdata_index", None), ("lj_cf_ffi_meta___index", None),
          ("lj_BC_FUNCC", None)] + lua, None),                     # a builtin's C
        ([("__pthread_kill_implementation", None), ("raise", None), ("abort", None),
          ("lj_vm_ffi_call", None), ("lj_ff_ffi_meta___call", None)] + lua,
         "__pthread_kill_implementation"),
        ([("lj_str_new", None), ("str_fastcmp", None), ("lua_pushstring", None),
          ("my_cfunc", None), ("lj_BC_FUNCC", None)] + lua, "my_cfunc"),
        ([(None, "/usr/lib/libfoo.so"), ("lj_vm_ffi_call", None)] + lua, "libfoo.so+0x1000"),
        ([(None, "/lj/libluajit.so"), (None, "/lj/libluajit.so")] + lua, None),   # stripped
        ([("__pthread_kill_implementation", None), ("abort", None), (None, "/lj/libluajit.so"),
          (None, "/lj/libluajit.so")] + lua, "__pthread_kill_implementation"),
        ([("abort", None), (None, None), ("lj_vm_exit_interp", None)] + lua, "abort"),  # FFI in a trace
        ([("lj_str_new", None), (None, None)] + lua, None),        # a trace's helper
        ([("worker_main", None), ("start_thread", None)], "worker_main"),          # no VM
        ([], "??"),
    ]
    for frames, want in cases:
        t = _Stack(frames)
        assert c_frame_of(t, t.frames) == want, (frames, want)
