#!/usr/bin/env bash
# Runs `make e2e-real` against ONE shared esr-testkit: every scenario's esr and harness talk to
# the same API server, as on a real cluster (fault injection is then unavailable, and the
# scenarios that need it print `skipped:`). Proves the suite is parallel-safe on a shared
# cluster without one. RBAC is enforced for ServiceAccount tokens, as on a real cluster (the
# kubeconfig itself stays cluster-admin). Extra arguments go to `make`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d)
cargo build -q -p esr-testkit --bin esr-testkit
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
"$target_dir/debug/esr-testkit" serve --port 0 --rbac --kubeconfig "$work/kubeconfig" >"$work/testkit.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
for _ in $(seq 1 300); do
  [ -s "$work/kubeconfig" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/testkit.log" >&2; exit 1; }
  sleep 0.1
done
[ -s "$work/kubeconfig" ] || { echo "esr-testkit wrote no kubeconfig" >&2; cat "$work/testkit.log" >&2; exit 1; }
echo "==> shared esr-testkit: $(grep -m1 'server:' "$work/kubeconfig" | tr -d ' ')"
ESR_E2E_KUBECONFIG="$work/kubeconfig" make e2e-real "$@"
