"""The core reader: ljgdb's commands on a core file without gdb.

  python3 -m ljgdb CORE [BINARY] COMMAND [ARGS...]

CORE is an ELF core (from the kernel, systemd-coredump, gcore or qemu-user;
x86-64 or arm64); BINARY is the program that wrote it (by default the
core's own record of it).  The files the core names are read from where
the core says they were mapped, under --sysroot DIR when given (as gdb's
`set sysroot`: an arm64 core on an x86-64 machine, /usr/aarch64-linux-gnu);
LuaJIT's layout comes from DWARF (the file's own or its separate debug file
under /usr/lib/debug) or from a layout profile.  The output is what the
command prints inside gdb on the same core."""
import os
import re
import shlex
import sys

from ...gdb_ext.backends import corefile
from ...gdb_ext.errors import LjError
from ..base import CommandError, UsageError, help_text
from ..host import SETTINGS, Operand, OwnSettings, install, setting_value, truncation_text

USAGE = ("python3 -m ljgdb [--set NAME=VALUE] [--thread N] [--frame N] [--sysroot DIR] CORE [BINARY] COMMAND "
         "[ARGS...]  (or --help)")


class CoreHost(OwnSettings):
    """The Host of the core reader: one core, its files, default settings
    unless --set changed them."""

    name = "core"
    debug_hint = "--set debug=on (before CORE) shows a traceback"
    reader = "the core reader"

    def __init__(self, path, executable=None, settings=None, thread=1, sysroot="/",
                 release_every=0):
        """thread: the number of the thread to look at, as gdb numbers a
        core's threads (1 is the first in the core, the one that got the
        signal); sysroot: where the files the core names are (gdb's `set
        sysroot`); release_every: let go of the core's resident pages
        every so many bytes read (Target.RELEASE_EVERY; 0: never)."""
        self.release_every = release_every
        self.path = path
        self.executable = executable
        self.thread = thread
        self.sysroot = sysroot
        OwnSettings.__init__(self, settings)
        self._target = self._lay = self._core_ = None

    def _core(self):
        if self._core_ is None:
            from ...gdb_ext.backends.coredump import Core
            try:
                core = Core(self.path, self.executable, sysroot=self.sysroot)
            except (OSError, ValueError) as e:
                raise LjError(str(e))
            if not 1 <= self.thread <= len(core.threads):
                raise LjError("the core has %d thread%s: --thread takes 1 to %d"
                              % (len(core.threads), "" if len(core.threads) == 1 else "s",
                                 len(core.threads)))
            self._core_ = core
        return self._core_

    def target_and_layout(self):
        if self._lay is None:
            from ...gdb_ext.backends.coretarget import open_target
            from ...gdb_ext.layouts.layout import Layout
            target = open_target(self._core(), self.thread - 1)
            target.RELEASE_EVERY = self.release_every
            self._lay = Layout(target)
            self._target = target
        return self._target, self._lay

    def check_memory(self):
        from ...gdb_ext.backends.coretarget import CoreTarget
        return CoreTarget(self._core(), thread=self.thread - 1)

    def check_environment(self):
        target, lay = self.target_and_layout()
        if self.param("check-build-id"):
            from ...gdb_ext.backends.coretarget import core_mismatch
            mismatch = core_mismatch(
                target.core, self.path,
                give="give the files that wrote the core (python3 -m ljgdb CORE BINARY ..., "
                     "with the same library versions)",
                off="--set check-build-id=off")
            if mismatch:
                raise LjError(mismatch)
        return target, lay

    def frame_candidates(self, lay):
        from ...gdb_ext.backends.coretarget import frame_candidates
        return frame_candidates(self._target, lay)

    def operand(self, expr, what="expression"):
        return parse_operand(expr, what, self.reader)

    def write(self, text):
        sys.stdout.write(text)
        sys.stdout.flush()

    def setting_hint(self, name, value):
        return "--set %s=%s" % (name, value)

    def error_text(self, e, name):
        if isinstance(e, ImportError):
            return ("%s: the core reader reads DWARF with pyelftools (pip install pyelftools, or "
                    "Debian's python3-pyelftools): %s" % (name, e))
        return None

    def truncation_note(self):
        return truncation_text(corefile.truncation(self.path))

    def profile_match(self):
        self.target_and_layout()
        return self._target.match

    def frames_note(self):
        """The unwinder's reason for ending the selected thread's frames
        before the outermost one (gdb guesses on there; this reader does
        not), or None."""
        self.target_and_layout()
        t = self._target
        n = len(t.machine_frames())
        if t.unwind_stop is None:
            return None
        note = ("%d frame%s of thread %d, then no more: %s (gdb guesses on past such code; "
                "%s does not)" % (n, "" if n == 1 else "s", self.thread, t.unwind_stop,
                                  self.reader))
        if t.core.missing and self.sysroot in ("", "/"):
            note += ("; the core's files were not found where it says: give --sysroot DIR "
                     "(before CORE) when they are under another root")
        return note


