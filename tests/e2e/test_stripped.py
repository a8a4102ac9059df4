"""A LuaJIT without debug info, read through a layout profile.

The host of a build is stripped (`strip`: no DWARF, no .symtab; what it
exports stays), and its layout profile is written from the unstripped host
with `python3 -m ljgdb.profile`.  The program runs under gdb on the stripped
host; lbt, lbt full, lthreads, lgcstat and ltrace run through the profile,
then again once `symbol-file` has loaded the unstripped host's symbols and
DWARF, live and from the core: they must print the same.  The only
difference allowed is a C function that only the debug info named (the
stripped host's static ljgdb_stop is `C:0x... (ljgdb_stop)`, by the name
Lua knows it by).  linfo says which
profile it uses; without a profile a command says in one line what is
missing and what to do.
"""
import os
import re
import subprocess
import sys

import pytest

from support.stop import BOTH_ARCHES, ROOT, Stop, manifest, stripped_with_profile

READ = ["lbt", "lbt full", "lthreads", "lgcstat", "ltrace"]


def normalize(text):
    return re.sub(r"C:0x[0-9a-f]+ \((\w+)\)", r"C:\1", text)


def read_twice(variant, stripped, host, profs, tmp_path, first=(), before=(), after=()):
    """The Stop of bt.lua nest on the stripped host: READ, linfo and `first`
    through the profiles in profs, then symbol-file of the unstripped host,
    `before`, READ again and `after`; READ must print the same both times,
    live and from the core."""
    cmds = (READ + ["linfo"] + list(first) + ["symbol-file " + host] + list(before) + READ +
            list(after))
    s = Stop(variant, "bt.lua", cmds, str(tmp_path / "run"), args=["nest"],
             env={"LJGDB_PROFILES": profs}, host=stripped)
    for mode in ("live", "core"):
        for cmd in READ:
            got, want = s.out(mode, cmd, 0), s.out(mode, cmd, 1)
            assert normalize(got) == want, (mode, cmd, got, want)
    return s


@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_stripped_build_reads_as_with_debug_info(variant, tmp_path):
    """One process (and its core), read twice: through the profile, then
    with the unstripped binary's symbols and DWARF loaded (symbol-file)."""
    host = manifest()[variant]["host"]
    stripped, profs = stripped_with_profile(host, variant, str(tmp_path))
    s = read_twice(variant, stripped, host, profs, tmp_path, first=["bt"], after=["linfo"])
    for mode in ("live", "core"):
        assert "Lua backtrace" in s.out(mode, "lbt", 1)
        assert "(exact)" in s.out(mode, "lgcstat", 1)
        linfo = s.out(mode, "linfo", 0)
        assert re.search(r"^layout: +layout profile %s\.json \(LuaJIT 2\.[^)]*, build-id [0-9a-f]+\)"
                         % variant, linfo, re.M), linfo
        assert re.search(r"^layout: +DWARF debug info$", s.out(mode, "linfo", 1), re.M)
    # gdb's own bt names the VM's frames from the profile too.
    bt = s.out("live", "bt")
    assert re.search(r"^#\d+ +0x[0-9a-f]+ in lj_BC_FUNCC \(\)$", bt, re.M), bt
    assert "    [Lua] () at " in bt


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64"])
def test_stripped_build_without_build_id(variant, tmp_path):
    """A stripped build whose build-id no profile has: the profile comes by LuaJIT's
    version string, and of the two profiles with that version (r21-gc64's
    and r21-x64's) only this build's makes the process's global_State
    consistent; its VM code is the profile's, so the labels hold.  The
    output equals the DWARF reading of the same process and core."""
    m = manifest()
    host = m[variant]["host"]
    stripped = str(tmp_path / "host")
    subprocess.run(["strip", "-o", stripped, host], check=True)
    overwrite_build_id(stripped)
    profs = str(tmp_path / "profs")
    os.makedirs(profs)
    for v in ("r21-gc64", "r21-x64"):
        subprocess.run([sys.executable, "-m", "ljgdb.profile", m[v]["host"], "-o",
                        os.path.join(profs, v + ".json")], cwd=ROOT, check=True)
    # (The unstripped host's build-id is not the one in the core: ljgdb
    # would refuse to read the core with it, rightly.)
    s = read_twice(variant, stripped, host, profs, tmp_path,
                   before=["set ljgdb check-build-id off"])
    for mode in ("live", "core"):
        linfo = s.out(mode, "linfo")
        assert re.search(r"^layout: +layout profile %s\.json .*, chosen by the version string "
                         r"'LuaJIT 2\.1\.[^']*' and a global_State consistent under its layout "
                         r"\(of 2 profiles with that version\) .*; the VM's code labels from the "
                         r"profile$" % variant, linfo, re.M), linfo


