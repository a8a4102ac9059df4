"""pip install must give the package `ljgdb` and no bare `commands` module."""
import os
import subprocess
import sys
import zipfile

from support.stop import ROOT, Stop, manifest

# The engine's C code built beside its loader by pip: (wing, stem).
C_HELPERS = (("backends", "ptstop"), ("heap", "graphc"), ("heap", "walkc"), ("stack", "threadc"))


def test_wheel_contents(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), ROOT], check=True, cwd=str(tmp_path))
    wheels = [f for f in os.listdir(str(tmp_path)) if f.endswith(".whl")]
    assert len(wheels) == 1
    names = zipfile.ZipFile(os.path.join(str(tmp_path), wheels[0])).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"ljgdb"}, tops
    assert "ljgdb/commands/lval.py" in names
    assert "ljgdb/gdb_ext/layouts/layout.py" in names
    assert "ljgdb/__init__.py" in names
    # python3 -m ljgdb.profile and the shipped layout profiles.
    assert "ljgdb/profile.py" in names
    shipped = sorted(f for f in os.listdir(os.path.join(ROOT, "pkg", "profiles"))
                     if f.endswith(".json"))
    assert shipped and all("ljgdb/profiles/" + f in names for f in shipped), shipped
    glibc = sorted(f for f in os.listdir(os.path.join(ROOT, "pkg", "profiles", "glibc"))
                   if f.endswith(".json"))
    assert glibc and all("ljgdb/profiles/glibc/" + f in names for f in glibc), glibc
    library = sorted(f for f in os.listdir(os.path.join(ROOT, "pkg", "profiles", "library"))
                     if f.endswith(".json.gz"))
    assert library and all("ljgdb/profiles/library/" + f in names for f in library), library
    # record's C sampler, the heap graph's and the thread scan's C code:
    # each source, and the library built beside it for this machine (a
    # compiler is at hand here).
    for wing, stem in C_HELPERS:
        assert "ljgdb/gdb_ext/%s/%s.c" % (wing, stem) in names
        built = [n for n in names if n.startswith("ljgdb/gdb_ext/%s/%s-" % (wing, stem))]
        assert len(built) == 1 and built[0].endswith("-%s.so" % os.uname().machine), built
    # The BPF sampler's program: its source (compiled at first use, into
    # the cache: clang's output depends on the kernel's headers only).
    assert "ljgdb/gdb_ext/backends/bpfsample.bpf.c" in names


def test_install_in_a_virtualenv(tmp_path):
    """pip install . in a venv, then the line ljgdb-gdbinit prints loads the
    commands in gdb, whose own Python does not see the venv."""
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    # The wheel is built outside (a fresh venv has no `wheel` to build with).
    wheels = str(tmp_path / "wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", wheels, ROOT], check=True, cwd=str(tmp_path))
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps",
                    os.path.join(wheels, os.listdir(wheels)[0])], check=True, cwd=str(tmp_path))
    line = subprocess.run([os.path.join(venv, "bin", "ljgdb-gdbinit")], check=True,
                          stdout=subprocess.PIPE).stdout.decode().strip()
    assert line.startswith("source " + venv) and line.endswith("ljgdb/gdbinit.py"), line
    out = subprocess.run(["gdb", "-nx", "-nh", "--batch", "-ex", line, "-ex", "help ljgdb"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         cwd=str(tmp_path)).stdout.decode()
    assert "lbt " in out and "lstates " in out and "Error" not in out, out
    # The installed package writes a layout profile too (with the test
    # Python's pyelftools on the path: the venv has no dependencies).
    host = manifest()["r21-gc64"]["host"]
    site = subprocess.run([py, "-c", "import ljgdb, os; print(os.path.dirname(ljgdb.__file__))"],
                          check=True, stdout=subprocess.PIPE,
                          cwd=str(tmp_path)).stdout.decode().strip()
    assert site.startswith(venv), site
    import elftools
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(elftools.__file__)))
    prof = subprocess.run([py, "-m", "ljgdb.profile", host], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, cwd=str(tmp_path), env=env)
    assert prof.returncode == 0 and b'"build_id"' in prof.stdout, prof.stdout[-2000:]
    assert os.path.isdir(os.path.join(site, "profiles"))
    # record's C sampler and the heap graph's C code are the ones the wheel
    # carries: nothing is built into the (empty) cache.
    cache = str(tmp_path / "cache")
    for wing, stem in C_HELPERS:
        lib = subprocess.run([py, "-c", "from ljgdb.gdb_ext.%s import %s; print(%s.load()[0]._name)"
                              % (wing, stem, stem)], check=True, stdout=subprocess.PIPE,
                             cwd=str(tmp_path), env=dict(os.environ, XDG_CACHE_HOME=cache)
                             ).stdout.decode().strip()
        assert lib.startswith(os.path.join(site, "gdb_ext", wing, stem + "-")), lib
    assert not os.path.exists(cache)
    # The installed core reader (python3 -m ljgdb CORE ...) prints what the
    # checkout's prints, on a core of that host.
    stop = Stop("r21-gc64", "bt.lua", ["lbt"], str(tmp_path / "run"),
                args=["nest"])
    reader = subprocess.run([py, "-m", "ljgdb", stop.core, host, "lbt"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=str(tmp_path), env=env)
    assert reader.returncode == 0, reader.stdout.decode()[-2000:]
    assert reader.stdout.decode().rstrip("\n") == stop.out("core", "lbt").rstrip("\n")
    # The console script `ljgdb` is python3 -m ljgdb: the core reader as
    # above, and the live commands' own help.
    script = os.path.join(venv, "bin", "ljgdb")
    got = subprocess.run([script, stop.core, host, "lbt"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, cwd=str(tmp_path), env=env)
    assert got.returncode == 0 and got.stdout == reader.stdout, got.stdout.decode()[-2000:]
    for cmd, usage in (("record", "usage: python3 -m ljgdb record --pid PID"),
                       ("top", "usage: python3 -m ljgdb top --pid PID"),
                       ("dump", "usage: python3 -m ljgdb dump --pid PID")):
        got = subprocess.run([script, cmd, "--help"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, cwd=str(tmp_path))
        assert got.returncode == 0 and got.stdout.decode().startswith(usage), got.stdout
    # --auto-load writes a script that gdb runs for a file holding LuaJIT
    # (here the test host), from a directory of the test's.
    d = str(tmp_path / "auto-load")
    subprocess.run([os.path.join(venv, "bin", "ljgdb-gdbinit"), "--auto-load", "--dir", d, host],
                   check=True, stdout=subprocess.PIPE)
    out = subprocess.run(["gdb", "-nx", "-batch", "-iex", "set auto-load scripts-directory " + d,
                          "-iex", "add-auto-load-safe-path " + d, host, "-ex", "help lbt"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
    assert "the Lua backtrace" in out and "Traceback" not in out, out
    # --append adds it to ~/.gdbinit once.
    home = str(tmp_path / "home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home)
    for _ in range(2):
        subprocess.run([os.path.join(venv, "bin", "ljgdb-gdbinit"), "--append"], check=True,
                       env=env, stdout=subprocess.PIPE)
    with open(os.path.join(home, ".gdbinit")) as f:
        assert f.read().splitlines() == [line]
