"""A Lua program that stops several times: gdb runs the same commands at
every stop and saves a core at each, then a second gdb loads each core in
turn and runs the commands again.  Two gdb processes per program, however
many stops."""
import json
import os

from .stop import (LOADER, LUA_DIR, MANIFEST, cut_outputs, qemu_gdb, qemu_target, read_expected,
                   run_gdb, wrap_commands)


def _by_stop(text, nstops, commands):
    """out[stop][command index] = text or None."""
    return [[out for _, out in cut_outputs(text, commands, stop=s)] for s in range(nstops)]


class MultiStop(object):
    """Run `program` in the host of `variant`; at each of `nstops` hits of
    ljgdb_break run `commands` and save a core.  live[s][i] / core[s][i]
    are the outputs of command i at stop s; expected the program's records."""

    def __init__(self, variant, program, commands, nstops, workdir, args=(), keep_cores=False):
        m = build_of(variant)
        self.variant = variant
        self.commands = list(commands)
        self.nstops = nstops
        os.makedirs(workdir, exist_ok=True)
        self.expected_file = os.path.join(workdir, "expected.txt")
        cores = [os.path.join(workdir, "core.%d" % s) for s in range(nstops)]
        for f in [self.expected_file] + cores:
            if os.path.exists(f):
                os.unlink(f)
        argv = [m["host"], os.path.join(LUA_DIR, program), self.expected_file] + list(args)
        arm64 = m.get("arch") == "arm64"
        live = ["-ex", "source " + LOADER, "-ex", "break ljgdb_break",
                "-ex", "continue" if arm64 else "run"]
        for s in range(nstops):
            live += wrap_commands(self.commands, stop=s)
            # arm64 under qemu: the host forks a child that aborts at each
            # stop once gdb lets it go on (LJGDB_FORK_CORE; see host.c).
            live += ["-ex", "continue"] if arm64 else ["-ex", "gcore " + cores[s]]
            if s + 1 < nstops and not arm64:
                live += ["-ex", "continue"]
        # LUA_PATH lets the program load jit.vmdef (LuaJIT's own names).
        env = {"LUA_PATH": os.path.join(m["src"], "?.lua") + ";;"}
        if arm64:
            self.live_text, qcores = qemu_gdb(m, argv, workdir, dict(env, LJGDB_FORK_CORE="1"),
                                              live + ["-ex", "kill"])
            for q, c in zip(qcores, cores):
                os.rename(q, c)
        else:
            self.live_text = run_gdb(live + ["-ex", "kill", "--args"] + argv, cwd=workdir, env=env)
        missing = [c for c in cores if not os.path.exists(c)]
        if missing:
            raise AssertionError("%s: %d of %d stops reached:\n%s" % (
                variant, nstops - len(missing), nstops, self.live_text[-4000:]))
        self.live = _by_stop(self.live_text, nstops, self.commands)
        core = (qemu_target(m) if arm64 else ["-ex", "file " + m["host"]]) + ["-ex", "source " + LOADER]
        for s in range(nstops):
            core += ["-ex", "core-file " + cores[s]] + wrap_commands(self.commands, stop=s)
        self.core_text = run_gdb(core, cwd=workdir, gdb="gdb-multiarch" if arm64 else "gdb")
        self.core = _by_stop(self.core_text, nstops, self.commands)
        if not keep_cores:
            for c in cores:
                os.unlink(c)
        self.expected = read_expected(self.expected_file)

    def out(self, mode, stop, cmd_index=0):
        text = (self.live if mode == "live" else self.core)[stop][cmd_index]
        if text is None:
            whole = self.live_text if mode == "live" else self.core_text
            raise AssertionError("%s %s: no output for %r at stop %d:\n%s" % (
                self.variant, mode, self.commands[cmd_index], stop, whole[-4000:]))
        return text


def build_of(variant):
    """The manifest entry of one build (testprogs/build.py writes it)."""
    if not os.path.exists(MANIFEST):
        raise RuntimeError("no LuaJIT builds: run `python3 testprogs/build.py` (%s missing)"
                           % MANIFEST)
    with open(MANIFEST) as f:
        m = json.load(f)
    if variant not in m or not os.path.exists(m[variant]["host"]):
        raise RuntimeError("no build of %s: run `python3 testprogs/build.py`" % variant)
    return m[variant]


def built_variants():
    """Every variant the manifest lists."""
    if not os.path.exists(MANIFEST):
        return []
    with open(MANIFEST) as f:
        return sorted(json.load(f))
