#!/usr/bin/env bash
# Assembles the image's root filesystem without a Docker daemon: what the Dockerfile's
# runtime stage holds, from this Debian 12 machine (the distroless cc-debian12 base is
# built from the same Debian release).
#
#   deploy/image/rootfs.sh [--link-binary] OUT [BINARY]
#
#   OUT            the directory to fill (emptied first)
#   BINARY         the hcpflow binary (default: the release build, built when missing)
#   --link-binary  hard-link BINARY instead of copying it (tests: a debug build is a
#                  gigabyte)
#
# The result: /usr/local/bin/hcpflow, the C runtime it links (glibc and libgcc, found by
# ldd) and the dynamic loader, the CA certificates, /etc/passwd and /etc/group with the
# nonroot user 65532 and its home, /tmp; no shell and no other program. Run it as the
# image does:  chroot --userspec=65532:65532 OUT /usr/local/bin/hcpflow server
set -euo pipefail
# The image's files are world-readable whatever the caller's umask (a 077 one would leave
# the nonroot user unable to reach its own binary).
umask 022

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
die() { printf 'rootfs: error: %s\n' "$*" >&2; exit 1; }

link=0
if [[ ${1:-} == --link-binary ]]; then link=1; shift; fi
out=${1:-}
[[ -n $out ]] || die "usage: rootfs.sh [--link-binary] OUT [BINARY]"
binary=${2:-}
if [[ -z $binary ]]; then
  (cd "$repo" && cargo build --release --locked --quiet -p hcpflow-workers --bin hcpflow)
  binary=${CARGO_TARGET_DIR:-$repo/target}/release/hcpflow
fi
[[ -x $binary ]] || die "no executable at $binary"
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || die "no CA bundle at /etc/ssl/certs/ca-certificates.crt (apt-get install ca-certificates)"

# OUT is emptied only if this script made it (its marker is there) or it is empty.
if [[ -d $out && -n $(ls -A "$out") && ! -e $out/.hcpflow-rootfs ]]; then
  die "$out is not empty and not a root filesystem this script made: give a new directory"
fi
rm -rf "$out"
mkdir -p "$out"/{usr/local/bin,etc/ssl/certs,home/nonroot,tmp}
touch "$out/.hcpflow-rootfs"
# Debian's merged /usr: /lib and /lib64 are links into /usr, here as there.
for dir in lib lib64; do
  if [[ -L /$dir ]]; then
    mkdir -p "$out/$(readlink "/$dir")"
    ln -s "$(readlink "/$dir")" "$out/$dir"
  fi
done
chmod 1777 "$out/tmp"
chown 65532:65532 "$out/home/nonroot" 2>/dev/null || true

# A link shares the binary's mode: only one that everybody may run is linked.
if [[ $link == 1 && $(stat -c %a "$binary") == 755 ]] && ln "$binary" "$out/usr/local/bin/hcpflow" 2>/dev/null; then
  :
else
  install -m 0755 "$binary" "$out/usr/local/bin/hcpflow"
fi

# The shared libraries the binary links, and the loader, at the paths the binary names.
while read -r path; do
  cp --parents -L "$path" "$out"
  # The loader's own path (/lib64/...) may be a link into /lib/x86_64-linux-gnu.
  real=$(readlink -f "$path")
  [[ $real == "$path" ]] || cp --parents -L "$real" "$out"
done < <(ldd "$binary" | grep -oE '/[^ ]+\.so[^ ]*' | sort -u)

cp /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/"
cat > "$out/etc/passwd" <<'USERS'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
USERS
cat > "$out/etc/group" <<'GROUPS'
root:x:0:
nonroot:x:65532:
GROUPS
# Host names resolve from /etc/hosts, then DNS (glibc's resolver is in libc itself).
printf 'hosts: files dns\n' > "$out/etc/nsswitch.conf"
printf 'rootfs: %s (%s)\n' "$out" "$(du -sh --apparent-size "$out" | cut -f1)" >&2
