"""Run real gdb with ljgdb on real LuaJIT builds, live and on a core.

A "stop" runs a Lua test program in the C host of one build variant under
gdb, stops at ljgdb_break (a C function called from Lua), runs a list of
gdb commands, saves a core with gcore, then loads that core in a second gdb
and runs the same commands again.  Each command's output is cut out of
gdb's output by markers.  The Lua program writes what it expects (from
LuaJIT itself) to a file before it stops.
"""
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

# tests/support/stop.py -> the checkout
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = os.path.join(ROOT, "ljgdb.py")
LUA_DIR = os.path.join(ROOT, "testprogs", "lua")
CACHE = os.environ.get("LJGDB_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ljgdb")
MANIFEST = os.path.join(CACHE, "builds.json")
# Debian's libluajit2-5.1-2 rebuilt with its -dbgsym debug file, unpacked
# (never installed) by testprogs/debs.py: its library directory (for
# LD_LIBRARY_PATH) and the gdb command that finds its debug file.
LIBLUAJIT2_ROOT = os.path.join(CACHE, "debs", "libluajit2-rebuilt-root")
LIBLUAJIT2_DIR = os.path.join(LIBLUAJIT2_ROOT, "usr", "lib", "x86_64-linux-gnu")
# Debian's lua-nginx-module, unpacked by testprogs/debs.py (never installed).
NGINX_LUA_ROOT = os.path.join(CACHE, "debs", "nginx-lua-root")
LIBLUAJIT2_DEBUG = "set debug-file-directory %s:/usr/lib/debug" % os.path.join(
    LIBLUAJIT2_ROOT, "usr", "lib", "debug")

ALL_VARIANTS = ("r21-gc64", "r21-x64", "r21-dualnum", "r20-x64", "deb-gc64", "deb-x64", "or-gc64", "or-x64")
# Built by default too, but without the JIT (LUAJIT_DISABLE_JIT): only for
# the tests that check what commands say when there is no JIT.
NOJIT_VARIANTS = ("r21-nojit",)
# Cross-built for arm64 and run under qemu-user (testprogs/build.py --arm64;
# Stop and MultiStop run them under qemu-aarch64 and gdb-multiarch).
ARM64_VARIANTS = ("r21-arm64", "or-arm64")
# The x86-64 matrix and arm64: for the modules whose every test runs on arm64.
BOTH_ARCHES = ALL_VARIANTS + ARM64_VARIANTS
GDB_TIMEOUT = int(os.environ.get("LJGDB_GDB_TIMEOUT", "300"))


def manifest():
    if not os.path.exists(MANIFEST):
        raise RuntimeError("no LuaJIT builds: run `python3 testprogs/build.py` first (%s missing)"
                           % MANIFEST)
    with open(MANIFEST) as f:
        m = json.load(f)
    missing = [v for v in ALL_VARIANTS + NOJIT_VARIANTS + ARM64_VARIANTS
               if v not in m or not os.path.exists(m[v]["host"])]
    if missing:
        raise RuntimeError("builds missing for %s: run `python3 testprogs/build.py --arm64`"
                           % ", ".join(missing))
    return m


_BEGIN = "@@LJGDB-BEGIN %s@@"
_END = "@@LJGDB-END %s@@"


def _key(i, stop):
    return "%d" % i if stop is None else "%d %d" % (stop, i)


def wrap_commands(commands, first=0, stop=None):
    """gdb arguments running each command between markers numbered from
    `first` on (as cut_outputs finds them); `stop`, the number of the stop
    when a program stops several times (multistop.py), goes in the markers
    too."""
    args = []
    for i, cmd in enumerate(commands, first):
        args += ["-ex", "echo \\n" + _BEGIN % _key(i, stop) + "\\n", "-ex", cmd,
                 "-ex", "echo \\n" + _END % _key(i, stop) + "\\n"]
    return args


