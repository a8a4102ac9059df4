"""gdb_ext.backends.corestore on small files: what a stored core's name
says, which files are cores, and the unpacking's limit."""
import lzma
import os

import pytest

from gdb_ext.backends.corestore import kind_of, metadata, plain_core
from gdb_ext.errors import LjError

CORE_HEAD = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x04\x00" + b"\0" * 46


def test_systemd_name(tmp_path):
    # systemd-coredump escapes a dot in the program's name as \x2e.
    p = tmp_path / "core.nginx\\x2eworker.33.0123456789abcdef0123456789abcdef.4242.1764142800500000.zst"
    p.write_bytes(b"")
    assert metadata(str(p)) == {"time": 1764142800.5, "comm": "nginx.worker", "uid": 33,
                                "boot_id": "0123456789abcdef0123456789abcdef", "pid": 4242}
    other = tmp_path / "core"
    other.write_bytes(b"")
    os.utime(str(other), (1000, 2000))
    assert metadata(str(other)) == {"time": 2000}


def test_kinds(tmp_path):
    files = {"core": CORE_HEAD, "exe": CORE_HEAD[:16] + b"\x02\x00" + CORE_HEAD[18:],
             "xz": lzma.compress(CORE_HEAD), "zst": b"\x28\xb5\x2f\xfd" + b"\0" * 8,
             "lz4": b"\x04\x22\x4d\x18" + b"\0" * 8, "text": b"hello\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert {n: kind_of(str(tmp_path / n)) for n in files} == {
        "core": "core", "exe": None, "xz": "xz", "zst": "zstd", "lz4": "lz4", "text": None}


def test_unpacked_then_deleted_and_bounded(tmp_path):
    p = tmp_path / "c.xz"
    p.write_bytes(lzma.compress(CORE_HEAD + b"\0" * 3000))
    with plain_core(str(p), 1 << 20, str(tmp_path)) as core:
        with open(core, "rb") as f:
            assert f.read() == CORE_HEAD + b"\0" * 3000
    assert not os.path.exists(core)
    with pytest.raises(LjError, match="unpacks to more than 1000 bytes"):
        with plain_core(str(p), 1000, str(tmp_path)):
            pass
    assert sorted(os.listdir(str(tmp_path))) == ["c.xz"]       # (nothing left behind)
    q = tmp_path / "bad.xz"
    q.write_bytes(lzma.compress(b"not a core"))
    with pytest.raises(LjError, match="its xz content is not an ELF core"):
        with plain_core(str(q), 1 << 20, str(tmp_path)):
            pass
