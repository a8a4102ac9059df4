"""Which distribution package ships a file, for the hint about its debug
symbols (Debian names them <package>-dbgsym)."""
from typing import Optional
import os
import subprocess


def owning_package(path: str) -> Optional[str]:
    """The Debian package that ships `path` (as dpkg-query -S says, tried
    with the path as given and with its symlinks resolved), or None where
    there is no dpkg or no package owns it."""
    tried = []
    for p in (path, os.path.realpath(path)):
        if p in tried:
            continue
        tried.append(p)
        try:
            out = subprocess.run(["dpkg-query", "-S", p], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                 timeout=20).stdout.decode("utf-8", "replace")
        except (OSError, subprocess.SubprocessError):
            return None
        for line in out.splitlines():
            # libluajit-5.1-2:amd64: /usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2.1.0
            pkgs, sep, f = line.partition(": ")
            if sep and f.strip() == p:
                return pkgs.split(",")[0].strip().split(":")[0]
    return None
