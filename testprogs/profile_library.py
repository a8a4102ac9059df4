#!/usr/bin/env python3
"""Write the library of layout profiles (pkg/profiles/library/) from the
sources of the LuaJIT versions people run, for stripped builds whose
build-id no profile has: ljgdb chooses one by LuaJIT's version string and a
check of the process's memory (gdb_ext/layouts/profiles.py choose).

Each entry is built here from its source, in GC64 and X64 mode where the
version has both, the way its own Makefile builds it (its default -O2
-fomit-frame-pointer, with -g added), and its profile is read from that
build's DWARF by python3 -m ljgdb.profile, then gzipped.  The layout and the
VM's code labels do not depend on the C compiler's options; the VM's place
in the file does, and ljgdb finds it through the dispatch table.

Sources:
  lupa's sdists (PyPI)  bundle upstream LuaJIT: 2.0.5 and 2.1.0-beta3 (lupa
                        2.0; older sdists hold no Makefile), then
                        the rolling 2.0 and 2.1 branches at the commit of
                        each lupa release; a rolling tree gets the version a
                        release tarball of its commit has (build.py
                        stamp_release); pinned by sha256
  Debian sources        luajit (Debian's 2.1.0-beta3 snapshot) and luajit2
                        (OpenResty's fork), as build.py fetches them
  OpenResty's releases  of 2025, as Debian's current suites carry them (the
                        orig tarballs of trixie's and sid's luajit), built
                        as released; pinned by sha256
  Tarantool's fork      as Tarantool 2.6.0 bundles it (the orig tarball of
                        bookworm's tarantool: third_party/luajit), built
                        with the definition Tarantool's CMake adds
                        (LUAJIT_SMART_STRINGS); pinned by sha256

The 2.1 versions are also cross-built for arm64 (always GC64 there), with
the cross tools install-deps.sh installs.

  python3 testprogs/profile_library.py [--check] [--list] [--mode MODE] [NAME ...]

--check writes nothing and exits 1 when a shipped profile's layout differs
from what its source gives now; NAME limits the run to those entries, and
--mode (gc64, x64 or arm64) to that mode.
"""
import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from build import ARM64_MAKE, CACHE, NO_GC64, SRC, debian_sources_list, extract, fetch_debian, fetch_lupa, \
    log, make_static, pinned, run, sha256_file, stamp_release, unpack  # noqa: E402

OUT = os.path.join(ROOT, "pkg", "profiles", "library")
WORK = os.path.join(CACHE, "library")

LUPA_SHA256 = {
    "2.0": "ad3fef486be7adddd349fe9a9c393789061312cf98ebc533b489be34f484cb79",
    "2.1": "760030712d5273396f5e963dd8731aefb5ac65d92eff8bf8fd4124c1630fe950",
    "2.2": "665a006bcf8d9aacdfdb953824b929d06a0c55910a662b59be2f157ab4c8924d",
    "2.4": "5300d21f81aa1bd4d45f55e31dddba3b879895696068a3f84cfcb5fd9148aacd",
    "2.5": "69c6a89f2b7b08a3040d7ed2a1eeccba37a31ddc92fa199339c53a2ae3c48c34",
    "2.6": "9a770a6e89576be3447668d7ced312cd6fd41d3c13c2462c9dc2c2ab570e45d9",
    "2.8": "d8022641b9ec8ecf2c5ecbe9f47e5a70e0b87c4b5ae921b92cb02a638e0acd08",
}

# Upstream tarballs of releases that Debian's current suites carry (as the
# orig tarballs of their source packages), fetched whole and built without
# Debian's patches: file: (package=version, suites, sha256).
ORIGS = {
    "luajit_2.1.0+openresty20250117.orig.tar.xz": (
        "luajit=2.1.0+openresty20250117-2", ("trixie", "sid"),
        "99ad5fdfa85e08a291454f797f625fbb53f4d2129cac063922255a1fe34ccf1c"),
    "luajit_2.1.0+openresty20251030.orig.tar.xz": (
        "luajit=2.1.0+openresty20251030-1", ("trixie", "sid"),
        "04106b57bb3b089ce21ae606163c6fbd260f245580cfeb45484201fd86835190"),
    "tarantool_2.6.0.orig.tar.gz": (
        "tarantool=2.6.0-1.2", ("bookworm",),
        "f7f547be785eaa91cd03a14ad2c02a8bc87adac0e9011a90500f744a08d8a106"),
}

