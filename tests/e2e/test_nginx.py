"""nginx with lua-nginx-module (Debian's nginx, and its libnginx-mod-http-lua
unpacked into the cache by testprogs/debs.py, on OpenResty's libluajit2 as a
shared library: Debian's package rebuilt with its debug file and unpacked
there too, never installed; nginx loads the module by its path, the
library through LD_LIBRARY_PATH, and gdb finds its debug
file through debug-file-directory): request coroutines blocked in
ngx.sleep, in a cosocket read and inside a coroutine.wrap, each recording
its frames; the worker idles in epoll_wait with no Lua state in any
frame.  Attached, from its gcore and from the kernel's core after SIGABRT.
Traffic on 127.0.0.1 only."""
import json
import os
import re
import shutil
import socket
import threading
import time

import pytest

from support.stop import (CACHE, LIBLUAJIT2_DEBUG, LIBLUAJIT2_DIR, LIBLUAJIT2_ROOT, LOADER,
                          NGINX_LUA_ROOT, ROOT, addr_of, chunk_display, cut_outputs, frame_place, run_gdb,
                          wrap_commands)
from support.host import HostProcess, core_outputs
from support.moments import kernel_cores_possible

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
LUA_MODULE = os.path.join(NGINX_LUA_ROOT, "usr", "lib", "nginx", "modules", "ngx_http_lua_module.so")
APPDIR = os.path.join(ROOT, "testprogs", "nginx")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (os.path.exists(NGINX) and os.path.exists(LUA_MODULE)),
                                 reason="nginx or the unpacked libnginx-mod-http-lua is missing "
                                 "(testprogs/install-deps.sh installs nginx, testprogs/debs.py "
                                 "unpacks the module)")]
