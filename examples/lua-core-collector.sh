#!/bin/sh
# A crash collector for LuaJIT programs: the kernel pipes each core to this
# script, which keeps the core and writes the Lua backtrace of every thread
# next to it, with the core reader (no gdb needed).
#
# Install (as root; the script must stay where it is named):
#   echo '|/path/to/ljgdb/examples/lua-core-collector.sh %P %e %t' \
#       > /proc/sys/kernel/core_pattern
# The kernel runs it as root with the core on standard input, while the
# crashed process's files are still in place.
#
# Environment: LJGDB_CORE_DIR (default /var/crash/ljgdb) is where cores and
# reports go; LJGDB_HOME (default: this script's checkout) is ljgdb's root.
set -u
pid=${1:-0}
exe=${2:-unknown}
when=${3:-$(date +%s)}
dir=${LJGDB_CORE_DIR:-/var/crash/ljgdb}
home=${LJGDB_HOME:-$(dirname "$(dirname "$(readlink -f "$0")")")}
umask 077
mkdir -p "$dir" || exit 1
core="$dir/core.$exe.$pid.$when"
cat > "$core" || exit 1
report="$core.lua.txt"
{
    echo "core: $core"
    for cmd in "lbt full" "lthreads" "linfo"; do
        echo
        echo "== $cmd"
        # shellcheck disable=SC2086
        python3 "$home/ljgdb.py" "$core" $cmd 2>&1
    done
} > "$report"
exit 0