def cut_outputs(text, commands, stop=None):
    """[(command, output or None)] in order (of the stop numbered `stop`)."""
    out = []
    for i, cmd in enumerate(commands):
        m = re.search(re.escape(_BEGIN % _key(i, stop)) + r"\n(.*?)\n?" +
                      re.escape(_END % _key(i, stop)), text, re.S)
        out.append((cmd, m.group(1) if m else None))
    return out


# gdb makes frames the core reader (and ljgdb --pid) does not: a tail
# call's caller (from the DWARF call-site records: "tail call frame") and a
# parameter's value at the call (L@entry).  Where those frames are, the frames named in lstates'
# "found by" and in linfo's "selected L" differ; what was found does not.
_FRAME_NAMED = re.compile(r"frame #\d+ [^:;\])]*: [A-Za-z0-9_ ]+")


def without_frame_names(text):
    """text with each 'frame #N function: variable' as 'frame', a list of
    them as one, and without how linfo's selected L was chosen (a pointer
    to the same L or to its G may come first in the two frame lists)."""
    text = re.sub(r"^(selected L: +\S+ \S+)  \[.*\]$", r"\1", text, flags=re.M)
    return re.sub(r"frame(; frame)+", "frame", _FRAME_NAMED.sub("frame", text))


# What lbt writes after a Lua frame's place: the name its caller gave it, as
# Lua's traceback says it (test_lbt.py's test_frame_names_are_luajits checks
# those against debug.getinfo; tests of the places leave them out).
_CALLED_AS = re.compile(r": in (?:main chunk|function <[^>]*>|[a-z]+ '[^']*')(?=$| \(in trace )",
                        re.M)


def traceback_name(what, namewhat, name, source, linedefined):
    """How Lua 5.2's traceback says a Lua frame was called, from
    debug.getinfo's what, namewhat, name, source and linedefined: what lbt
    writes after the place and ": in "."""
    if namewhat:
        return "%s '%s'" % ("function" if namewhat == "global" else namewhat, name)
    if what == "main":
        return "main chunk"
    return "function <%s:%s>" % (chunk_display(source), linedefined)


def frame_place(text):
    """lbt's text (a frame line, or lines) without the frames' names."""
    return _CALLED_AS.sub("", text)


# A profile's frame as record, top and lprofile write it: "busy (app.lua:12)"
# where the frame's caller called its function by a name, as py-spy writes
# a frame; the place alone ("app.lua:12") where it has none.  A top table
# names the function the same way, at the line it is defined on, or
# "function app.lua:10" without a name.
_PROFILE_NAMED = re.compile(r"^(.+) \(([^()]*:\d+)\)$")


def profile_place(frame):
    """A profile's frame text without its function's name."""
    m = _PROFILE_NAMED.match(frame)
    return m.group(2) if m else frame


def profile_frame(place, called):
    """The text of a profile's frame at place, whose caller called it by
    called ((namewhat, name) as debug.getinfo gives them, or None)."""
    return "%s (%s)" % (called[1], place) if called and called[0] else place


def profile_function(place, called):
    """A top table's name of the function defined at place (file:line)."""
    return "%s (%s)" % (called[1], place) if called and called[0] else "function " + place


def placed(stacks):
    """{folded stack: count} with each frame's text its place (profile_place)."""
    out = {}
    for s, n in stacks.items():
        k = ";".join(profile_place(f) for f in s.split(";"))
        out[k] = out.get(k, 0) + n
    return out


def driver_command(work, template):
    """Write template, given its own path (template % path), as work's
    driver.py; the gdb command that runs it at the stop."""
    driver = os.path.join(work, "driver.py")
    with open(driver, "w") as f:
        f.write(template % driver)
    return "python exec(open(%r).read())" % driver


def run_gdb(args, timeout=GDB_TIMEOUT, cwd=None, env=None, gdb="gdb"):
    """Run gdb in batch mode without any init file; return its whole output.
    cwd is where gdb runs: never the checkout, to show that `source` of the
    loader by absolute path is all it takes."""
    cmd = [gdb, "-nx", "-nh", "--batch", "-ex", "set confirm off", "-ex", "set pagination off",
           "-ex", "set width 0", "-ex", "set auto-load safe-path /"] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                       stdin=subprocess.DEVNULL, env=dict(os.environ, LC_ALL="C", **(env or {})),
                       cwd=cwd or os.path.expanduser("~"))
    return p.stdout.decode("utf-8", "replace")


