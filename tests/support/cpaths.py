"""The core reader run four ways, for the tests of the engine's C paths
(graphc, threadc): as it is ("C"), with the C path off ("python": the
variable `var` set to python), with every long read of the C path
refused ("runs unreadable": runs_unreadable.py, which then reads one
request at a time), and with no memory held in place ("pages copied":
pages_copied.py, as gdb, lldb and --pid read a process)."""
import os
import subprocess
import sys

from .stop import ROOT, sysroot_args

WRAPPERS = {how: os.path.join(ROOT, "tests", "support", name) for how, name in (
    ("runs unreadable", "runs_unreadable.py"), ("pages copied", "pages_copied.py"))}


def reader(stop, how, var, *args):
    """The core reader's output of args on the stop's core, run `how`."""
    env = dict(os.environ)
    env.pop(var, None)
    if how == "python":
        env[var] = "python"
    cmd = [sys.executable] + ([WRAPPERS[how]] if how in WRAPPERS else ["-m", "ljgdb"])
    p = subprocess.run(cmd + sysroot_args(stop.build) + [stop.core, stop.build["host"]] +
                       list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    if how == "pages copied":
        got = p.stderr.decode().rsplit("pages in place: ", 1)[1].split()
        assert int(got[0].rstrip(",")) > 0 and int(got[-1]) > 0, p.stderr.decode()  # (both ran)
    if how == "runs unreadable":
        refused = int(p.stderr.decode().rsplit("runs refused: ", 1)[1].split()[0])
        assert refused > 0, p.stderr.decode()      # (the fallback did run)
    return p.stdout.decode()
