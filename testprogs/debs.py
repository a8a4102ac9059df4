#!/usr/bin/env python3
"""Debug symbols for Debian's own LuaJIT packages, as users get them, for
the real-host tests: rebuild the `luajit` and `luajit2` source packages
with dpkg-buildpackage (their -dbgsym packages are not reachable from these
machines), then

  luajit2   install the rebuilt libluajit2-5.1-2 (OpenResty's fork, which
            nginx's lua module links) and libluajit2-5.1-2-dbgsym: luajit2
            does not rebuild byte-identical, so the official library would
            not match the debug file.  Its debug file lands under
            /usr/lib/debug/.build-id/, where gdb looks.
            Debian's official libluajit2-5.1-2 is unpacked into
            $LJGDB_CACHE/debs/libluajit2-root/ (not installed), without a
            debug file: the stripped library users run.
  luajit    unpack Debian's official luajit package and, when the rebuild
            is byte-identical (checked by build-id), luajit-dbgsym, into
            $LJGDB_CACHE/debs/luajit-root/ (usr/bin/luajit,
            usr/lib/debug/.build-id/...).  Not installed: Debian's luajit
            conflicts with libluajit2-5.1-2, which nginx needs.

Built packages are cached under $LJGDB_CACHE/debs/<source>_<version>/, so
a second run builds nothing, and installs nothing that is in place.

Usage: python3 testprogs/debs.py        (run by testprogs/run-tests.sh)
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build import CACHE, SRC, fetch_debian, log, run  # noqa: E402

DEBS = os.path.join(CACHE, "debs")


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode()
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def built(pkg):
    """The directory of pkg's rebuilt binary packages (building them once)."""
    fetch_debian(pkg)
    dsc = sorted(glob.glob(os.path.join(SRC, "debian", pkg + "_*.dsc")))[-1]
    version = os.path.basename(dsc)[len(pkg) + 1:-len(".dsc")]
    out = os.path.join(DEBS, "%s_%s" % (pkg, version))
    if glob.glob(os.path.join(out, "*.deb")):
        return out
    log("rebuilding Debian's %s %s with dpkg-buildpackage (about a minute)" % (pkg, version))
    work = tempfile.mkdtemp(prefix="ljgdb-deb-")
    try:
        run(["dpkg-source", "-x", dsc, os.path.join(work, "src")], stdout=subprocess.DEVNULL)
        env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=%d" % (os.cpu_count() or 2))
        with open(os.path.join(work, "build.log"), "wb") as logf:
            p = subprocess.run(["dpkg-buildpackage", "-b", "-uc", "-us"], cwd=os.path.join(work, "src"),
                               stdout=logf, stderr=subprocess.STDOUT, env=env)
        if p.returncode != 0:
            with open(os.path.join(work, "build.log"), "rb") as f:
                tail = f.read()[-3000:].decode("utf-8", "replace")
            raise SystemExit("debs.py: dpkg-buildpackage of %s failed:\n%s" % (pkg, tail))
        os.makedirs(out + ".tmp", exist_ok=True)
        for f in glob.glob(os.path.join(work, "*.deb")):
            shutil.move(f, out + ".tmp")
        os.rename(out + ".tmp", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def deb(d, name):
    found = glob.glob(os.path.join(d, name + "_*.deb"))
    if not found:
        raise SystemExit("debs.py: %s has no %s package" % (d, name))
    return found[0]


def debug_ids(dbgsym):
    """The build-ids whose debug files a -dbgsym package holds."""
    out = subprocess.run(["dpkg-deb", "-c", dbgsym], stdout=subprocess.PIPE, check=True).stdout
    return set(a + b for a, b in re.findall(r"\.build-id/([0-9a-f]{2})/([0-9a-f]+)\.debug",
                                            out.decode()))


def installed_file(pkg, pattern):
    out = subprocess.run(["dpkg-query", "-L", pkg], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode()
    return [f for f in out.splitlines() if re.search(pattern, f) and os.path.isfile(f)]


def dpkg_install(paths):
    run(["dpkg", "-i"] + paths, stdout=subprocess.DEVNULL)


def main():
    if shutil.which("dpkg-buildpackage") is None:
        raise SystemExit("debs.py: dpkg-buildpackage is missing (testprogs/install-deps.sh "
                         "installs dpkg-dev and debhelper)")
    # OpenResty's fork: the rebuilt library and its debug file.
    d = built("luajit2")
    lib, dbg = deb(d, "libluajit2-5.1-2"), deb(d, "libluajit2-5.1-2-dbgsym")
    libs = installed_file("libluajit2-5.1-2", r"\.so\.[0-9.]+$")
    if not libs or not debug_ids(dbg) & {build_id(f) for f in libs} or \
            not os.path.exists(_debug_path(build_id(libs[0]))):
        log("installing the rebuilt libluajit2-5.1-2 and its debug symbols")
        dpkg_install([lib, dbg])
    # ... and Debian's official libluajit2-5.1-2, unpacked (not installed):
    # what users run, without a debug file anywhere (tests/test_nginx.py
    # runs nginx on it through LD_LIBRARY_PATH).
    unpack_official("libluajit2-5.1-2", os.path.join(DEBS, "libluajit2-root"))
    # Debian's luajit: the official binary and, if the rebuild matches it,
    # its debug file, unpacked side by side.
    d = built("luajit")
    root = os.path.join(DEBS, "luajit-root")
    official = os.path.join(root, "usr", "bin", "luajit")
    if not os.path.exists(official):
        dl = tempfile.mkdtemp(prefix="ljgdb-deb-")
        try:
            run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", "luajit"], cwd=dl,
                stdout=subprocess.DEVNULL)
            os.makedirs(root + ".tmp", exist_ok=True)
            run(["dpkg-deb", "-x", glob.glob(os.path.join(dl, "luajit_*.deb"))[0], root + ".tmp"])
            dbg = deb(d, "luajit-dbgsym")
            bid = build_id(os.path.join(root + ".tmp", "usr", "bin", "luajit"))
            if bid in debug_ids(dbg):
                run(["dpkg-deb", "-x", dbg, root + ".tmp"])
            else:
                log("the rebuilt luajit differs from Debian's (build-id %s, debug files for %s): "
                    "no debug file for it" % (bid, ", ".join(sorted(debug_ids(dbg)))))
            if os.path.exists(root):
                shutil.rmtree(root)
            os.rename(root + ".tmp", root)
        finally:
            shutil.rmtree(dl, ignore_errors=True)
    return 0


def unpack_official(pkg, root):
    """Debian's own binary package pkg, unpacked into root (once)."""
    if os.path.isdir(root):
        return root
    dl = tempfile.mkdtemp(prefix="ljgdb-deb-")
    try:
        run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", pkg], cwd=dl,
            stdout=subprocess.DEVNULL)
        run(["dpkg-deb", "-x", glob.glob(os.path.join(dl, pkg + "_*.deb"))[0], root + ".tmp"])
        os.rename(root + ".tmp", root)
    finally:
        shutil.rmtree(dl, ignore_errors=True)
    return root


def _debug_path(bid):
    return "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])


if __name__ == "__main__":
    sys.exit(main())
