"""ljgdb-gdbinit: print the gdb command that loads this installed ljgdb,
add it to ~/.gdbinit, or install it as gdb auto-load scripts.

  ljgdb-gdbinit            print `source .../ljgdb/gdbinit.py`
  ljgdb-gdbinit --append   add that line to ~/.gdbinit unless it is there
  ljgdb-gdbinit --auto-load [--dir DIR] [OBJFILE ...]
                           write DIR/<OBJFILE's real path>-gdb.py for each
                           OBJFILE (default: the system's libluajit and
                           luajit), so that gdb on any program that loads
                           it has ljgdb's commands with no `source` line;
                           DIR: gdb's auto-load directory (default its data
                           directory's auto-load/, as Debian's python3-dbg
                           ships python-gdb.py)
  ljgdb-gdbinit --uninstall [--dir DIR] [OBJFILE ...]
                           remove what --auto-load wrote
"""
import glob
import os
import re
import shutil
import subprocess
import sys

USAGE = ("usage: ljgdb-gdbinit [--append | --auto-load [--dir DIR] [OBJFILE ...] | "
         "--uninstall [--dir DIR] [OBJFILE ...]]")
# The first line of every script --auto-load writes: --uninstall removes
# only files that start with it.
MARK = "# ljgdb: written by ljgdb-gdbinit --auto-load"
LIB_NAMES = ("libluajit-5.1.so.2",)
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/lib")


# An auto-load script: the loader run as `source` would run it, with its
# own __file__ (a `source` inside an auto-load script would keep the
# script's).
AUTO_LOAD = """%s for %s
_ljgdb_loader = %r
with open(_ljgdb_loader) as _f:
    exec(compile(_f.read(), _ljgdb_loader, "exec"),
         {"__name__": "ljgdb_auto_load", "__file__": _ljgdb_loader})
"""


def loader_path():
    """The file that loads ljgdb in gdb: the installed package's gdbinit.py,
    or, run from a checkout (this file is pkg/install.py), its ljgdb.py."""
    here = os.path.dirname(os.path.realpath(__file__))
    checkout = os.path.join(os.path.dirname(here), "ljgdb.py")
    if os.path.basename(here) == "pkg" and os.path.isfile(checkout):
        return checkout
    return os.path.join(here, "gdbinit.py")


def source_line():
    return "source %s" % loader_path()


def _gdb_show(what, default):
    """A gdb setting's text (show data-directory ...), default without gdb."""
    try:
        out = subprocess.run(["gdb", "-nx", "-batch", "-ex", "show " + what],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             timeout=60).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return default
    m = re.search(r'"([^"]*)"|is (\S+)\.$', out.strip())
    return (m.group(1) or m.group(2)) if m else default


def auto_load_dir():
    """gdb's own auto-load directory: its data directory's auto-load/."""
    return os.path.join(_gdb_show("data-directory", "/usr/share/gdb"), "auto-load")


def default_objfiles():
    """The system's LuaJIT: its libluajit and its luajit, real paths."""
    found = []
    for d in LIB_DIRS:
        for name in LIB_NAMES:
            for p in glob.glob(os.path.join(d, name)):
                found.append(os.path.realpath(p))
    exe = shutil.which("luajit")
    if exe:
        found.append(os.path.realpath(exe))
    return sorted(set(found))


def script_path(directory, objfile):
    """Where gdb looks for objfile's auto-load script under directory."""
    return os.path.join(directory, os.path.realpath(objfile).lstrip("/") + "-gdb.py")


def safe_path_line(directory):
    """None when gdb's auto-load safe path holds directory; else the one
    line that says what to add."""
    safe = _gdb_show("auto-load safe-path", "$debugdir:$datadir/auto-load")
    datadir = _gdb_show("data-directory", "/usr/share/gdb")
    debugdir = _gdb_show("debug-file-directory", "/usr/lib/debug")
    real = os.path.realpath(directory)
    for entry in safe.split(":"):
        entry = entry.replace("$datadir", datadir).replace("$debugdir", debugdir)
        if entry == "/" or real == os.path.realpath(entry) or \
                real.startswith(os.path.realpath(entry).rstrip("/") + "/"):
            return None
    return ("gdb runs auto-load scripts only from its safe path (now %s): add the line "
            "'add-auto-load-safe-path %s' to ~/.gdbinit" % (safe, directory))


def _options(argv):
    """(directory or None, objfiles) of --auto-load's and --uninstall's
    arguments; ValueError with what is wrong."""
    directory, objfiles = None, []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--dir":
            if not args:
                raise ValueError("--dir needs a directory")
            directory = args.pop(0)
        elif a.startswith("-"):
            raise ValueError("'%s' is not an option here" % a)
        elif not os.path.isfile(a):
            raise ValueError("no file %s" % a)
        else:
            objfiles.append(a)
    return directory, objfiles


def install_auto_load(argv, remove=False):
    try:
        directory, objfiles = _options(argv)
    except ValueError as e:
        sys.stderr.write("ljgdb-gdbinit: %s; %s\n" % (e, USAGE))
        return 2
    directory = directory or auto_load_dir()
    objfiles = objfiles or default_objfiles()
    if not objfiles:
        sys.stderr.write("ljgdb-gdbinit: no libluajit-5.1.so.2 nor luajit on this system: name "
                         "the files that hold LuaJIT (ljgdb-gdbinit --auto-load FILE ...)\n")
        return 1
    for obj in objfiles:
        path = script_path(directory, obj)
        if remove:
            if os.path.exists(path):
                with open(path) as f:
                    if not f.readline().startswith(MARK):
                        sys.stderr.write("ljgdb-gdbinit: %s was not written by ljgdb-gdbinit: "
                                         "left alone\n" % path)
                        continue
                os.unlink(path)
                print("removed %s" % path)
            continue
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(AUTO_LOAD % (MARK, os.path.realpath(obj), loader_path()))
        except OSError as e:
            sys.stderr.write("ljgdb-gdbinit: cannot write %s: %s (gdb's directory needs root; "
                             "or give --dir DIR)\n" % (path, e.strerror or e))
            return 1
        print("wrote %s" % path)
    if not remove:
        line = safe_path_line(directory)
        if line:
            print(line)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    line = source_line()
    if not argv:
        print(line)
        return 0
    if argv[0] in ("--auto-load", "--uninstall"):
        return install_auto_load(argv[1:], remove=argv[0] == "--uninstall")
    if argv != ["--append"]:
        sys.stderr.write(USAGE + "\n")
        return 2
    path = os.path.join(os.path.expanduser("~"), ".gdbinit")
    text = open(path).read() if os.path.exists(path) else ""
    if line in text.splitlines():
        print("%s already has: %s" % (path, line))
        return 0
    with open(path, "a") as f:
        if text and not text.endswith("\n"):
            f.write("\n")
        f.write(line + "\n")
    print("added to %s: %s" % (path, line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
