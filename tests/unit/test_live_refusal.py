"""The live backend's refusal lines on synthetic input (gdb_ext.backends.live):
Yama's three restricting scopes, given as the text of
/proc/sys/kernel/yama/ptrace_scope (this machine's kernel has no Yama, so
the e2e tests cannot meet them: docs/robustness.md), and qemu-user told
from its /proc/PID/exe and the ELF machine of the files it maps."""
import errno
import os
import struct

import pytest

from ljgdb.gdb_ext.backends import live

EPERM = OSError(errno.EPERM, os.strerror(errno.EPERM))


@pytest.mark.parametrize("scope, what, advice", [
    ("1\n", "only a process's ancestors may trace it",
     "run as root (or with CAP_SYS_PTRACE), or set it to 0 (sysctl kernel.yama.ptrace_scope=0)"),
    ("2\n", "only a process with CAP_SYS_PTRACE may trace",
     "run as root (or with CAP_SYS_PTRACE), or set it to 0 (sysctl kernel.yama.ptrace_scope=0)"),
    ("3\n", "no process may trace",
     "not even root, and the setting cannot be lowered until the machine restarts; what is left "
     "is a core the kernel writes (python3 -m ljgdb CORE BINARY COMMAND)"),
])
def test_yama_scopes(scope, what, advice):
    line = live.yama_refusal(4242, EPERM, scope)
    assert line == ("ptrace of process 4242 refused (Operation not permitted): "
                    "/proc/sys/kernel/yama/ptrace_scope is %s, so %s; %s"
                    % (scope.strip(), what, advice)), line


@pytest.mark.parametrize("scope", [None, "0\n", "", "7\n"])
def test_yama_not_the_reason(scope):
    """No Yama, or scope 0 (classic ptrace rules): the general line."""
    assert live.yama_refusal(4242, EPERM, scope) is None


def test_refusal_reads_the_scope_file(tmp_path, monkeypatch):
    """refusal() takes the scope from the file (here a stand-in) when no
    tracer is the reason (the pid of a process that has none: this one)."""
    f = tmp_path / "ptrace_scope"
    f.write_text("3\n")
    monkeypatch.setattr(live, "YAMA_SCOPE", str(f))
    assert live.refusal(os.getpid(), EPERM) == live.yama_refusal(os.getpid(), EPERM, "3")
    monkeypatch.setattr(live, "YAMA_SCOPE", str(tmp_path / "none"))
    assert "run as the process's user or as root" in live.refusal(os.getpid(), EPERM)


def elf(path, machine):
    """A file with just an ELF header's first 20 bytes for `machine`."""
    path.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HH", 2, machine))
    return str(path)


def test_qemu_user_is_told(tmp_path):
    qemu = elf(tmp_path / "qemu-aarch64-static", 0x3e)
    libc = elf(tmp_path / "libc.so.6", 0x3e)
    guest = elf(tmp_path / "host", 0xb7)
    maps = [(0x400000, 0x401000, "r-xp", 0, 7, guest), (0x5500000, 0x5501000, "rw-p", 0, 0, ""),
            (0x7f0000, 0x7f1000, "r-xp", 0, 8, libc), (0x7f2000, 0x7f3000, "r-xp", 0, 9, qemu)]
    line = live.emulator_refusal(77, qemu, maps, "x86_64")
    assert line.startswith("process 77 is qemu-aarch64-static (qemu-user) running the aarch64 "
                           "program %s: ptrace reads qemu's own x86_64 registers" % guest), line
    assert "gdb-multiarch" in line and "-g SOCKET" in line and "core" in line and "\n" not in line
    # Its guest not found among the files: still told, without a name.
    line = live.emulator_refusal(77, qemu, maps[1:], "x86_64")
    assert " running another machine's program: " in line, line
    # Not qemu: nothing to say.
    assert live.emulator_refusal(77, libc, maps, "x86_64") is None
