"""A debuginfod client for the core reader and the live backend: the debug
file of a build-id from the servers DEBUGINFOD_URLS names, kept where
elfutils' own client keeps it, so that gdb, the debuginfod-find program
and ljgdb share one cache:

  $DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client, else
  ~/.cache/debuginfod_client;  then BUILD_ID/debuginfo

A file already there is used without asking.  Otherwise each server is
asked in turn (GET URL/buildid/BUILD_ID/debuginfo, DEBUGINFOD_TIMEOUT
seconds, 90 by default, as elfutils waits) and the first answer is
written there (through a temporary file, renamed once whole).  A server
that is down, or does not know the build-id, is noted (failures: the
host prints them, one line each) and the reader goes on without the file.
Nothing is asked when DEBUGINFOD_URLS is unset or empty."""
import os
import tempfile
from typing import Dict, List, Optional, Tuple

# (build-id, what) -> why it could not be fetched (asked once a process).
failures: Dict[Tuple[str, str], str] = {}
# What a server gives for a build-id, and how a note names it.
WHAT = {"debuginfo": "debug file", "executable": "file"}


def urls() -> List[str]:
    return (os.environ.get("DEBUGINFOD_URLS") or "").split()


def cache_root() -> str:
    got = os.environ.get("DEBUGINFOD_CACHE_PATH")
    if got:
        return got
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "debuginfod_client")


def _timeout() -> float:
    try:
        return float(os.environ.get("DEBUGINFOD_TIMEOUT") or 90)
    except ValueError:
        return 90.0


def debuginfo(build_id: str) -> Optional[str]:
    """The path of build_id's debug file in the cache, fetched first when
    it is not there; None when no server gave it (failures says why)."""
    return fetch(build_id, "debuginfo")


def executable(build_id: str) -> Optional[str]:
    """The same for the file itself (a program or library a core names
    that is not on this machine)."""
    return fetch(build_id, "executable")


def fetch(build_id: str, what: str) -> Optional[str]:
    servers = urls()
    if not build_id or not servers:
        return None
    path = os.path.join(cache_root(), build_id, what)
    if os.path.isfile(path) and os.path.getsize(path) > 0:
        return path
    if (build_id, what) in failures:
        return None
    # (imported here: urllib takes 40 ms to import, and every core reader
    # and ljgdb.py in gdb would pay it at each start)
    import urllib.error
    why = []
    for url in servers:
        try:
            _get("%s/buildid/%s/%s" % (url.rstrip("/"), build_id, what), path)
            return path
        except urllib.error.HTTPError as e:
            why.append("%s: %s %s" % (url, e.code, e.reason))
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
            why.append("%s: %s" % (url, reason))
    failures[(build_id, what)] = "; ".join(why)
    return None


def _get(url: str, path: str) -> None:
    import urllib.request
    with urllib.request.urlopen(url, timeout=_timeout()) as r:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".debuginfo.")
        try:
            with os.fdopen(fd, "wb") as f:
                while True:
                    chunk = r.read(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


def notes() -> List[str]:
    """One line for each file no server gave."""
    return ["debuginfod: no %s for build-id %s (%s); going on without it" % (WHAT[k], b, w)
            for (b, k), w in sorted(failures.items())]