_NUMBER = r"(-?(?:0[xX][0-9a-fA-F]+|[0-9]+))"
_CAST_RE = re.compile(r"^\(\s*(?:struct\s+|union\s+)?([A-Za-z_][A-Za-z_0-9]*)\s*(\*+)\s*\)\s*"
                      + _NUMBER + r"$")
_NUMBER_RE = re.compile("^" + _NUMBER + "$")


def parse_operand(expr, what="expression", reader="the core reader"):
    """What the core reader (or `reader`, --pid) takes where gdb takes an
    expression: a number (an address) or a pointer cast of one, (GCtab
    *)0x7f...; anything else is a UsageError that says so."""
    text = expr.strip()
    m = _NUMBER_RE.match(text)
    if m:
        return Operand(value=int(m.group(1), 0) & 0xFFFFFFFFFFFFFFFF)
    m = _CAST_RE.match(text)
    if m:
        pointee = m.group(1) if len(m.group(2)) == 1 else "pointer"
        return Operand(value=int(m.group(3), 0) & 0xFFFFFFFFFFFFFFFF, pointee=pointee)
    raise UsageError("%s takes an address, 0x7f... or a cast such as (GCtab *)0x7f..., "
                     "where gdb takes an expression; %s '%s' is not one" % (reader, what, expr))


def commands():
    """{name: command class} of the commands that run without gdb."""
    from .. import command_classes
    return {c.NAME: c for c in command_classes(with_gdb_only=False)}


def take_options(argv, names=("--set", "--thread", "--frame", "--sysroot")):
    """Pops the leading options among `names` off argv: {'settings': {...},
    'thread': N, 'sysroot': DIR, 'pid': PID (--pid)}; ValueError(line) for
    a bad one."""
    opts = {"settings": {}, "thread": 1, "frame": 0, "sysroot": "/", "pid": None}
    while argv and argv[0].startswith(tuple(names)):
        opt = argv.pop(0)
        key = opt.split("=", 1)[0]
        if key not in names:
            raise ValueError("'%s' is not an option (%s)" % (opt, ", ".join(names)))
        val = opt[len(key) + 1:] if "=" in opt else (argv.pop(0) if argv else "")
        if key == "--sysroot":
            if not os.path.isdir(val):
                raise ValueError("--sysroot takes a directory (where the core's libraries are, "
                                 "such as /usr/aarch64-linux-gnu); '%s' is not one" % val)
            opts["sysroot"] = val
        elif key == "--thread":
            if not val.isdigit() or int(val) < 1:
                raise ValueError("--thread takes a thread's number (1 is the %s's first)"
                                 % ("process" if "--pid" in names else "core"))
            opts["thread"] = int(val)
        elif key == "--frame":
            if not val.isdigit():
                raise ValueError("--frame takes a Lua frame's number, as lbt numbers them (0 is "
                                 "the innermost), not '%s'" % val)
            opts["frame"] = int(val)
        elif key == "--pid":
            if not val.isdigit() or int(val) < 1:
                raise ValueError("--pid takes a process id, not '%s'" % val)
            opts["pid"] = int(val)
        else:
            name, _, value = val.partition("=")
            if name not in SETTINGS or not value:
                raise ValueError("--set takes NAME=VALUE with NAME one of %s"
                                 % ", ".join(sorted(SETTINGS)))
            try:
                opts["settings"][name] = setting_value(name, value)
            except ValueError as e:
                raise ValueError("--set %s takes %s" % (name, e))
    return opts


