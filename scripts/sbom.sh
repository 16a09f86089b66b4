#!/usr/bin/env bash
# Writes a CycloneDX (1.5, JSON) SBOM of the esr binary's dependencies to target/sbom/esr.cdx.json
# (`make sbom`, which installs cargo-cyclonedx when missing). Every dependency is listed, not
# only the direct ones, for the target TARGET (default: the host's, as `rustc -vV` says).
# cargo-cyclonedx writes one file beside each workspace member's Cargo.toml: the esr crate's is
# kept, the others are removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${TARGET:-$(rustc -vV | sed -n 's/^host: //p')}
name=esr-sbom-$$
out=target/sbom
mkdir -p "$out"
cleanup() { find . -path ./target -prune -o -name "$name.json" -type f -exec rm -f {} +; }
trap cleanup EXIT
echo "==> cargo cyclonedx ($target)"
cargo cyclonedx --quiet --format json --spec-version 1.5 --all --target "$target" \
  --override-filename "$name"
mv "crates/esr/$name.json" "$out/esr.cdx.json"
python3 - "$out/esr.cdx.json" <<'EOF'
import json, sys
bom = json.load(open(sys.argv[1]))
assert bom.get("bomFormat") == "CycloneDX", "not a CycloneDX document"
top = bom["metadata"]["component"]
comps = bom.get("components", [])
no_license = [c["name"] for c in comps if not c.get("licenses")]
print(f"==> wrote {sys.argv[1]}: CycloneDX {bom['specVersion']}, {top['name']} {top['version']}, "
      f"{len(comps)} components, {len(no_license)} without a license")
EOF