REQUESTS = ("sleep", "read", "wrap")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class SilentServer(object):
    """Accepts connections on 127.0.0.1 and never sends a byte."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


def write_conf(d, master=False):
    """nginx.conf in d for a free port on 127.0.0.1; returns the port.
    master: a master process and two workers (user root: they write the
    handlers' records into d), not the one process."""
    port = free_port()
    with open(os.path.join(APPDIR, "nginx.conf.in")) as f:
        conf = f.read().replace("@PREFIX@", d).replace("@PORT@", str(port)).replace(
            "@APPDIR@", APPDIR).replace("@LUAROOT@", NGINX_LUA_ROOT)
    if master:
        conf = conf.replace("master_process off;", "master_process on;\nuser root;").replace(
            "worker_processes 1;", "worker_processes 2;")
    os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(conf)
    return port


def start_nginx(d, expected, libdir=LIBLUAJIT2_DIR, gdb_init=(LIBLUAJIT2_DEBUG,), master=False):
    """nginx on the libluajit in libdir (LD_LIBRARY_PATH; by default the
    rebuilt one, whose debug file gdb_init lets gdb find); master: as
    write_conf takes it."""
    if not os.path.isdir(libdir):
        pytest.fail("%s is missing: python3 testprogs/debs.py unpacks it" % libdir)
    port = write_conf(d, master)

    def accepting():
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            return False
    p = HostProcess([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf")], d, expected,
                    env={"LD_LIBRARY_PATH": libdir, "LJGDB_EXPECTED": expected}, ready=accepting,
                    gdb_init=gdb_init)
    p.libdir = libdir
    return p, port


def request(port, path):
    """Send a GET and keep the connection open (the handler blocks)."""
    c = socket.create_connection(("127.0.0.1", port), 5)
    c.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" % path).encode())
    return c


def check(outs, expected, how):
    out = dict(outs)
    threads = {r[1]: addr_of(r[2]) for r in expected if r[0] == "req"}
    frames = {}
    for r in expected:
        if r[0] == "frame":
            frames.setdefault(r[1], []).append("%s:%s" % (chunk_display(r[3]), r[4]))
    assert set(threads) == set(REQUESTS), expected
    assert "memory search" in out["linfo"], (how, out["linfo"])
    for name, L in threads.items():
        lbt = out["lbt L=0x%x" % L].splitlines()
        assert lbt[0].startswith("Lua backtrace of (lua_State *)0x%x (coroutine, " % L), (how, lbt)
        lua = [frame_place(line[5:]) for line in lbt[1:] if re.match(r"#\d+ ", line)
               and not line[5:].startswith(("C:", "[builtin#"))]
        # The recorded frames are the innermost Lua frames of the thread.
        assert lua[:len(frames[name])] == frames[name], (how, name, lbt, frames[name])
        assert re.search(r"^0x%x\s+(suspended|normal)\s" % L, out["lthreads"], re.M), \
            (how, out["lthreads"])
    # The C functions the handlers block in, by the names Lua code calls
    # them (the lua module is stripped: no symbols).
    top = {name: out["lbt L=0x%x" % L].splitlines()[1] for name, L in threads.items()}
    assert re.match(r"#0   C:0x[0-9a-f]+ \(ngx\.sleep\)$", top["sleep"]), (how, top)
    assert re.match(r"#0   C:0x[0-9a-f]+ \(:receive\)$", top["read"]), (how, top)
    # The request that called the coroutine.wrap function resumed the
    # coroutine that recorded "wrap".
    assert re.search(r"^#0   C:0x[0-9a-f]+ \(coroutine\.wrap function\) -> resumed "
                     r"\(lua_State \*\)0x%x$" % threads["wrap"], out["lbt --all"], re.M), \
        (how, out["lbt --all"])
    assert re.search(r"^0x%x\s+suspended .*\(resumed by 0x[0-9a-f]+, " % threads["wrap"],
                     out["lthreads"], re.M), (how, out["lthreads"])
    # Each coroutine's request, as thread.exdata gave it.
    for r in expected:
        if r[0] == "exdata":
            assert re.search(r"^0x%x\s.*request \(ngx_http_request_t \*\)0x%x\)$"
                             % (threads[r[1]], addr_of(r[2])), out["lthreads"], re.M), \
                (how, r, out["lthreads"])
    assert [r for r in expected if r[0] == "exdata"], "thread.exdata gave nothing"
    assert "(exact)" in out["lgcstat"], (how, out["lgcstat"])
    # Who holds each request's table: the module's M.held[NAME], and
    # nothing else; the path from the roots ends there.
    held = [r for r in expected if r[0] == "held"]
    assert sorted(r[1] for r in held) == sorted(REQUESTS), expected
    for _, name, obj, holder in held:
        ref = json.loads(out["lgcref --json 0x%x" % addr_of(obj)])
        assert [(r["how"], r["holder"], r["key"]) for r in ref["referrers"]] == \
            [("val", "0x%x" % addr_of(holder), '"%s"' % name)], (how, name, ref)
        path = json.loads(out["lgcpath --json 0x%x" % addr_of(obj)])
        assert path["expression"].endswith(".held.%s" % name), (how, name, path)
    rows = [line for line in out["lstates"].splitlines() if line.startswith("0x")]
    assert len(rows) == 1 and " idle " in rows[0], (how, out["lstates"])


def test_nginx_request_coroutines(tmp_path):
    run_request_coroutines(str(tmp_path))


def run_request_coroutines(d, also=None, **lib):
    """Three request coroutines blocked, read attached, from the gcore and
    from the kernel's core; also(core, cmds, expected): more checks on the
    gcore; lib: start_nginx's libdir and gdb_init."""
    exp = os.path.join(d, "expected.txt")
    silent = SilentServer()
    p, port = start_nginx(d, exp, **lib)
    conns = []
    try:
        conns.append(request(port, "/sleep"))
        conns.append(request(port, "/read?port=%d" % silent.port))
        conns.append(request(port, "/wrap"))
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(exp) and len([r for r in p.reread() if r[0] == "req"]) == 3:
                break
            time.sleep(0.05)
        time.sleep(0.3)         # every handler is in its blocking call
        expected = p.reread()
        threads = [addr_of(r[2]) for r in expected if r[0] == "req"]
        held = [addr_of(r[2]) for r in expected if r[0] == "held"]
        cmds = ["linfo", "lthreads", "lgcstat", "lstates", "lbt --all"] + \
            ["lbt L=0x%x" % L for L in threads] + \
            ["lgcref --json 0x%x" % a for a in held] + ["lgcpath --json 0x%x" % a for a in held]
        core = os.path.join(d, "gcore")
        attached = p.attach(cmds, core)
        with open(core, "rb") as f:      # the process ran the library of LD_LIBRARY_PATH
            assert os.path.realpath(os.path.join(p.libdir, "libluajit-5.1.so.2")).encode() \
                in f.read(), p.libdir
        from_core = core_outputs(NGINX, core, cmds, d, p.gdb_init)
        if p.libdir == LIBLUAJIT2_DIR:   # gdb read the rebuilt library's debug file
            for outs in (attached, from_core):
                linfo = dict(outs)["linfo"]
                assert re.search(r"^layout: +DWARF debug info$", linfo, re.M), linfo
        check(attached, expected, "attached")
        check(from_core, expected, "gcore")
        if also is not None:
            also(core, cmds, expected)
        if not kernel_cores_possible():
            kcore = p.abort()
            assert kcore, "no kernel core after SIGABRT:\n%s" % p.log()
            check(core_outputs(NGINX, kcore, cmds, d, p.gdb_init), expected, "kernel core")
    finally:
        for c in conns:
            c.close()
        p.stop()
        silent.close()


# Debian's official libluajit2-5.1-2, unpacked by testprogs/debs.py: the
# stripped library users run, whose debug file is nowhere on this machine.
OFFICIAL_LIBDIR = os.path.join(CACHE, "debs", "libluajit2-root", "usr", "lib", "x86_64-linux-gnu")


@pytest.mark.skipif(not os.path.isdir(OFFICIAL_LIBDIR), reason="testprogs/debs.py unpacks "
                    "Debian's official libluajit2-5.1-2")
def test_nginx_official_library_through_the_shipped_profile(tmp_path):
    """nginx on Debian's official, stripped libluajit2 (LD_LIBRARY_PATH):
    gdb has no DWARF for it, and the shipped profile of the rebuilt
    package, chosen by LuaJIT's version string and the worker's memory,
    reads the same frames, threads, requests and heap as the debug file
    does; so does the core reader on the gcore."""
    import subprocess
    import sys
    lib = os.path.realpath(os.path.join(OFFICIAL_LIBDIR, "libluajit-5.1.so.2"))
    note = subprocess.run(["readelf", "-n", lib], stdout=subprocess.PIPE).stdout.decode()
    bid = re.search(r"Build ID: ([0-9a-f]+)", note).group(1)
    for debug_dir in ("/usr/lib/debug", os.path.join(LIBLUAJIT2_ROOT, "usr", "lib", "debug")):
        assert not os.path.exists("%s/.build-id/%s/%s.debug" % (debug_dir, bid[:2], bid[2:]))
    with open(os.path.join(ROOT, "pkg", "profiles", [
            f for f in os.listdir(os.path.join(ROOT, "pkg", "profiles"))
            if f.startswith("debian-libluajit2_")][0])) as f:
        assert bid not in f.read()          # chosen by version, not by build-id

    def also(core, cmds, expected):
        out = dict(core_outputs(NGINX, core, ["linfo"], os.path.dirname(core)))["linfo"]
        assert re.search(r"^layout: +layout profile debian-libluajit2_[^ ]+\.json \(LuaJIT "
                         r"2\.1\.0-beta3, build-id [0-9a-f]+\), chosen by the version string "
                         r"'LuaJIT 2\.1\.0-beta3' and a global_State consistent under its "
                         r"layout \(of \d+ profiles with that version; 2 fit, all laid out alike\) \(the binary has no "
                         r"DWARF for LuaJIT\); the VM's code labels from the profile$", out,
                         re.M), out
        reader = []
        for cmd in cmds:
            r = subprocess.run([sys.executable, "-m", "ljgdb", core, NGINX] + cmd.split(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
            reader.append((cmd, r.stdout.decode()))
        check(reader, expected, "core reader")
    run_request_coroutines(str(tmp_path), also=also, libdir=OFFICIAL_LIBDIR, gdb_init=())


def test_nginx_library_without_its_debug_file(tmp_path):
    """nginx on the machine's own libluajit2-5.1-2 (OpenResty's, as a user
    of Debian's libnginx-mod-http-lua has it installed), without its debug
    file and without layout profiles (the shipped one would read it: test
    above): the hint names the package that ships it (dpkg -S).  Where the
    machine has Debian's libluajit-5.1-2 instead (the suite never installs
    libluajit2: it would remove that), the lua module cannot load it, and
    test_distro's test of the installed luajit checks the same hint."""
    import subprocess
    system = "/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2"
    owner = subprocess.run(["dpkg-query", "-S", os.path.realpath(system)], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL).stdout.decode()
    if not owner.startswith("libluajit2-5.1-2:"):
        pytest.skip("the machine's libluajit is not OpenResty's libluajit2-5.1-2 (%s): nginx's lua "
                    "module needs it" % (owner.split(":")[0] or "none"))
    pkg = owner.split(":")[0]
    d = str(tmp_path)
    write_conf(d)
    cmds = ["lbt", "linfo"]
    text = run_gdb(["-iex", "set debug-file-directory /nonexistent", "-iex",
                    "set debuginfod enabled off", "-ex", "source " + LOADER, "-ex",
                    "set breakpoint pending on", "-ex", "break lua_pcall", "-ex", "run"]
                   + wrap_commands(cmds) + ["-ex", "kill", "--args", NGINX, "-p", d, "-c",
                                            os.path.join(d, "nginx.conf")], cwd=d,
                   env={"LJGDB_PROFILES": "none"})
    for cmd, out in cut_outputs(text, cmds):
        assert out is not None, text[-3000:]
        lines = out.strip().splitlines()
        assert len(lines) == 1 and "without debug info" in lines[0], out
        assert "apt install %s-dbgsym" % pkg in lines[0], out


def test_nginx_worker_busy_in_lua(tmp_path):
    """A worker spinning in interpreted Lua inside a request: gdb attaches at
    random moments (and the kernel's core after SIGABRT), and lbt must be
    the recorded stack, judged as tests/support/moments.py judges (never wrong)."""
    import random
    from support.moments import judge
    d = str(tmp_path)
    exp = os.path.join(d, "expected.txt")
    p, port = start_nginx(d, exp)
    conns = []
    try:
        conns.append(request(port, "/spin"))
        spin = exp + ".spin"
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(spin) and "ready\n" in open(spin).read():
                break
            time.sleep(0.05)
        from support.stop import read_expected
        records = read_expected(spin)
        rnd = random.Random(7)
        verdicts = []
        inner = [r for r in records if r[0] == "frame"][0]
        where = "%s:%s" % (chunk_display(inner[3]), inner[4])
        for i in range(6):
            time.sleep(rnd.uniform(0.01, 0.2))
            outs = dict(p.attach(["lbt", "lthreads"]))
            verdicts.append((judge(records, outs["lbt"]), outs["lbt"]))
            # lthreads shows the running thread where lbt does (or '?').
            running = [line for line in outs["lthreads"].splitlines() if " running " in line]
            assert len(running) == 1, outs["lthreads"]
            assert running[0].split()[5] in (where, "?"), (where, outs["lthreads"])
        if not kernel_cores_possible():
            kcore = p.abort()
            assert kcore, "no kernel core after SIGABRT:\n%s" % p.log()
            out = dict(core_outputs(NGINX, kcore, ["lbt"], d, p.gdb_init))["lbt"]
            verdicts.append((judge(records, out), out))
        assert not [v for v in verdicts if v[0][0] == "wrong"], verdicts
        assert sum(1 for v in verdicts if v[0][0] == "exact") >= len(verdicts) - 1, verdicts
    finally:
        for c in conns:
            c.close()
        p.stop()
