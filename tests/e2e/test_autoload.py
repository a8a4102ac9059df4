"""ljgdb-gdbinit --auto-load: gdb auto-load scripts for Debian's LuaJIT
(the luajit and libluajit2 packages, as testprogs/debs.py unpacks them),
so that gdb on a file that holds LuaJIT has ljgdb's commands without a
`source` line; --uninstall removes them.  The scripts go to a directory of
the test's (gdb's `set auto-load scripts-directory`), never to the
machine's own gdb directory."""
import os
import subprocess
import sys

import pytest

from support.stop import CACHE, ROOT

DEBS = os.path.join(CACHE, "debs")
FILES = [os.path.join(DEBS, "luajit-root", "usr", "bin", "luajit"),
         os.path.join(DEBS, "libluajit2-root", "usr", "lib", "x86_64-linux-gnu",
                      "libluajit-5.1.so.2.1.0")]


def gdbinit(*args):
    """(status, stdout, stderr) of ljgdb-gdbinit ARGS, as the checkout runs it."""
    p = subprocess.run([sys.executable, "-c", "import sys, ljgdb; from ljgdb.install import main; "
                        "sys.exit(main(sys.argv[1:]))"] + list(args), cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def gdb_on(path, directory, safe=True):
    """gdb with no init file, its auto-load directory `directory`, on the
    file path: `help lbt`'s output."""
    args = ["gdb", "-nx", "-batch", "-iex", "set auto-load scripts-directory " + directory]
    if safe:
        args += ["-iex", "add-auto-load-safe-path " + directory]
    return subprocess.run(args + [path, "-ex", "help lbt"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=120).stdout.decode()


@pytest.mark.skipif(not all(os.path.exists(f) for f in FILES),
                    reason="testprogs/debs.py has not unpacked Debian's luajit and libluajit2")
def test_auto_load_debian_luajit(tmp_path):
    d = str(tmp_path / "auto-load")
    status, out, err = gdbinit("--auto-load", "--dir", d, *FILES)
    assert status == 0 and err == "", err
    for f in FILES:
        script = os.path.join(d, os.path.realpath(f).lstrip("/") + "-gdb.py")
        assert "wrote %s" % script in out and os.path.isfile(script), out
    # Not in gdb's safe path: the one line that says what to add.
    assert "add-auto-load-safe-path %s' to ~/.gdbinit" % d in out, out
    for f in FILES:
        text = gdb_on(f, d)
        assert "the Lua backtrace" in text and "Traceback" not in text, text
        declined = gdb_on(f, d, safe=False)
        assert "auto-loading has been declined" in declined and "the Lua backtrace" not in declined
    status, out, err = gdbinit("--uninstall", "--dir", d, *FILES)
    assert status == 0 and out.count("removed ") == 2, (out, err)
    for f in FILES:
        assert "the Lua backtrace" not in gdb_on(f, d)


def test_auto_load_bad_input(tmp_path):
    for args, line in ((["--auto-load", "--dir"], "--dir needs a directory"),
                       (["--auto-load", "/no/such/file"], "no file /no/such/file"),
                       (["--uninstall", "--bogus"], "'--bogus' is not an option here")):
        status, out, err = gdbinit(*args)
        assert status == 2 and out == "" and len(err.splitlines()) == 1 and line in err, err
