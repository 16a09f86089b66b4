#!/usr/bin/env bash
# Benchmark esr-testkit (not a test): create throughput and watch fan-out latency with 10,000
# Secrets (BENCH_OBJECTS), 10 watchers (BENCH_WATCHERS), 32 concurrent creates (BENCH_CONCURRENCY).
# Built in release mode: debug builds are several times slower.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release -q -p esr-testkit --example bench
