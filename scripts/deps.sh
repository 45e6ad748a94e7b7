#!/usr/bin/env bash
# Installs the Debian packages a make target needs, only those missing.
# Idempotent; safe to run as often as you like. Usage: scripts/deps.sh TARGET...
# Targets: core (nothing), test, demo, fuzz, bench, python.
# Set PAGEIN_NO_DEPS=1 to skip (e.g. on a machine without root).
set -u
[ "${PAGEIN_NO_DEPS:-0}" = 1 ] && exit 0

pkgs=()
for target in "${@:-core}"; do
  case "$target" in
    core) ;;
    test) pkgs+=(make gcc clang libclang-rt-14-dev valgrind python3 python3-numpy python3-pytest
                 python3-torch python3-dev libfuse3-dev fuse3 liburing-dev libxxhash-dev pkg-config
                 libzstd-dev zlib1g-dev liblz4-dev) ;;
    demo|bench) pkgs+=(fio vmtouch hyperfine python3-numpy python3-torch fuse3 libfuse3-dev liburing-dev pkg-config) ;;
    fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    python) pkgs+=(python3-dev python3-numpy python3-pytest python3-torch) ;;
    *) echo "deps.sh: unknown target '$target'" >&2; exit 2 ;;
  esac
done
# remote sources (mk/remote.mk, docs/REMOTE.md): libcurl and libcrypto, the
# test servers (nginx, openssl for the private CA, node for s3rver; npm comes with
# Debian's nodejs on some releases and as the package npm on others) and
# the peers of `bench remote`; pagein.fsspec's tests compare with fsspec's HTTP (aiohttp)
for target in "${@:-core}"; do
  case "$target" in
    test) pkgs+=(libcurl4-openssl-dev libssl-dev nginx openssl curl nodejs python3-fsspec python3-aiohttp) ;;
    bench) pkgs+=(libcurl4-openssl-dev libssl-dev nginx openssl curl aria2 python3-fsspec python3-aiohttp) ;;
  esac
done
# the --svg figures (cli/svg.c): tests/cli/svg.test.sh renders them with librsvg
for target in "${@:-core}"; do
  case "$target" in
    test) pkgs+=(librsvg2-bin) ;;
  esac
done
# Arrow IPC (mk/arrow.mk, docs/FORMAT-ARROW.md): liblz4 and libzstd inflate
# compressed record batches; the test fixtures come from npm apache-arrow
# (node; npm as above) with bodies compressed by the lz4 and zstd programs
for target in "${@:-core}"; do
  case "$target" in
    test) pkgs+=(liblz4-dev libzstd-dev lz4 zstd nodejs) ;;
    fuzz|bench) pkgs+=(liblz4-dev libzstd-dev) ;;
  esac
done
# the Parquet reader's codecs (mk/parquet.mk, docs/FORMAT-PARQUET.md)
for target in "${@:-core}"; do
  case "$target" in
    test|fuzz|bench) pkgs+=(libsnappy-dev zlib1g-dev libzstd-dev liblz4-dev libbrotli-dev) ;;
  esac
done
[ ${#pkgs[@]} -eq 0 ] && exit 0

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "deps.sh: missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
  exit 0
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || {
  apt-get update -qq >/dev/null 2>&1
  apt-get install -y -qq "${missing[@]}" >&2 || echo "deps.sh: could not install: ${missing[*]}" >&2
}
exit 0
