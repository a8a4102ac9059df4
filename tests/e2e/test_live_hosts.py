"""The live backend (python3 -m ljgdb dump --pid, --pid PID lbt, record
--pid) on real hosts, where it may not read, and on qemu-user.

- nginx with lua-nginx-module (test_nginx's server, one process that is the
  worker), under load from clients on 127.0.0.1: every request counts in
  the interpreter in testprogs/nginx/app.lua's busy handler, whose first
  run records its frames (debug.getinfo, on the loop's line).  Each dump
  and lbt is judged against them as tests/support/moments.py judges gdb's
  lbt; the worker answers the clients throughout and one more request
  after, and is not traced.  record --pid's stacks end in those frames.
  On the rebuilt libluajit2 and on Debian's
  official, stripped one (the shipped layout profile).
- Tarantool running testprogs/tarantool/busy.lua: a fiber counting in Lua,
  the same judgement, the fiber named as the program named it, and its
  ticker fiber goes on ticking.
- Refusals, one line each on stderr, exit status 1, the target left as it
  was: gdb attached (the tracer named), an unprivileged user against a
  root process, qemu-user (its guest's registers are not ptrace's).  Yama
  is unit-tested (tests/unit/test_live_refusal.py): this kernel has none.
  A pid that is gone and a process without LuaJIT: test_live.py.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from support.bpfprogs import bpf_why
from support.host import HostProcess, proc_state
from support.moments import judge
from support.stop import ROOT, chunk_display, frame_place, manifest, read_expected
from test_live import TRACEBACK, Waiting, assert_left_alone, assert_one_line_each, dump, live
from test_nginx import LUA_MODULE, NGINX, OFFICIAL_LIBDIR, start_nginx
from test_record import folded

TARANTOOL = shutil.which("tarantool")
TRIES = 5
SYSTEM_LIBDIR = "/usr/lib/x86_64-linux-gnu"


def tracer_pid(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^TracerPid:\s+(\d+)$", f.read(), re.M).group(1))


def verdict(records, out, pid, dumped):
    """judge's verdict on one run's output (dump's: its one thread's lbt
    text), or ('idle', ...) for dump's line when no frame runs Lua at that
    moment (between two requests)."""
    if dumped:
        if out.startswith("no thread of process %d runs Lua code now" % pid):
            return "idle", out
        head, _, rest = out.partition("\n")
        # (Its state as the kernel gave it just before the stop: running,
        # unless it had just come back from the event loop.)
        assert re.match(r'^Thread %d "[^"]+" \([RSD]: [a-z ]+\)$' % pid, head), out
        out = rest.split("\n\n")[0]
    return judge(records, out)


def assert_judged(records, pid, check=None, elsewhere=None):
    """TRIES dumps and TRIES --pid lbt of a process busy in the recorded
    frames: none wrong, all but one per kind exact; check(out) on each.
    elsewhere(out): True when the moment caught another part of the
    program running, rightly shown (it checks that); such a moment is taken
    again, up to TRIES times a kind."""
    outs = []
    for args, dumped in (([], True), (["lbt"], False)):
        taken = again = 0
        while taken < TRIES:
            code, out, err = dump(pid, args) if dumped else live(pid, args)
            assert (code, err) == (0, ""), (args, err)
            assert tracer_pid(pid) == 0
            if elsewhere is not None and again < TRIES and elsewhere(out):
                again += 1
                continue
            taken += 1
            if check:
                check(out)
            outs.append((dumped, verdict(records, out, pid, dumped), out))
    assert not [o for o in outs if o[1][0] not in ("exact", "honest", "idle")], outs
    for dumped in (True, False):
        assert sum(1 for o in outs if o[0] == dumped and o[1][0] == "exact") >= TRIES - 1, outs
    return outs


def innermost_two(records):
    """The innermost two of the frames a handler recorded, as a folded
    stack's end ("file:line;file:line")."""
    frames = sorted((int(r[1]), chunk_display(r[3]), int(r[4])) for r in records if r[0] == "frame")
    return ";".join("%s:%d" % (src, line) for _, src, line in reversed(frames[:2]))


