#!/bin/bash
# The deb's maintainer scripts (packaging/deb/debian) run by the real dpkg
# on a scratch root (dpkg --root --force-script-chrootless: the scripts act
# on $DPKG_ROOT): a purge never deletes through a mount point, never
# deletes a state dir it cannot count, honours state-dir, and a refused
# purge leaves the next unattended install working with the operator's
# config. The package is the real scripts, conffile, maint and
# nodevol-flex (no daemon: nothing here starts one).
#   purge_test.sh SOURCE_DIR NODEVOL_FLEX
set -euo pipefail
src=${1:?usage: purge_test.sh SOURCE_DIR NODEVOL_FLEX}
flex=${2:?usage: purge_test.sh SOURCE_DIR NODEVOL_FLEX}
if [[ $(id -u) -ne 0 ]] || ! command -v dpkg-deb >/dev/null; then
  echo "SKIP: needs root (bind mounts) and dpkg"
  exit 77
fi
t=$(mktemp -d)
r=$t/root
mounts=()
cleanup() {
  local m
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$t"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The package: real scripts, conffile, maint and driver.
p=$t/pkg
mkdir -p "$p/DEBIAN" "$p/etc/nodevol" "$p/usr/lib/nodevol"
cp "$src/packaging/common/nodevold.conf" "$p/etc/nodevol/"
cp "$src/packaging/common/maint" "$p/usr/lib/nodevol/"
cp "$flex" "$p/usr/lib/nodevol/nodevol-flex"
for s in postinst prerm postrm; do install -m 0755 "$src/packaging/deb/debian/nodevol-node.$s" "$p/DEBIAN/$s"; done
echo /etc/nodevol/nodevold.conf >"$p/DEBIAN/conffiles"
printf 'Package: nodevol-node\nVersion: 0.0.1\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: purge test\n' >"$p/DEBIAN/control"
dpkg-deb --root-owner-group -b "$p" "$t/nodevol-node.deb" >/dev/null

fresh_root() {
  rm -rf --one-file-system "$r"
  mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/proc/1/ns"
  : >"$r/var/lib/dpkg/status"
  : >"$r/var/lib/dpkg/available"
}
dpkg_r() { dpkg --root="$r" --force-script-chrootless "$@" </dev/null; }
status() { dpkg-query --admindir="$r/var/lib/dpkg" -W -f='${Status}' nodevol-node 2>/dev/null || true; }
install_pkg() {
  dpkg_r -i "$t/nodevol-node.deb" >"$t/out" 2>&1 || { cat "$t/out"; fail "dpkg -i: $1"; }
  [[ $(status) == "install ok installed" ]] || fail "status after install ($1): $(status)"
}
remove_pkg() { dpkg_r -r nodevol-node >"$t/out" 2>&1 || { cat "$t/out"; fail "dpkg -r"; }; }
# purge_refused WHY-REGEX: dpkg -P fails with a message and deletes nothing.
snapshot() { { find "$r/var/lib/nodevol" "$@" -printf '%p %s\n' 2>/dev/null || true; } | sort; }
purge_refused() {
  local why=$1
  shift
  snapshot "$@" >"$t/before"
  if dpkg_r -P nodevol-node >"$t/out" 2>&1; then cat "$t/out"; fail "purge succeeded: should refuse ($why)"; fi
  snapshot "$@" >"$t/after"
  diff "$t/before" "$t/after" >/dev/null || fail "refused purge changed files: $(diff "$t/before" "$t/after" | head)"
  grep -qE "$why" "$t/out" || { cat "$t/out"; fail "refusal does not say '$why'"; }
  echo "ok: purge refused: $(grep -m1 -E "$why" "$t/out" | sed 's/^nodevol-node: //')"
}
bind() {  # bind SRC DST: a real mount below the scratch root
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounts=("$2" "${mounts[@]}")
}

# --- issue 27 item 9: a bind (an NFS staging mount's stand-in) below the
# state dir with no volume record: purge must not empty the export.
fresh_root
install_pkg "first"
grep -q "kubelet's FlexVolume plugin dir" "$t/out" || fail "postinst did not install the driver: $(cat "$t/out")"
mkdir -p "$t/export/other-node"
echo "someone else's data" >"$t/export/other-node/data"
bind "$t/export" "$r/var/lib/nodevol/nfs/shared"
remove_pkg
purge_refused "something is still mounted at or below .*/var/lib/nodevol" "$t/export"
[[ -f $t/export/other-node/data ]] || fail "the purge deleted through the mount point"
umount "$r/var/lib/nodevol/nfs/shared"

# --- a records dir that cannot be listed (here a symlink loop: find
# fails) counts as "volumes exist", not as none.
ln -s volumes "$r/var/lib/nodevol/volumes"
purge_refused "cannot list the volume records"
rm "$r/var/lib/nodevol/volumes"

# --- issue 28 item 5: the refused purge (a volume exists) keeps the
# edited config outside /etc; the next unattended dpkg -i does not stop at
# a conffile prompt and puts the edit back.
mkdir -p "$r/var/lib/nodevol/volumes"
echo '{}' >"$r/var/lib/nodevol/volumes/pv-keep.json"
purge_refused "not purging: 1 volume\(s\) still exist on this node \(pv-keep\)"
grep -q "nodevold.conf.saved" "$t/out" || fail "the refusal does not say where the config is kept"
fresh_conf_edit="log-level = debug"
install_pkg "after a refused purge"
grep -q "^pool = " "$r/etc/nodevol/nodevold.conf" || fail "no config after reinstall"

# Edit, remove, purge (refused), reinstall without any --force-conf*.
echo "$fresh_conf_edit" >>"$r/etc/nodevol/nodevold.conf"
remove_pkg
[[ -f $r/var/lib/nodevol/package/nodevold.conf.saved ]] || fail "prerm kept no copy of the config"
purge_refused "not purging: 1 volume\(s\)"
[[ $(status) == *config-files* ]] || fail "status after the refused purge: $(status)"
install_pkg "after a refused purge over an edited config"
grep -qx "$fresh_conf_edit" "$r/etc/nodevol/nodevold.conf" || fail "the edited config was not restored"
[[ ! -e $r/var/lib/nodevol/package/nodevold.conf.saved ]] || fail "the restored copy was left behind"
echo "ok: unattended reinstall after a refused purge: installed, edited config restored"

# --- issue 59 item 2: snapshots are kept. A snapshot record, and a copy
# in the default dir pool's .snapshots/ (a Retain snapshot of a deleted
# volume: the only copy of its data), each refuse the purge.
rm "$r/var/lib/nodevol/volumes/pv-keep.json" 2>/dev/null || true
remove_pkg
mkdir -p "$r/var/lib/nodevol/snapshots"
echo '{}' >"$r/var/lib/nodevol/snapshots/snap-1.json"
purge_refused "not purging: 1 snapshot\(s\) still exist on this node \(snap-1\)"
rm "$r/var/lib/nodevol/snapshots/snap-1.json"
mkdir -p "$r/var/lib/nodevol/pools/default/.snapshots/snap-2"
echo "the only copy" >"$r/var/lib/nodevol/pools/default/.snapshots/snap-2/data"
purge_refused "/var/lib/nodevol/pools/default/.snapshots still holds snapshot copies"
rm -r "$r/var/lib/nodevol/pools/default/.snapshots/snap-2"
install_pkg "after the refused snapshot purges"

# --- state-dir set in nodevold.conf: its records count, and its mounts.
mkdir -p "$r/srv/nv/volumes"
echo "state-dir = /srv/nv" >>"$r/etc/nodevol/nodevold.conf"
rm -f "$r/var/lib/nodevol/volumes/pv-keep.json"
echo '{}' >"$r/srv/nv/volumes/elsewhere.json"
remove_pkg
purge_refused "1 volume\(s\) still exist on this node \(elsewhere\)" "$r/srv/nv"
rm "$r/srv/nv/volumes/elsewhere.json"
mkdir -p "$t/lv"
echo "lvm data" >"$t/lv/data"
bind "$t/lv" "$r/srv/nv/staging/p/vol"
purge_refused "mounted at or below .*/srv/nv" "$r/srv/nv" "$t/lv"
umount "$r/srv/nv/staging/p/vol"

# --- nothing mounted, no record: purge deletes nodevol's dirs, and of a
# state dir elsewhere only nodevol's entries.
echo "keep me" >"$r/srv/nv/not-nodevols"
dpkg_r -P nodevol-node >"$t/out" 2>&1 || { cat "$t/out"; fail "purge of an unused node failed"; }
[[ -z $(status) || $(status) == *not-installed* ]] || fail "status after purge: $(status)"
for d in /etc/nodevol /var/lib/nodevol /srv/nv/volumes /srv/nv/staging; do
  [[ ! -e $r$d ]] || fail "$d left after purge"
done
[[ -f $r/srv/nv/not-nodevols ]] || fail "purge deleted a file in the state dir that is not nodevol's"
[[ -f $t/lv/data && -f $t/export/other-node/data ]] || fail "purge deleted data outside"
echo "ok: purge of an unused node removes nodevol's dirs only"
echo PASS
