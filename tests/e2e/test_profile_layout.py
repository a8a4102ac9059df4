"""Layout profiles (python3 -m ljgdb.profile, pyelftools) against gdb.

For every build of the matrix, and for Debian's libluajit2 with its debug
file from the -dbgsym package: gdb reads the engine's types, enumerators
and flags through its own DWARF reader (testprogs/dump_layout.py), and the
profile writer reads them with pyelftools, without gdb.  The two must be
the same for every struct and union the engine uses (every member's
offset, size, count and type name), every enumerator, and the build's
flags; the profile's build-id is the binary's.
"""
import json
import os
import subprocess
import sys

import pytest

from support.stop import (ALL_VARIANTS, ARM64_VARIANTS, LIBLUAJIT2_DEBUG, LIBLUAJIT2_DIR,
                          LIBLUAJIT2_ROOT, NOJIT_VARIANTS, ROOT, manifest, run_gdb, tool_for)

DUMP = os.path.join(ROOT, "testprogs", "dump_layout.py")
# The rebuilt libluajit2-5.1-2 and its debug file, unpacked by testprogs/debs.py.
LIBLUAJIT2 = os.path.join(LIBLUAJIT2_DIR, "libluajit-5.1.so.2")


def gdb_layout(binary, tmp, init=()):
    """init: gdb commands run before the binary is loaded."""
    out = os.path.join(tmp, "gdb.json")
    # (gdb-multiarch reads an arm64 binary's DWARF)
    gdb = "gdb" if tool_for(binary, "gdb") == "gdb" else "gdb-multiarch"
    text = run_gdb([a for c in init for a in ("-iex", c)] +
                   ["-ex", "python import sys; sys.argv = ['x', %r]" % out, "-x", DUMP, binary],
                   gdb=gdb)
    assert os.path.exists(out), text[-2000:]
    with open(out) as f:
        return json.load(f)


def profile(path, tmp):
    out = os.path.join(tmp, "profile.json")
    p = subprocess.run([sys.executable, "-m", "ljgdb.profile", path, "-o", out], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 0, p.stdout.decode()
    with open(out) as f:
        return json.load(f)


def gnu_build_id(path):
    """The build-id as readelf (binutils) gives it."""
    text = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE).stdout.decode()
    for line in text.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return None


def same(prof, ref):
    assert sorted(prof["types"]) == sorted(ref["types"])
    for name, want in ref["types"].items():
        got = prof["types"][name]
        assert got["size"] == want["size"], name
        diff = {k: (got["fields"].get(k), want["fields"].get(k))
                for k in set(got["fields"]) | set(want["fields"])
                if got["fields"].get(k) != want["fields"].get(k)}
        assert not diff, (name, diff)
    assert {k: prof["constants"].get(k) for k in ref["constants"]} == ref["constants"]
    assert prof["enums"] == ref["enums"]
    assert prof["symbols"] == ref["symbols"]
    assert prof["flags"] == ref["flags"]


@pytest.mark.parametrize("variant", ALL_VARIANTS + NOJIT_VARIANTS + ARM64_VARIANTS)
def test_profile_equals_gdb(variant, tmp_path):
    host = manifest()[variant]["host"]
    ref = gdb_layout(host, str(tmp_path))
    prof = profile(host, str(tmp_path))
    same(prof, ref)
    assert prof["build_id"] == gnu_build_id(host)
    assert prof["version"] and prof["version"].startswith("LuaJIT 2.")
    # The VM's symbols, as offsets from an exported one.
    vm = prof["vm_symbols"]
    assert vm["anchor"] == "lua_pcall"
    nm = subprocess.run([tool_for(host, "nm"), host], stdout=subprocess.PIPE).stdout.decode()
    nm = nm.split("\n")
    addr = {f[2]: int(f[0], 16) for f in (ln.split() for ln in nm) if len(f) == 3}
    for name in ("lj_vm_asm_begin", "lj_BC_FUNCC", "lj_vm_exit_handler", "lj_vm_pcall"):
        if name in addr:
            assert vm["offsets"][name] == addr[name] - addr["lua_pcall"], name


def test_profile_of_a_separate_debug_file(tmp_path):
    """Debian's libluajit2 (OpenResty's fork) is stripped; its -dbgsym
    package's debug file has the DWARF: the profile read from the debug
    file equals what gdb reads through the library."""
    if not os.path.exists(LIBLUAJIT2):
        pytest.fail("%s is missing: testprogs/debs.py unpacks the rebuilt libluajit2"
                    % LIBLUAJIT2)
    bid = gnu_build_id(LIBLUAJIT2)
    debug = os.path.join(LIBLUAJIT2_ROOT, "usr", "lib", "debug", ".build-id", bid[:2],
                         bid[2:] + ".debug")
    assert os.path.exists(debug), debug
    ref = gdb_layout(LIBLUAJIT2, str(tmp_path), [LIBLUAJIT2_DEBUG])
    prof = profile(debug, str(tmp_path))
    same(prof, ref)
    assert prof["build_id"] == bid
    assert prof["flags"]["fork"] == "OpenResty"


def test_profile_of_a_file_without_luajit(tmp_path):
    """A file without LuaJIT's DWARF: one line that says so, exit 1."""
    p = subprocess.run([sys.executable, "-m", "ljgdb.profile", "/bin/true"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode().strip()
    assert p.returncode == 1 and len(out.splitlines()) == 1, out
    assert out.startswith("ljgdb.profile: /bin/true: no LuaJIT debug info"), out


def test_shipped_profiles_are_current():
    """pkg/profiles/ holds what testprogs/make_profiles.py writes from the
    builds it describes today."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "testprogs", "make_profiles.py"),
                        "--check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 0, p.stdout.decode()