# name: (source, where in it, modes, the version string it builds).  A
# source is ("lupa", version), ("debian", package) or ("orig", file).
BETA3 = "LuaJIT 2.1.0-beta3"
BOTH = ("gc64", "x64")
# 2.1's modes: GC64 and X64 on x86-64, and arm64 (GC64 by default there).
ALL = BOTH + ("arm64",)
# Upstream's rolling releases in lupa's sdists: (branch, lupa version, the
# commit's time that names the version).
ROLLING = (("2.0", "2.4", "1734355810"), ("2.0", "2.8", "1774896119"),
           ("2.1", "2.1", "1710088188"), ("2.1", "2.2", "1716656478"),
           ("2.1", "2.4", "1734355927"), ("2.1", "2.5", "1748459687"),
           ("2.1", "2.6", "1760617492"), ("2.1", "2.8", "1774896198"))
ENTRIES = dict(
    [("upstream-2.0.5", (("lupa", "2.0"), "third-party/luajit20/", ("x64",), "LuaJIT 2.0.5")),
     ("upstream-2.1.0-beta3", (("lupa", "2.0"), "third-party/luajit21/", ALL, BETA3))] +
    [("upstream-%s.%s" % (branch, when),
      (("lupa", lupa), "third-party/luajit%s/" % branch.replace(".", ""),
       ALL if branch == "2.1" else ("x64",), "LuaJIT %s.%s" % (branch, when)))
     for branch, lupa, when in ROLLING] +
    [("debian-luajit-2.1.0-beta3+git20220320", (("debian", "luajit"), None, ALL, BETA3)),
     ("openresty-luajit2-2.1-20230119", (("debian", "luajit2"), None, ALL, BETA3))] +
    [("openresty-luajit2-2.1-%s" % day, (("orig", "luajit_2.1.0+openresty%s.orig.tar.xz" % day),
                                         None, ALL, "LuaJIT 2.1.%s" % when))
     for day, when in (("20250117", "1737090214"), ("20251030", "1761786044"))] +
    [("tarantool-2.6.0", (("orig", "tarantool_2.6.0.orig.tar.gz"),
                          "tarantool_2.6.0/third_party/luajit/", ALL, BETA3))])
# Definitions a fork's own build adds to LuaJIT's XCFLAGS in every mode.
XCFLAGS = {"tarantool-2.6.0": "-DLUAJIT_SMART_STRINGS=1"}


