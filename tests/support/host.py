"""Real host programs (Tarantool, nginx) started by the tests: run one in
the background until it writes "ready", look at it with gdb attached (and
save a core with gcore), then from that core, and from the kernel's core
after SIGABRT.  Servers listen on 127.0.0.1 only."""
import os
import signal
import subprocess
import time

from .stop import LOADER, cut_outputs, read_expected, run_gdb, wrap_commands


def proc_state(pid, tid=None):
    """The kernel's scheduling state letter of a process (or of its thread
    tid), from /proc/PID[/task/TID]/stat: after the "(comm)" field, which
    may hold spaces and parentheses."""
    path = "/proc/%d/stat" % pid if tid is None else "/proc/%d/task/%d/stat" % (pid, tid)
    with open(path) as f:
        text = f.read()
    return text[text.rindex(")") + 2]


class HostProcess(object):
    """argv started with core dumps allowed, in workdir; `expected` is the
    file the program writes its records to, ending with a line 'ready'."""

    def __init__(self, argv, workdir, expected, env=None, timeout=60, ready=None, gdb_init=()):
        """ready: a function that tells when the program is ready (default:
        a line 'ready' in the expected file); gdb_init: gdb commands run
        before gdb attaches (such as a debug-file-directory)."""
        self.workdir = workdir
        self.gdb_init = list(gdb_init)
        self.expected_file = expected
        self.proc = subprocess.Popen(["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh"] + argv,
                                     cwd=workdir, stdin=subprocess.DEVNULL,
                                     stdout=open(os.path.join(workdir, "stdout.txt"), "wb"),
                                     stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})))
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("%s exited (%s) before it was ready:\n%s" % (
                    argv[0], self.proc.returncode, self.log()))
            if ready is not None:
                if ready():
                    break
            elif os.path.exists(expected):
                with open(expected) as f:
                    if "ready\n" in f.read():
                        break
            time.sleep(0.05)
        else:
            self.stop()
            raise AssertionError("%s was not ready in %d s:\n%s" % (argv[0], timeout, self.log()))
        self.expected = read_expected(expected) if os.path.exists(expected) else []

    def reread(self):
        self.expected = read_expected(self.expected_file)
        return self.expected

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        with open(os.path.join(self.workdir, "stdout.txt"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]

    def attach(self, commands, core=None):
        """[(command, output)] of gdb attached to the process (then a gcore
        into `core` if given, and detach)."""
        args = _init(self.gdb_init) + ["-p", str(self.pid), "-ex", "source " + LOADER] + \
            wrap_commands(commands)
        if core:
            args += ["-ex", "gcore " + core]
        args += ["-ex", "detach"]
        return cut_outputs(run_gdb(args, cwd=self.workdir), commands)

    def abort(self, timeout=60):
        """SIGABRT: the kernel writes a core (core_pattern permitting).
        Returns its path, or None."""
        before = set(os.listdir(self.workdir))
        self.proc.send_signal(signal.SIGABRT)
        self.proc.wait(timeout)
        deadline = time.time() + timeout
        while time.time() < deadline:
            new = [f for f in set(os.listdir(self.workdir)) - before if f.startswith("core")]
            if new:
                path = os.path.join(self.workdir, new[0])
                size = -1
                while size != os.path.getsize(path):     # written whole
                    size = os.path.getsize(path)
                    time.sleep(0.2)
                return path
            time.sleep(0.1)
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _init(cmds):
    return [a for c in cmds for a in ("-iex", c)]


def core_outputs(program, core, commands, cwd=None, gdb_init=()):
    args = _init(gdb_init) + ["-ex", "source " + LOADER, "-ex", "core-file " + core] + \
        wrap_commands(commands) + [program]
    return cut_outputs(run_gdb(args, cwd=cwd), commands)
