"""ljgdb-gdbinit: print the gdb command that loads this installed ljgdb,
or add it to ~/.gdbinit.

  ljgdb-gdbinit            print `source .../ljgdb/gdbinit.py`
  ljgdb-gdbinit --append   add that line to ~/.gdbinit unless it is there
"""
import os
import sys


def source_line():
    return "source %s" % os.path.join(os.path.dirname(os.path.realpath(__file__)), "gdbinit.py")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    line = source_line()
    if not argv:
        print(line)
        return 0
    if argv != ["--append"]:
        sys.stderr.write("usage: ljgdb-gdbinit [--append]\n")
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