class Stop(object):
    """Outputs of `commands` live and from the core, plus the expectations
    the Lua program wrote.  live/core map command -> output text."""

    def __init__(self, variant, program, commands, workdir, args=(), stop_on="break",
                 live_prelude=(), env=None, host=None):
        """live_prelude: gdb commands run in the live gdb only, after the
        first stop and before `commands` (such as `catch syscall read` and
        `continue`, to move to a later moment); the core is saved after
        them, so the core run sees the same moment without them.
        env: more environment variables for the program (the host's
        LJGDB_IDLE, LJGDB_STATES), which the core's gdb has too.  host: the
        binary to run in place of the variant's host (a stripped copy)."""
        m = dict(manifest()[variant])
        if host is not None:
            m["host"] = host
        self.variant = variant
        self.build = m
        self.commands = list(commands)
        os.makedirs(workdir, exist_ok=True)
        self.expected_file = os.path.join(workdir, "expected.txt")
        self.core = os.path.join(workdir, "core")
        for f in (self.expected_file, self.core):
            if os.path.exists(f):
                os.unlink(f)
        prog = os.path.join(LUA_DIR, program)
        # LUA_PATH lets the program load jit.vmdef (LuaJIT's own names).
        env = dict(env or {}, LUA_PATH=os.path.join(m["src"], "?.lua") + ";;")
        argv = [m["host"], prog, self.expected_file] + list(args)
        if m.get("arch") == "arm64":
            self._run_qemu(argv, workdir, stop_on, live_prelude, env)
            return
        live_args = self._live_args("run", stop_on, live_prelude)
        live_args += ["-ex", "gcore " + self.core, "-ex", "kill", "--args"] + argv
        self.live_text = run_gdb(live_args, cwd=workdir, env=env)
        self._check_live(stop_on)
        core_args = ["-ex", "source " + LOADER, "-ex", "core-file " + self.core]
        core_args += wrap_commands(self.commands)
        self.core_text = run_gdb(core_args + [m["host"]], cwd=workdir, env=env)
        self._finish()

    def _live_args(self, start, stop_on, live_prelude):
        """The live gdb's commands up to the last of self.commands; start
        is `run` or, attached to qemu's stub, `continue`."""
        args = ["-ex", "source " + LOADER]
        if stop_on == "break":
            args += ["-ex", "break ljgdb_break"]
        args += ["-ex", start]
        for cmd in live_prelude:
            args += ["-ex", cmd]
        return args + wrap_commands(self.commands)

    def _check_live(self, stop_on):
        # (Without debug info gdb writes "Breakpoint 1, 0x... in ljgdb_break ()".)
        marker = r"Breakpoint 1, (0x[0-9a-f]+ in )?ljgdb_break" if stop_on == "break" else \
            "received signal " + stop_on
        if not re.search(marker, self.live_text):
            raise AssertionError("%s: the program did not reach ljgdb_break:\n%s"
                                 % (self.variant, self.live_text[-3000:]))
        if not os.path.exists(self.core):
            raise AssertionError("%s: no core was written:\n%s" % (self.variant, self.live_text[-3000:]))
        self.live = cut_outputs(self.live_text, self.commands)

    def _finish(self):
        self.core_out = cut_outputs(self.core_text, self.commands)
        self.expected = read_expected(self.expected_file)

    def _run_qemu(self, argv, workdir, stop_on, live_prelude, env):
        """The arm64 stop (qemu_gdb): gcore over qemu's stub writes no
        usable core, so the core is the one qemu writes when gdb delivers
        SIGABRT."""
        m = self.build
        live_args = self._live_args("continue", stop_on, live_prelude) + ["-ex", "signal SIGABRT"]
        self.live_text, cores = qemu_gdb(m, argv, workdir, env, live_args)
        if cores:
            os.rename(cores[0], self.core)
        self._check_live(stop_on)
        core_args = qemu_target(m) + ["-ex", "core-file " + self.core, "-ex", "source " + LOADER]
        self.core_text = run_gdb(core_args + wrap_commands(self.commands), cwd=workdir, env=env,
                                 gdb="gdb-multiarch")
        self._finish()

    def out(self, mode, cmd, nth=0):
        """Output of the nth run of cmd (a command may be listed twice)."""
        found = [t for c, t in (self.live if mode == "live" else self.core_out) if c == cmd]
        text = found[nth] if len(found) > nth else None
        if text is None:
            whole = self.live_text if mode == "live" else self.core_text
            raise AssertionError("no output for %r (%s):\n%s" % (cmd, mode, whole[-3000:]))
        return text