def run_command(cmds, name, argv):
    """Runs command `name` with the words argv on the installed host: its
    output on stdout, its error line on stderr; the exit status."""
    try:
        out = cmds[name]().execute(" ".join(shlex.quote(a) for a in argv))
    except CommandError as e:
        if e.output:
            sys.stdout.write(e.output)
        sys.stderr.write("%s\n" % e)
        return 1
    sys.stdout.write(out)
    return 0


def usage_text(cmds, how):
    """The commands with their one line each, as `help ljgdb` lists them,
    told to ask `how` for more (a host without gdb's help command)."""
    return help_text(list(cmds.values())).split("\nIn gdb's")[0].replace(
        "'help <command>' tells more", how)


def settings_text():
    return ", ".join(sorted(SETTINGS))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmds = commands()
    try:
        opts = take_options(argv)
    except ValueError as e:
        return _fail(str(e))
    settings, thread, sysroot = opts["settings"], opts["thread"], opts["sysroot"]
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write("usage: %s\n\n%s\n\nOptions before CORE: --set NAME=VALUE (%s); "
                         "--thread N, the thread to look at (gdb's numbers: 1 is the "
                         "core's first, the one that got the signal); --frame N, the Lua frame "
                         "lframe, llocals, lprint and llist start from (lbt's numbers); "
                         "--sysroot DIR, where "
                         "the core's files are (gdb's set sysroot).\nA running process: "
                         "python3 -m ljgdb --pid PID COMMAND [ARGS...] (--pid PID --help "
                         "tells more); every thread's Lua backtrace: python3 -m ljgdb dump "
                         "--pid PID [--all] [--locals] [--json]; a sampling profiler: "
                         "python3 -m ljgdb record --pid PID -o FILE (a flame graph; --help "
                         "tells more), and its live view, python3 -m ljgdb top --pid PID.\n"
                         "Many cores grouped by crash signature (plain, or as systemd-coredump "
                         "stores them): python3 -m ljgdb triage CORE_OR_DIR... [--json].\n"
                         "An editor's debugger (the Debug Adapter Protocol) over a core or a "
                         "process: python3 -m ljgdb dap [--port N].\n"
                         % (USAGE, usage_text(cmds, "CORE COMMAND --help tells more"), settings_text()))
        return 0 if argv else 2
    core = argv.pop(0)
    binary = None
    if argv and argv[0] not in cmds:
        if not os.path.exists(argv[0]):
            return _fail("'%s' is neither a command (%s) nor a file" % (argv[0], ", ".join(cmds)))
        binary = argv.pop(0)
    if not argv:
        return _fail("name a command (%s) after the core%s" % (", ".join(cmds),
                                                               " and the binary" if binary else ""))
    name = argv.pop(0)
    if name not in cmds:
        return _fail("'%s' is not a command of the core reader (%s)" % (name, ", ".join(cmds)))
    for path, what in ((core, "core file"), (binary, "binary")):
        if path is not None and not os.path.isfile(path):
            return _fail("%s '%s' does not exist or is not a file" % (what, path))
    host = install(CoreHost(core, binary, settings, thread, sysroot))
    host.start_frame = opts["frame"]
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write((cmds[name].__doc__ or "").replace("(gdb) ", "$ ") + "\n")
        return 0
    code = run_command(cmds, name, argv)
    from ...gdb_ext.backends import debuginfod
    for note in debuginfod.notes():
        sys.stderr.write("ljgdb: %s\n" % note)
    return code


def _fail(line):
    sys.stderr.write("ljgdb: %s; usage: %s\n" % (line, USAGE))
    return 1
