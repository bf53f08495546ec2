#!/usr/bin/env bash
# Installs electd from a checkout: binaries, the units electd.service and
# electd@.service, sysusers.d and tmpfiles.d entries, the configuration and the man
# pages. On a Debian system prefer the package (cargo deb; README.md, "Install").
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
Usage: systemd/install.sh [--prefix DIR] [--destdir DIR] [--no-build]
       systemd/install.sh --uninstall [--purge] [--prefix DIR] [--destdir DIR]

Installs electd (PREFIX/sbin), electctl (PREFIX/bin), the man pages
(PREFIX/share/man), /etc/systemd/system/electd.service and electd@.service,
/usr/lib/sysusers.d/electd.conf, /usr/lib/tmpfiles.d/electd.conf,
/etc/electd/electd.conf.example, and /etc/electd/electd.conf unless it exists.
Then creates the electd user and its directories, reloads systemd, and restarts
electd units that are running (an upgrade); it enables and starts nothing.

  --prefix DIR   where the binaries and man pages go (default /usr/local)
  --destdir DIR  stage everything under DIR instead of / (packaging, tests); no
                 user, directory or systemd changes are made
  --no-build     never build: fail if target/release/electd or electctl is
                 missing (by default they are built, with cargo, only when missing)
  --uninstall    stop the units and remove what install.sh installs (pass the same
                 --prefix); keeps /etc/electd/electd.conf, the state in
                 /var/lib/electd and the electd user
  --purge        with --uninstall: also remove /etc/electd/electd.conf and the
                 state (the server's term and vote: it may rejoin its cluster
                 only as a new server); the user stays (userdel electd)
  -h, --help     this help
USAGE
}

prefix=/usr/local
destdir=
build=1
action=install
purge=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }; prefix=$2; shift 2 ;;
    --destdir) [ $# -ge 2 ] || { echo "install.sh: --destdir needs a directory" >&2; exit 2; }; destdir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --uninstall) action=uninstall; shift ;;
    --purge) purge=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$purge" = 1 ] && [ "$action" != uninstall ]; then
  echo "install.sh: --purge goes with --uninstall" >&2
  exit 2
fi
root=${destdir%/}
# systemctl and friends only for a real install on a host booted with systemd.
live=0
if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then live=1; fi

units=(electd.service electd@.service)
mans=(man1/electctl.1 man5/electd.conf.5 man8/electd.8)
# What install puts in place, relative to the root (the config is handled apart).
files=("$prefix/sbin/electd" "$prefix/bin/electctl")
for u in "${units[@]}"; do files+=("/etc/systemd/system/$u"); done
files+=(/usr/lib/sysusers.d/electd.conf /usr/lib/tmpfiles.d/electd.conf /etc/electd/electd.conf.example)
for m in "${mans[@]}"; do files+=("$prefix/share/man/$m"); done

if [ "$action" = uninstall ]; then
  if [ "$live" = 1 ]; then
    # A leader resigns on SIGTERM. Disabling the template removes every instance's link.
    systemctl stop electd.service 'electd@*.service' || true
    systemctl disable electd.service electd@.service 2>/dev/null || true
  fi
  for f in "${files[@]}" "$prefix/bin/electd"; do rm -f "$root$f"; done
  if [ "$purge" = 1 ]; then
    rm -f "$root/etc/electd/electd.conf"
    rm -rf "$root/var/lib/electd" "$root/run/electd"
    rmdir "$root/etc/electd" 2>/dev/null || true
    kept="the electd user (userdel electd)"
  else
    kept="/etc/electd/electd.conf, the state in /var/lib/electd and the electd user"
  fi
  if [ "$live" = 1 ]; then systemctl daemon-reload; fi
  echo "electd removed from ${root:-}$prefix; kept: $kept."
  exit 0
fi

missing=
for b in electd electctl; do
  [ -x "target/release/$b" ] || missing="$missing $b"
done
if [ -n "$missing" ]; then
  if [ "$build" = 0 ]; then
    echo "install.sh: target/release has no$missing and --no-build was given; build first: cargo build --release --locked" >&2
    exit 1
  fi
  if ! command -v cargo >/dev/null; then
    cat >&2 <<MSG
install.sh: target/release has no$missing, and cargo is not on PATH to build it.
Build as your own user first, then install as root:
  cargo build --release --locked
  sudo systemd/install.sh
(A Rust toolchain from rustup lives in your ~/.cargo/bin, which sudo's PATH does not
include: run the build without sudo. Or install Rust with rustup, https://rustup.rs.)
MSG
    exit 1
  fi
  echo "install.sh: building$missing (cargo build --release --locked)"
  cargo build --release --locked
fi

install -Dm755 target/release/electd "$root$prefix/sbin/electd"
install -Dm755 target/release/electctl "$root$prefix/bin/electctl"
# Older versions of this script put electd in bin; the units now run sbin's.
rm -f "$root$prefix/bin/electd"
install -d "$root/etc/systemd/system"
for u in "${units[@]}"; do
  sed -e "s#/usr/sbin/electd#$prefix/sbin/electd#g" -e "s#/usr/bin/electctl#$prefix/bin/electctl#g" \
    "systemd/$u" > "$root/etc/systemd/system/$u"
  chmod 644 "$root/etc/systemd/system/$u"
done
install -Dm644 systemd/electd.sysusers "$root/usr/lib/sysusers.d/electd.conf"
install -Dm644 systemd/electd.tmpfiles "$root/usr/lib/tmpfiles.d/electd.conf"
install -Dm644 conf/electd.conf "$root/etc/electd/electd.conf.example"
fresh=0
if [ ! -e "$root/etc/electd/electd.conf" ]; then
  install -Dm644 conf/electd.conf "$root/etc/electd/electd.conf"
  fresh=1
fi
for m in "${mans[@]}"; do
  install -Dm644 "docs/man/$m" "$root$prefix/share/man/$m"
done
restarted=
if [ "$live" = 1 ]; then
  systemd-sysusers /usr/lib/sysusers.d/electd.conf
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/electd.conf
  systemctl daemon-reload
  # An upgrade: restart what runs (a leader hands over within about one rtt).
  restarted=$(systemctl list-units --state=active --plain --no-legend 'electd.service' 'electd@*.service' | awk '{print $1}' | tr '\n' ' ')
  if [ -n "$restarted" ]; then systemctl try-restart electd.service 'electd@*.service'; fi
fi
echo "electd installed under ${root:-/} (binaries in $prefix)."
if [ -n "$restarted" ]; then
  echo "Restarted: $restarted"
elif [ "$fresh" = 1 ] || [ -n "$destdir" ]; then
  cat <<MSG
Next: edit /etc/electd/electd.conf (the server list must be the same on every
server), check it with 'electd --check-config', then:
  systemctl enable --now electd        # or electd@ID for a file without 'id'
  electctl status                      # as root or a member of group electd
Units of your own (README, "Running the processor only on the leader") run electctl
as $prefix/bin/electctl: write that path in their ExecStart= (the package's is
/usr/bin/electctl; another path fails the unit with status 203/EXEC).
MSG
fi