def test_version_profile_that_does_not_fit(tmp_path):
    """Only r21-x64's profile, which has the version string of the r21-gc64
    build that runs (whose build-id no profile has): the memory does not fit
    it, and the one line says so."""
    m = manifest()
    stripped = str(tmp_path / "host")
    subprocess.run(["strip", "-o", stripped, m["r21-gc64"]["host"]], check=True)
    overwrite_build_id(stripped)
    profs = str(tmp_path / "profs")
    os.makedirs(profs)
    subprocess.run([sys.executable, "-m", "ljgdb.profile", m["r21-x64"]["host"], "-o",
                    os.path.join(profs, "r21-x64.json")], cwd=ROOT, check=True)
    s = Stop("r21-gc64", "bt.lua", ["lbt"], str(tmp_path / "run"), args=["nest"],
             env={"LJGDB_PROFILES": profs}, host=stripped)
    for mode in ("live", "core"):
        out = s.out(mode, "lbt").strip()
        assert len(out.splitlines()) == 1, out
        assert out.startswith("lbt: LuaJIT is in %s" % stripped) and (
            "1 layout profile has LuaJIT's version string 'LuaJIT 2.1.ROLLING', but the "
            "process's memory fits none of them" in out), out


def overwrite_build_id(path):
    """Give the file a build-id no profile has: its bytes overwritten in
    place (removing the note with objcopy renumbers sections, and gdb then
    misplaces symbols)."""
    bid = bytes.fromhex(build_id(path))
    with open(path, "r+b") as f:
        data = f.read()
        assert data.count(bid) == 1
        f.seek(data.index(bid))
        f.write(bytes(b ^ 0xFF for b in bid))


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE).stdout.decode()
    return out.split("Build ID:")[1].split()[0]


def test_stripped_build_without_profile(tmp_path):
    """No profile at all (LJGDB_PROFILES=none: not even the library, which
    reads this 2.1.ROLLING build by memory fit,
    test_profile_library.test_stripped_rolling_build_by_memory_fit): one
    line naming the build-id and what to do."""
    host = manifest()["r21-gc64"]["host"]
    stripped = str(tmp_path / "host")
    subprocess.run(["strip", "-o", stripped, host], check=True)
    s = Stop("r21-gc64", "bt.lua", ["lbt"], str(tmp_path / "run"), args=["nest"],
             env={"LJGDB_PROFILES": "none"}, host=stripped)
    out = s.out("live", "lbt").strip()
    assert len(out.splitlines()) == 1, out
    assert out.startswith("lbt: LuaJIT is in %s" % stripped) and "without debug info" in out
    assert "(build-id %s)" % build_id(stripped) in out and "LJGDB_PROFILES" in out, out


def test_stripped_build_with_its_vm_elsewhere(tmp_path):
    """The same LuaJIT objects linked another way (lj_vm.o first): the VM's
    machine code is the profile's byte for byte, but lies at another
    distance from lua_pcall, so the profile's offsets from lua_pcall miss
    it.  The VM is found through the dispatch table (its static copy holds
    lj_BC_ISLT's address), the labels hold again, and the stripped build
    reads as with its DWARF, live and from the core."""
    m = manifest()["r21-gc64"]
    work = str(tmp_path / "link")
    os.makedirs(work)
    subprocess.run(["ar", "x", m["lib"], "lj_vm.o"], cwd=work, check=True)
    host = os.path.join(work, "host")
    subprocess.run(["gcc", "-g", "-O0", "-I", m["src"], "-o", host, os.path.join(work, "lj_vm.o"),
                    os.path.join(ROOT, "testprogs", "host.c"), m["lib"], "-lm", "-ldl",
                    "-lpthread", "-Wl,-E"], check=True)
    stripped = str(tmp_path / "host")
    subprocess.run(["strip", "-o", stripped, host], check=True)
    profs = str(tmp_path / "profs")
    os.makedirs(profs)
    prof = os.path.join(profs, "r21-gc64.json")
    subprocess.run([sys.executable, "-m", "ljgdb.profile", m["host"], "-o", prof], cwd=ROOT,
                   check=True)

    def vm_from_pcall(path):
        syms = dict(re.findall(r"^([0-9a-f]+) \S (\w+)$", subprocess.run(
            ["nm", path], stdout=subprocess.PIPE).stdout.decode(), re.M))
        syms = {v: int(k, 16) for k, v in syms.items()}
        return syms["lj_vm_asm_begin"] - syms["lua_pcall"]
    assert vm_from_pcall(host) != vm_from_pcall(m["host"])     # the premise
    s = read_twice("r21-gc64", stripped, host, profs, tmp_path)
    for mode in ("live", "core"):
        linfo = s.out(mode, "linfo")
        assert re.search(r"^layout: +layout profile r21-gc64\.json .*, chosen by the version "
                         r"string .*; its VM code found at 0x[0-9a-f]+ through the dispatch "
                         r"table .*; the VM's code labels from the profile$", linfo, re.M), linfo
