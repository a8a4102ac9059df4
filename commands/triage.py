"""python3 -m ljgdb triage: many cores grouped by their crash signature.

  python3 -m ljgdb triage [--json] [--max-size BYTES] [--tmpdir DIR]
                          [--sysroot DIR] CORE_OR_DIR...

Each core (plain, or compressed as systemd-coredump stores them: zstd, lz4,
xz; directories are searched through) is opened alone, read by the core
reader, and closed before the next: its signature is lbt's (the signal,
the innermost C frame, the innermost Lua frames with their lines:
gdb_ext.stack.signature).  Cores with the same signature make a group:
its count, its first and last time, the programs that wrote it, one
example core and that core's Lua backtrace.  A core that cannot be read
gets one line saying why, and the next is read.

  --json           one JSON document: {"cores", "groups": [{"count",
                   "signature", "first", "last", "programs", "example",
                   "backtrace"}], "unreadable": [{"path", "error"}],
                   "skipped"} (files in the directories that are no core)
  --max-size BYTES a compressed core that unpacks to more is refused
                   (default 16 GiB)
  --tmpdir DIR     where compressed cores are unpacked, one at a time
  --sysroot DIR    where the cores' files are (as the core reader takes it)

The exit status is 0 when at least one core was grouped, 1 when none
was, 2 for bad options."""
import json
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..gdb_ext.errors import LjError

USAGE = ("python3 -m ljgdb triage [--json] [--max-size BYTES] [--tmpdir DIR] [--sysroot DIR] "
         "CORE_OR_DIR...")
DEFAULT_MAX = 16 << 30          # a compressed core unpacked to more than this is refused


def parse(argv: Sequence[str]) -> Dict[str, Any]:
    """The options and paths; ValueError(line) for bad ones."""
    opts = {"json": False, "max_size": DEFAULT_MAX, "tmpdir": None, "sysroot": "/", "paths": []}
    args = list(argv)
    while args:
        a = args.pop(0)
        key, eq, val = a.partition("=")
        if a == "--json":
            opts["json"] = True
        elif key in ("--max-size", "--tmpdir", "--sysroot"):
            if not eq:
                if not args:
                    raise ValueError("%s takes a value" % key)
                val = args.pop(0)
            if key == "--max-size":
                if not val.isdigit() or int(val) < 1:
                    raise ValueError("--max-size takes a number of bytes, not '%s'" % val)
                opts["max_size"] = int(val)
            elif not os.path.isdir(val):
                raise ValueError("%s takes a directory; '%s' is not one" % (key, val))
            else:
                opts[key[2:]] = val
        elif a.startswith("-") and a != "-":
            raise ValueError("'%s' is not an option of triage" % a)
        else:
            if not os.path.exists(a):
                raise ValueError("'%s' does not exist" % a)
            opts["paths"].append(a)
    if not opts["paths"]:
        raise ValueError("name the cores, or the directories that hold them")
    return opts


def candidates(paths: Sequence[str]) -> Iterator[Tuple[str, bool]]:
    """(path, named): the files named, then each file under the
    directories named (sorted; named False: a file there that is no core
    is passed over without a word)."""
    for p in paths:
        if not os.path.isdir(p):
            yield p, True
            continue
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(files):
                yield os.path.join(root, name), False


class Group(object):
    """The cores of one signature."""

    def __init__(self, sig: Dict[str, Any], example: str, backtrace: str) -> None:
        self.sig = sig
        self.example = example
        self.backtrace = backtrace
        self.count = 0
        self.first = self.last = None
        self.programs = {}

    def add(self, when: float, program: Optional[str]) -> None:
        self.count += 1
        self.first = when if self.first is None else min(self.first, when)
        self.last = when if self.last is None else max(self.last, when)
        key = program or "?"
        self.programs[key] = self.programs.get(key, 0) + 1


