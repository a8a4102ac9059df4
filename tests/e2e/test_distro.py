"""Distribution builds as users get them: Debian's official luajit binary
(stripped) with the debug file of its -dbgsym package (testprogs/debs.py
rebuilds the source package, byte-identical, and unpacks both), found
through gdb's debug-file-directory and through a debuginfod server; and
what ljgdb says when the debug file is missing."""
import os
import re
import shutil
import subprocess

import pytest

from support.stop import (CACHE, LOADER, LUA_DIR, chunk_display, cut_outputs, frame_place, read_expected, run_gdb,
                          wrap_commands)

ROOT = os.path.join(CACHE, "debs", "luajit-root")
LUAJIT = os.path.join(ROOT, "usr", "bin", "luajit")
DEBUG_DIR = os.path.join(ROOT, "usr", "lib", "debug")
PROGRAM = os.path.join(LUA_DIR, "distro.lua")
pytestmark = pytest.mark.skipif(not os.path.exists(LUAJIT), reason="Debian's luajit is not "
                                "unpacked (python3 testprogs/debs.py does it)")

COMMANDS = ["lbt", "linfo", "lgcstat"]


def has_debug_file():
    return os.path.isdir(os.path.join(DEBUG_DIR, ".build-id"))


def session(tmp_path, pre, env=None, wrap=None, stop="lj_cf_os_clock", binary=LUAJIT):
    """Outputs of COMMANDS live at the breakpoint `stop` (and from a gcore
    core) of `binary` running distro.lua, with the gdb commands `pre` run
    before the binary is loaded."""
    exp = str(tmp_path / "expected.txt")
    core = str(tmp_path / "core")
    args = []
    for p in pre:
        args += ["-iex", p]
    args += ["-ex", "source " + LOADER, "-ex", "set breakpoint pending on",
             "-ex", "break " + stop, "-ex", "run"] + wrap_commands(COMMANDS)
    args += ["-ex", "gcore " + core, "-ex", "kill", "--args", binary, PROGRAM, exp]
    if wrap:
        cmd = ["gdb", "-nx", "-nh", "--batch", "-ex", "set confirm off", "-ex",
               "set pagination off", "-ex", "set width 0"] + args
        text = subprocess.run(wrap + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=300, cwd=str(tmp_path),
                              env=dict(os.environ, LC_ALL="C", **(env or {}))).stdout.decode()
    else:
        text = run_gdb(args, cwd=str(tmp_path), env=env)
    live = dict(cut_outputs(text, COMMANDS))
    core_args = []
    for p in pre:
        core_args += ["-iex", p]
    core_args += ["-ex", "source " + LOADER, "-ex", "core-file " + core] + wrap_commands(COMMANDS)
    core_out = dict(cut_outputs(run_gdb(core_args + [binary], cwd=str(tmp_path), env=env), COMMANDS)) \
        if os.path.exists(core) and not wrap else None
    return live, core_out, read_expected(exp) if os.path.exists(exp) else None, text


def check(out, expected, text):
    frames = ["%s:%s" % (chunk_display(r[2]), r[3]) for r in expected if r[0] == "frame"]
    lbt = (out["lbt"] or text[-3000:]).splitlines()
    assert lbt[0].startswith("Lua backtrace of (lua_State *)0x") and "running" in lbt[0], lbt
    assert lbt[1] == "#0   [builtin#os.clock]", lbt
    assert [frame_place(line[5:]) for line in lbt[2:]] == frames, (lbt, frames)
    assert "(exact)" in out["lgcstat"], out["lgcstat"]


@pytest.mark.skipif(not has_debug_file(), reason="the rebuilt luajit was not byte-identical")
def test_debian_luajit_with_its_debug_file(tmp_path):
    live, core, expected, text = session(tmp_path, ["set debug-file-directory " + DEBUG_DIR])
    check(live, expected, text)
    check(core, expected, text)


def test_debian_luajit_through_its_shipped_profile(tmp_path):
    """No debug file, no debuginfod: the shipped layout profile of this very
    build (pkg/profiles/, matched by its build-id) gives lbt and lgcstat.
    Without symbols for static functions, the stop is in libc's clock(),
    which os.clock calls."""
    live, core, expected, text = session(tmp_path, ["set debug-file-directory /nonexistent",
                                                    "set debuginfod enabled off"], stop="clock")
    check(live, expected, text)
    check(core, expected, text)
    for out in (live, core):
        assert re.search(r"^layout: +layout profile debian-luajit_[^ ]+\.json \(LuaJIT 2\.1\.0-beta3, "
                         r"build-id [0-9a-f]+\)", out["linfo"], re.M), out["linfo"]


