#!/usr/bin/env python3
"""Write the shipped layout profiles (pkg/profiles/) from the real builds
they describe, with python3 -m ljgdb.profile's reader:

  debian-luajit_<version>.json   Debian's official luajit (statically
                                 linked, stripped), from the debug file of
                                 its -dbgsym package (testprogs/debs.py
                                 rebuilds it byte-identical and unpacks both)

  debian-libluajit2_<version>.json  OpenResty's fork as Debian ships it
                                 (libluajit2-5.1-2, which nginx's lua
                                 module links), from the rebuilt package's
                                 debug file: the rebuild is not
                                 byte-identical (its build-id differs), but
                                 its layout is the same source's and its
                                 VM code the same bytes at the same place
                                 (tests/e2e/test_nginx.py runs the official
                                 library through this profile)

  glibc/debian-libc6_<version>_amd64.json   the machine's glibc (Debian's
                                 libc6): lmalloc's layout of its malloc, from
                                 libc6-dbg, for a libc without its debug file

  python3 testprogs/make_profiles.py [--check]

--check writes nothing and exits 1 when a shipped profile differs from what
its build gives now (tests/e2e/test_profile_layout.py runs it).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from build import CACHE  # noqa: E402

OUT = os.path.join(ROOT, "pkg", "profiles")
DEBIAN_ROOT = os.path.join(CACHE, "debs", "luajit-root")
LIBLUAJIT2_ROOT = os.path.join(CACHE, "debs", "libluajit2-rebuilt-root")


def debian_luajit():
    """(profile name, debug file, binary) of Debian's official luajit."""
    binary = os.path.join(DEBIAN_ROOT, "usr", "bin", "luajit")
    debug = glob.glob(os.path.join(DEBIAN_ROOT, "usr", "lib", "debug", ".build-id", "*",
                                   "*.debug"))
    versions = glob.glob(os.path.join(CACHE, "debs", "luajit_*"))
    if not os.path.exists(binary) or len(debug) != 1 or len(versions) != 1:
        raise SystemExit("make_profiles: Debian's luajit and its debug file are not unpacked in "
                         "%s: run python3 testprogs/debs.py first" % DEBIAN_ROOT)
    version = os.path.basename(versions[0])[len("luajit_"):]
    return "debian-luajit_%s.json" % version.replace("~", "-"), debug[0], binary


def debian_libluajit2():
    """(profile name, debug file, library) of the rebuilt libluajit2-5.1-2
    that testprogs/debs.py unpacks with its debug file."""
    libs = glob.glob(os.path.join(LIBLUAJIT2_ROOT, "usr", "lib", "x86_64-linux-gnu",
                                  "libluajit-5.1.so.2.*"))
    versions = glob.glob(os.path.join(CACHE, "debs", "luajit2_*"))
    if len(libs) != 1 or len(versions) != 1:
        raise SystemExit("make_profiles: the rebuilt libluajit2-5.1-2 is not unpacked in %s: "
                         "run python3 testprogs/debs.py first" % LIBLUAJIT2_ROOT)
    version = os.path.basename(versions[0])[len("luajit2_"):]
    note = subprocess.run(["readelf", "-n", libs[0]], stdout=subprocess.PIPE).stdout.decode()
    bid = note.split("Build ID: ")[1].split()[0]
    debug = os.path.join(LIBLUAJIT2_ROOT, "usr", "lib", "debug", ".build-id", bid[:2],
                         bid[2:] + ".debug")
    if not os.path.exists(debug):
        raise SystemExit("make_profiles: no debug file for %s (%s): run python3 "
                         "testprogs/debs.py first" % (libs[0], debug))
    return "debian-libluajit2_%s.json" % version.replace("~", "-"), debug, libs[0]


LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
GLIBC_OUT = os.path.join(OUT, "glibc")


def glibc_profile():
    """(profile name, its JSON text) of the machine's libc: the layout of
    the structs lmalloc reads (gdb_ext/heap/glibc.py) from libc6-dbg's
    debug file (the malloc.c unit), its symbols main_arena, mp_ and
    __libc_version as ELF addresses, and malloc's (the anchor: exported by
    every libc), for a libc without its debug file."""
    from elftools.elf.elffile import ELFFile
    sys.path.insert(0, ROOT)
    __import__("ljgdb")
    from ljgdb.gdb_ext.heap.glibc import Layout
    from ljgdb.gdb_ext.layouts.elfdwarf import DwarfTypes
    note = subprocess.run(["readelf", "-n", LIBC], stdout=subprocess.PIPE).stdout.decode()
    bid = note.split("Build ID: ")[1].split()[0]
    debug = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    if not os.path.exists(debug):
        raise SystemExit("make_profiles: no debug file for %s (%s): apt install libc6-dbg"
                         % (LIBC, debug))
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libc6"],
                             stdout=subprocess.PIPE).stdout.decode().strip()
    types = DwarfTypes(debug, "malloc.c")
    symtab = types.elf.get_section_by_name(".symtab")
    with open(LIBC, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        symbols = {"malloc": dynsym.get_symbol_by_name("malloc")[0]["st_value"]}
    for n in ("main_arena", "mp_", "__libc_version"):
        symbols[n] = symtab.get_symbol_by_name(n)[0]["st_value"]
    doc = {"kind": "glibc malloc layout", "libc": "libc6 %s amd64" % version, "build_id": bid,
           "symbols": symbols,
           "types": {n: types.type_info(n).to_json() for n in Layout.NEEDED}}
    types.close()
    return "debian-libc6_%s_amd64.json" % version.replace("~", "-").replace("+", "-"), \
        json.dumps(doc, indent=1, sort_keys=True) + "\n"


def profile_text(debug, binary):
    p = subprocess.run([sys.executable, "-m", "ljgdb.profile", debug, "--binary", binary],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        raise SystemExit(p.stdout.decode())
    return p.stdout.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    stale = []
    for name, debug, binary in [debian_luajit(), debian_libluajit2()]:
        text = profile_text(debug, binary)
        path = os.path.join(OUT, name)
        if a.check:
            try:
                with open(path) as f:
                    same = json.load(f) == json.loads(text)
            except (OSError, ValueError):
                same = False
            if not same:
                stale.append(path)
            continue
        os.makedirs(OUT, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print("wrote %s" % path)
    name, text = glibc_profile()
    path = os.path.join(GLIBC_OUT, name)
    if a.check:
        # (A machine whose libc has no shipped profile is not a stale one.)
        if os.path.exists(path):
            with open(path) as f:
                if json.load(f) != json.loads(text):
                    stale.append(path)
    else:
        os.makedirs(GLIBC_OUT, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print("wrote %s" % path)
    if stale:
        raise SystemExit("make_profiles: not current: %s (python3 testprogs/make_profiles.py "
                         "writes them)" % ", ".join(stale))


if __name__ == "__main__":
    main()
