"""Compiling a C source shipped with the engine (the live backend's
ptstop.c, the BPF sampler's bpfsample.bpf.c, the heap graph's graphc.c)
once, into ljgdb's cache ($XDG_CACHE_HOME/ljgdb, else ~/.cache/ljgdb),
under a name made of the source's hash and the machine, so a changed
source is built again and two versions live side by side."""
import hashlib
import os
import subprocess
import tempfile
from typing import Callable, List


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
