"""Stripped builds read through the library of layout profiles
(pkg/profiles/library/, written by testprogs/profile_library.py from each
version's source with its Makefile's default options).

The builds here are upstream 2.1 as released (the version string a release
tarball gives) made with other compiler options (-O1, -O3, -O2
-fno-omit-frame-pointer): no profile has their build-id, so the profile
comes by the version string LuaJIT itself reports and a check of the
process's memory, and the VM's code labels through the dispatch table
(the VM lies elsewhere in these files).  Nothing but the shipped set is
given (LJGDB_PROFILES empty).  Each reads as with its own DWARF, live and
from the core, in gdb and in the core reader; the -O3 build also through
--pid (the live backend), and the release cross-built for arm64 under
qemu-user.
"""
import gzip
import json
import os
import re
import subprocess

import pytest

from support import moments
from support.stop import ROOT, Stop, frame_place, manifest, tool_for
from test_corereader import core_reader, differs
from test_stripped import read_twice

FLAVOURS = ["r21-O1", "r21-O3", "r21-fp"]
# The same release cross-built for arm64 with -O3, run under qemu-user.
ARM64 = ["r21-arm64-O3"]
# Builds of the matrix whose source the library has, linked into the test
# host (so the VM lies elsewhere than in the library's luajit): variant:
# the profiles of its source and mode, one of which must be chosen, of the
# 8 with its version string (LuaJIT 2.1.0-beta3: Debian's snapshot,
# OpenResty's fork and upstream's beta3, each in two modes, and the two
# Debian packages').  OpenResty's GC64 build is also Debian's libluajit2.
FORKS = {"or-gc64": ("openresty-luajit2-2.1-20230119-gc64.json.gz",
                     "debian-libluajit2_2.1-20230119-1.json"),
         "deb-x64": ("debian-luajit-2.1.0-beta3+git20220320-x64.json.gz",)}
LIBRARY = os.path.join(ROOT, "pkg", "profiles", "library")


def luajit_version(build):
    """jit.version as the build's own luajit reports it."""
    return subprocess.run(build.get("runner", []) + [build["luajit"], "-e", "io.write(jit.version)"],
                          stdout=subprocess.PIPE, check=True).stdout.decode()


def stripped_copy(host, tmp_path):
    stripped = str(tmp_path / "host")
    subprocess.run([tool_for(host, "strip"), "-o", stripped, host], check=True)
    return stripped


@pytest.mark.parametrize("variant", FLAVOURS + ARM64 + sorted(FORKS))
def test_stripped_build_of_other_options(variant, tmp_path):
    build = manifest()[variant]
    version = luajit_version(build)
    if variant in FORKS:
        names = FORKS[variant]
    else:
        assert re.match(r"LuaJIT 2\.1\.\d+$", version), version     # a release's, not ROLLING
        names = ("upstream-%s-%s.json.gz" % (version[len("LuaJIT "):],
                                             "arm64" if variant in ARM64 else "gc64"),)
    stripped = stripped_copy(build["host"], tmp_path)
    s = read_twice(variant, stripped, build["host"], "", tmp_path)
    for mode in ("live", "core"):
        linfo = s.out(mode, "linfo")
        assert re.search(r"^layout: +layout profile (%s) \(%s, build-id [0-9a-f]+\), chosen by the "
                         r"version string '%s' and a global_State consistent under its layout "
                         r"\(of \d+ profiles with that version(; \d+ fit, all laid out alike)?\)"
                         r"(; its VM code found at 0x[0-9a-f]+ through the dispatch table)? .*; "
                         r"the VM's code labels from the profile$"
                         % ("|".join(map(re.escape, names)), re.escape(version),
                            re.escape(version)),
                         linfo, re.M), linfo
    # The core reader, on the same core, through the same profile.
    cmds = ["lbt", "lbt full", "lthreads", "lgcstat", "ltrace"]
    got = core_reader(s.core, stripped, cmds, env={"LJGDB_PROFILES": ""}, build=s.build)
    bad = [d for d in map(differs, got, [s.out("core", c, 0) for c in cmds], cmds) if d]
    assert not bad, "\n".join(bad)


def test_stripped_build_by_pid(tmp_path, monkeypatch):
    """The live backend (python3 -m ljgdb --pid) on the stripped -O3
    build, through the library as the core reader chooses: the text gdb
    attached gives, the frames the program recorded, and the process left
    as it was."""
    from test_live import COMMANDS, Waiting, assert_frames, assert_left_alone, assert_same_by_pid
    build = manifest()["r21-O3"]
    stripped = stripped_copy(build["host"], tmp_path)
    monkeypatch.setenv("LJGDB_PROFILES", "")    # (gdb and --pid inherit it)
    prog = Waiting("r21-O3", tmp_path, host=stripped)
    try:
        want = dict(prog.attach(COMMANDS))
        assert_left_alone(prog.pid)
        assert re.search(r"^layout: +layout profile upstream-[0-9.]+-gc64\.json\.gz .*; its VM "
                         r"code found at 0x[0-9a-f]+ through the dispatch table ", want["linfo"],
                         re.M), want["linfo"]
        assert_same_by_pid(prog, want)
        assert_frames(want["lbt"], prog.frames())
        prog.quit()
    finally:
        prog.stop()


