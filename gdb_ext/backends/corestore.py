"""Cores as machines store them: plain ELF cores, and systemd-coredump's
store (/var/lib/systemd/coredump/core.COMM.UID.BOOT_ID.PID.USEC.zst),
whose cores are compressed with zstd (its default), lz4 or xz.

A compressed core is unpacked, as a stream, into a temporary file, and
refused once it grows past a size limit (a core is as big as the process
was: the limit keeps a disk from filling); the core reader then reads the
temporary file as any core, and it is deleted after.  xz is read with
Python's own lzma; zstd and lz4 with the `zstandard` and `lz4` modules
where they are installed, else with the `zstd` and `lz4` programs.

What coredumpctl shows of a stored core (the program's name, its pid, the
user, the boot, the time) is in the file's name; the signal and the
program's path are in the core's notes (the core reader reads them)."""
import contextlib
import datetime
import lzma
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Dict, IO, Iterator, Optional

from ..errors import LjError

# The first bytes of each compressed format, and of an ELF file.
MAGIC = ((b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz"), (b"\x04\x22\x4d\x18", "lz4"))
ELF = b"\x7fELF"
ET_CORE = 4
CHUNK = 1 << 20
# systemd-coredump's file name (coredump.c: core.%s.%s.%s.%s.%s, then the
# compression's suffix): the program's name (comm, with its dots and
# unusual bytes escaped), uid, boot id, pid, and the time in microseconds.
SYSTEMD_NAME = re.compile(r"^core\.(?P<comm>.+)\.(?P<uid>\d+)\.(?P<boot_id>[0-9a-f]{32})\."
                          r"(?P<pid>\d+)\.(?P<usec>\d+)(?:\.(?P<ext>zst|lz4|xz))?$")


def kind_of(path: str) -> Optional[str]:
    """"core" for an ELF core, "zstd", "xz" or "lz4" for a compressed file
    (a core, as far as the first bytes tell), None for anything else;
    OSError when it cannot be read."""
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] == ELF:
        return "core" if len(head) >= 18 and int.from_bytes(head[16:18], "little") == ET_CORE \
            else None
    for magic, name in MAGIC:
        if head.startswith(magic):
            return name
    return None


def metadata(path: str) -> Dict[str, Any]:
    """What the file's name and its place say: {"time" (seconds since the
    epoch: systemd's from the name, else the file's modification time),
    and from a systemd-coredump name "comm", "uid", "boot_id", "pid"}."""
    m = SYSTEMD_NAME.match(os.path.basename(path))
    if m is None:
        return {"time": os.stat(path).st_mtime}
    comm = re.sub(r"\\x([0-9a-f]{2})", lambda e: chr(int(e.group(1), 16)), m.group("comm"))
    return {"time": int(m.group("usec")) / 1e6, "comm": comm, "uid": int(m.group("uid")),
            "boot_id": m.group("boot_id"), "pid": int(m.group("pid"))}


def time_text(t: float) -> str:
    """A time as UTC, to the second (2026-11-26 07:40:01 UTC)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


@contextlib.contextmanager
def plain_core(path: str, limit: int, tmpdir: Optional[str] = None) -> Iterator[str]:
    """The path of path's core to read: path itself when it is not
    compressed, else a temporary file (under tmpdir) it is unpacked into,
    deleted on leaving.  LjError when it is not a core, cannot be
    unpacked, or unpacks to more than `limit` bytes."""
    try:
        kind = kind_of(path)
    except OSError as e:
        raise LjError("cannot read it: %s" % (e.strerror or e))
    if kind is None:
        raise LjError("neither an ELF core nor a zstd, lz4 or xz file")
    if kind == "core":
        yield path
        return
    fd, tmp = tempfile.mkstemp(prefix="ljgdb-core-", dir=tmpdir)
    try:
        with os.fdopen(fd, "wb") as out:
            _unpack(kind, path, out, limit)
        if kind_of(tmp) != "core":
            raise LjError("its %s content is not an ELF core" % kind)
        yield tmp
    finally:
        os.unlink(tmp)


def _unpack(kind: str, path: str, out: IO[bytes], limit: int) -> None:
    module = {"xz": "lzma", "zstd": "zstandard", "lz4": "lz4.frame"}[kind]
    try:
        if kind == "xz":
            reader = lzma.open(path, "rb")
        elif kind == "zstd":
            import zstandard
            reader = zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True)
        else:
            import lz4.frame
            reader = lz4.frame.open(path, "rb")
    except ImportError:
        return _unpack_with_program(kind, module, path, out, limit)
    try:
        with reader:
            _copy(reader, out, limit, kind)
    except (lzma.LZMAError, EOFError, RuntimeError, ValueError) as e:
        raise LjError("its %s data is damaged: %s" % (kind, e))


def _unpack_with_program(kind: str, module: str, path: str, out: IO[bytes],
                         limit: int) -> None:
    program = shutil.which(kind)
    if program is None:
        raise LjError("it is %s-compressed, and neither Python's %s module nor the %s program "
                      "is here (pip install %s, or apt install %s)"
                      % (kind, module.split(".")[0], kind, module.split(".")[0], kind))
    p = subprocess.Popen([program, "-dc", path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        _copy(p.stdout, out, limit, kind)
    except BaseException:
        p.kill()
        raise
    finally:
        p.stdout.close()
        err = p.stderr.read().decode("utf-8", "replace").strip().splitlines()
        p.stderr.close()
        code = p.wait()
    if code != 0:
        raise LjError("%s -d failed: %s" % (kind, err[-1] if err else "exit status %d" % code))


def _copy(reader: IO[bytes], out: IO[bytes], limit: int, kind: str) -> None:
    n = 0
    while True:
        chunk = reader.read(CHUNK)
        if not chunk:
            return
        n += len(chunk)
        if n > limit:
            raise LjError("it unpacks to more than %d bytes (the limit: --max-size)" % limit)
        out.write(chunk)
