"""python3 -m ljgdb: the core reader (commands.hosts.corehost, python3 -m ljgdb
CORE COMMAND ...) or, with --pid among the options before the command, the
same commands on a running process (commands.hosts.livehost); python3 -m ljgdb
dump --pid PID: every thread's Lua backtrace (commands.dump); record and
top --pid PID: a sampling profiler (commands.record); triage CORE_OR_DIR...:
many cores grouped by crash signature (commands.triage); dap: a Debug
Adapter Protocol server for an editor (commands.hosts.dap).  Only the
modules the chosen path needs are imported."""
import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["dump"]:
        from .dump import main as dump
        return dump(argv[1:])
    if argv[:1] == ["record"]:
        from .record import record_main
        return record_main(argv[1:])
    if argv[:1] == ["triage"]:
        from .triage import main as triage
        return triage(argv[1:])
    if argv[:1] == ["top"]:
        from .record import top_main
        return top_main(argv[1:])
    if argv[:1] == ["dap"]:
        from .hosts.dap import main as dap
        return dap(argv[1:])
    i = 0
    while i < len(argv) and argv[i].startswith("--") and argv[i] not in ("--help",):
        if argv[i] == "--pid" or argv[i].startswith("--pid="):
            from .hosts.livehost import main as live
            return live(argv)
        i += 1 if "=" in argv[i] else 2
    from .hosts.corehost import main as core
    return core(argv)


def console():
    """The installed `ljgdb` script: python3 -m ljgdb's exit status."""
    sys.exit(main())
