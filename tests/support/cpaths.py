"""The core reader run three ways, for the tests of the engine's C paths
(graphc, threadc): as it is ("C"), with the C path off ("python": the
variable `var` set to python), and with every long read of the C path
refused ("runs unreadable": runs_unreadable.py, which then reads one
request at a time)."""
import os
import subprocess
import sys

from .stop import ROOT, sysroot_args

WRAPPER = os.path.join(ROOT, "tests", "support", "runs_unreadable.py")


def reader(stop, how, var, *args):
    """The core reader's output of args on the stop's core, run `how`."""
    env = dict(os.environ)
    env.pop(var, None)
    if how == "python":
        env[var] = "python"
    cmd = [sys.executable] + (["-m", "ljgdb"] if how != "runs unreadable" else [WRAPPER])
    p = subprocess.run(cmd + sysroot_args(stop.build) + [stop.core, stop.build["host"]] +
                       list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    if how == "runs unreadable":
        refused = int(p.stderr.decode().rsplit("runs refused: ", 1)[1].split()[0])
        assert refused > 0, p.stderr.decode()      # (the fallback did run)
    return p.stdout.decode()
