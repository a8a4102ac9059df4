#!/usr/bin/env bash
# Install what ljgdb's demo or its test suite needs, idempotently, beside
# what the machine has: nothing is ever removed, downgraded or swapped for
# another package (docs/testing.md#set-up-what-is-installed).
#
#   bash testprogs/install-deps.sh --demo   what testprogs/demo.sh needs: gdb with its
#                                           Python, gcc, libc6-dev, make, pip (it names
#                                           the index the LuaJIT sources come from)
#   bash testprogs/install-deps.sh          all the suite needs (run-tests.sh)
#
# The suite's share: patch, xz, zstd and lz4 (triage's compressed cores);
# the real hosts the tests run (tarantool, with its own LuaJIT fork; nginx,
# whose lua module is unpacked into the cache by testprogs/debs.py, never
# installed: it needs OpenResty's libluajit2, which conflicts with Debian's
# luajit); a debuginfod server and curl; the arm64 cross tools, qemu-user
# and gdb-multiarch; lldb with its Python; what debs.py rebuilds Debian's
# LuaJIT packages with (dpkg-dev, debhelper, build-essential); chromium
# (the flame graph's SVG in a real browser); procps and python3-venv; for
# the Python that runs the tests: pytest, pytest-xdist, setuptools, wheel,
# pyelftools, flake8, jsonschema; and the consumers the tests read ljgdb's
# output formats with: speedscope's schema and memlab (npm, into the
# cache), go tool pprof (go on PATH, else Debian's golang-go).
set -euo pipefail

MODE=suite
case "${1:-}" in
  --demo) MODE=demo ;;
  "") ;;
  *) echo "usage: bash testprogs/install-deps.sh [--demo]" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PY="${PYTHON:-python3}"
CACHE_DIR="${LJGDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ljgdb}"
export DEBIAN_FRONTEND=noninteractive

