#!/usr/bin/env python3
"""Fetch LuaJIT sources and build the ljgdb test matrix, idempotently.

Usage: python3 testprogs/build.py [--list] [--arm64] [VARIANT ...]

Every build is made with -g, cached outside the checkout under
$LJGDB_CACHE (default ~/.cache/ljgdb) and keyed by a hash of its sources,
its flags and this recipe, so a second run does nothing.  At the end a
manifest (builds.json in the cache) tells the tests where each build is.

Sources:
  lupa 2.8 sdist (PyPI)     third-party/luajit21 (upstream 2.1 rolling),
                            third-party/luajit20 (upstream 2.0)
  Debian source `luajit`    2.1.0~beta3+git20220320 (Debian's upstream snapshot)
  Debian source `luajit2`   2.1-20230119 (OpenResty's fork)
The Debian sources are fetched with apt-get source through a private,
source-only list derived from the system's own Debian sources, so the
system's apt configuration is not touched.

Each variant builds a static libluajit.a, the luajit binary and our C host
(testprogs/host.c) linked against it.  The arm64 variants are cross-built
(aarch64-linux-gnu-gcc, installed by install-deps.sh) and run under
qemu-user: their manifest entry has "arch": "arm64" and "runner", the
command line that runs their binaries here.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("LJGDB_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ljgdb")
SRC = os.path.join(CACHE, "src")
BUILD = os.path.join(CACHE, "build")
MANIFEST = os.path.join(CACHE, "builds.json")

# Bump when the way a build is made changes, to invalidate the cache.
RECIPE = "3"

LUPA_VERSION = "2.8"
LUPA_SHA256 = "d8022641b9ec8ecf2c5ecbe9f47e5a70e0b87c4b5ae921b92cb02a638e0acd08"

NO_GC64 = "-DLUAJIT_DISABLE_GC64"
NO_JIT = "-DLUAJIT_DISABLE_JIT"

ARM64_CROSS = "aarch64-linux-gnu-"
ARM64_SYSROOT = "/usr/aarch64-linux-gnu"
ARM64_RUNNER = ["qemu-aarch64", "-L", ARM64_SYSROOT]
# make's arguments for an arm64 cross build: it sets CROSS and not CC (the
# Makefile prefixes CC with CROSS itself); HOST_CC builds buildvm for this
# machine.
ARM64_MAKE = ["HOST_CC=gcc", "CROSS=" + ARM64_CROSS, "TARGET_SYS=Linux"]
# Built only when asked for by name or with --arm64 (they need the cross
# tools; arm64 LuaJIT is always GC64 and dual-number).
ARM64_VARIANTS = ("r21-arm64", "or-arm64", "r21-arm64-O3")

# name: (source, extra XCFLAGS, what it is)
VARIANTS = {
    "r21-gc64": ("lupa21", "", "upstream 2.1 rolling, GC64"),
    "r21-x64": ("lupa21", NO_GC64, "upstream 2.1 rolling, X64 (GC64 disabled)"),
    "r20-x64": ("lupa20", "", "upstream 2.0, X64"),
    "deb-gc64": ("luajit", "", "Debian luajit 2.1.0~beta3+git20220320, GC64"),
    "deb-x64": ("luajit", NO_GC64, "Debian luajit 2.1.0~beta3+git20220320, X64"),
    "or-gc64": ("luajit2", "", "OpenResty luajit2 2.1-20230119, GC64"),
    "or-x64": ("luajit2", NO_GC64, "OpenResty luajit2 2.1-20230119, X64"),
    "r21-dualnum": ("lupa21", "-DLUAJIT_NUMMODE=2",
                    "upstream 2.1 rolling, GC64, dual-number mode (integers as their own TValues)"),
    "r21-nojit": ("lupa21", NO_JIT, "upstream 2.1 rolling, GC64, JIT disabled (LUAJIT_DISABLE_JIT)"),
    # The same source with other compiler options, its version stamped as a
    # release tarball's (.relver): read stripped through the library of
    # layout profiles (tests/e2e/test_profile_library.py).
    "r21-O1": ("lupa21", "", "upstream 2.1 rolling as released, GC64, -O1"),
    "r21-O3": ("lupa21", "", "upstream 2.1 rolling as released, GC64, -O3"),
    "r21-fp": ("lupa21", "", "upstream 2.1 rolling as released, GC64, -O2 -fno-omit-frame-pointer"),
    "r21-nojit-rel": ("lupa21", NO_JIT, "upstream 2.1 rolling as released, GC64, JIT disabled"),
    "r21-arm64": ("lupa21", "", "upstream 2.1 rolling, arm64 (GC64, dual-number), under qemu-user"),
    "or-arm64": ("luajit2", "", "OpenResty luajit2 2.1-20230119, arm64 (GC64, dual-number), under qemu-user"),
    "r21-arm64-O3": ("lupa21", "", "upstream 2.1 rolling as released, arm64, -O3, under qemu-user"),
}


# name: CCOPT (the Makefile's default is -O2 -fomit-frame-pointer); these
# builds' version is stamped (stamp_release).
CCOPTS = {
    "r21-O1": "-O1 -fomit-frame-pointer",
    "r21-O3": "-O3 -fomit-frame-pointer",
    "r21-fp": "-O2 -fno-omit-frame-pointer",
    "r21-nojit-rel": "-O2 -fomit-frame-pointer",
    "r21-arm64-O3": "-O3 -fomit-frame-pointer",
}


def log(msg):
    sys.stderr.write("[build] %s\n" % msg)
    sys.stderr.flush()


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pinned(path, want, who="build.py"):
    """path, once its sha256 is want; else exit saying what to do."""
    got = sha256_file(path)
    if got != want:
        raise SystemExit("%s: %s has sha256 %s, expected %s; delete it and retry"
                         % (who, path, got, want))
    return path


def package_index():
    """The package index pip is set to use (PIP_INDEX_URL, pip's own
    configuration, else pip's default), without its trailing slash."""
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        p = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        url = p.stdout.decode().strip() if p.returncode == 0 else ""
    if not url:
        try:
            from pip._internal.models.index import PyPI
        except ImportError:
            raise SystemExit("build.py: pip is missing (testprogs/install-deps.sh installs "
                             "python3-pip); it names the package index lupa's sources come from")
        url = PyPI.simple_url
    return url.rstrip("/")


def fetch_lupa(version=LUPA_VERSION, sha256=LUPA_SHA256):
    """The path of lupa's sdist of this version, downloaded once into SRC
    and checked against its sha256.  The file is looked up in the package
    index's JSON listing (PEP 691) and fetched as it is: pip download would
    run the sdist's metadata step, which takes minutes and setuptools."""
    name = "lupa-%s.tar.gz" % version
    path = os.path.join(SRC, name)
    if not os.path.exists(path):
        import urllib.parse
        import urllib.request
        os.makedirs(SRC, exist_ok=True)
        index = package_index()
        log("fetching %s from the package index" % name)
        req = urllib.request.Request(index + "/lupa/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                listing = json.load(r)
            url = [f["url"] for f in listing.get("files", []) if f.get("filename") == name]
            if not url:
                raise SystemExit("build.py: the package index lists no %s" % name)
            tmp = path + ".tmp"
            with urllib.request.urlopen(urllib.parse.urljoin(index + "/lupa/", url[0]),
                                        timeout=120) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
        except (OSError, ValueError) as e:
            raise SystemExit("build.py: cannot fetch %s from %s: %s" % (name, index, e))
        os.rename(pinned(tmp, sha256), path)
        return path
    return pinned(path, sha256)


def debian_sources_list():
    """A deb-src list made from the system's own Debian 'deb' entries."""
    out = []
    parts = "/etc/apt/sources.list.d"
    for name in sorted(os.listdir(parts)) if os.path.isdir(parts) else []:
        if name.endswith(".sources"):
            with open(os.path.join(parts, name)) as f:
                text = f.read()
            for stanza in text.split("\n\n"):
                if "debian" in stanza and "Types:" in stanza:
                    out.append("\n".join(
                        "Types: deb-src" if line.startswith("Types:") else line
                        for line in stanza.splitlines()))
    if os.path.exists("/etc/apt/sources.list"):
        with open("/etc/apt/sources.list") as f:
            for line in f:
                if line.startswith("deb "):
                    out.append("deb-src " + line[4:].strip())
    if not out:
        raise SystemExit("build.py: found no Debian entries in /etc/apt to derive a deb-src list from")
    return out


def fetch_debian(pkg):
    d = os.path.join(SRC, "debian")
    have = [f for f in os.listdir(d) if f.startswith(pkg + "_")] if os.path.isdir(d) else []
    if not any(f.endswith(".dsc") for f in have):
        apt = os.path.join(SRC, "apt")
        srcparts = os.path.join(apt, "sources.list.d")
        lists = os.path.join(apt, "lists")
        os.makedirs(os.path.join(lists, "partial"), exist_ok=True)
        os.makedirs(srcparts, exist_ok=True)
        os.makedirs(d, exist_ok=True)
        entries = debian_sources_list()
        one_line = [e for e in entries if e.startswith("deb-src ")]
        deb822 = [e for e in entries if not e.startswith("deb-src ")]
        with open(os.path.join(srcparts, "ljgdb-src.sources"), "w") as f:
            f.write("\n\n".join(deb822) + "\n")
        with open(os.path.join(srcparts, "ljgdb-src.list"), "w") as f:
            f.write("\n".join(one_line) + "\n")
        opts = ["-o", "Dir::Etc::SourceList=/dev/null", "-o", "Dir::Etc::SourceParts=" + srcparts,
                "-o", "Dir::State::Lists=" + lists, "-o", "APT::Sandbox::User=root"]
        if not os.path.exists(os.path.join(apt, "updated")):
            run(["apt-get", "update", "-q"] + opts, stdout=subprocess.DEVNULL)
            open(os.path.join(apt, "updated"), "w").close()
        run(["apt-get", "source", "--download-only", "-q"] + opts + [pkg], cwd=d,
            stdout=subprocess.DEVNULL)
        have = [f for f in os.listdir(d) if f.startswith(pkg + "_")]
    files = sorted(os.path.join(d, f) for f in have if ".orig." in f or ".debian." in f)
    if len(files) != 2:
        raise SystemExit("build.py: expected an orig and a debian tarball for %s in %s, found %s"
                         % (pkg, d, files))
    return files


def extract(tarball, dest, member_prefix=None, strip=None):
    """Extract a tarball into dest, dropping `strip` leading path parts
    (by default the one top-level folder, if every member is inside one)."""
    with tarfile.open(tarball) as t:
        members = t.getmembers()
        if strip is None and not member_prefix:
            tops = {[p for p in m.name.split("/") if p not in ("", ".")][:1][0]
                    for m in members if m.name.strip("./")}
            one = len(tops) == 1 and any(m.isdir() and m.name.strip("./") in tops for m in members)
            strip = 1 if one else 0
        for m in members:
            if member_prefix and not m.name.startswith(member_prefix):
                continue
            name = m.name[len(member_prefix):] if member_prefix else m.name
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if not member_prefix:
                parts = parts[strip:]
            if not parts or ".." in parts:
                continue
            m.name = "/".join(parts)
            if m.issym() or m.islnk():
                continue
            t.extract(m, dest, filter="data") if sys.version_info >= (3, 12) else t.extract(m, dest)


def unpack(source, files, dest):
    if source in ("lupa21", "lupa20"):
        sub = "luajit21" if source == "lupa21" else "luajit20"
        extract(files[0], dest, member_prefix="lupa-2.8/third-party/%s/" % sub)
    else:
        orig = [f for f in files if ".orig." in f][0]
        deb = [f for f in files if ".debian." in f][0]
        extract(orig, dest)
        extract(deb, dest, strip=0)  # adds debian/
        series = os.path.join(dest, "debian", "patches", "series")
        if os.path.exists(series):
            with open(series) as f:
                for line in f:
                    line = line.split("#")[0].strip()
                    if line:
                        run(["patch", "-s", "-p1", "-i", os.path.join("debian", "patches", line)],
                            cwd=dest)


def stamp_release(tree):
    """Give a rolling 2.x tree unpacked from lupa's sdist the version a
    release tarball of its commit builds with: the sdist's .relver holds
    the unexpanded '$Format:%ct$' (the build then says 2.x.ROLLING), while
    its generated luajit.h names the commit's time.  Returns that version
    string, or None for a tree without .relver (2.0.5, 2.1.0-beta3)."""
    relver = os.path.join(tree, ".relver")
    if not os.path.exists(relver):
        return None
    with open(os.path.join(tree, "src", "luajit.h")) as f:
        m = re.search(r'#define LUAJIT_VERSION\s+"(LuaJIT 2\.[01]\.(\d+))"', f.read())
    if m is None:
        raise SystemExit("build.py: no release time in %s/src/luajit.h" % tree)
    with open(relver, "w") as f:
        f.write(m.group(2) + "\n")
    return m.group(1)


def make_static(srcdir, xcflags, extra=()):
    """make clean (lupa's sdist ships generated files and host binaries),
    then LuaJIT's static build with -g in srcdir: libluajit.a and luajit."""
    run(["make", "-s", "-C", srcdir, "clean"], stdout=subprocess.DEVNULL)
    run(["make", "-s", "-j%d" % (os.cpu_count() or 2), "-C", srcdir, "CCDEBUG=-g",
         "BUILDMODE=static", "XCFLAGS=" + xcflags, "Q="] + list(extra), stdout=subprocess.DEVNULL)


def host_hash():
    h = hashlib.sha256()
    for name in ("host.c",):
        with open(os.path.join(HERE, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def build_variant(name, sources):
    source, xcflags, what = VARIANTS[name]
    arm64 = name in ARM64_VARIANTS
    files = sources[source]
    ccopt = CCOPTS.get(name)
    h = hashlib.sha256(("%s|%s|%s|%s" % (RECIPE, source, xcflags, "arm64" if arm64 else "")).encode())
    if ccopt:
        h.update(("|stamped|" + ccopt).encode())
    for f in files:
        h.update(sha256_file(f).encode())
    key = h.hexdigest()[:12]
    out = os.path.join(BUILD, "%s-%s" % (name, key))
    srcdir = os.path.join(out, "src")
    done = os.path.join(out, "built")
    if not os.path.exists(done):
        shutil.rmtree(out, ignore_errors=True)
        tree = os.path.join(out, "tree")
        os.makedirs(tree)
        unpack(source, files, tree)
        if ccopt:
            stamp_release(tree)
        make_static(os.path.join(tree, "src"), xcflags,
                    (ARM64_MAKE if arm64 else []) + (["CCOPT=" + ccopt] if ccopt else []))
        os.rename(os.path.join(tree, "src"), srcdir)
        shutil.rmtree(tree)
        open(done, "w").close()
    host = os.path.join(out, "host-" + host_hash())
    if not os.path.exists(host):
        for old in os.listdir(out):
            if old.startswith("host-"):
                os.unlink(os.path.join(out, old))
        tmp = host + ".tmp"
        # arm64: not PIE, else gdb cannot relocate it in qemu's cores.
        cc = [ARM64_CROSS + "gcc", "-no-pie"] if arm64 else ["gcc"]
        run(cc + ["-g", "-O0", "-Wall", "-I", srcdir, "-o", tmp, os.path.join(HERE, "host.c"),
                  os.path.join(srcdir, "libluajit.a"), "-lm", "-ldl", "-lpthread", "-Wl,-E"])
        os.rename(tmp, host)
    return {
        "name": name, "what": what, "source": source, "xcflags": xcflags,
        "gc64": NO_GC64 not in xcflags and source != "lupa20",
        "jit": NO_JIT not in xcflags,
        # arm64's default is dual-number mode; x86-64's is not.
        "dualnum": arm64 or "LUAJIT_NUMMODE=2" in xcflags,
        "arch": "arm64" if arm64 else "x86-64",
        "runner": ARM64_RUNNER if arm64 else [],
        "sysroot": ARM64_SYSROOT if arm64 else "",
        "dir": out, "src": srcdir, "luajit": os.path.join(srcdir, "luajit"),
        "lib": os.path.join(srcdir, "libluajit.a"), "host": host,
    }


def main(argv):
    if "--list" in argv:
        for name, (_, _, what) in VARIANTS.items():
            print("%-10s %s" % (name, what))
        return 0
    names = [a for a in argv if not a.startswith("-")] or \
        [n for n in VARIANTS if n not in ARM64_VARIANTS or "--arm64" in argv]
    bad = [n for n in names if n not in VARIANTS]
    if bad:
        raise SystemExit("build.py: unknown variant(s) %s; known: %s" % (", ".join(bad), ", ".join(VARIANTS)))
    wanted = {VARIANTS[n][0] for n in names}
    sources = {}
    if wanted & {"lupa21", "lupa20"}:
        sources["lupa21"] = sources["lupa20"] = [fetch_lupa()]
    for pkg in ("luajit", "luajit2"):
        if pkg in wanted:
            sources[pkg] = fetch_debian(pkg)
    manifest = {}
    if os.path.exists(MANIFEST):
        with open(MANIFEST) as f:
            manifest = json.load(f)
    for n in names:
        manifest[n] = build_variant(n, sources)
        log("%s ready: %s" % (n, manifest[n]["host"]))
    manifest = {k: v for k, v in manifest.items() if k in VARIANTS}
    with open(MANIFEST + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.rename(MANIFEST + ".tmp", MANIFEST)
    print(MANIFEST)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as e:
        sys.exit("build.py: %s failed (exit %d); its output is above"
                 % (" ".join(e.cmd[:2]), e.returncode))
