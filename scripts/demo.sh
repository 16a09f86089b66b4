#!/usr/bin/env bash
# `make demo`: build esr, start a local API server (esr-testkit), apply the CRDs and examples/,
# run `esr controller` against it, wait until every ExternalSecret is Ready, show the result,
# and stop everything. Needs only cargo; uses kubectl too when it is installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work="$root/target/demo"
mkdir -p "$work"
kubeconfig="$work/kubeconfig"
t0=$(date +%s)

pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

echo "==> building esr, esr-testkit and the demo helper"
cargo build -q -p esr -p esr-testkit
cargo build -q -p esr-controller --example demo_tool
t_build=$(( $(date +%s) - t0 ))
echo "    build: ${t_build}s"
bin="${CARGO_TARGET_DIR:-$root/target}/debug"
tool="$bin/examples/demo_tool"

echo "==> starting esr-testkit (local Kubernetes API server)"
rm -f "$kubeconfig"
"$bin/esr-testkit" serve --port 0 --kubeconfig "$kubeconfig" >"$work/testkit.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$kubeconfig" ] && break; sleep 0.1; done
[ -s "$kubeconfig" ] || { echo "esr-testkit did not start:"; cat "$work/testkit.log"; exit 1; }

echo "==> applying CRDs (crds/) and examples/"
if ! "$tool" apply --kubeconfig "$kubeconfig" crds >"$work/apply-crds.log" 2>&1; then
  echo "    (the API server rejected the committed CRDs; retrying with a plain metadata schema)"
  "$tool" apply --kubeconfig "$kubeconfig" --fix-crd-metadata crds >"$work/apply-crds.log" 2>&1 \
    || { cat "$work/apply-crds.log"; exit 1; }
fi
"$tool" apply --kubeconfig "$kubeconfig" examples | sed 's/^/    /'

echo "==> starting esr controller (logs: target/demo/controller.log)"
"$bin/esr" controller --kubeconfig "$kubeconfig" --metrics-addr 127.0.0.1:0 --live-addr 127.0.0.1:0 \
  --log-format text >"$work/controller.log" 2>&1 &
pids+=($!)

echo "==> waiting until the ExternalSecrets are Ready"
"$tool" wait-ready --kubeconfig "$kubeconfig" --timeout 60 || { tail -20 "$work/controller.log"; exit 1; }
echo
"$tool" show --kubeconfig "$kubeconfig"

if command -v kubectl >/dev/null 2>&1; then
  echo
  echo "==> the same with kubectl"
  KUBECONFIG="$kubeconfig" kubectl get externalsecrets -A 2>&1 || true
  KUBECONFIG="$kubeconfig" kubectl get clustersecretstores,secretstores -A 2>&1 || true
  KUBECONFIG="$kubeconfig" kubectl get secret -n demo db-credentials -o jsonpath='{.data.dsn}' 2>/dev/null \
    | base64 -d 2>/dev/null && echo || true
fi

echo
echo "==> demo finished in $(( $(date +%s) - t0 ))s (build ${t_build}s, run $(( $(date +%s) - t0 - t_build ))s); stopping the controller and the API server"