def sysroot_args(m):
    """The core reader's --sysroot for build m's core (an arm64 build's
    libraries are under the cross toolchain's sysroot), or nothing."""
    return ["--sysroot", m["sysroot"]] if m and m.get("sysroot") else []


def qemu_target(m):
    """gdb-multiarch's first arguments for an arm64 build (sysroot first:
    in batch mode it must come before the file and the core are loaded)."""
    return ["-ex", "set sysroot " + m["sysroot"], "-ex", "file " + m["host"]]


def qemu_gdb(m, argv, workdir, env, gdb_args, timeout=GDB_TIMEOUT):
    """Run argv (an arm64 build's host) under qemu-user with its gdb stub
    on a unix socket (nothing listens on the network), attach
    gdb-multiarch with `target remote`, run gdb_args.  Returns gdb's
    output, then the program's, and the cores qemu wrote, oldest first,
    moved to workdir as qcore.N (qemu writes qemu_<prog>_<date>_<pid>.core
    in its working directory, where the kernel also drops a core of qemu
    itself: both in a directory of their own, removed after)."""
    # (A unix socket's path has at most 107 bytes: not under workdir.)
    sockdir = tempfile.mkdtemp(prefix="ljgdb-q")
    sock = os.path.join(sockdir, "gdb.sock")
    qdir = os.path.join(workdir, "qemu")
    shutil.rmtree(qdir, ignore_errors=True)
    os.makedirs(qdir)
    logname = os.path.join(workdir, "qemu.log")
    log = open(logname, "wb")
    qemu = subprocess.Popen(
        m["runner"] + ["-g", sock] + argv, cwd=qdir, stdin=subprocess.DEVNULL,
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, LC_ALL="C", **env),
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2))
    try:
        for _ in range(200):
            if os.path.exists(sock) or qemu.poll() is not None:
                break
            time.sleep(0.05)
        text = run_gdb(qemu_target(m) + ["-ex", "target remote " + sock] + gdb_args,
                       timeout=timeout, cwd=workdir, env=env, gdb="gdb-multiarch")
        qemu.wait(timeout=60)
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()
        log.close()
        shutil.rmtree(sockdir, ignore_errors=True)
    with open(logname, errors="replace") as f:
        text += "\n[the program's output under qemu]\n" + f.read()[-2000:]
    found = sorted((os.stat(os.path.join(qdir, f)).st_mtime_ns, f) for f in os.listdir(qdir)
                   if f.startswith("qemu_") and f.endswith(".core"))
    cores = []
    for n, (_, f) in enumerate(found):
        cores.append(os.path.join(workdir, "qcore.%d" % n))
        os.rename(os.path.join(qdir, f), cores[-1])
    shutil.rmtree(qdir, ignore_errors=True)
    return text, cores


def tool_for(binary, tool):
    """The binutils tool for the binary's machine: the host's, or for an
    arm64 ELF file the cross toolchain's (the host's strip cannot write
    one)."""
    with open(binary, "rb") as f:
        head = f.read(20)
    return "aarch64-linux-gnu-" + tool if head[18:20] == b"\xb7\x00" else tool


