#!/usr/bin/env bash
# `make bench-fanout`: one ClusterExternalSecret matching 1,000 namespaces plus 10,000 unrelated
# Secrets on esr-testkit. Prints the time until all 1,000 Secrets exist, esr's RSS (VmRSS), and
# the new-namespace → Secret latency p50/p99 over 100 namespaces (goal: p99 < 1 s).
# Sizes: BENCH_NAMESPACES, BENCH_SECRETS, BENCH_NEW. BENCH_PROFILE=release (default) or debug.
# BENCH_ESR_ARGS: extra `esr controller` flags (e.g. "--concurrent 8").
# Not a test: it reports numbers (the scenario is the ignored e2e test `bench_fanout`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
profile=${BENCH_PROFILE:-release}
flag=""; [ "$profile" = release ] && flag="--release"
echo "==> building esr ($profile)"
cargo build -q $flag -p esr --bin esr
target=${CARGO_TARGET_DIR:-$root/target}
export ESR_BIN="$target/$profile/esr"
export ESR_E2E_NO_BUILD=1
echo "==> running (namespaces=${BENCH_NAMESPACES:-1000} secrets=${BENCH_SECRETS:-10000} new=${BENCH_NEW:-100})"
cargo nextest run $flag -p esr-e2e --test clusterexternalsecret --run-ignored ignored-only \
  --no-capture -E 'test(bench_fanout)'