def test_debian_luajit_without_its_debug_file(tmp_path):
    # Without symbols for static functions, stop where luajit.c runs the
    # script (lua_pcall is exported); no profile either (LJGDB_PROFILES=none
    # turns the shipped set off).
    live, core, _, text = session(tmp_path, ["set debug-file-directory /nonexistent",
                                             "set debuginfod enabled off"], stop="lua_pcall",
                                  env={"LJGDB_PROFILES": "none"})
    for out in (live, core):
        for cmd in COMMANDS:
            lines = out[cmd].strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(cmd + ": LuaJIT is in " + LUAJIT), out
            # No package owns the unpacked file: no package is named.
            assert "without debug info" in lines[0] and "-dbgsym package)" in lines[0], out


INSTALLED = "/usr/bin/luajit"


def installed_owner():
    """The package dpkg says ships /usr/bin/luajit, or None."""
    out = subprocess.run(["dpkg-query", "-S", INSTALLED], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode()
    return out.split(":")[0] if out.startswith("luajit:") else None


@pytest.mark.skipif(installed_owner() is None, reason="Debian's luajit is not installed "
                    "(testprogs/install-deps.sh installs it where it installs cleanly)")
def test_installed_luajit_names_its_package(tmp_path):
    """The machine's own luajit (dpkg owns it) without its debug file or a
    profile: the hint names the package to install, luajit-dbgsym, as
    dpkg-query -S says it ships the file."""
    live, core, _, text = session(tmp_path, ["set debug-file-directory /nonexistent",
                                             "set debuginfod enabled off"], stop="lua_pcall",
                                  env={"LJGDB_PROFILES": "none"}, binary=INSTALLED)
    assert core is not None, text[-3000:]
    for out in (live, core):
        for cmd in COMMANDS:
            lines = out[cmd].strip().splitlines()
            assert len(lines) == 1 and "without debug info" in lines[0], out
            assert "apt install %s-dbgsym" % installed_owner() in lines[0], out


@pytest.mark.skipif(not has_debug_file() or shutil.which("debuginfod") is None
                    or shutil.which("unshare") is None,
                    reason="needs the debug file, debuginfod and unshare")
def test_debian_luajit_with_debuginfod(tmp_path):
    """A debuginfod server serving the -dbgsym's files, and gdb fetching
    from it; both in a network namespace of their own whose only interface
    is the loopback, so the server is reachable on 127.0.0.1 only."""
    port = 18765
    out = subprocess.run(["readelf", "-n", LUAJIT], stdout=subprocess.PIPE, check=True).stdout
    bid = re.search(rb"Build ID: ([0-9a-f]+)", out).group(1).decode()
    env = {"DEBUGINFOD_URLS": "http://127.0.0.1:%d" % port,
           "DEBUGINFOD_CACHE_PATH": str(tmp_path / "cache")}
    live, _, expected, text = session(
        tmp_path, ["set debuginfod enabled on", "set debug-file-directory /nonexistent"], env,
        wrap=["unshare", "-n", "sh", "-c", server_script(tmp_path, port, bid), "sh"])
    check(live, expected, text)
    assert os.listdir(str(tmp_path / "cache")), "gdb fetched nothing from debuginfod"


def server_script(tmp_path, port, bid, serve=DEBUG_DIR, kinds=("debuginfo",)):
    """sh -c text that brings the loopback up, starts a debuginfod server
    serving the ELF files under `serve` (the -dbgsym's) on
    127.0.0.1:port, asks it until its first scan has indexed build-id
    bid's `kinds` (a miss before that would be cached by a client), runs
    "$@", and stops the server.  (The server must not inherit
    DEBUGINFOD_URLS: it would ask itself.)"""
    probe = " && ".join("curl -sf -o /dev/null http://127.0.0.1:%d/buildid/%s/%s" % (port, bid, k)
                        for k in kinds)
    return ("ip link set lo up && env -u DEBUGINFOD_URLS debuginfod -p %d -d %s -F %s >%s "
            "2>&1 & S=$!; for i in $(seq 300); do %s && break; sleep 0.1; done; \"$@\"; rc=$?; "
            "kill $S; wait $S; exit $rc"
            % (port, tmp_path / "db.sqlite", serve, tmp_path / "debuginfod.log", probe))


def in_namespace_with_server(tmp_path, port, bid, argv, env, serve=DEBUG_DIR, kinds=("debuginfo",)):
    """argv run in a network namespace of its own (only the loopback),
    beside a debuginfod server on 127.0.0.1:port (server_script); (exit
    status, stdout, stderr)."""
    p = subprocess.run(["unshare", "-n", "sh", "-c", server_script(tmp_path, port, bid, serve, kinds), "sh"] + argv,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       env=dict(os.environ, **env))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.mark.skipif(not has_debug_file() or shutil.which("debuginfod") is None
                    or shutil.which("unshare") is None,
                    reason="needs the debug file, debuginfod and unshare")
def test_core_reader_with_debuginfod(tmp_path):
    """The core reader (no gdb) on a core of Debian's stripped luajit, with
    no debug file on the machine and no layout profile: a debuginfod
    server (started here, on 127.0.0.1 in a network namespace of its own)
    gives the debug file; it is kept where elfutils' client keeps it
    (DEBUGINFOD_CACHE_PATH/BUILD_ID/debuginfo), and lbt is LuaJIT's own
    view.  With the server down, one line says so and the shipped layout
    profile serves."""
    import sys
    live, _, expected, text = session(tmp_path, ["set debug-file-directory " + DEBUG_DIR])
    check(live, expected, text)
    core = str(tmp_path / "core")
    out = subprocess.run(["readelf", "-n", LUAJIT], stdout=subprocess.PIPE, check=True).stdout
    bid = re.search(rb"Build ID: ([0-9a-f]+)", out).group(1).decode()
    port = 18766
    cache = tmp_path / "cache"
    env = {"DEBUGINFOD_URLS": "http://127.0.0.1:%d" % port, "DEBUGINFOD_CACHE_PATH": str(cache),
           "LJGDB_PROFILES": "none", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    outs = {}
    for cmd in COMMANDS:
        code, o, err = in_namespace_with_server(
            tmp_path, port, bid, [sys.executable, "-m", "ljgdb", core, LUAJIT, cmd],
            dict(env, PYTHONPATH=os.path.dirname(LOADER)))
        assert code == 0 and err == "", (cmd, code, err)
        outs[cmd] = o.rstrip("\n")
    check(outs, expected, text)
    assert os.path.getsize(str(cache / bid / "debuginfo")) > 0
    # The server down: one line, and the shipped profile of this build.
    down = dict(env, DEBUGINFOD_URLS="http://127.0.0.1:%d" % (port + 1))
    del down["LJGDB_PROFILES"]
    shutil.rmtree(str(cache))
    p = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && exec \"$@\"", "sh",
                        sys.executable, "-m", "ljgdb", core, LUAJIT, "lbt"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(LOADER), **down))
    check({"lbt": p.stdout.decode().rstrip("\n"), "lgcstat": "(exact)"}, expected, text)
    assert p.stderr.decode().splitlines() == [
        "ljgdb: debuginfod: no debug file for build-id %s (http://127.0.0.1:%d: [Errno 111] "
        "Connection refused); going on without it" % (bid, port + 1)], p.stderr.decode()


