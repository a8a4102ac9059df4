#!/usr/bin/env bash
# Install what ljgdb's tests and demo need, idempotently: gdb, a C toolchain,
# patch, xz, zstd and lz4 (triage's compressed cores); the real hosts the
# tests run (tarantool, with its own LuaJIT fork; nginx with
# libnginx-mod-http-lua, on OpenResty's libluajit2; a debuginfod server and
# curl); the arm64 cross tools, qemu-user and
# gdb-multiarch; and what testprogs/debs.py rebuilds Debian's
# LuaJIT packages with (dpkg-dev, debhelper); and for the Python that runs the tests: pip, pytest,
# setuptools, wheel (pip download of the lupa sdist runs its metadata step), pyelftools
# (the DWARF reader of python3 -m ljgdb.profile), flake8 (the lint run-tests.sh runs);
# inferno, which draws flame graphs of lprofile's folded stacks; and the
# consumers that tests/e2e/test_profout_consumers.py reads commands/profout.py's
# formats with: jsonschema (pip) and speedscope's schema (the npm package
# speedscope, with node and npm from Debian where absent), go (for go tool pprof;
# Debian's golang-go where no go is installed); memlab (the npm package
# @memlab/core), which tests/e2e/test_heapsnapshot.py reads lgcstat's V8 heap
# snapshots with.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PY="${PYTHON:-python3}"

apt_pkgs=()
for pair in gdb:gdb gcc:gcc make:make patch:patch xz:xz-utils zstd:zstd lz4:lz4 apt-get:apt; do
  cmd="${pair%%:*}"; pkg="${pair#*:}"
  command -v "$cmd" >/dev/null 2>&1 || apt_pkgs+=("$pkg")
done
# gdb's embedded Python must be able to run (Debian's gdb links libpython3).
if command -v gdb >/dev/null 2>&1 && ! gdb -nx --batch -ex 'python import sys' >/dev/null 2>&1; then
  apt_pkgs+=(gdb)
fi
if ! command -v "$PY" >/dev/null 2>&1; then apt_pkgs+=(python3); fi
[ -d /etc/ssl/certs ] || apt_pkgs+=(ca-certificates)

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "$@" >/dev/null
}
# Real hosts, and the tools to rebuild Debian's LuaJIT packages.  (Debian's
# luajit conflicts with libluajit2-5.1-2: debs.py unpacks it instead.)
# lua-check: a real Lua program no one here wrote, for lbc's listings.
# libc6-dbg: glibc's types and static symbols (main_arena), for lmalloc.
# The arm64 variants: a cross compiler and C library, qemu-user to run them,
# gdb-multiarch to debug them through qemu's gdb stub.
for pkg in tarantool nginx libnginx-mod-http-lua debuginfod curl dpkg-dev debhelper lua-check libc6-dbg \
           gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user gdb-multiarch; do
  dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || apt_pkgs+=("$pkg")
done
# lldb with its Python bindings (tests/e2e/test_lldb.py): one the machine has
# (lldb-NN beside python3-lldb-NN), else Debian's lldb-19, else lldb-16;
# where neither exists the lldb tests skip, saying so.
have_lldb=
for v in 19 18 17 16 15 14; do
  if dpkg-query -W -f '${Status}' "python3-lldb-$v" 2>/dev/null | grep -q "ok installed" &&
     command -v "lldb-$v" >/dev/null 2>&1; then have_lldb=$v; break; fi
done
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  echo "[deps] apt-get install ${apt_pkgs[*]}" >&2
  apt_install "${apt_pkgs[@]}"
fi
if [ -z "$have_lldb" ]; then
  [ ${#apt_pkgs[@]} -gt 0 ] || $SUDO apt-get update -q >/dev/null
  for v in 19 16; do
    if apt-cache show "python3-lldb-$v" >/dev/null 2>&1; then
      echo "[deps] apt-get install lldb-$v python3-lldb-$v" >&2
      $SUDO apt-get install -y -q --no-install-recommends "lldb-$v" "python3-lldb-$v" >/dev/null
      break
    fi
  done
fi

# Python modules: pip first; where the system Python refuses pip installs
# (PEP 668, Debian bookworm's python3), Debian's packages instead.
py_has() { "$PY" -c "import $1" >/dev/null 2>&1; }
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  echo "[deps] apt-get install python3-pip" >&2
  apt_install python3-pip
fi
missing=()
for mod in pytest setuptools wheel elftools flake8 jsonschema; do
  # (pyelftools is imported as elftools)
  py_has "$mod" || missing+=("$([ "$mod" = elftools ] && echo pyelftools || echo "$mod")")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] pip install ${missing[*]}" >&2
  if ! "$PY" -m pip install -q "${missing[@]}" 2>/dev/null; then
    debs=()
    for m in "${missing[@]}"; do debs+=("python3-$m"); done
    echo "[deps] apt-get install ${debs[*]}" >&2
    apt_install "${debs[@]}"
  fi
fi

# inferno (a Rust crate) draws lprofile's folded stacks as a flame graph
# SVG; built once into the cache, outside the checkout.
CACHE_DIR="${LJGDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ljgdb}"
INFERNO_VERSION=0.12.8
if [ ! -x "$CACHE_DIR/cargo/bin/inferno-flamegraph" ]; then
  CARGO="$(command -v cargo || true)"
  [ -n "$CARGO" ] || { [ -x "$HOME/.cargo/bin/cargo" ] && CARGO="$HOME/.cargo/bin/cargo"; } || true
  if [ -z "$CARGO" ]; then
    echo "[deps] apt-get install cargo" >&2
    apt_install cargo
    CARGO=cargo
  fi
  echo "[deps] cargo install inferno $INFERNO_VERSION" >&2
  "$CARGO" install -q --locked inferno --version "$INFERNO_VERSION" --root "$CACHE_DIR/cargo"
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
  if [ ${#node_pkgs[@]} -gt 0 ]; then
    echo "[deps] apt-get install ${node_pkgs[*]}" >&2
    apt_install "${node_pkgs[@]}"
  fi
  echo "[deps] npm install $1 $2" >&2
  mkdir -p "$CACHE_DIR/npm"
  npm install --prefix "$CACHE_DIR/npm" --ignore-scripts --no-audit --no-fund --silent "$1@$2"
}
# speedscope's file format schema (the npm package ships it).
npm_cache_install speedscope 1.25.0
# memlab's heap snapshot parser and dominator tree.
npm_cache_install @memlab/core 2.0.5

# go tool pprof reads the pprof profiles: the go on PATH, else /usr/local/go's,
# else Debian's golang-go.  Since Go 1.24 `go tool pprof` is built on its first
# run (some 40 s, then kept in go's build cache): done here, once, not in a test.
GO="$(command -v go || true)"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; fi
if [ -z "$GO" ]; then
  echo "[deps] apt-get install golang-go" >&2
  apt_install golang-go
  GO=go
fi
"$GO" tool pprof -h >/dev/null 2>&1 || true
