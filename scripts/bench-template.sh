#!/usr/bin/env bash
# Benchmark of the template engine: µs per render of a typical 10-key
# ExternalSecret template (fromJson, printf, b64dec). Prints timings; asserts
# nothing about them. BENCH_ITERATIONS overrides the iteration count.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet --release -p esr-template --example bench_render