def assert_recorded(records, pid, tmp):
    """record --pid for 2 s at 100 Hz while the process is busy in the
    recorded frames: most kept stacks end in them (the innermost two, as
    lbt names them), none is written wrong elsewhere than between two
    units of work, and the process is not left traced."""
    out = os.path.join(tmp, "busy.folded")
    p = subprocess.run([sys.executable, "-m", "ljgdb", "record", "--pid", str(pid), "--duration",
                        "2", "--format", "folded", "-o", out], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode()
    assert p.returncode == 0 and TRACEBACK not in err, err
    assert tracer_pid(pid) == 0
    tail = innermost_two(records)
    stacks = folded(out)
    busy = sum(n for st, n in stacks.items() if st.endswith(tail))
    assert busy >= sum(stacks.values()) // 2 and busy >= 50, (tail, stacks, err)


# --- nginx -------------------------------------------------------------------

class Load(object):
    """Clients on 127.0.0.1 sending GET /busy?n=N one after the other."""

    def __init__(self, port, clients=2, n=20000000):
        self.port, self.n = port, n
        self.answers, self.errors = 0, []
        self.running = True
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def _loop(self):
        while self.running:
            try:
                body = get(self.port, "/busy?n=%d" % self.n)
            except OSError as e:
                self.errors.append(repr(e))
                return
            if body == "busy %d\n" % self.n:
                self.answers += 1
            else:
                self.errors.append(body)

    def stop(self):
        self.running = False
        for t in self.threads:
            t.join(60)


def get(port, path):
    """The body of the answer to GET path."""
    c = socket.create_connection(("127.0.0.1", port), 60)
    try:
        c.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        c.close()
    head, _, body = data.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200 "), data
    return body


def official_libdir():
    """Debian's official, stripped libluajit2: as testprogs/debs.py unpacks
    it, else the machine's own when dpkg says it is that package and no
    debug file for it is installed; None otherwise."""
    if os.path.isdir(OFFICIAL_LIBDIR):
        return OFFICIAL_LIBDIR
    lib = os.path.realpath(os.path.join(SYSTEM_LIBDIR, "libluajit-5.1.so.2"))
    owner = subprocess.run(["dpkg-query", "-S", lib], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL).stdout.decode()
    note = subprocess.run(["readelf", "-n", lib], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL).stdout.decode()
    bid = re.search(r"Build ID: ([0-9a-f]+)", note)
    if not owner.startswith("libluajit2-5.1-2:") or not bid or os.path.exists(
            "/usr/lib/debug/.build-id/%s/%s.debug" % (bid.group(1)[:2], bid.group(1)[2:])):
        return None
    return SYSTEM_LIBDIR


nginx_needed = pytest.mark.skipif(not (os.path.exists(NGINX) and os.path.exists(LUA_MODULE)),
                                  reason="nginx or the unpacked libnginx-mod-http-lua is missing "
                                  "(install-deps.sh, debs.py)")


@pytest.mark.slow
@nginx_needed
@pytest.mark.parametrize("lib", ["rebuilt", "official"])
def test_nginx_worker_under_load(lib, tmp_path):
    """dump --pid and --pid lbt of the worker busy in the handler, as the
    handler recorded its frames; the layout from the library's DWARF-made
    profile (the rebuilt one) or the shipped profile chosen by LuaJIT's
    version (the official one, which has no debug file here)."""
    libdir = {"rebuilt": None, "official": official_libdir()}[lib]
    if lib == "official" and libdir is None:
        pytest.skip("Debian's official libluajit2-5.1-2 is neither unpacked (testprogs/debs.py) "
                    "nor installed without its debug file")
    d = str(tmp_path)
    exp = os.path.join(d, "expected.txt")
    p, port = start_nginx(d, exp, **({"libdir": libdir, "gdb_init": ()} if libdir else {}))
    load = None
    try:
        assert get(port, "/busy?n=1") == "busy 1\n"         # (records the handler's frames)
        records = read_expected(exp + ".busy")
        assert records[-1] == ["ready"] and len([r for r in records if r[0] == "frame"]) == 4, \
            records
        with open("/proc/%d/maps" % p.pid) as f:
            mapped = set(line.split()[-1] for line in f if "libluajit" in line)
        assert mapped == {os.path.realpath(os.path.join(p.libdir, "libluajit-5.1.so.2"))}, mapped
        code, linfo, err = live(p.pid, ["linfo"])
        assert code == 0, err
        if lib == "official":
            assert re.search(r"^layout: +layout profile debian-libluajit2_[^ ]+\.json \(LuaJIT "
                             r"2\.1\.0-beta3, build-id [0-9a-f]+\), chosen by the version string",
                             linfo, re.M), linfo
        load = Load(port)
        deadline = time.time() + 10
        while proc_state(p.pid) != "R" and time.time() < deadline:
            time.sleep(0.02)
        before = load.answers
        assert_judged(records, p.pid)
        assert_recorded(records, p.pid, d)
        assert load.answers > before and not load.errors, (load.answers, before, load.errors)
        load.stop()
        # It goes on serving, and nothing of ours is left on it.
        assert get(port, "/busy?n=10") == "busy 10\n"
        deadline = time.time() + 10
        while proc_state(p.pid) != "S" and time.time() < deadline:
            time.sleep(0.02)
        assert_left_alone(p.pid)
    finally:
        if load:
            load.stop()
        p.stop()


@pytest.mark.slow
@nginx_needed
@pytest.mark.skipif(bpf_why() is not None, reason="no BPF sampler: %s" % bpf_why())
def test_nginx_master_and_workers_recorded(tmp_path):
    """record --pid MASTER --children with the BPF sampler: nginx with a
    master and two workers (the same server, master_process on), four
    clients keeping both workers busy.  The profile has a root frame per
    process, named by its pid: the master's and its two children's
    (/proc/PID/task/TID/children), no other; each worker's stacks end in
    the busy handler's frames as the handler recorded them; the summary
    counts the three processes; the clients get every answer."""
    d = str(tmp_path)
    exp = os.path.join(d, "expected.txt")
    p, port = start_nginx(d, exp, master=True)
    load = None
    try:
        deadline = time.time() + 10
        workers = []
        while len(workers) < 2 and time.time() < deadline:
            workers = sorted(int(k) for t in os.listdir("/proc/%d/task" % p.pid)
                             for k in open("/proc/%d/task/%s/children" % (p.pid, t)).read().split())
            time.sleep(0.05)
        assert len(workers) == 2, workers
        assert get(port, "/busy?n=1") == "busy 1\n"
        records = read_expected(exp + ".busy")
        tail = innermost_two(records)
        load = Load(port, clients=4, n=2000000)
        out = os.path.join(d, "all.folded")
        r = subprocess.run([sys.executable, "-m", "ljgdb", "record", "--pid", str(p.pid),
                            "--children", "--duration", "3", "--format", "folded", "-o", out],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        err = r.stderr.decode()
        assert r.returncode == 0 and TRACEBACK not in err, err
        assert "of 3 processes (%d, %d, %d)" % (p.pid, workers[0], workers[1]) in err, err
        busy = {}
        for stack, n in folded(out).items():
            root, _, rest = stack.partition(";")
            m = re.match(r"^process (\d+) \(nginx\)$", root)
            assert m and int(m.group(1)) in [p.pid] + workers, stack
            if rest.endswith(tail):
                busy[int(m.group(1))] = busy.get(int(m.group(1)), 0) + n
        assert set(busy) == set(workers) and min(busy.values()) >= 20, (busy, err)
        load.stop()
        assert load.answers > 0 and not load.errors, (load.answers, load.errors)
    finally:
        if load:
            load.stop()
        # (SIGTERM: the master stops its workers and waits for them; a
        # SIGKILL would leave them running)
        p.proc.send_signal(signal.SIGTERM)
        try:
            p.proc.wait(20)
        except subprocess.TimeoutExpired:
            pass
        p.stop()


# --- Tarantool ---------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(TARANTOOL is None, reason="tarantool is not installed")
def test_tarantool_fiber_busy_in_lua(tmp_path):
    d = str(tmp_path)
    exp = os.path.join(d, "expected.txt")
    p = HostProcess([TARANTOOL, os.path.join(ROOT, "testprogs", "tarantool", "busy.lua"), exp], d,
                    exp)
    try:
        records = p.expected
        (fid, name), = [r[1:] for r in records if r[0] == "fiber"]
        assert name == "spinner" and len([r for r in records if r[0] == "frame"]) == 2, records

        def fiber_named(out):
            if "no thread of process" not in out:
                assert re.search(r'^Lua backtrace of \(lua_State \*\)0x[0-9a-f]+ \(coroutine, '
                                 r'running; fiber %s "%s", running\)' % (fid, name), out, re.M), out

        ticks = os.path.join(d, "expected.txt.ticks")
        deadline = time.time() + 10
        while not os.path.exists(ticks) and time.time() < deadline:
            time.sleep(0.05)
        with open(ticks) as f:
            before = len(f.readlines())
        with open(os.path.join(d, "expected.txt.ticker")) as f:
            _, src, first, last = f.read().split("\t")
        first, last = int(first), int(last)

        def ticker(out):
            """The ticker fiber caught writing its tick (once in a few
            hundred moments): its Lua frames are the ticker function's."""
            if not re.search(r'^Lua backtrace of .*; fiber \d+ "ticker", running\)', out, re.M):
                return False
            lua = re.findall(r"^#\d+\s+(\S+?):(\d+): in function <(\S+?):(\d+)>$", out, re.M)
            where = chunk_display(src)
            assert lua and all(a == c == where and int(e) == first and first <= int(b) <= last
                               for a, b, c, e in lua), out
            return True
        assert_judged(records, p.pid, fiber_named, ticker)
        assert_recorded(records, p.pid, d)
        time.sleep(0.5)
        with open(ticks) as f:
            after = f.readlines()
        assert len(after) > before and after[-1] == "tick %d\n" % len(after), (before, after[-3:])
        assert_left_alone(p.pid, proc_state(p.pid))
        assert p.proc.poll() is None
    finally:
        p.stop()


# --- Refusals ----------------------------------------------------------------

def test_gdb_attached_is_named(tmp_path):
    """gdb attached (the process stopped under it): dump and --pid lbt say
    which process traces it; once gdb has detached, the process runs as
    before and dump reads it."""
    prog = Waiting("r21-gc64", tmp_path)
    go = os.path.join(str(tmp_path), "go")
    gdb = subprocess.Popen(["gdb", "-nx", "-batch", "-p", str(prog.pid), "-ex",
                            "shell while [ ! -e %s ]; do sleep 0.05; done" % go],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while tracer_pid(prog.pid) != gdb.pid and time.time() < deadline:
            time.sleep(0.05)
        assert tracer_pid(prog.pid) == gdb.pid
        line = r"^ljgdb: process %d is already traced by process %d \(gdb; TracerPid in " \
            r"/proc/%d/status\): a process has one tracer at a time; detach that one first$" % (
                prog.pid, gdb.pid, prog.pid)
        assert_one_line_each([(["--pid", str(prog.pid)], line)], first=["dump"])
        assert_one_line_each([(["--pid", str(prog.pid), "lbt"], line)])
        assert tracer_pid(prog.pid) == gdb.pid          # (still gdb's)
        open(go, "w").close()
        assert gdb.wait(30) == 0
        prog.wait_blocked()
        assert_left_alone(prog.pid)
        code, out, err = dump(prog.pid, [])
        assert code == 0 and "wait.lua:%d\n" % prog.frames()[0][2] in frame_place(out), err
        assert_left_alone(prog.pid)
        prog.quit()
    finally:
        if gdb.poll() is None:
            open(go, "w").close()
            gdb.wait(30)
        prog.stop()


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv")
                    or not os.path.exists("/usr/bin/python3"),
                    reason="needs root, setpriv and /usr/bin/python3")
def test_unprivileged_user_is_told(tmp_path):
    """dump and --pid lbt as user nobody against a process of root: one
    line naming both users and what to do.  (/usr/bin/python3: the
    tests' interpreter may be in a directory nobody cannot enter.)"""
    prog = Waiting("r21-gc64", tmp_path)
    try:
        for args in (["dump", "--pid", str(prog.pid)], ["--pid", str(prog.pid), "lbt"]):
            p = subprocess.run(NOBODY + ["/usr/bin/python3", "-m", "ljgdb"] + args,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                               timeout=60)
            err = p.stderr.decode()
            assert p.returncode == 1 and p.stdout == b"" and TRACEBACK not in err, (args, err)
            assert re.match(r"^ljgdb: ptrace of process %d refused \(Permission denied\), it runs "
                            r"as user root \(uid 0\) and this is user nobody \(uid 65534\): run "
                            r"as the process's user or as root \(.*\)\n$" % prog.pid, err), err
            assert_left_alone(prog.pid)
        prog.send("ping")
        prog.wait_blocked()
        prog.quit()
    finally:
        prog.stop()


@pytest.mark.skipif(not shutil.which("qemu-aarch64"), reason="qemu-user is not installed")
def test_qemu_user_is_told(tmp_path):
    """The r21-arm64 build under qemu-aarch64: the pid is qemu's, an
    x86-64 process whose registers are not the guest's; one line naming
    the guest program and what to use, and qemu runs on untouched."""
    prog = Waiting("r21-arm64", tmp_path)
    try:
        with open("/proc/%d/exe" % prog.pid, "rb") as f:
            assert f.read(20)[18] == 0x3e                  # (x86-64: qemu itself)
        line = (r"^ljgdb: process %d is qemu-aarch64 \(qemu-user\) running the aarch64 program "
                r"%s: ptrace reads qemu's own x86_64 registers, not the emulated ones, so --pid "
                r"cannot; start the program under qemu-aarch64 -g SOCKET and attach "
                r"gdb-multiarch with ljgdb \(target remote SOCKET\), or read a core qemu writes "
                r"\(SIGABRT: .*\) with python3 -m ljgdb --sysroot DIR CORE PROGRAM COMMAND$"
                % (prog.pid, re.escape(manifest()["r21-arm64"]["host"])))
        assert_one_line_each([(["--pid", str(prog.pid)], line)], first=["dump"])
        assert_one_line_each([(["--pid", str(prog.pid), "lbt"], line)])
        assert_left_alone(prog.pid)
        prog.quit()
    finally:
        prog.stop()
