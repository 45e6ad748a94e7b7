#!/usr/bin/env bash
# slowfs.sh - mount and unmount tools/slowfs for tests and benchmarks.
#   slowfs.sh check                      exit 0 if FUSE works here, else print why and exit 77
#   slowfs.sh mount SRC MNT [OPTS...]    start slowfs in the background, wait until MNT is
#                                        mounted, print its pid (OPTS go to slowfs)
#   slowfs.sh umount MNT                 unmount (slowfs then exits and writes its stats)
# SLOWFS names the binary (default: build/slowfs next to this repository's Makefile).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
SLOWFS=${SLOWFS:-$here/build/slowfs}

why_not() {
  [ -e /dev/fuse ] || { echo "no /dev/fuse"; return; }
  [ -r /dev/fuse ] && [ -w /dev/fuse ] || { echo "/dev/fuse not accessible"; return; }
  command -v fusermount3 >/dev/null || { echo "fusermount3 not installed (Debian: fuse3)"; return; }
  [ -x "$SLOWFS" ] || { echo "slowfs not built ($SLOWFS; needs libfuse3-dev)"; return; }
}

case "${1:-}" in
  check)
    r=$(why_not)
    [ -z "$r" ] && exit 0
    echo "FUSE unavailable: $r"; exit 77 ;;
  mount)
    [ $# -ge 3 ] || { echo "usage: slowfs.sh mount SRC MNT [OPTS...]" >&2; exit 2; }
    src=$2 mnt=$3; shift 3
    r=$(why_not); [ -z "$r" ] || { echo "FUSE unavailable: $r" >&2; exit 77; }
    mkdir -p "$mnt"
    "$SLOWFS" "$@" "$src" "$mnt" </dev/null >/dev/null 2>"$mnt.slowfs.log" &
    pid=$!
    for _ in $(seq 1 200); do
      if grep -qs " $(cd "$mnt" 2>/dev/null && pwd -P) fuse.slowfs " /proc/mounts; then echo $pid; exit 0; fi
      kill -0 $pid 2>/dev/null || break
      sleep 0.05
    done
    echo "slowfs did not mount $mnt: $(cat "$mnt.slowfs.log" 2>/dev/null)" >&2
    kill $pid 2>/dev/null; exit 2 ;;
  umount)
    [ $# -ge 2 ] || { echo "usage: slowfs.sh umount MNT" >&2; exit 2; }
    fusermount3 -u "$2" 2>/dev/null || umount "$2" 2>/dev/null || fusermount3 -uz "$2"
    rm -f "$2.slowfs.log"
    ;;
  *) echo "usage: slowfs.sh check | mount SRC MNT [OPTS...] | umount MNT" >&2; exit 2 ;;
esac
