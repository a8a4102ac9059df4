#!/usr/bin/env bash
# ljgdb demo: build a LuaJIT (upstream 2.1, GC64 unless VARIANT= says
# otherwise), run testprogs/lua/demo.lua in it under gdb, save a core at the
# moment it sits in a C function called from Lua, then open that core in a
# fresh gdb with ljgdb loaded and run its commands.
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANT="${VARIANT:-r21-gc64}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash testprogs/packages.sh save "$work/packages"
bash testprogs/install-deps.sh --demo
echo "== building LuaJIT ($VARIANT) with -g into the cache (once; about 20 s)"
python3 testprogs/build.py "$VARIANT" 2>"$work/build.log" >/dev/null || { cat "$work/build.log" >&2; exit 1; }
bash testprogs/packages.sh check "$work/packages"
host=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["host"])' \
       "${LJGDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ljgdb}/builds.json" "$VARIANT")

echo "== the example, testprogs/lua/demo.lua: a small \"API server\" keeps its configuration"
echo "   and 100 user sessions in tables; while it handles a request (user42 adds a book to"
echo "   the cart) it calls into C, as a server blocks in a socket read or a database driver."
echo "   gdb stops it there (ljgdb_break), saves a core, and ljgdb reads the Lua world from it."
echo "== $VARIANT: running testprogs/lua/demo.lua; gcore at the breakpoint in ljgdb_break"
gdb -nx --batch -ex 'set confirm off' -ex 'break ljgdb_break' -ex run \
    -ex "gcore $work/demo.core" -ex kill --args "$host" testprogs/lua/demo.lua >/dev/null 2>&1
ls -l "$work/demo.core" | awk '{print "== core file: " $5 " bytes"}'

cmds=("lbt full" "lthreads" "lgcstat --top 3" "ltrace" "lmcode" "linfo" "lval L 1" "ltab L->base --depth 2" "ltab L->base+1" "lval --raw L 3")
args=()
for c in "${cmds[@]}"; do args+=(-ex "echo \\n(gdb) $c\\n" -ex "$c"); done
echo "== gdb $(basename "$host") demo.core, with: source $PWD/ljgdb.py"
gdb -nx --batch -ex "source $PWD/ljgdb.py" -ex "core-file $work/demo.core" "${args[@]}" "$host" \
    2>&1 | grep -v -e '^\[New LWP' -e '^Core was generated' -e '^Program terminated' \
                   -e '^#0  ljgdb_break' -e '^[0-9]*\s.*ljgdb_break_count' -e '^\[Thread debugging' \
                   -e '^Using host libthread_db'
