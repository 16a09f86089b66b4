#!/usr/bin/env bash
# Builds the esr container image without a container daemon, with buildah (`make image`).
# The result is the image the Dockerfile builds: FROM scratch, the root filesystem of
# scripts/image-rootfs.sh, user 65532:65532, entrypoint /esr, and the OCI labels
# org.opencontainers.image.{version,revision,source,licenses,created,title,description}.
#
# Usage: scripts/image.sh [--binary PATH] [--out DIR] [--tag TAG]
#   --binary PATH  put this esr binary in the image instead of building one
#   --out DIR      where to write the image (default target/image)
#   --tag TAG      image tag (default: the crate version)
#   --no-archive   write only the OCI layout, not the OCI archive
# Without --binary, esr is built with `cargo auditable build --release -p esr` (cargo-auditable is
# installed when missing; the dependency tree is embedded in the binary) for
# x86_64-unknown-linux-musl (a static binary) when that target can be installed, else for the
# host's glibc target (the image then carries the binary's shared libraries).
#
# Output: DIR/oci (an OCI image layout; the image is `DIR/oci:TAG`) and DIR/esr-TAG-ARCH.tar
# (an OCI archive for `podman load -i` or `skopeo copy oci-archive:... docker://...`).
# buildah works in its own storage under DIR/storage (removed afterwards), apart from the system's.
#
# Needs root (buildah's vfs storage). When buildah is missing and we are root, it is installed
# with apt-get; otherwise the script exits with status 3 ("no builder").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=""
out="$root/target/image"
tag=""
archive=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --no-archive) archive=no; shift ;;
    *) echo "usage: $0 [--binary PATH] [--out DIR] [--tag TAG] [--no-archive]" >&2; exit 2 ;;
  esac
done
cd "$root"

# shellcheck source=scripts/lib-build.sh
. "$root/scripts/lib-build.sh"

if ! command -v buildah >/dev/null; then
  apt_install buildah || true
fi
if ! command -v buildah >/dev/null; then
  echo "no builder: buildah is not installed and cannot be installed here (needs root and apt-get)" >&2
  exit 3
fi
if [ "$(id -u)" != 0 ]; then
  echo "no builder: buildah's storage needs root here" >&2
  exit 3
fi

# Facts for the labels, the same ones `esr version` prints.
meta=$(cargo metadata --no-deps --format-version 1 --manifest-path "$root/Cargo.toml")
field() { python3 -c 'import json,sys; p=[p for p in json.load(sys.stdin)["packages"] if p["name"]=="esr"][0]; print(p[sys.argv[1]] or "")' "$1" <<<"$meta"; }
version=$(field version)
source_url=$(field repository)
license=$(field license)
tag=${tag:-$version}
ESR_GIT_COMMIT_SET=${ESR_GIT_COMMIT:-}
revision=${ESR_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
# Reproducible by default: the commit's time unless SOURCE_DATE_EPOCH is given.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH ESR_GIT_COMMIT=$revision
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

if [ -z "$binary" ]; then
  auditable_version=$(sed -n 's/^CARGO_AUDITABLE_VERSION := //p' "$root/Makefile")
  target=$(musl_target)
  if [ -z "$target" ]; then
    echo "==> the musl target is not available: building for the host's glibc target"
  fi
  # cargo auditable embeds the dependency tree in the binary (docs/supply-chain.md).
  if ! cargo auditable --version >/dev/null 2>&1; then
    echo "==> cargo install --locked cargo-auditable@$auditable_version"
    cargo install --locked --quiet "cargo-auditable@$auditable_version"
  fi
  echo "==> cargo auditable build --release -p esr ${target:+--target $target}"
  cargo auditable build --release --locked -p esr ${target:+--target "$target"}
  binary="$root/target/${target:+$target/}release/esr"
fi
# The labels describe the binary: when it runs here, its own commit is the revision.
if [ -z "${ESR_GIT_COMMIT_SET:-}" ] && info=$("$binary" version -o json 2>/dev/null); then
  revision=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["commit"])' <<<"$info")
fi

# The image's architecture: $ARCH (amd64, arm64) when the binary was built for another one.
arch=${ARCH:-$(dpkg --print-architecture 2>/dev/null || uname -m)}

work="$out/work"
rm -rf "$work" "$out/oci" "$out/esr-$tag-$arch.tar"
mkdir -p "$work"
"$root/scripts/image-rootfs.sh" "$binary" "$work/rootfs"

B=(buildah --storage-driver vfs --root "$out/storage" --runroot "$out/run")
name="esr-image-$$"
ctr=$("${B[@]}" from --name "$name" scratch)
trap '"${B[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
"${B[@]}" copy "$ctr" "$work/rootfs/" / >/dev/null
"${B[@]}" config \
  --arch "$arch" --os linux \
  --user 65532:65532 \
  --workingdir / \
  --entrypoint '["/esr"]' \
  --cmd '["controller"]' \
  --label org.opencontainers.image.title=esr \
  --label "org.opencontainers.image.description=External Secrets, in Rust: a drop-in replacement for the External Secrets Operator" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.source=$source_url" \
  --label "org.opencontainers.image.url=$source_url" \
  --label "org.opencontainers.image.licenses=$license" \
  --label "org.opencontainers.image.created=$created" \
  "$ctr"
"${B[@]}" commit --quiet --format oci --disable-compression=false --timestamp "$SOURCE_DATE_EPOCH" "$ctr" "oci:$out/oci:$tag" >/dev/null
built="$out/oci:$tag"
if [ "$archive" = yes ]; then
  "${B[@]}" commit --quiet --format oci --disable-compression=false --timestamp "$SOURCE_DATE_EPOCH" "$ctr" "oci-archive:$out/esr-$tag-$arch.tar:$tag" >/dev/null
  built="$built and $out/esr-$tag-$arch.tar"
fi
"${B[@]}" rm "$ctr" >/dev/null
trap - EXIT
"${B[@]}" rmi --all >/dev/null 2>&1 || true
rm -rf "$work" "$out/storage" "$out/run"
echo "==> built $built (version $version, revision $revision, $arch)"
