"""The BPF programs loaded in the kernel, read through libbpf (the test's
own view, not ljgdb's): which of record's BPF sampler's programs exist."""
import ctypes
import errno

NAME = b"ljgdb_sample"      # (the program's function in bpfsample.bpf.c)


def _lib():
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    lib.bpf_prog_get_next_id.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32)]
    lib.bpf_prog_get_fd_by_id.argtypes = [ctypes.c_uint32]
    lib.bpf_obj_get_info_by_fd.argtypes = [ctypes.c_int, ctypes.c_void_p,
                                           ctypes.POINTER(ctypes.c_uint32)]
    return lib


def sampler_programs():
    """The ids of the loaded BPF programs named NAME (struct bpf_prog_info:
    the name is 16 bytes at offset 64)."""
    import os
    lib = _lib()
    out = set()
    cur = ctypes.c_uint32(0)
    while lib.bpf_prog_get_next_id(cur.value, ctypes.byref(cur)) == 0:
        fd = lib.bpf_prog_get_fd_by_id(cur.value)
        if fd < 0:
            if ctypes.get_errno() == errno.ENOENT:
                continue            # (freed since it was listed)
            raise OSError(ctypes.get_errno(), "bpf_prog_get_fd_by_id")
        try:
            info = ctypes.create_string_buffer(256)
            n = ctypes.c_uint32(256)
            if lib.bpf_obj_get_info_by_fd(fd, info, ctypes.byref(n)) == 0 and \
                    info.raw[64:80].split(b"\0")[0] == NAME:
                out.add(cur.value)
        finally:
            os.close(fd)
    return out


def program_fdinfos(pid):
    """The /proc/PID/fdinfo text of each BPF program process pid holds a
    file descriptor of (none when it holds none or is gone)."""
    import os
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return
    for fd in fds:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "anon_inode:bpf-prog":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                text = f.read()
        except OSError:
            continue
        yield text


def programs_of(pid):
    """The ids of the BPF programs process pid holds a file descriptor of
    (fdinfo's prog_id), empty when it holds none or is gone."""
    import re
    out = set()
    for text in program_fdinfos(pid):
        m = re.search(r"^prog_id:\s+(\d+)", text, re.M)
        if m:
            out.add(int(m.group(1)))
    return out


def bpf_why():
    """None where record's BPF sampler can serve on this machine, else why
    not (ljgdb's own check: it compiles and loads the program once)."""
    from gdb_ext.backends.bpfsample import available
    ok, why = available()
    return None if ok else why
