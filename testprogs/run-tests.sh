#!/usr/bin/env bash
# The whole test suite: install dependencies, lint (flake8, .flake8), build the
# LuaJIT matrix (the arm64 variants too) and rebuild Debian's LuaJIT packages for
# their debug symbols (cached in ~/.cache/ljgdb), then run pytest on all of tests/
# (pytest.ini): engine unit tests on synthetic memory (tests/unit) and end-to-end
# tests of every command under real gdb, live and on cores (tests/e2e), the slow
# ones too.  The tests run on two workers (pytest-xdist, a test file to a
# worker), then the timing-sensitive ones (marker `serial`) alone.  The
# machine's packages are listed before the set-up and checked after it and at
# the end: none may be gone (testprogs/packages.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=$(mktemp)
trap 'rm -f "$pkgs"' EXIT
bash testprogs/packages.sh save "$pkgs"
bash testprogs/install-deps.sh
python3 -m flake8
python3 testprogs/build.py --arm64
python3 testprogs/debs.py
bash testprogs/packages.sh check "$pkgs"
status=0
cache="${LJGDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ljgdb}"
# Each run's JUnit XML, for bench/suite_times.py (where the time goes).
run="$cache/last-run"
mkdir -p "$run"
# Every gdb, lldb and core reader the tests start imports ljgdb: its
# compiled modules are kept in the cache, outside the checkout, even where
# the environment forbids writing them (PYTHONDONTWRITEBYTECODE), which made
# each of those processes compile its 95 modules again (0.2 s of gdb's 0.35).
export PYTHONPYCACHEPREFIX="$cache/pycache"
unset PYTHONDONTWRITEBYTECODE
# (exit 5: no test selected, as a run given a file without serial tests has)
python3 -m pytest -q -n 2 --dist loadfile --serial=skip --durations=20 \
  --junitxml="$run/parallel.xml" tests "$@" || { s=$?; [ $s = 5 ] || status=$s; }
python3 -m pytest -q -p no:xdist --serial=only --durations=10 \
  --junitxml="$run/serial.xml" tests "$@" || { s=$?; [ $s = 5 ] || status=$s; }
bash testprogs/packages.sh check "$pkgs"
exit $status
