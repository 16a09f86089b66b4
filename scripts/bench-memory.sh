#!/usr/bin/env bash
# `make bench-memory`: esr's memory with 1,000 ExternalSecrets while 20,000 unrelated Secrets are
# added to the cluster (esr-testkit). esr watches only Secrets labelled
# reconcile.external-secrets.io/managed=true (metadata only), so its RSS must stay flat.
# Prints the RSS (VmRSS from /proc/<pid>/status) after each step. Not a test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work="$root/target/bench-memory"
mkdir -p "$work"
kubeconfig="$work/kubeconfig"
n_es=${BENCH_EXTERNALSECRETS:-1000}
n_secrets=${BENCH_SECRETS:-20000}
step=${BENCH_STEP:-5000}
profile=${BENCH_PROFILE:-release}

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

flag=""; [ "$profile" = release ] && flag="--release"
echo "==> building ($profile)"
cargo build -q $flag -p esr -p esr-testkit
cargo build -q $flag -p esr-controller --example demo_tool
bin="$root/target/$profile"
tool="$bin/examples/demo_tool"

rm -f "$kubeconfig"
"$bin/esr-testkit" serve --port 0 --kubeconfig "$kubeconfig" >"$work/testkit.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$kubeconfig" ] && break; sleep 0.1; done
"$tool" apply --kubeconfig "$kubeconfig" crds >/dev/null 2>&1 \
  || "$tool" apply --kubeconfig "$kubeconfig" --fix-crd-metadata crds >/dev/null

{
  echo "apiVersion: external-secrets.io/v1"
  echo "kind: ClusterSecretStore"
  echo "metadata: {name: bench, annotations: {external-secrets.io/ignore-maintenance-checks: 'true'}}"
  echo "spec:"
  echo "  provider:"
  echo "    fake:"
  echo "      data:"
  for i in $(seq 0 9); do echo "        - {key: /bench/$i, value: value-$i}"; done
} >"$work/store.yaml"
"$tool" apply --kubeconfig "$kubeconfig" "$work/store.yaml" >/dev/null

"$bin/esr" controller --kubeconfig "$kubeconfig" --metrics-addr 127.0.0.1:0 --live-addr 127.0.0.1:0 \
  --loglevel warn >"$work/controller.log" 2>&1 &
esr_pid=$!
pids+=($esr_pid)

rss() { awk '/^VmRSS/ {print $2}' "/proc/$esr_pid/status"; }
report() { printf '%-44s %8s KiB (%s MiB)\n' "$1" "$(rss)" "$(( $(rss) / 1024 ))"; }

sleep 2
report "esr idle (no ExternalSecrets)"
"$tool" bulk --kubeconfig "$kubeconfig" --namespace bench --externalsecrets "$n_es" --secrets 0 --store bench
"$tool" wait-ready --kubeconfig "$kubeconfig" --timeout 600
sleep 3
report "$n_es ExternalSecrets Ready, 0 unrelated"
added=0
while [ "$added" -lt "$n_secrets" ]; do
  "$tool" bulk --kubeconfig "$kubeconfig" --namespace bench --externalsecrets 0 --secrets "$step" --offset "$added" >/dev/null
  added=$(( added + step ))
  sleep 3
  report "$n_es ExternalSecrets, $added unrelated Secrets"
done
echo "(esr binary: $profile build; unrelated Secrets carry a 1 KiB value each)"
