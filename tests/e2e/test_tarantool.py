"""Tarantool (Debian's package: its own LuaJIT fork, X64, with full debug
info): fibers blocked in nested Lua calls.  lbt of each fiber's thread
equals the frames debug.getinfo recorded, lthreads and lbt name the fiber
as its scheduler sees it, lgcstat's sum is g->gc.total and equals
collectgarbage("count"), lgcstat --retained of a table is what the program
measured dropping one like it frees, and the VM is found although the process idles in
its event loop with no Lua state in any frame: attached, from gcore's core
and from the kernel's core after SIGABRT."""
import json
import os
import re
import shutil
import subprocess

import pytest

from support.stop import ROOT, addr_of, chunk_display, frame_place
from support.host import HostProcess, core_outputs
from support.moments import kernel_cores_possible

TARANTOOL = shutil.which("tarantool")
PROGRAM = os.path.join(ROOT, "testprogs", "tarantool", "fibers.lua")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(TARANTOOL is None, reason="tarantool is not installed "
                                 "(testprogs/install-deps.sh installs it)")]


def check(outs, expected, how, fibers=True):
    """outs against the program's records; fibers: the fibers are named
    (Tarantool's own DWARF is there)."""
    out = dict(outs)
    fib = {r[1]: r[2] for r in expected if r[0] == "fiber"}
    thread = {r[1]: addr_of(r[2]) for r in expected if r[0] == "thread"}
    frames = {}
    for r in expected:
        if r[0] == "frame":
            frames.setdefault(r[1], []).append("%s:%s" % (chunk_display(r[3]), r[4]))
    (total,) = [int(float(r[1])) for r in expected if r[0] == "total"]
    assert set(fib) == set(thread) == set(frames)
    assert "memory search" in out["linfo"], (how, out["linfo"])
    for fid, L in thread.items():
        lbt = out["lbt L=0x%x" % L].splitlines()
        assert lbt[0] == ('Lua backtrace of (lua_State *)0x%x (coroutine, normal%s)'
                          % (L, '; fiber %s "%s", suspended' % (fid, fib[fid]) if fibers else "")
                          ), (how, lbt)
        # The C function it blocks in on top, then the recorded frames.
        assert lbt[1].startswith("#0   C:"), (how, lbt)
        assert [frame_place(line[5:]) for line in lbt[2:]] == frames[fid], (how, lbt, frames[fid])
        if fibers:
            assert re.search(r'^0x%x\s+normal .* \(fiber %s "%s", suspended\)$'
                             % (L, fid, fib[fid]), out["lthreads"], re.M), (how, out["lthreads"])
        else:
            assert re.search(r'^0x%x\s+normal ' % L, out["lthreads"], re.M) and \
                "(fiber " not in out["lthreads"], (how, out["lthreads"])
    assert "g->gc.total: %d bytes (exact)" % total in out["lgcstat"], (how, out["lgcstat"])
    # What dropping _G.held freed, as the program measured it, and its path.
    (held, nbytes), = [(addr_of(r[1]), int(r[2])) for r in expected if r[0] == "retained"]
    doc = json.loads(out["lgcstat --retained --json 0x%x" % held])["object"]
    assert (doc["retained"], doc["path"]) == (nbytes, "_G.held"), (how, doc)
    # One VM, found by the memory search, with the recorded heap size.
    rows = [line.split() for line in out["lstates"].splitlines() if line.startswith("0x")]
    assert len(rows) == 1 and int(rows[0][3]) == total and "memory search" in out["lstates"], \
        (how, out["lstates"])


def fibers_program(binary, d):
    """(fibers.lua started in tarantool binary and ready, the commands
    check() wants the output of)."""
    exp = os.path.join(d, "expected.txt")
    p = HostProcess([binary, PROGRAM, exp], d, exp)
    try:
        threads = [addr_of(r[2]) for r in p.expected if r[0] == "thread"]
        (held,) = [addr_of(r[1]) for r in p.expected if r[0] == "retained"]
    except BaseException:
        p.stop()
        raise
    return p, ["linfo", "lthreads", "lgcstat", "lstates"] + \
        ["lbt L=0x%x" % L for L in threads] + ["lgcstat --retained --json 0x%x" % held]


def test_tarantool_fibers(tmp_path):
    d = str(tmp_path)
    p, cmds = fibers_program(TARANTOOL, d)
    try:
        core = os.path.join(d, "gcore")
        check(p.attach(cmds, core), p.expected, "attached")
        check(core_outputs(TARANTOOL, core, cmds, d), p.expected, "gcore")
        if kernel_cores_possible():
            pytest.skip("kernel core: %s" % kernel_cores_possible())
        kcore = p.abort()
        assert kcore, "no kernel core after SIGABRT:\n%s" % p.log()
        check(core_outputs(TARANTOOL, kcore, cmds, d), p.expected, "kernel core")
    finally:
        p.stop()


def test_stripped_tarantool_through_the_library(tmp_path, monkeypatch):
    """Debian's tarantool stripped (no symbol table, no DWARF), with only
    the shipped profiles: LuaJIT's layout comes from the library's profile
    of the LuaJIT that Tarantool 2.6.0 bundles, built from its source with
    Tarantool's own definition (LUAJIT_SMART_STRINGS), chosen by the
    version string and the process's memory, the VM's code through the
    dispatch table.  The same records hold as with the DWARF, attached and
    from gcore's core, but for the fibers' names: struct fiber, struct cord
    and main_cord are Tarantool's own, which no LuaJIT profile has."""
    d = str(tmp_path)
    stripped = os.path.join(d, "tarantool")
    subprocess.run(["strip", "-o", stripped, TARANTOOL], check=True)
    monkeypatch.setenv("LJGDB_PROFILES", "")        # the shipped set alone (gdb inherits it)
    p, cmds = fibers_program(stripped, d)
    try:
        core = os.path.join(d, "gcore")
        for outs, how in ((p.attach(cmds, core), "attached"),
                          (core_outputs(stripped, core, cmds, d), "gcore")):
            check(outs, p.expected, how, fibers=False)
            assert re.search(r"^layout: +layout profile tarantool-2\.6\.0-x64\.json\.gz \(LuaJIT "
                             r"2\.1\.0-beta3, build-id [0-9a-f]+\), chosen by the version string "
                             r"'LuaJIT 2\.1\.0-beta3' and a global_State consistent under its "
                             r"layout \(of \d+ profiles with that version\); its VM code found at "
                             r"0x[0-9a-f]+ through the dispatch table .*; the VM's code labels "
                             r"from the profile$", dict(outs)["linfo"], re.M), dict(outs)["linfo"]
    finally:
        p.stop()