installed() { dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

apt_updated=
apt_update() {
  [ -n "$apt_updated" ] && return
  $SUDO apt-get update -q >/dev/null
  apt_updated=1
}

# apt_simulate PKG...: what `apt-get install PKG...` would do (apt-get -s),
# with apt's status.
apt_simulate() { apt-get -s install -y --no-install-recommends "$@" 2>&1; }

# refusal STATUS SIMULATION: why that install must not go ahead, in one
# line, or nothing: apt's own error, or the packages it would remove.
refusal() {
  if [ "$1" != 0 ]; then
    echo "$2" | grep -m1 '^E:' || echo "apt-get -s install failed"
    return
  fi
  local gone
  gone=$(echo "$2" | awk '/^Remv /{print $2}' | paste -sd' ' -)
  [ -z "$gone" ] || echo "apt would remove $gone, which this machine has (a conflict)"
}

# apt_install [--optional] PKG...: install the packages with apt, beside what
# the machine has.  A simulation first: a package whose install would remove
# one the machine has (a conflict), or that apt cannot install, is refused
# with a line saying why, and the others go ahead (--optional) or the script
# stops.  apt may upgrade a package the machine has to the version a new one
# depends on (the same package, a newer release): each such upgrade is said.
apt_install() {
  local optional=
  if [ "${1:-}" = --optional ]; then optional=1; shift; fi
  [ $# -gt 0 ] || return 0
  apt_update
  local sim status=0 ok=() pkg one why
  sim=$(apt_simulate "$@") || status=$?
  if [ -z "$(refusal "$status" "$sim")" ]; then
    ok=("$@")
  else
    # Which of them: each simulated alone, then the rest together again.
    for pkg in "$@"; do
      status=0; one=$(apt_simulate "$pkg") || status=$?
      why=$(refusal "$status" "$one")
      if [ -n "$why" ]; then
        echo "[deps] not installing $pkg: $why" >&2
        [ -n "$optional" ] || { echo "[deps] install-deps.sh stops: $pkg is needed" >&2; exit 1; }
      else
        ok+=("$pkg")
      fi
    done
    [ ${#ok[@]} -gt 0 ] || return 0
    sim=$(apt_simulate "${ok[@]}") || true
  fi
  local upgrades
  upgrades=$(echo "$sim" | sed -n 's/^Inst \([^ ]*\) \[\([^]]*\)\] (\([^ ]*\).*/\1 \2 -> \3/p' |
             paste -sd, -)
  echo "[deps] apt-get install ${ok[*]}" >&2
  [ -z "$upgrades" ] || echo "[deps] apt upgrades, as those depend on it: $upgrades" >&2
  $SUDO apt-get install -y -q --no-install-recommends --no-remove "${ok[@]}" >/dev/null
}

# --- what the demo needs -----------------------------------------------------
apt_pkgs=()
for pair in gdb:gdb gcc:gcc make:make; do
  cmd="${pair%%:*}"; pkg="${pair#*:}"
  command -v "$cmd" >/dev/null 2>&1 || apt_pkgs+=("$pkg")
done
# gdb's embedded Python must be able to run (Debian's gdb links libpython3).
if command -v gdb >/dev/null 2>&1 && ! gdb -nx --batch -ex 'python import sys' >/dev/null 2>&1; then
  apt_pkgs+=(gdb)
fi
# (gcc without its recommends has no C library headers)
installed libc6-dev || apt_pkgs+=(libc6-dev)
command -v "$PY" >/dev/null 2>&1 || apt_pkgs+=(python3)
[ -f /etc/ssl/certs/ca-certificates.crt ] || apt_pkgs+=(ca-certificates)
"$PY" -m pip --version >/dev/null 2>&1 || apt_pkgs+=(python3-pip)
if [ "$MODE" = demo ]; then
  apt_install "${apt_pkgs[@]}"
  exit 0
fi

# --- what the suite needs ----------------------------------------------------
for pair in patch:patch xz:xz-utils zstd:zstd lz4:lz4 pgrep:procps; do
  cmd="${pair%%:*}"; pkg="${pair#*:}"
  command -v "$cmd" >/dev/null 2>&1 || apt_pkgs+=("$pkg")
done
"$PY" -c 'import ensurepip, venv' >/dev/null 2>&1 || apt_pkgs+=(python3-venv)
apt_install "${apt_pkgs[@]}"

# Real hosts, and the tools to rebuild Debian's LuaJIT packages (debs.py).
# lua-check: a real Lua program no one here wrote, for lbc's listings.
# libc6-dbg: glibc's types and static symbols (main_arena), for lmalloc.
# luajit: a LuaJIT that dpkg owns (test_distro: the hint names its package),
# only where it installs cleanly.
# The arm64 variants: a cross compiler and C library, qemu-user to run them,
# gdb-multiarch to debug them through qemu's gdb stub.
apt_pkgs=()
# libpcre3: what nginx's lua module (unpacked by debs.py) links besides libluajit2.
# clang, libbpf-dev: record's BPF sampler (gdb_ext/backends/bpfsample.bpf.c,
# compiled at first use; libbpf-dev brings libbpf1, its loader).
for pkg in tarantool nginx libpcre3 debuginfod curl build-essential dpkg-dev debhelper lua-check libc6-dbg \
           gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user gdb-multiarch chromium \
           clang libbpf-dev; do
  installed "$pkg" || apt_pkgs+=("$pkg")
done
installed luajit || installed libluajit2-5.1-2 || apt_pkgs+=(luajit)
# lldb with its Python bindings (tests/e2e/test_lldb.py): one the machine has
# (lldb-NN beside python3-lldb-NN), else Debian's lldb-19, else lldb-16;
# where neither exists the lldb tests skip, saying so.
have_lldb=
for v in 19 18 17 16 15 14; do
  if installed "python3-lldb-$v" && command -v "lldb-$v" >/dev/null 2>&1; then have_lldb=$v; break; fi
done
if [ -z "$have_lldb" ]; then
  apt_update
  for v in 19 16; do
    if apt-cache show "python3-lldb-$v" >/dev/null 2>&1; then
      apt_pkgs+=("lldb-$v" "python3-lldb-$v")
      break
    fi
  done
fi
apt_install --optional "${apt_pkgs[@]}"

# Python modules: pip first; where the system Python refuses pip installs
# (PEP 668, Debian bookworm's python3), Debian's packages instead.
py_has() { "$PY" -c "import $1" >/dev/null 2>&1; }
missing=()
for mod in pytest xdist setuptools wheel elftools flake8 jsonschema; do
  case "$mod" in
    elftools) name=pyelftools ;;
    xdist) name=pytest-xdist ;;
    *) name=$mod ;;
  esac
  py_has "$mod" || missing+=("$name")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] pip install ${missing[*]}" >&2
  if ! "$PY" -m pip install -q "${missing[@]}" 2>/dev/null; then
    debs=()
    for m in "${missing[@]}"; do debs+=("python3-$m"); done
    apt_install "${debs[@]}"
  fi
fi

# npm packages the tests read files with, installed into the cache's npm
# folder; node and npm from Debian only where none is installed.
# --ignore-scripts: no install step runs (memlab's puppeteer would download
# a browser, which reading a snapshot file does not use).
npm_cache_install() {   # NAME VERSION
  if grep -qs "\"version\": \"$2\"" "$CACHE_DIR/npm/node_modules/$1/package.json"; then
    return
  fi
  node_pkgs=()
  command -v node >/dev/null 2>&1 || node_pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || node_pkgs+=(npm)
  apt_install "${node_pkgs[@]}"
  echo "[deps] npm install $1 $2" >&2
  mkdir -p "$CACHE_DIR/npm"
  npm install --prefix "$CACHE_DIR/npm" --ignore-scripts --no-audit --no-fund --silent "$1@$2"
}
# speedscope's file format schema (the npm package ships it).
npm_cache_install speedscope 1.25.0
# memlab's heap snapshot parser and dominator tree.
npm_cache_install @memlab/core 2.0.5
# VS Code's own Debug Adapter Protocol test client (DebugClient), which
# drives `python3 -m ljgdb dap` in tests/e2e/test_dap.py.
npm_cache_install @vscode/debugadapter-testsupport 1.68.0

# go tool pprof reads the pprof profiles: the go on PATH, else /usr/local/go's,
# else Debian's golang-go.  Since Go 1.24 `go tool pprof` is built on its first
# run (some 40 s, then kept in go's build cache): done here, once, not in a test.
GO="$(command -v go || true)"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; fi
if [ -z "$GO" ]; then
  apt_install golang-go
  GO=go
fi
"$GO" tool pprof -h >/dev/null 2>&1 || true