def read_one(path: str, opts: Dict[str, Any], known: Any
             ) -> Tuple[Dict[str, Any], Optional[str], Optional[str]]:
    """(signature, the program's path, lbt's text unless the signature's
    key is in `known`) of one core; LjError with the reason it cannot be
    read."""
    from ..gdb_ext.backends.corestore import plain_core
    from ..gdb_ext.stack.signature import thread_signature
    from .base import CommandError
    from .hosts.corehost import CoreHost, commands
    from .host import install
    cmds = commands()
    with plain_core(path, opts["max_size"], opts["tmpdir"]) as core:
        host = install(CoreHost(core, None, {}, 1, opts["sysroot"]))
        try:
            doc = json.loads(cmds["lbt"]().execute("--json"))
            t, _ = host.target_and_layout()
            # (None: the thread that got the signal runs no Lua of this VM;
            # the signal and the C frame alone.)
            sig = doc.get("signature") or thread_signature(t, [])
            text = cmds["lbt"]().execute("") if sig["key"] not in known else None
        except CommandError as e:
            raise LjError(str(e))
        return sig, t.core.executable, text


def triage(opts: Dict[str, Any], progress: Any = None) -> Dict[str, Any]:
    """The document: {"cores", "groups": [...], "unreadable": [{"path",
    "error"}], "skipped"} (groups: most cores first)."""
    from ..gdb_ext.backends.corestore import metadata, time_text
    groups = {}
    unreadable = []
    skipped = 0
    total = 0
    for path, named in candidates(opts["paths"]):
        try:
            meta = metadata(path)
            sig, program, text = read_one(path, opts, groups)
            g = groups.get(sig["key"])
            if g is None:
                g = groups[sig["key"]] = Group(sig, path, text)
            g.add(meta["time"], program)
            total += 1
        except (LjError, OSError) as e:
            reason = str(e) if isinstance(e, LjError) else (e.strerror or str(e))
            if not named and reason.startswith("neither an ELF core"):
                skipped += 1
                continue
            unreadable.append({"path": path, "error": reason})
            total += 1
        if progress is not None:
            progress(total, len(groups), len(unreadable))
    out = []
    for g in sorted(groups.values(), key=lambda g: (-g.count, g.first)):
        out.append({"count": g.count, "signature": g.sig, "first": time_text(g.first),
                    "last": time_text(g.last), "programs": g.programs,
                    "example": g.example, "backtrace": g.backtrace})
    return {"cores": total, "groups": out, "unreadable": unreadable, "skipped": skipped}


def lines(doc: Dict[str, Any]) -> List[str]:
    n, ng, nu = doc["cores"], len(doc["groups"]), len(doc["unreadable"])
    out = ["%d core%s: %d signature%s, %d unreadable%s" % (
        n, "" if n == 1 else "s", ng, "" if ng == 1 else "s", nu,
        "; %d other file%s passed over" % (doc["skipped"], "" if doc["skipped"] == 1 else "s")
        if doc["skipped"] else "")]
    for i, g in enumerate(doc["groups"], 1):
        out.append("")
        out.append("#%d  %d core%s  %s" % (
            i, g["count"], "" if g["count"] == 1 else "s", g["signature"]["key"]))
        out.append("    first %s, last %s" % (g["first"], g["last"]))
        out.append("    programs: " + ", ".join("%s (%d)" % (p, c) for p, c in sorted(
            g["programs"].items(), key=lambda pc: (-pc[1], pc[0]))))
        out.append("    example: %s" % g["example"])
        out.extend("    " + line for line in (g["backtrace"] or "").rstrip("\n").split("\n"))
    if doc["unreadable"]:
        out.append("")
        out.extend("unreadable: %s: %s" % (u["path"], u["error"]) for u in doc["unreadable"])
    return out


def main(argv: Sequence[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write("usage: %s\n\n%s\n" % (USAGE, __doc__.split("\n\n", 2)[2]))
        return 0
    try:
        opts = parse(argv)
    except ValueError as e:
        sys.stderr.write("ljgdb triage: %s; usage: %s\n" % (e, USAGE))
        return 2
    tty = sys.stderr.isatty()

    def progress(n, ng, nu):
        sys.stderr.write("\rtriage: %d cores read, %d signatures, %d unreadable" % (n, ng, nu))
        sys.stderr.flush()
    doc = triage(opts, progress if tty else None)
    if tty:
        sys.stderr.write("\n")
    from ..gdb_ext.backends import debuginfod
    for note in debuginfod.notes():
        sys.stderr.write("ljgdb triage: %s\n" % note)
    if opts["json"]:
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(lines(doc)) + "\n")
    return 0 if doc["groups"] else 1
