"""python3 -m ljgdb: the core reader (commands.corehost, python3 -m ljgdb
CORE COMMAND ...) or, with --pid among the options before the command, the
same commands on a running process (commands.livehost); python3 -m ljgdb
dump --pid PID: every thread's Lua backtrace (commands.dump).  Only the
modules the chosen path needs are imported."""
import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["dump"]:
        from .dump import main as dump
        return dump(argv[1:])
    i = 0
    while i < len(argv) and argv[i].startswith("--") and argv[i] not in ("--help",):
        if argv[i] == "--pid" or argv[i].startswith("--pid="):
            from .livehost import main as live
            return live(argv)
        i += 1 if "=" in argv[i] else 2
    from .corehost import main as core
    return core(argv)
