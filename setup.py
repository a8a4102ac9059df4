"""Install ljgdb as the package `ljgdb` (ljgdb.gdb_ext, ljgdb.commands).

`ljgdb` is python3 -m ljgdb (the core reader, --pid, dump, record, top).
The checkout itself is all gdb needs (`source /path/to/ljgdb.py`).  Installed
(also in a virtualenv, which gdb's own Python does not see), `ljgdb-gdbinit`
prints the line for ~/.gdbinit, `source .../site-packages/ljgdb/gdbinit.py`
(`ljgdb-gdbinit --append` adds it).  No bare top-level `commands` module is
installed: both parts live under `ljgdb`.
"""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class BuildWithSampler(build_py):
    """Also build the engine's C code beside its loaders, where a compiler
    is at hand: record's C sampler (gdb_ext/backends/ptstop.c), the heap
    walk's and the heap graph's (gdb_ext/heap/walkc.c, graphc.c) and the
    thread scan's (gdb_ext/stack/threadc.c).  Without one, ljgdb builds them into its
    cache at first use, or does the same work in Python."""

    def run(self):
        build_py.run(self)
        import glob
        from gdb_ext.backends import ptstop
        from gdb_ext.heap import graphc, walkc
        from gdb_ext.stack import threadc
        for mod, wing, stem, what in ((ptstop, "backends", "ptstop", "record's C sampler"),
                                      (walkc, "heap", "walkc", "the heap walk's C code"),
                                      (graphc, "heap", "graphc", "the heap graph's C code"),
                                      (threadc, "stack", "threadc", "the thread scan's C code")):
            dest = os.path.join(self.build_lib, "ljgdb", "gdb_ext", wing)
            # (A build directory kept from an earlier build holds that source's.)
            for old in glob.glob(os.path.join(dest, stem + "-*.so")):
                os.unlink(old)
            try:
                mod.build(dest)
            except (OSError, subprocess.CalledProcessError) as e:
                print("ljgdb: %s not built (%s); it is built at first use where a C compiler "
                      "is found" % (what, e), file=sys.stderr)


# The engine's subpackages (gdb_ext/<wing>/; docs/architecture.md).
ENGINE_WINGS = ("layouts", "vm", "stack", "heap", "jit", "backends")

setup(
    name="ljgdb",
    version="0.1.0",
    description="GDB Python extension for LuaJIT: Lua backtraces, values, tables, GC and JIT "
                "state from live processes and core files",
    long_description=open("README.md").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.6",
    packages=(["ljgdb", "ljgdb.gdb_ext"] + ["ljgdb.gdb_ext." + s for s in ENGINE_WINGS]
              + ["ljgdb.commands", "ljgdb.commands.hosts"]),
    package_dir=dict({"ljgdb": "pkg", "ljgdb.gdb_ext": "gdb_ext", "ljgdb.commands": "commands",
                      "ljgdb.commands.hosts": "commands/hosts"},
                     **{"ljgdb.gdb_ext." + s: "gdb_ext/" + s for s in ENGINE_WINGS}),
    # The shipped layout profiles (testprogs/make_profiles.py writes them).
    package_data={"ljgdb": ["profiles/*.json", "profiles/glibc/*.json",
                            "profiles/library/*.json.gz"],
                  "ljgdb.gdb_ext.backends": ["ptstop.c", "bpfsample.bpf.c"],
                  "ljgdb.gdb_ext.heap": ["graphc.c", "walkc.c"],
                  "ljgdb.gdb_ext.stack": ["threadc.c"]},
    cmdclass={"build_py": BuildWithSampler},
    # ljgdb: the core reader and the live commands (python3 -m ljgdb's).
    entry_points={"console_scripts": ["ljgdb-gdbinit = ljgdb.install:main",
                                      "ljgdb = ljgdb.commands.cli:console"]},
    # python3 -m ljgdb.profile and the core reader (python3 -m ljgdb CORE ...)
    # read DWARF with pyelftools (gdb needs nothing).
    extras_require={"profile": ["pyelftools"], "core": ["pyelftools"]},
    classifiers=["Topic :: Software Development :: Debuggers",
                 "Programming Language :: Python :: 3"],
)