def stripped_with_profile(host, name, workdir):
    """(stripped copy of host, directory holding the layout profile
    `name`.json written from host by python3 -m ljgdb.profile)."""
    stripped = os.path.join(workdir, "host")
    subprocess.run([tool_for(host, "strip"), "-o", stripped, host], check=True)
    profs = os.path.join(workdir, "profs")
    os.makedirs(profs)
    p = subprocess.run([sys.executable, "-m", "ljgdb.profile", host, "-o",
                        os.path.join(profs, name + ".json")], cwd=ROOT)
    assert p.returncode == 0
    return stripped, profs


def read_expected(path):
    """Tab-separated records the Lua program wrote: list of lists."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def unhex(s):
    assert s.startswith("hex:"), s
    return bytes.fromhex(s[4:])


def lua_quote(data, limit=200):
    """The string literal form ljgdb specifies for bytes (see README):
    \\ escapes for \\ " \\n \\r \\t \\0 \\a \\b \\v \\f, \\ddd for other
    bytes outside printable ASCII; cut at `limit` bytes with the length."""
    esc = {92: "\\\\", 34: '\\"', 10: "\\n", 13: "\\r", 9: "\\t", 0: "\\0", 7: "\\a", 8: "\\b",
           11: "\\v", 12: "\\f"}
    cut = data[:limit]
    s = '"' + "".join(esc.get(b) or (chr(b) if 32 <= b < 127 else "\\%d" % b) for b in cut) + '"'
    if len(data) > limit:
        s += "... (%d bytes)" % len(data)
    return s


def addr_of(tostring_text):
    """The address in a tostring() result such as 'table: 0x7f...'."""
    return int(tostring_text.rsplit(" ", 1)[1].strip("()"), 16)


def chunk_display(source):
    """LuaJIT's short_src rule, uncut: '@file' -> file, '=name' -> name."""
    if source[:1] in ("@", "="):
        return source[1:]
    first = source.split("\n", 1)
    return '[string "%s%s"]' % (first[0], "..." if len(first) > 1 else "")


def value_regex(typ, shown, ffnames=None):
    """A regex for the text ljgdb prints for a value LuaJIT described with
    type() and tostring() (strings as hex, see the Lua programs)."""
    import re as _re
    if typ == "string":
        return _re.escape(lua_quote(unhex(shown)))
    if typ in ("number", "boolean", "nil"):
        return _re.escape(shown)
    if typ == "table":
        return _re.escape("table: (GCtab *)0x%x" % addr_of(shown))
    if typ == "thread":
        return _re.escape("thread: (lua_State *)0x%x" % addr_of(shown))
    if typ == "function":
        if "builtin#" in shown:
            ffid = int(shown.split("#")[1])
            name = (ffnames or {}).get(ffid, str(ffid))
            return r"function: \(GCfuncC \*\)0x[0-9a-f]+ \[builtin#%s\]" % _re.escape(name)
        return r"function: \(GCfunc[LC] \*\)0x%x .+" % addr_of(shown)
    if typ == "userdata":
        if shown == "userdata: NULL":
            return _re.escape("light userdata (void *) 0x0")
        if shown.startswith("file ("):
            return r"userdata: \(GCudata \*\)0x[0-9a-f]+ io file, \d+ bytes at 0x[0-9a-f]+"
        ptr = addr_of(shown)
        if ptr < 0x100000:
            return _re.escape("light userdata (void *) 0x%x" % ptr)
        return r"userdata: \(GCudata \*\)0x[0-9a-f]+ userdata, \d+ bytes at 0x%x" % ptr
    if typ == "cdata":
        # tostring() names the type: cdata<TYPE>: 0x...; a value may follow.
        ctype = _re.escape(shown.split(">: ")[0] + ">")
        if "*" in shown.split(">:")[0]:
            # tostring() of a pointer cdata prints the pointer, not the payload
            return (r"%s: \(GCcdata \*\)0x[0-9a-f]+ ctypeid \d+, size \d+, data at "
                    r"0x[0-9a-f]+( = .*)?" % ctype)
        return (r"%s: \(GCcdata \*\)0x[0-9a-f]+ ctypeid \d+, size \d+, data at 0x%x( = .*)?"
                % (ctype, addr_of(shown)))
    raise AssertionError("unexpected type " + typ)
