#!/usr/bin/env bash
# The README's commands as a new user meets them: a minimal Debian 12 made
# with debootstrap, in a chroot, with only luajit, git and python3 installed
# as that user's own packages; then a clone of this checkout and
# testprogs/demo.sh (or run-tests.sh) in it, timed, and the packages checked:
# the user's are all still there and luajit -v runs.  Run as root:
#
#   bash testprogs/fresh-debian.sh [DIR] [demo|tests]   (default /var/tmp/ljgdb-bookworm, demo)
#
# DIR.base is made once (debootstrap and the user's packages, about 40 s)
# and kept; each run starts from a fresh copy of it in DIR (delete DIR.base
# for a new one).  The mirror is the one this machine's apt uses.  The
# chroot gets this machine's CA bundle, as its registries need
# (docs/testing.md#a-fresh-debian-12).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-/var/tmp/ljgdb-bookworm}"
WHAT="${2:-demo}"
case "$WHAT" in demo|tests) ;; *) echo "usage: bash testprogs/fresh-debian.sh [DIR] [demo|tests]" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "fresh-debian.sh: run it as root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -q --no-install-recommends debootstrap >/dev/null

mirror() {   # the first Debian (non-security) URI of this machine's apt
  { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' || true
    grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' || true; } |
    grep -v security | head -1
}
CA=/etc/ssl/certs/ljgdb-host-ca.crt
ROOT=
mount_root() {   # DIR: the chroot in_root runs in, a mount point of its own (as a
                 # container's root is: unshare --propagation needs it), with
                 # /proc, /sys and /dev bound
  ROOT="$1"
  mkdir -p "$ROOT/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT$CA"
  mountpoint -q "$ROOT" || mount --bind "$ROOT" "$ROOT"
  for fs in proc sys dev; do mountpoint -q "$ROOT/$fs" || mount --rbind "/$fs" "$ROOT/$fs"; done
}
unmount_root() {   # DIR; fails if a mount stays (nothing may then delete DIR)
  if mountpoint -q "$1"; then umount -R "$1" || umount -lR "$1"; fi
  if mountpoint -q "$1" || grep -q " $1/" /proc/mounts; then
    echo "fresh-debian.sh: something under $1 is still mounted" >&2; return 1
  fi
}
in_root() {
  chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive SSL_CERT_FILE=$CA NODE_EXTRA_CA_CERTS=$CA \
    REQUESTS_CA_BUNDLE=$CA PIP_CERT=$CA CURL_CA_BUNDLE=$CA GIT_SSL_CAINFO=$CA "$@"
}

BASE="$DIR.base"
if [ ! -f "$BASE/root/packages-of-the-user" ]; then
  if [ -d "$BASE" ]; then unmount_root "$BASE"; rm -rf --one-file-system "$BASE"; fi
  m=$(mirror)
  echo "== debootstrap --variant=minbase bookworm (the user's machine)" >&2
  debootstrap --variant=minbase bookworm "$BASE" "$m" >/dev/null
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
    "$m" "$m" "$m" > "$BASE/etc/apt/sources.list"
  mount_root "$BASE"
  echo "== the user's own packages: luajit git python3" >&2
  in_root apt-get update -q >/dev/null
  in_root apt-get install -y -q luajit git python3 >/dev/null
  in_root dpkg-query -W -f '${Package}\n' > "$BASE/root/packages-of-the-user.tmp"
  mv "$BASE/root/packages-of-the-user.tmp" "$BASE/root/packages-of-the-user"
  unmount_root "$BASE"
fi
if [ -d "$DIR" ]; then unmount_root "$DIR"; rm -rf --one-file-system "$DIR"; fi
cp -a "$BASE" "$DIR"
trap 'unmount_root "$DIR"' EXIT
mount_root "$DIR"
# (in /opt, not root's home: a test runs ljgdb as user nobody, who must read it)
git clone -q . "$DIR/opt/ljgdb"
# the work tree as it is, uncommitted changes and new files too
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -C "$DIR/opt/ljgdb" -xf -
cmd="bash testprogs/demo.sh"
[ "$WHAT" = tests ] && cmd="bash testprogs/run-tests.sh"
echo "== in the chroot: cd ljgdb && $cmd" >&2
start=$(date +%s)
status=0
in_root /bin/bash -c "cd /opt/ljgdb && $cmd" > "$DIR/root/$WHAT.out" 2>&1 || status=$?
end=$(date +%s)
echo "== $cmd: exit $status after $((end - start)) s (its output: $DIR/root/$WHAT.out)" >&2
missing=$(in_root dpkg-query -W -f '${Package}\n' | sort | comm -23 <(sort "$DIR/root/packages-of-the-user") - |
          paste -sd' ' -)
if [ -n "$missing" ]; then
  echo "== REMOVED: $missing" >&2; status=1
else
  echo "== every package the user had is still installed ($(wc -l < "$DIR/root/packages-of-the-user") of them)" >&2
fi
in_root luajit -v >&2 || status=1
exit $status
