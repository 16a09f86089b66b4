#!/usr/bin/env bash
# `make bench-scale`: esr at scale on esr-testkit (or a real cluster): the API server's write
# rate W, then N ExternalSecrets (fake store, one key each) and M unrelated Secrets, the release
# esr's cold-sync rate and its ratio to W/2, requests per ExternalSecret by verb and resource
# (esr-testkit's audit log), peak RSS, CPU-seconds per 1,000 syncs, the requests of a refresh with
# unchanged data, and the p99 latencies of a spec change and of a new namespace's
# ClusterExternalSecret Secret. The scenario is the ignored e2e test `bench_scale`
# (e2e/tests/bench_scale.rs). A benchmark, not a test: `make test` never runs it.
#
# Usage: scripts/bench-scale.sh [--es N] [--secrets M] [--refresh R] [--samples S]
#                               [--kubeconfig PATH] [--profile release|debug]
#                               [--target musl|host] [-- ESR FLAGS...]
#   defaults: --es 10000 --secrets 50000 --refresh 1000 --samples 100, release build;
#   e.g. scripts/bench-scale.sh --es 500 --secrets 2000 -- --concurrent 16 --client-qps 0
# --target: the esr measured is built as the image ships it (scripts/image.sh): the static musl
# build, with musl's allocator (default `musl`; Rust's musl target and musl-gcc are installed when
# they can be, else the host's glibc build is measured and the script says so); `host` measures
# the host's glibc build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
profile=release
want_target=musl
while [ $# -gt 0 ]; do
  case "$1" in
    --es) export BENCH_ES=$2; shift 2 ;;
    --secrets) export BENCH_SECRETS=$2; shift 2 ;;
    --refresh) export BENCH_REFRESH=$2; shift 2 ;;
    --samples) export BENCH_SAMPLES=$2; shift 2 ;;
    --kubeconfig) export ESR_E2E_KUBECONFIG=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --target) want_target=$2; shift 2 ;;
    --) shift; export BENCH_ESR_ARGS="$*"; break ;;
    *) echo "bench-scale: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
flag=""; [ "$profile" = release ] && flag="--release"
# shellcheck source=scripts/lib-build.sh
. "$root/scripts/lib-build.sh"
triple=""
if [ "$want_target" = musl ]; then
  triple=$(musl_target)
  if [ -z "$triple" ]; then
    echo "==> the musl target is not available: measuring the host's glibc build instead"
    echo "    (the image ships the musl build; see scripts/image.sh)"
  fi
fi
echo "==> building esr ($profile${triple:+, $triple})"
cargo build -q $flag -p esr --bin esr ${triple:+--target "$triple"}
target=${CARGO_TARGET_DIR:-$root/target}
export ESR_BIN="$target/${triple:+$triple/}$profile/esr"
# The linker leaves the binary it just wrote in the page cache in large folios, and a process
# then maps more of its file around each page it runs (28 MiB of file pages instead of 22 at
# 10,000 ExternalSecrets). Dropping the file from the page cache makes esr read its code from
# disk, as it does from an image layer on a node.
dd if="$ESR_BIN" iflag=nocache count=0 status=none || true
export ESR_E2E_NO_BUILD=1
echo "==> running (ExternalSecrets=${BENCH_ES:-10000} unrelated Secrets=${BENCH_SECRETS:-50000})"
cargo nextest run $flag -p esr-e2e --test bench_scale --run-ignored ignored-only \
  --no-capture -E 'test(bench_scale)'