@pytest.mark.skipif(not has_debug_file() or shutil.which("debuginfod") is None
                    or shutil.which("unshare") is None,
                    reason="needs the debug file, debuginfod and unshare")
def test_core_reader_fetches_the_program_too(tmp_path):
    """A kernel core of Debian's luajit whose program is no longer on the
    machine (run from a copy, deleted after): the program itself and its
    debug file come from the debuginfod server (serving the unpacked
    package), by the build-id the core holds; lbt gives the line LuaJIT's
    debug.getinfo printed before ffi.C.abort()."""
    import sys
    gone = tmp_path / "gone"
    gone.mkdir()
    exe = str(gone / "luajit")
    shutil.copy(LUAJIT, exe)
    chunk = ("local ffi = require('ffi') ffi.cdef('void abort(void);') "
             "local i = debug.getinfo(1, 'Sl') io.write(i.short_src, ':', i.currentline, '\\n') "
             "io.flush() ffi.C.abort()")
    p = subprocess.run(["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh", exe, "-e", chunk],
                       cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       timeout=60)
    assert p.returncode == -6, p.returncode
    where = p.stdout.decode().strip()
    core = str(tmp_path / "core")
    assert os.path.exists(core)
    os.unlink(exe)
    out = subprocess.run(["readelf", "-n", LUAJIT], stdout=subprocess.PIPE, check=True).stdout
    bid = re.search(rb"Build ID: ([0-9a-f]+)", out).group(1).decode()
    cache = tmp_path / "cache"
    env = {"DEBUGINFOD_URLS": "http://127.0.0.1:18767", "DEBUGINFOD_CACHE_PATH": str(cache),
           "LJGDB_PROFILES": "none", "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           "PYTHONPATH": os.path.dirname(LOADER)}
    code, o, err = in_namespace_with_server(
        tmp_path, 18767, bid, [sys.executable, "-m", "ljgdb", core, "lbt"], env, serve=ROOT,
        kinds=("debuginfo", "executable"))
    assert code == 0 and err == "", (code, o, err)
    lines = o.rstrip("\n").split("\n")
    assert lines[1] == "#0   [builtin#ffi.meta.__call]" and frame_place(lines[2]) == "#1   " + where, lines
    assert os.path.getsize(str(cache / bid / "executable")) > 0
    assert os.path.getsize(str(cache / bid / "debuginfo")) > 0
