#!/usr/bin/env bash
# The whole test suite: install dependencies, lint (flake8, .flake8), build the
# LuaJIT matrix (the arm64 variants too) and rebuild Debian's LuaJIT packages for
# their debug symbols (cached in ~/.cache/ljgdb), then run pytest on all of tests/ (pytest.ini):
# engine unit tests on synthetic memory (tests/unit) and end-to-end tests of every
# command under real gdb, live and on cores (tests/e2e), the slow ones too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash testprogs/install-deps.sh
python3 -m flake8
python3 testprogs/build.py --arm64
python3 testprogs/debs.py
exec python3 -m pytest -q tests "$@"
