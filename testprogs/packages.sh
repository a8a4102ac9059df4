#!/usr/bin/env bash
# The machine's Debian packages before and after ljgdb's set-up:
#   bash testprogs/packages.sh save FILE     writes the installed packages to FILE
#   bash testprogs/packages.sh check FILE    fails, naming them, if a package of FILE
#                                            is no longer installed; says which
#                                            changed version and which were added
# (demo.sh and run-tests.sh wrap their set-up and tests in it: nothing the
# machine had may be removed or swapped for another package.)
set -euo pipefail
list() {
  dpkg-query -W -f '${Package}:${Architecture} ${Version} ${db:Status-Abbrev}\n' 2>/dev/null |
    awk '$3 ~ /^[ih]i/ {print $1, $2}' | sort
}
case "${1:-}:${2:-}" in
  save:?*) list > "$2" ;;
  check:?*)
    now=$(mktemp); trap 'rm -f "$now"' EXIT
    list > "$now"
    gone=$(join -v1 "$2" "$now" | awk '{print $1}' | paste -sd' ' -)
    changed=$(join "$2" "$now" | awk '$2 != $3 {print $1, $2, "->", $3}' | paste -sd, -)
    added=$(join -v2 "$2" "$now" | wc -l)
    [ -z "$changed" ] || echo "[packages] upgraded by apt for the new packages: $changed" >&2
    if [ -n "$gone" ]; then
      echo "[packages] $added added, and REMOVED packages the machine had: $gone" >&2
      exit 1
    fi
    echo "[packages] $added added, none removed" >&2 ;;
  *) echo "usage: bash testprogs/packages.sh save|check FILE" >&2; exit 2 ;;
esac
