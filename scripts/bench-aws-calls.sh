#!/usr/bin/env bash
# Call-count benchmark for the AWS Secrets Manager and Parameter Store providers (not a test).
# 1,000 ExternalSecrets, each taking 3 properties from one of 100 secrets (or parameters with
# BENCH_SERVICE=ParameterStore), one refresh cycle,
# through esr's provider client layer against moto. Prints the AWS API calls made and the wall time,
# and the same cycle with the cross-reconcile cost controls off (what ESO does: one call per
# ExternalSecret per refresh).
# Usage: make bench-aws-calls   (= scripts/test-servers.sh scripts/bench-aws-calls.sh)
# Knobs: BENCH_SERVICE (SecretsManager | ParameterStore), BENCH_EXTERNAL_SECRETS (1000), BENCH_SECRETS (100), BENCH_STAGGER_MS (200),
#        BENCH_CONCURRENCY (reconciles at a time; default: all, like a large --concurrent),
#        BENCH_CYCLES (1; further cycles run after the cache expired, i.e. steady-state refreshes),
#        BENCH_PROFILE (dev; "release" for optimised timings), ESR_AWS_CACHE_TTL, ESR_AWS_BATCH_WINDOW,
#        ESR_AWS_PREFETCH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -z "${ESR_TEST_MOTO_ENDPOINT:-}" ]; then
  exec scripts/test-servers.sh "$0" "$@"
fi
profile=${BENCH_PROFILE:-dev}
cargo run -q --profile "$profile" -p esr-provider-aws --example bench_aws_calls
