#!/usr/bin/env python3
"""Debug symbols for Debian's own LuaJIT packages, as users get them, for
the real-host tests: rebuild the `luajit` and `luajit2` source packages
with dpkg-buildpackage (their -dbgsym packages are not reachable from these
machines), then unpack (dpkg-deb -x, never dpkg -i: nothing here changes
the machine's packages) into private roots under $LJGDB_CACHE/debs/:

  luajit2   libluajit2-rebuilt-root/: the rebuilt libluajit2-5.1-2
            (OpenResty's fork, which nginx's lua module links) and its
            libluajit2-5.1-2-dbgsym (usr/lib/x86_64-linux-gnu/,
            usr/lib/debug/.build-id/): luajit2 does not rebuild
            byte-identical, so the official library would not match the
            debug file.  The tests run nginx on it through LD_LIBRARY_PATH
            and point gdb's debug-file-directory at its usr/lib/debug.
            libluajit2-root/: Debian's official libluajit2-5.1-2, without a
            debug file: the stripped library users run.
  nginx     nginx-lua-root/: Debian's libnginx-mod-http-lua, libnginx-mod-
            http-ndk, lua-resty-core and lua-resty-lrucache, as they are
            (the nginx modules in usr/lib/nginx/modules/, the Lua code in
            usr/share/lua/5.1/).
  luajit    luajit-root/: Debian's official luajit package and, when the
            rebuild is byte-identical (checked by build-id), luajit-dbgsym
            (usr/bin/luajit, usr/lib/debug/.build-id/...).

Built packages are cached under $LJGDB_CACHE/debs/<source>_<version>/ and
each root is unpacked once, so a second run does nothing.

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
# The rebuilt libluajit2-5.1-2 and its debug file (tests/support/stop.py names it too).
REBUILT_ROOT = os.path.join(DEBS, "libluajit2-rebuilt-root")
LIBDIR = os.path.join("usr", "lib", "x86_64-linux-gnu")
# Debian's lua-nginx-module and what it needs besides libluajit2
# (tests/e2e/test_nginx.py loads it from here).
NGINX_LUA_ROOT = os.path.join(DEBS, "nginx-lua-root")
NGINX_LUA_PACKAGES = ("libnginx-mod-http-lua", "libnginx-mod-http-ndk", "lua-resty-core",
                      "lua-resty-lrucache")


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


def unpack_rebuilt(debs, root):
    """The packages debs unpacked into root (once: a stamp names them)."""
    stamp = os.path.join(root, ".debs")
    names = "".join(os.path.basename(d) + "\n" for d in debs)
    if os.path.isfile(stamp):
        with open(stamp) as f:
            if f.read() == names:
                return root
    log("unpacking %s into %s" % (", ".join(os.path.basename(d) for d in debs), root))
    shutil.rmtree(root + ".tmp", ignore_errors=True)
    os.makedirs(root + ".tmp")
    for d in debs:
        run(["dpkg-deb", "-x", d, root + ".tmp"])
    libs = glob.glob(os.path.join(root + ".tmp", LIBDIR, "libluajit-5.1.so.2.*"))
    bids = {build_id(f) for f in libs}
    if len(libs) != 1 or not bids & debug_ids(debs[1]):
        raise SystemExit("debs.py: %s holds no debug file for the library of %s (build-id %s)"
                         % (os.path.basename(debs[1]), os.path.basename(debs[0]),
                            ", ".join(sorted(str(b) for b in bids)) or "none"))
    with open(os.path.join(root + ".tmp", ".debs"), "w") as f:
        f.write(names)
    if os.path.exists(root):
        shutil.rmtree(root)
    os.rename(root + ".tmp", root)
    return root


def main():
    if shutil.which("dpkg-buildpackage") is None:
        raise SystemExit("debs.py: dpkg-buildpackage is missing (testprogs/install-deps.sh "
                         "installs dpkg-dev and debhelper)")
    # OpenResty's fork: the rebuilt library and its debug file, unpacked.
    d = built("luajit2")
    unpack_rebuilt([deb(d, "libluajit2-5.1-2"), deb(d, "libluajit2-5.1-2-dbgsym")],
                   REBUILT_ROOT)
    system = glob.glob(os.path.join("/", LIBDIR, "libluajit-5.1.so.2.*"))
    rebuilt = glob.glob(os.path.join(REBUILT_ROOT, LIBDIR, "libluajit-5.1.so.2.*"))
    if system and rebuilt and build_id(system[0]) == build_id(rebuilt[0]):
        log("note: %s is the rebuild an earlier debs.py installed (the tests no longer need it): "
            "apt-get install --reinstall libluajit2-5.1-2 puts Debian's back" % system[0])
    # ... and Debian's official libluajit2-5.1-2, unpacked (not installed):
    # what users run, without a debug file anywhere (tests/e2e/test_nginx.py
    # runs nginx on it through LD_LIBRARY_PATH).
    unpack_official("libluajit2-5.1-2", os.path.join(DEBS, "libluajit2-root"))
    # nginx's lua module (and the ndk module and Lua libraries it needs),
    # unpacked, never installed: installed, it would bring OpenResty's
    # libluajit2, which removes Debian's luajit.  The tests load the modules
    # from here (load_module) and run nginx on a libluajit2 above
    # (LD_LIBRARY_PATH).
    unpack_official(NGINX_LUA_PACKAGES, NGINX_LUA_ROOT)
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


def unpack_official(pkgs, root):
    """Debian's own binary packages pkgs (a name or a list), as apt-get
    download fetches them, unpacked together into root (once)."""
    if os.path.isdir(root):
        return root
    pkgs = [pkgs] if isinstance(pkgs, str) else list(pkgs)
    dl = tempfile.mkdtemp(prefix="ljgdb-deb-")
    try:
        run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root"] + pkgs, cwd=dl,
            stdout=subprocess.DEVNULL)
        shutil.rmtree(root + ".tmp", ignore_errors=True)
        for pkg in pkgs:
            run(["dpkg-deb", "-x", glob.glob(os.path.join(dl, pkg + "_*.deb"))[0], root + ".tmp"])
        os.rename(root + ".tmp", root)
    finally:
        shutil.rmtree(dl, ignore_errors=True)
    return root


if __name__ == "__main__":
    sys.exit(main())
