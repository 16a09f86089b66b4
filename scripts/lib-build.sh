# Build helpers sourced by scripts/image.sh and scripts/bench-scale.sh.

# apt-get install PACKAGES..., when running as root on a machine with apt-get (else status 1).
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    return 1
  fi
  echo "==> apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
}

# Prints the musl target triple the image's static binary is built for, when Rust's musl target
# and musl-gcc are installed or can be (rustup target add; apt-get install musl-tools as root);
# prints nothing when they cannot.
musl_target() {
  local musl
  musl="$(uname -m)-unknown-linux-musl"
  if command -v rustup >/dev/null &&
    { rustup target list --installed | grep -qx "$musl" || timeout 300 rustup target add "$musl" >&2; } &&
    { command -v musl-gcc >/dev/null || apt_install musl-tools >&2; }; then
    echo "$musl"
  fi
}
