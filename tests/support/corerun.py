"""Run many ljgdb commands on one core in the core reader, in one process
(python3 -m ljgdb runs one command per process; its own code path is
commands.hosts.corehost.main, tested through the real command line too).

  python3 tests/support/corerun.py CORE [BINARY] [--thread N] [--sysroot DIR] < commands.json
      ->  [[output, error line], ...]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

__import__("ljgdb")  # the checkout as the package ljgdb
from ljgdb.commands import command_classes  # noqa: E402
from ljgdb.commands.base import CommandError  # noqa: E402
from ljgdb.commands.hosts.corehost import CoreHost  # noqa: E402
from ljgdb.commands.host import install  # noqa: E402


class CapturingHost(CoreHost):
    """The core reader's host, its direct writes kept (stdout is this
    program's JSON)."""

    written = []

    def write(self, text):
        self.written.append(text)


def main():
    args = sys.argv[1:]
    opts = {"--thread": "1", "--sysroot": "/"}
    for opt in opts:
        if opt in args:
            i = args.index(opt)
            opts[opt] = args[i + 1]
            del args[i:i + 2]
    core = args[0]
    binary = args[1] if len(args) > 1 else None
    host = install(CapturingHost(core, binary, thread=int(opts["--thread"]),
                                 sysroot=opts["--sysroot"]))
    cmds = {c.NAME: c for c in command_classes(with_gdb_only=False)}
    out = []
    for line in json.load(sys.stdin):
        name, _, arg = line.partition(" ")
        host.written = []
        try:
            text, err = cmds[name]().execute(arg), None
        except CommandError as e:
            text, err = e.output, str(e)
        # What a command writes before its end (lgcstat's partial report
        # before its error line) comes first, as in gdb's output.
        out.append(["".join(host.written) + (text or ""), err])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
