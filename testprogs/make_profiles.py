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
    if stale:
        raise SystemExit("make_profiles: not current: %s (python3 testprogs/make_profiles.py "
                         "writes them)" % ", ".join(stale))


if __name__ == "__main__":
    main()
