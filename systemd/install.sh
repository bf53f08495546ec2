#!/usr/bin/env bash
# Installs electd: binaries, the systemd unit, sysusers.d and tmpfiles.d entries, an
# example configuration and the man pages.
#
#   sudo systemd/install.sh                 # build if needed, install under /usr/local
#   systemd/install.sh --destdir /tmp/root  # stage into a directory (packaging, tests)
#
# Options: --prefix DIR (default /usr/local), --destdir DIR, --no-build.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr/local
destdir=
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --destdir) destdir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$build" = 1 ]; then
  cargo build --release --locked
fi
for b in electd electctl; do
  [ -x "target/release/$b" ] || { echo "install.sh: target/release/$b is missing; build first" >&2; exit 1; }
done
root=${destdir%/}
install -Dm755 target/release/electd "$root$prefix/bin/electd"
install -Dm755 target/release/electctl "$root$prefix/bin/electctl"
install -d "$root/etc/systemd/system"
sed "s#/usr/local/bin/#$prefix/bin/#g" systemd/electd.service > "$root/etc/systemd/system/electd.service"
chmod 644 "$root/etc/systemd/system/electd.service"
install -Dm644 systemd/electd.sysusers "$root/usr/lib/sysusers.d/electd.conf"
install -Dm644 systemd/electd.tmpfiles "$root/usr/lib/tmpfiles.d/electd.conf"
install -Dm644 conf/electd.conf "$root/etc/electd/electd.conf.example"
if [ ! -e "$root/etc/electd/electd.conf" ]; then
  install -Dm644 conf/electd.conf "$root/etc/electd/electd.conf"
fi
for m in man1/electctl.1 man5/electd.conf.5 man8/electd.8; do
  install -Dm644 "docs/man/$m" "$root$prefix/share/man/$m"
done
if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
  systemd-sysusers
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/electd.conf
  systemctl daemon-reload
fi
cat <<MSG
electd installed under ${root:-}$prefix.
Next: edit /etc/electd/electd.conf (the server list must be the same on every
server), check it with 'electd --check-config', then:
  systemctl enable --now electd
  electctl status
MSG
