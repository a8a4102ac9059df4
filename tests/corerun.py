"""Run many ljgdb commands on one core in the core reader, in one process
(python3 -m ljgdb runs one command per process; its own code path is
commands.corehost.main, tested through the real command line too).

  python3 tests/corerun.py CORE [BINARY] [--thread N] < commands.json
      ->  [[output, error line], ...]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

__import__("ljgdb")  # the checkout as the package ljgdb
from ljgdb.commands import command_classes  # noqa: E402
from ljgdb.commands.base import CommandError  # noqa: E402
from ljgdb.commands.corehost import CoreHost  # noqa: E402
from ljgdb.commands.host import install  # noqa: E402


def main():
    args = sys.argv[1:]
    thread = 1
    if "--thread" in args:
        i = args.index("--thread")
        thread = int(args[i + 1])
        del args[i:i + 2]
    core = args[0]
    binary = args[1] if len(args) > 1 else None
    install(CoreHost(core, binary, thread=thread))
    cmds = {c.NAME: c for c in command_classes(with_gdb_only=False)}
    out = []
    for line in json.load(sys.stdin):
        name, _, arg = line.partition(" ")
        try:
            out.append([cmds[name]().execute(arg), None])
        except CommandError as e:
            out.append([e.output, str(e)])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
