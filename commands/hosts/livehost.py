"""ljgdb's commands on a running process without gdb.

  python3 -m ljgdb [--set NAME=VALUE] [--thread N] --pid PID COMMAND [ARGS...]

The process is held (every thread stopped by ptrace) only while the command
reads, then let go as it was: nothing written to it, no signal of ours
pending, no thread left stopped or traced (gdb_ext.backends.live).  The
output is what the command prints in gdb attached to the same process at
the same moment; where gdb takes an expression, give an address, as to the
core reader (commands.hosts.corehost)."""
import sys

from ...gdb_ext.errors import LjError
from .corehost import CoreHost, commands, run_command, settings_text, take_options, usage_text
from ..host import install

USAGE = "python3 -m ljgdb [--set NAME=VALUE] [--thread N] [--frame N] --pid PID COMMAND [ARGS...]"
OPTIONS = ("--set", "--thread", "--frame", "--pid")


class LiveHost(CoreHost):
    """The core reader's host over a live process (a LiveProcess opened
    before the command, held by stopped() while it runs)."""

    name = "live"
    debug_hint = "--set debug=on (before --pid) shows a traceback"
    reader = "ljgdb --pid"

    def __init__(self, process, settings=None, thread=1):
        super().__init__("/proc/%d" % process.pid, settings=settings, thread=thread)
        self.process = process

    def target_and_layout(self):
        if self._lay is None:
            from ...gdb_ext.backends.live import open_live_target
            from ...gdb_ext.layouts.layout import Layout
            self._check_thread()
            target = open_live_target(self.process, self.thread - 1)
            self._lay = Layout(target)
            self._target = target
        return self._target, self._lay

    def _check_thread(self):
        n = len(self.process.threads)
        if not 1 <= self.thread <= n:
            raise LjError("process %d has %d thread%s: --thread takes 1 to %d"
                          % (self.process.pid, n, "" if n == 1 else "s", n))

    def check_environment(self):
        return self.target_and_layout()

    def check_memory(self):
        from ...gdb_ext.backends.live import LiveTarget
        self._check_thread()
        return LiveTarget(self.process, thread=self.thread - 1)

    def truncation_note(self):
        return ""


def main(argv):
    """python3 -m ljgdb ... --pid PID COMMAND [ARGS...]; the exit status."""
    argv = list(argv)
    cmds = commands()
    try:
        opts = take_options(argv, OPTIONS)
    except ValueError as e:
        return _fail(str(e))
    if opts["pid"] is None:
        return _fail("give --pid PID before the command")
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write("usage: %s\n\n%s\n\nThe process is stopped while the command reads, "
                         "then left running as it was.  Options before the command: --set "
                         "NAME=VALUE (%s); --thread N, the thread to look at (gdb's numbers: 1 "
                         "is the main thread); --frame N, the Lua frame lframe, llocals, "
                         "lprint and llist start from (lbt's numbers).\n"
                         % (USAGE, usage_text(cmds, "--pid PID COMMAND --help tells more"),
                            settings_text()))
        return 0 if argv else 2
    name = argv.pop(0)
    if name not in cmds:
        return _fail("'%s' is not a command (%s)" % (name, ", ".join(cmds)))
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write((cmds[name].__doc__ or "").replace("(gdb) ", "$ ") + "\n")
        return 0
    from ...gdb_ext.backends.live import open_process
    try:
        process = open_process(opts["pid"], luajit=getattr(cmds[name], "NEEDS_LUAJIT", True))
    except LjError as e:
        sys.stderr.write("ljgdb: %s\n" % e)
        return 1
    host = install(LiveHost(process, opts["settings"], opts["thread"]))
    host.start_frame = opts["frame"]
    try:
        with process.stopped():
            status = run_command(cmds, name, argv)
    except LjError as e:
        sys.stderr.write("ljgdb: %s\n" % e)
        return 1
    finally:
        process.close()
    if opts["settings"].get("debug"):
        sys.stderr.write("ljgdb: process %d held for %.3f s\n" % (process.pid, process.held_seconds))
    return status


def _fail(line):
    sys.stderr.write("ljgdb: %s; usage: %s\n" % (line, USAGE))
    return 1
