"""The live backend only reads (--pid, dump --pid, record --pid): a process
blocked in a read is hashed before and after every command, and nothing
changed.

testprogs/lua/wait.lua (test_live.Waiting) waits in the C library's read
of a FIFO; while it waits nothing in it moves.  The test hashes, by its own
reads of /proc/PID/mem (not through ljgdb), every writable mapping, and
for every thread its /proc/PID/task/TID/syscall line (the system call's
number and arguments, the stack pointer and the pc: the registers that
matter to a thread blocked in a system call) and the state letter of its
stat.  Then every command of `python3 -m ljgdb --help`'s list that needs
no argument (and a few with simple ones, and bad input), dump with
--all --locals and with --json, and record, blocking and --nonblocking,
each once; then the same hash: equal.  The process is not traced, has no
signal pending, and reads the next line written into its FIFO.  The
gdb counterpart is test_hardening.py's test_commands_never_change_the_process.

The program runs with glibc's rseq registration off
(GLIBC_TUNABLES=glibc.pthread.rseq=0).  With it on (glibc 2.35 and later)
the kernel writes the CPU number into each thread's struct rseq (in its
thread control block: cpu_id_start and cpu_id) whenever the thread goes
back to user space on another CPU, and a thread stopped and let go again
may well do that: 8 bytes of the main thread's TLS block and of the idle
thread's stack top changed from 1,1 to 0,0 and back, at random, after
`--pid PID lbt` or `dump`, and never with rseq off.  That is the kernel's
write, not ljgdb's, and any ptrace stop (gdb's attach too) causes it.
"""
import hashlib
import os
import subprocess
import sys

import pytest

from support.host import proc_state
from support.stop import ROOT
from test_live import TRACEBACK, Waiting, assert_left_alone, live

VARIANTS = ["r21-gc64", "deb-x64"]

# --pid PID COMMAND: every command of --help that runs without an argument,
# and some with simple ones.
GOOD = ["lbt", "lbt full", "lbt --all", "lbt --all --group", "lbt --json", "linfo", "lthreads",
        "lgcstat", "lgcstat --top 5 --by-chunk", "lstates", "lmcode", "ltrace", "lstr", "lheap",
        "linfo --json"]
# Bad input: exit status 1, nothing on stdout, one line on stderr.  (lval
# takes an address without gdb: `lval L` is refused, as in the core reader.)
BAD = ["lval nosuch", "lval L", "lbt --bogus", "lthreads extra", "lgcstat --top many", "ltrace notanumber",
       "lstates L=x", "nosuchcommand"]
# Other entry points: (argv after "-m ljgdb" with PID for the pid, output
# file or None, environment added).  record stops the process with its C
# sampler, and with the Python one when told to.
OTHERS = [(["dump", "--pid", "PID", "--all", "--locals"], None, {}),
          (["dump", "--pid", "PID", "--json"], None, {}),
          (["record", "--pid", "PID", "--duration", "1", "--idle", "--format", "folded",
            "-o", "OUT"], "folded.txt", {}),
          (["record", "--pid", "PID", "--duration", "1", "--idle", "--format", "folded",
            "-o", "OUT"], "python.txt", {"LJGDB_SAMPLER": "python"}),
          (["record", "--pid", "PID", "--duration", "1", "--nonblocking", "--idle",
            "--format", "folded", "-o", "OUT"], "nonblocking.txt", {})]


def snapshot(pid):
    """(sha256 of every writable mapping's bytes, bytes hashed, {tid:
    (syscall line, state letter)}), read by the test itself."""
    h = hashlib.sha256()
    n = 0
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read().splitlines()
    fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
    try:
        for line in maps:
            fields = line.split()
            if "w" not in fields[1] or (len(fields) > 5 and fields[5].startswith(("[vvar",
                                                                                  "[vsyscall"))):
                continue
            lo, hi = [int(x, 16) for x in fields[0].split("-")]
            h.update(("%x-%x %s;" % (lo, hi, fields[1])).encode())
            addr = lo
            while addr < hi:
                size = min(hi - addr, 1 << 20)
                try:
                    data = os.pread(fd, size, addr)
                except OSError as e:
                    h.update(("unreadable %x: %s;" % (addr, e.errno)).encode())
                    addr += size
                    continue
                if not data:
                    h.update(("short %x;" % addr).encode())
                    break
                h.update(data)
                n += len(data)
                addr += len(data)
    finally:
        os.close(fd)
    threads = {}
    for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid)):
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            threads[tid] = (f.read().strip(), proc_state(pid, tid))
    return h.hexdigest(), n, threads


def run(argv, env=None):
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + argv, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=ROOT, timeout=300,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.mark.parametrize("variant", VARIANTS)
def test_live_commands_never_change_the_process(variant, tmp_path):
    prog = Waiting(variant, tmp_path, args=("5", "idle-thread"),
                   env={"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})
    try:
        before = snapshot(prog.pid)
        assert before[1] > 100000, before          # the heap and the stacks were hashed
        assert len(before[2]) == 2, before         # the main thread and the idle one
        for tid, (syscall, state) in before[2].items():
            assert state == "S" and syscall.split()[0] in ("0", "34"), (tid, syscall, state)
        failures = []
        for cmd in GOOD:
            code, out, err = live(prog.pid, cmd.split())
            if (code, err) != (0, "") or not out.strip() or "internal error" in out:
                failures.append((cmd, code, out[-500:], err))
        for cmd in BAD:
            code, out, err = live(prog.pid, cmd.split())
            lines = err.splitlines()
            if code != 1 or out or len(lines) != 1 or TRACEBACK in err:
                failures.append((cmd, code, out[-500:], err))
        for argv, outfile, env in OTHERS:
            path = str(tmp_path / outfile) if outfile else None
            argv = [str(prog.pid) if a == "PID" else path if a == "OUT" else a for a in argv]
            code, out, err = run(argv, env)
            if code != 0 or TRACEBACK in out + err or (not out.strip() and not path):
                failures.append((" ".join(argv), code, out[-500:], err))
            elif path and not os.path.exists(path):
                failures.append((" ".join(argv), "no " + path, out[-500:], err))
            if path and os.path.exists(path):
                # --idle: the thread sleeping in its read counts, under the
                # read's builtin, mostly with the read (its system call)
                # innermost.  (A sample soon after the one before can find
                # the thread runnable again, restarting its read after the
                # stop: no system call frame then.)
                with open(path) as f:
                    stacks = [line.rsplit(" ", 1) for line in f.read().splitlines()]
                read = sum(int(n) for s, n in stacks if s.endswith(";[builtin#io.method.read];read"))
                if not stacks or not all(";[builtin#io.method.read]" in s for s, _ in stacks) \
                        or read < 0.5 * sum(int(n) for _, n in stacks):
                    failures.append((" ".join(argv), "stacks", stacks[:5], err))
        assert not failures, failures
        assert_unchanged(prog, before)
    finally:
        prog.stop()


def assert_unchanged(prog, before):
    """The process hashes as `before` (snapshot), is left untraced with no
    signal pending, and goes on working: it reads its next line."""
    after = snapshot(prog.pid)
    assert after == before, "the process changed: %s\n%s" % (before, after)
    assert_left_alone(prog.pid)
    prog.send("after")
    prog.wait_blocked()
    assert_left_alone(prog.pid)
    prog.quit()
