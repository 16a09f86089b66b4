#!/usr/bin/env bash
# Lays out the root filesystem of the esr container image (used by the Dockerfile and by
# scripts/image.sh, so that both build the same image):
#   /esr                                  the binary (the image's entrypoint)
#   /etc/passwd, /etc/group               root and nonroot (65532:65532), the user the image runs as
#   /etc/ssl/certs/ca-certificates.crt    CA bundle for TLS to providers (rustls-native-certs)
#   /tmp                                  empty, mode 1777
#   the shared libraries and the dynamic loader, only when the binary is dynamically linked
#   (a glibc build; a musl build is static and needs none)
# No shell, no package manager.
# Usage: scripts/image-rootfs.sh <esr binary> <destination directory (created, must be empty)>
set -euo pipefail
bin=$1
dest=$2
if [ -e "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
  echo "error: $dest is not empty" >&2
  exit 1
fi
mkdir -p "$dest/etc/ssl/certs" "$dest/tmp"
chmod 1777 "$dest/tmp"
install -m 0755 "$bin" "$dest/esr"

cat >"$dest/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat >"$dest/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP

ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$ca" ]; then
  echo "error: $ca missing (apt-get install ca-certificates)" >&2
  exit 1
fi
install -m 0644 "$ca" "$dest/etc/ssl/certs/ca-certificates.crt"

# A dynamically linked binary: copy what the loader resolves (ldd prints "name => /path (addr)"
# and the loader itself as "/path (addr)"). glibc >= 2.34 has the files and dns NSS modules
# inside libc.so.6, so name resolution needs no further library.
if ldd "$bin" >/dev/null 2>&1; then
  ldd "$bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u | while read -r lib; do
    mkdir -p "$dest$(dirname "$lib")"
    cp -L "$lib" "$dest$lib"
  done
fi
