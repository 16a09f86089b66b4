# syntax=docker/dockerfile:1
# The esr container image: a static (musl) esr on an empty base, user 65532:65532, no shell.
# `make image` builds the same image without a daemon (scripts/image.sh, with buildah); both lay
# out the root filesystem with scripts/image-rootfs.sh.
#
#   docker build -t ghcr.io/esr-project/esr:0.1.0 \
#     --build-arg VERSION=0.1.0 \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) \
#     --build-arg CREATED=$(date -u -d @$(git log -1 --format=%ct) +%Y-%m-%dT%H:%M:%SZ) .
#
# Multi-arch (each platform builds natively; other platforms run under QEMU emulation):
#   docker buildx build --platform linux/amd64,linux/arm64 ... --push .

ARG RUST_VERSION=1.94

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH=0
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# cargo auditable embeds the dependency tree in the binary (docs/supply-chain.md); its version
# is the Makefile's CARGO_AUDITABLE_VERSION (installed before the sources come in, so it is cached).
COPY Makefile ./
RUN cargo install --locked "cargo-auditable@$(sed -n 's/^CARGO_AUDITABLE_VERSION := //p' Makefile)"
COPY . .
RUN target="$(uname -m)-unknown-linux-musl" \
    && rustup target add "$target" \
    && ESR_GIT_COMMIT="$REVISION" SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
       cargo auditable build --release --locked -p esr --target "$target" \
    && scripts/image-rootfs.sh "target/$target/release/esr" /rootfs

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="esr" \
      org.opencontainers.image.description="External Secrets, in Rust: a drop-in replacement for the External Secrets Operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/esr-project/esr" \
      org.opencontainers.image.url="https://github.com/esr-project/esr" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=build /rootfs/ /
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/esr"]
CMD ["controller"]