def fetch_orig(name):
    """The path of an ORIGS tarball, fetched once into SRC with apt-get
    source through a private deb-src list of Debian's current suites (on
    the mirrors the system's own entries name); its .dsc may be gone from
    the mirror while the tarball is not, so only the tarball is needed."""
    spec, suites, sha = ORIGS[name]
    d = os.path.join(SRC, "debian-orig")
    path = os.path.join(d, name)
    if not os.path.exists(path):
        apt = os.path.join(SRC, "apt-current")
        parts, lists = os.path.join(apt, "parts"), os.path.join(apt, "lists")
        for x in (d, parts, os.path.join(lists, "partial")):
            os.makedirs(x, exist_ok=True)
        uris = set()
        for entry in debian_sources_list():
            if entry.startswith("deb-src "):
                uris.add(entry.split()[1])
            for line in entry.splitlines():
                if line.startswith("URIs:"):
                    uris.update(line.split()[1:])
        uris = sorted(u for u in uris if "security" not in u)
        with open(os.path.join(parts, "current.list"), "w") as f:
            for u in uris:
                for suite in suites:
                    f.write("deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                            "%s %s main\n" % (u, suite))
        opts = ["-o", "Dir::Etc::SourceList=/dev/null", "-o", "Dir::Etc::SourceParts=" + parts,
                "-o", "Dir::State::Lists=" + lists, "-o", "APT::Sandbox::User=root"]
        run(["apt-get", "update", "-q"] + opts, stdout=subprocess.DEVNULL)
        subprocess.run(["apt-get", "source", "--download-only", "-q"] + opts + [spec], cwd=d,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not os.path.exists(path):
            raise SystemExit("profile_library: apt-get source %s did not fetch %s" % (spec, name))
    return pinned(path, sha, "profile_library")


def build(name, mode):
    """The luajit binary of entry `name` in `mode`, built with -g (cached
    under WORK, keyed by its sources and this recipe)."""
    (kind, what), inside, _, _ = ENTRIES[name]
    files = ([fetch_lupa(what, LUPA_SHA256[what])] if kind == "lupa" else
             [fetch_orig(what)] if kind == "orig" else fetch_debian(what))
    # (GC64 became x86-64's default after 2.1.0-beta3: asked for by name, it
    # is the same build in later versions.)
    xcflags = NO_GC64 if mode == "x64" else "-DLUAJIT_ENABLE_GC64" if mode == "gc64" else ""
    xcflags = " ".join(x for x in (xcflags, XCFLAGS.get(name)) if x)
    cross = ARM64_MAKE if mode == "arm64" else []
    h = hashlib.sha256(("1|%s|%s|%s%s" % (name, inside, xcflags, "|arm64" if cross else ""))
                       .encode())
    for f in files:
        h.update(sha256_file(f).encode())
    out = os.path.join(WORK, "%s-%s-%s" % (name, mode, h.hexdigest()[:12]))
    luajit = os.path.join(out, "src", "luajit")
    if not os.path.exists(os.path.join(out, "built")):
        shutil.rmtree(out, ignore_errors=True)
        tree = os.path.join(out, "tree")
        os.makedirs(tree)
        if kind == "lupa":
            extract(files[0], tree, member_prefix="lupa-%s/%s" % (what, inside))
            stamp_release(tree)
        elif kind == "orig":
            extract(files[0], tree, member_prefix=inside)
        else:
            unpack(what, files, tree)
        make_static(os.path.join(tree, "src"), xcflags, cross)
        os.rename(os.path.join(tree, "src"), os.path.join(out, "src"))
        shutil.rmtree(tree)
        open(os.path.join(out, "built"), "w").close()
    return luajit


def profile_of(luajit):
    """The layout profile of a build (python3 -m ljgdb.profile), as a dict."""
    p = subprocess.run([sys.executable, "-m", "ljgdb.profile", luajit], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise SystemExit("profile_library: python3 -m ljgdb.profile %s failed:\n%s"
                         % (luajit, p.stderr.decode(errors="replace")))
    return json.loads(p.stdout)


def layout_of(doc):
    """What a profile says about memory and code, without what names the
    one build it was read from (its build-id, file name)."""
    return {k: v for k, v in doc.items() if k not in ("build_id", "file")}


def write(path, doc):
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    tmp = path + ".tmp"
    with open(tmp, "wb") as raw:
        # mtime 0 and no file name: the same profile gives the same bytes.
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
            f.write(data)
    os.rename(tmp, path)


def read(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--mode", choices=ALL)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    if args.list:
        for name, (_, _, modes, _) in ENTRIES.items():
            print("%-42s %s" % (name, " ".join(modes)))
        return 0
    bad = [n for n in args.names if n not in ENTRIES]
    if bad:
        raise SystemExit("profile_library: unknown entr%s %s; --list shows them"
                         % ("y" if len(bad) == 1 else "ies", ", ".join(bad)))
    os.makedirs(OUT, exist_ok=True)
    status = 0
    for name in args.names or list(ENTRIES):
        for mode in ENTRIES[name][2]:
            if args.mode and mode != args.mode:
                continue
            doc = profile_of(build(name, mode))
            want = ENTRIES[name][3]
            if doc.get("version") != want:
                raise SystemExit("profile_library: %s %s says %r, not %r"
                                 % (name, mode, doc.get("version"), want))
            if doc.get("flags", {}).get("gc64") != (mode != "x64") or \
                    doc.get("arch") != ("aarch64" if mode == "arm64" else "x86_64"):
                raise SystemExit("profile_library: %s built as %s has flags %s on %s"
                                 % (name, mode, doc.get("flags"), doc.get("arch")))
            path = os.path.join(OUT, "%s-%s.json.gz" % (name, mode))
            if args.check:
                same = os.path.exists(path) and layout_of(read(path)) == layout_of(doc)
                log("%s: %s" % (os.path.basename(path), "as its source gives" if same
                                else "DIFFERS from what its source gives now"))
                status |= 0 if same else 1
            else:
                write(path, doc)
                log("wrote %s" % os.path.relpath(path, ROOT))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
