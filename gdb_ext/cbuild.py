"""Compiling a C source shipped with the engine (the live backend's
ptstop.c, the BPF sampler's bpfsample.bpf.c, the heap walk's walkc.c and
the heap graph's graphc.c, the thread scan's threadc.c)
once, into ljgdb's cache ($XDG_CACHE_HOME/ljgdb, else ~/.cache/ljgdb),
under a name made of the source's hash and the machine, so a changed
source is built again and two versions live side by side."""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from array import array
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .errors import FaultError


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ljgdb")


def built_name(source: str, stem: str, suffix: str) -> str:
    """STEM-HASH-MACHINE.SUFFIX of source's content."""
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    return "%s-%s-%s.%s" % (stem, digest, os.uname().machine, suffix)


def build(source: str, dest: str, command: Callable[[str], List[str]]) -> str:
    """dest (a path built_name gave), compiled from source unless it is
    there: command(output path) is the compiler's command line.  The output
    is written under a temporary name and renamed (a concurrent build wrote
    the same bytes).  OSError or CalledProcessError when it cannot be."""
    if os.path.exists(dest):
        return dest
    d = os.path.dirname(dest)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=os.path.splitext(dest)[1], dir=d)
    os.close(fd)
    try:
        subprocess.run(command(tmp), check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.rename(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def build_shared(source: str, stem: str, dest_dir: str) -> str:
    """A shared library compiled from the C file source into dest_dir with
    the system's compiler ($CC, cc, gcc or clang); OSError or
    CalledProcessError when it cannot be."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang")
               if c and shutil.which(c)), "cc")
    return build(source, os.path.join(dest_dir, built_name(source, stem, "so")),
                 lambda out: [cc, "-O2", "-shared", "-fPIC", "-o", out, source])


def load_shared(source: str, stem: str, what: str,
                dest_dir: Optional[str] = None) -> Tuple[Optional[ctypes.CDLL], str]:
    """(the library, "") or (None, why not, naming `what`): the copy pip
    built beside source, else one built from it into dest_dir (ljgdb's
    cache)."""
    try:
        beside = os.path.join(os.path.dirname(source), built_name(source, stem, "so"))
        path = beside if os.path.exists(beside) else \
            build_shared(source, stem, dest_dir or cache_dir())
        return ctypes.CDLL(path), ""
    except FileNotFoundError as e:
        if e.filename == source:
            return None, "no source of %s (%s)" % (what, source)
        return None, "no C compiler (%s) to build %s" % (e.filename or "cc", what)
    except (OSError, subprocess.CalledProcessError) as e:
        why = e.stderr.decode(errors="replace").strip().splitlines()[:1] \
            if isinstance(e, subprocess.CalledProcessError) else [str(e)]
        return None, "%s could not be built (%s)" % (what, why[0] if why else e)


class CHelper(object):
    """One C helper of the engine with ctypes signatures: built at first
    use (or found beside its source when pip built it), loaded once.
    env: the variable that asks for the Python path instead (=python);
    signatures(): {function: (result type, [argument types])}."""

    def __init__(self, source: str, stem: str, what: str, env: str,
                 signatures: Callable[[], Dict[str, Tuple[Any, List[Any]]]]) -> None:
        self.source, self.stem, self.what, self.env = source, stem, what, env
        self.signatures = signatures
        self._loaded = None         # (the library or None, why not)

    def build(self, dest_dir: str) -> str:
        """Compile the source into dest_dir; OSError or CalledProcessError
        when it cannot be."""
        return build_shared(self.source, self.stem, dest_dir)

    def load(self) -> Tuple[Optional[ctypes.CDLL], str]:
        """(the library, "") or (None, why the work is done in Python)."""
        if os.environ.get(self.env) == "python":
            return None, "%s=python" % self.env
        if self._loaded is None:
            lib, why = load_shared(self.source, self.stem, self.what)
            if lib is not None:
                for name, (res, args) in self.signatures().items():
                    f = getattr(lib, name)
                    f.restype, f.argtypes = res, args
            self._loaded = (lib, why)
        return self._loaded


# The arrays the C helpers fill and read (array.array of C numbers).
def words(ptr: Optional[int], count: int, code: str = "Q") -> array:
    """count numbers of type code copied from C memory at ptr."""
    out = array(code)
    if count:
        out.frombytes(ctypes.string_at(ptr, count * out.itemsize))
    return out


def zeros(code: str, count: int) -> array:
    return array(code, [0]) * count


class _PyBuffer(ctypes.Structure):
    """Py_buffer (the buffer protocol's view), to find where a read-only
    buffer (a core's mmap) holds its bytes."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


def buffer_address(buf: Any) -> int:
    """Where the bytes of buf (bytes, or a memoryview of them or of an
    mmap) are; buf must be kept alive while they are used."""
    if isinstance(buf, bytes):
        return ctypes.cast(buf, ctypes.c_void_p).value
    view = _PyBuffer()
    api = ctypes.pythonapi
    if api.PyObject_GetBuffer(ctypes.py_object(buf), ctypes.byref(view), 0) != 0:
        raise ValueError("no buffer")
    try:
        return view.buf
    finally:
        api.PyBuffer_Release(ctypes.byref(view))


def address_of(a: array) -> Optional[int]:
    """The address of an array's first item (None when it is empty)."""
    return a.buffer_info()[0] if len(a) else None


def feed_runs(read: Callable[[int, int], bytes], runs: Sequence[int],
              feed: Callable[[int, bytes, int], int], peek: Callable[[Any], int],
              skip: Callable[[], None]) -> None:
    """Read the runs a C helper planned (three words each: first address,
    length, requests in it) and feed each one's bytes to it; a run that
    cannot be read whole is read a request at a time (peek fills the next
    waiting request's address and length), and a request that cannot be
    read is passed over (skip).  feed(base, data, length): the requests
    it decoded."""
    al = (ctypes.c_uint64 * 2)()
    for r in range(len(runs) // 3):
        base, length, count = runs[3 * r], runs[3 * r + 1], runs[3 * r + 2]
        try:
            data = read(base, length)
        except FaultError:
            data = None
        if data is not None:
            count -= feed(base, data, length)
        while count > 0 and peek(al):               # a request at a time
            try:
                data = read(al[0], al[1])
            except FaultError:
                skip()
                count -= 1
                continue
            count -= max(feed(al[0], data, al[1]), 1)