def crash_read_stripped(build, tmp_path):
    """The build stripped, crashed at crash.lua's read_a with a kernel core
    (skips where the kernel writes none), read in the core reader through
    the library: its lbt's Lua frames must be the ones the program
    recorded with debug.getinfo.  Returns linfo's text."""
    why = moments.kernel_cores_possible()
    if why:
        pytest.skip(why)
    from test_triage import crash
    stripped = stripped_copy(build["host"], tmp_path)
    _, frames, core = crash(dict(build, host=stripped), "read_a", str(tmp_path / "run"))
    (lbt, err), (linfo, _) = core_reader(core, stripped, ["lbt", "linfo"],
                                         env={"LJGDB_PROFILES": ""}, build=build)
    assert err is None, err
    lua = [f for f in re.findall(r"^#\d+ +(.*)$", frame_place(lbt), re.M)
           if not f.startswith(("[builtin#", "C:"))]
    assert lua == frames, (lbt, frames)
    return linfo


def test_crash_core_with_the_jit_off(tmp_path):
    """crash.lua turns the JIT off (jit.off()), and LuaJIT then points the
    static dispatch entries of its four hot-counting loops at their
    non-counting twins: the labels must still come through the dispatch
    table.  The stripped -O3 build's kernel core, in the core reader: the
    Lua frames the program recorded with debug.getinfo, under the library's
    profile."""
    linfo = crash_read_stripped(manifest()["r21-O3"], tmp_path)
    assert re.search(r"^layout: +layout profile upstream-[0-9.]+-gc64\.json\.gz .*; its VM "
                     r"code found at 0x[0-9a-f]+ through the dispatch table .*; the VM's code "
                     r"labels from the profile$", linfo, re.M), linfo


@pytest.mark.parametrize("variant,mode", [("r21-gc64", "gc64"), ("r21-x64", "x64")])
def test_stripped_rolling_build_by_memory_fit(variant, mode, tmp_path):
    """A build from a source tree without git says `LuaJIT 2.1.ROLLING`
    (these builds: lupa's bundled tree, .relver unexpanded), a version
    string no profile has.  Stripped, its kernel core is read in the core
    reader through the library: every 2.1 profile for x86-64 is tried, the
    ones the memory fits and whose interpreter is laid out as this one
    (each bytecode's handler at the profile's label) agree, and the Lua
    frames are the ones the program recorded with debug.getinfo; linfo
    says which profiles were tried and why the one taken fits."""
    build = manifest()[variant]
    assert luajit_version(build) == "LuaJIT 2.1.ROLLING", luajit_version(build)
    linfo = crash_read_stripped(build, tmp_path)
    # (the library's 2.1 builds for x86-64: upstream's, Debian's,
    # OpenResty's and Tarantool's forks all say 2.1)
    branch = ("upstream-2.1", "debian-luajit", "openresty-luajit2-2.1", "tarantool")
    tried = len([n for n in os.listdir(LIBRARY)
                 if n.startswith(branch) and not n.endswith("-arm64.json.gz")])
    m = re.search(r"^layout: +layout profile upstream-2\.1\.\d+-%s\.json\.gz .*chosen by the "
                  r"memory, LuaJIT's version string 'LuaJIT 2\.1\.ROLLING' naming no release "
                  r"the profiles have: of the (\d+) profiles of LuaJIT 2\.1 for x86_64 tried, "
                  r".*, every bytecode's handler where the profile puts it\) fits" % mode,
                  linfo, re.M)
    assert m and int(m.group(1)) >= tried, (linfo, tried)


def test_vm_elsewhere_than_in_the_profiled_build():
    """The premise of the test above: the library's profile of this version
    places the VM's code at another distance from its anchor than these
    builds do (so its labels come through the dispatch table)."""
    version = luajit_version(manifest()["r21-O1"])[len("LuaJIT "):]
    with gzip.open(os.path.join(LIBRARY, "upstream-%s-gc64.json.gz" % version), "rt") as f:
        doc = json.load(f)
    vm = doc["vm_symbols"]
    for variant in FLAVOURS:
        syms = dict((name, int(addr, 16)) for addr, name in re.findall(
            r"^([0-9a-f]+) \S (\w+)$", subprocess.run(
                ["nm", manifest()[variant]["host"]], stdout=subprocess.PIPE).stdout.decode(), re.M))
        assert syms["lj_vm_asm_begin"] - syms[vm["anchor"]] != vm["offsets"]["lj_vm_asm_begin"]


def test_build_whose_layout_differs_is_refused(tmp_path):
    """The same release built with the JIT disabled: the library has
    profiles with its version string, but its structures are laid out
    otherwise; lbt says so in one line, live and from the core."""
    build = manifest()["r21-nojit-rel"]
    version = luajit_version(build)
    stripped = stripped_copy(build["host"], tmp_path)
    s = Stop("r21-nojit-rel", "bt.lua", ["lbt"], str(tmp_path / "run"), args=["nest"],
             env={"LJGDB_PROFILES": ""}, host=stripped)
    for mode in ("live", "core"):
        out = s.out(mode, "lbt").strip()
        assert len(out.splitlines()) == 1, out
        assert out.startswith("lbt: LuaJIT is in %s" % stripped) and (
            "2 layout profiles have LuaJIT's version string %r, but the process's memory fits "
            "none of them" % version in out), out


def test_library_is_what_its_sources_give():
    """The library's profile of the version these builds have is what
    testprogs/profile_library.py's reading of its source gives now (the
    whole library: python3 testprogs/profile_library.py --check)."""
    version = luajit_version(manifest()["r21-O1"])[len("LuaJIT "):]
    p = subprocess.run(["python3", os.path.join(ROOT, "testprogs", "profile_library.py"),
                        "--check", "upstream-" + version], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 0, p.stdout.decode()
