#!/bin/bash
# Runs inside a vm-run --systemd guest: the nodevol-node .deb's whole life
# on a node with systemd as PID 1, as an operator lives it: install with
# apt-get, use, upgrade twice (the second time over an edited conffile),
# remove refused while a pod volume is published, then forced, purge
# refused while a volume exists, unattended reinstall, delete, purge.
#   package_install_test.sh DEB_V1 DEB_V2 DEB_V3   (versions rising)
# The guest's root is the host's / under a tmpfs overlay, so dpkg's
# database and /etc are the host's as a copy: nothing reaches the host.
source "$VM_LIB"
deb1=${1:?usage: package_install_test.sh DEB_V1 DEB_V2 DEB_V3} deb2=${2:?} deb3=${3:?}
[[ $VM_MODE == systemd && $(</proc/1/comm) == systemd ]] || vm_fail "needs vm-run --systemd"
ver() { dpkg-deb -f "$1" Version; }
v1=$(ver "$deb1") v2=$(ver "$deb2") v3=$(ver "$deb3")
dpkg --compare-versions "$v2" gt "$v1" && dpkg --compare-versions "$v3" gt "$v2" ||
  vm_fail "versions do not rise: $v1 $v2 $v3"
for p in /etc/nodevol /var/lib/nodevol /run/nodevol; do
  [[ ! -e $p ]] || vm_fail "$p exists before the install (from the host?)"
done
dpkg -s nodevol-node >/dev/null 2>&1 && vm_fail "nodevol-node is already installed on the host"
# The host is a container image whose policy-rc.d forbids starting services
# (a real node has none); man-db's trigger would only cost minutes under TCG.
if [[ -e /usr/sbin/policy-rc.d ]]; then
  vm_log "removing the host's /usr/sbin/policy-rc.d in this guest (exit $(/usr/sbin/policy-rc.d x start >/dev/null 2>&1; echo $?) = services forbidden)"
  rm -f /usr/sbin/policy-rc.d
fi
rm -f /var/lib/man-db/auto-update

plugin=/usr/libexec/kubernetes/kubelet-plugins/volume/exec
driver=$plugin/nodevol.io~volume/volume
sock=/run/nodevol/nodevold.sock
ctl() { nodevolctl --socket $sock "$@"; }
# findmnt in PID 1's mount namespace: the host's view, not the daemon's.
host_findmnt() { nsenter --mount=/proc/1/ns/mnt findmnt -n "$@"; }
mount_id() { awk -v t="$1" '$5 == t { print $1 }' /proc/1/mountinfo; }
running_version() { ctl -o json info | grep -o '"version": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/'; }
active() { [[ $(systemctl is-active nodevold) == active ]]; }
wait_active() {  # after dpkg, nodevold answers once it sent READY=1
  for _ in $(seq 100); do active && [[ -S $sock ]] && return 0; sleep 0.2; done
  journalctl -u nodevold --no-pager | tail -20
  vm_fail "nodevold not active: $(systemctl status nodevold --no-pager 2>&1 | head -5)"
}

vm_step "apt-get install ./$(basename "$deb1") (version $v1)"
vm_run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb1"
wait_active
vm_log "nodevold: $(systemctl show -p ActiveState -p SubState -p MainPID -p UnitFileState nodevold | tr '\n' ' ')"
[[ $(systemctl is-enabled nodevold) == enabled ]] || vm_fail "nodevold.service is not enabled"
[[ $(stat -c '%a %U' $sock) == "600 root" ]] || vm_fail "socket $sock: $(stat -c '%a %U' $sock), want 600 root"
[[ -x $driver ]] || vm_fail "no driver at $driver"
init=$("$driver" init)
grep -q '"status":"Success"' <<<"$init" || vm_fail "driver init: $init"
vm_log "driver init: $init"
[[ -z $(find "$plugin" -name '.*') ]] || vm_fail "dot files left in $plugin"
info=$(ctl info) || vm_fail "nodevolctl info failed"
vm_log "$(head -3 <<<"$info" | tr '\n' ' ')"
[[ $(running_version) == "$v1" ]] || vm_fail "daemon reports version $(running_version), want $v1"
dpkg-query -W -f='${Conffiles}\n' nodevol-node | grep -q " /etc/nodevol/nodevold.conf " ||
  vm_fail "/etc/nodevol/nodevold.conf is not a dpkg conffile"

vm_step "create and publish a volume; the mount is seen from PID 1's namespace"
vm_run ctl volume create pv-keep --pool default --size 64Mi
target=/var/lib/kubelet/pods/0b2d6f1e-0000-4000-8000-00000000000a/volumes/nodevol.io~volume/pv-keep
mkdir -p "$target"
vm_run ctl publish --volume pv-keep --target "$target"
host_findmnt --mountpoint "$target" >/dev/null || vm_fail "findmnt in PID 1's namespace does not see $target"
vm_log "host findmnt: $(host_findmnt -o TARGET,SOURCE,FSTYPE --mountpoint "$target")"
echo "written at $v1" >"$target/data"
id0=$(mount_id "$target")
pid0=$(systemctl show -p MainPID --value nodevold)

upgrade() {  # upgrade DEB VERSION
  vm_step "upgrade: dpkg -i $(basename "$1") ($2)"
  local pid watch
  pid=$(systemctl show -p MainPID --value nodevold)
  # Throughout dpkg: which daemon runs and which driver file kubelet would
  # run, every 20 ms. The new driver must appear only once the new daemon
  # serves (a driver newer than its daemon may speak what it does not).
  watch=$(mktemp)
  ( ino0=$(stat -c %i "$driver")
    while sleep 0.02; do
      ino=$(stat -c %i "$driver" 2>/dev/null) || continue
      if [[ $ino != "$ino0" ]]; then
        now=$(systemctl show -p MainPID --value nodevold)
        echo "driver replaced while nodevold pid ${now:-none} ran (door: $([[ -S $sock.flex ]] && echo up || echo missing))" >"$watch"
        break
      fi
    done ) &
  local watcher=$!
  vm_run dpkg -i "$1"
  wait_active
  sleep 0.1
  kill "$watcher" 2>/dev/null || true
  wait "$watcher" 2>/dev/null || true
  local seen; seen=$(<"$watch"); rm -f "$watch"
  [[ -n $seen ]] || vm_fail "the upgrade did not replace the driver in $plugin"
  vm_log "$seen"
  [[ $seen == *" pid $pid ran"* || $seen == *"pid none ran"* || $seen == *"pid 0 ran"* ]] &&
    vm_fail "the upgrade put the new driver in place before the new nodevold served: $seen"
  [[ $seen == *"(door: up)" ]] || vm_fail "the new driver went in with no flex door to answer it: $seen"
  [[ $(systemctl show -p MainPID --value nodevold) != "$pid" ]] || vm_fail "nodevold was not restarted by the upgrade"
  [[ $(running_version) == "$2" ]] || vm_fail "daemon runs version $(running_version) after the upgrade, want $2"
  "$driver" version | grep -qF "$2" || vm_fail "driver after upgrade: $("$driver" version)"
  [[ $(mount_id "$target") == "$id0" ]] || vm_fail "the publication was remounted or lost (mount ID $id0 -> $(mount_id "$target"))"
  [[ $(<"$target/data") == "written at $v1" ]] || vm_fail "data not readable through the publication after the upgrade"
  ctl -o json volume get pv-keep | grep -q "\"$target\"" || vm_fail "pv-keep no longer records its publication"
  vm_log "daemon $pid -> $(systemctl show -p MainPID --value nodevold) runs $2; mount ID $id0 unchanged; data readable"
}
upgrade "$deb2" "$v2"

vm_step "edit the conffile, then upgrade again: the edit survives"
edit="metrics-address = 127.0.0.1:9818"
sed -i "s/^# metrics-address = 127.0.0.1:9808\$/$edit/" /etc/nodevol/nodevold.conf
grep -qx "$edit" /etc/nodevol/nodevold.conf || vm_fail "could not edit the conffile"
upgrade "$deb3" "$v3"
grep -qx "$edit" /etc/nodevol/nodevold.conf || vm_fail "the upgrade lost the conffile edit"
[[ -z $(ls /etc/nodevol/*.dpkg-* 2>/dev/null) ]] || vm_fail "dpkg left $(ls /etc/nodevol/*.dpkg-*)"
healthz() {  # healthz PORT: nodevold's /healthz answers 200 there
  local reply
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  reply=$(timeout 10 cat <&3 || true)
  exec 3<&-
  [[ $(head -1 <<<"$reply") == *" 200"* ]]
}
healthz 9818 || vm_fail "the edited metrics-address does not apply: nothing answers on 127.0.0.1:9818"
vm_log "'$edit' kept and applied (/healthz answers there)"

vm_step "dpkg -r with a published pod volume: refused, nothing changes"
if out=$(dpkg -r nodevol-node 2>&1); then echo "$out"; vm_fail "dpkg -r succeeded with a published pod volume"; fi
echo "$out" | sed 's/^/    | /'
grep -q "not removing: 1 pod volume(s) are still published" <<<"$out" || vm_fail "no clear refusal message"
active || vm_fail "the refused remove stopped nodevold"
[[ -x $driver ]] || vm_fail "the refused remove left no driver in $plugin"
# dpkg keeps the package installed and marks it wanted for removal
# ("deinstall"): what matters is the state, "installed".
[[ $(dpkg-query -W -f='${Status}' nodevol-node) == *" ok installed" ]] ||
  vm_fail "status after the refused remove: $(dpkg-query -W -f='${Status}' nodevol-node)"

vm_step "NODEVOL_REMOVE_WITH_MOUNTS=yes dpkg -r: daemon stopped, driver gone, state, data and config kept, the mount stays"
out=$(NODEVOL_REMOVE_WITH_MOUNTS=yes dpkg -r nodevol-node 2>&1) || { echo "$out"; vm_fail "dpkg -r failed"; }
echo "$out" | sed 's/^/    | /'
! active || vm_fail "nodevold still active after remove"
[[ ! -e $plugin/nodevol.io~volume ]] || vm_fail "driver left in $plugin after remove"
[[ ! -e /usr/sbin/nodevold ]] || vm_fail "/usr/sbin/nodevold left after remove"
[[ -f /var/lib/nodevol/volumes/pv-keep.json ]] || vm_fail "remove lost the volume record"
[[ -f /var/lib/nodevol/pools/default/pv-keep/data ]] || vm_fail "remove lost the volume's data"
grep -qx "$edit" /etc/nodevol/nodevold.conf || vm_fail "remove lost the config"
[[ $(mount_id "$target") == "$id0" ]] || vm_fail "remove unmounted the publication"
[[ $(dpkg-query -W -f='${Status}' nodevol-node) == "deinstall ok config-files" ]] ||
  vm_fail "status after remove: $(dpkg-query -W -f='${Status}' nodevol-node)"

vm_step "dpkg -P with a volume present: refused with a message, nothing deleted"
if out=$(dpkg -P nodevol-node 2>&1); then echo "$out"; vm_fail "purge succeeded with a volume present"; fi
echo "$out" | sed 's/^/    | /'
grep -q "not purging: 1 volume(s) still exist on this node (pv-keep)" <<<"$out" || vm_fail "no clear refusal message"
[[ -f /var/lib/nodevol/volumes/pv-keep.json && -f /var/lib/nodevol/pools/default/pv-keep/data ]] ||
  vm_fail "refused purge deleted state or data"
# dpkg deleted the conffile before postrm ran; the edit is kept outside
# /etc (put back there, dpkg would stop the next install at a prompt).
grep -qx "$edit" /var/lib/nodevol/package/nodevold.conf.saved || vm_fail "refused purge lost the edited config"

vm_step "unattended reinstall (no --force-conf*): the edited config is back, the daemon finds the kept volume; unpublish and delete it; purge succeeds"
vm_run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb3" </dev/null
wait_active
ctl -o json volume get pv-keep | grep -q "\"$target\"" || vm_fail "reinstalled daemon lost pv-keep or its publication"
grep -qx "$edit" /etc/nodevol/nodevold.conf || vm_fail "reinstall replaced the edited config"
[[ -x $driver ]] || vm_fail "reinstall did not put the driver back"
vm_run ctl unpublish --target "$target"
vm_run ctl volume delete pv-keep
vm_run dpkg -r nodevol-node

vm_step "dpkg -P with a mount below /var/lib/nodevol and no record (an NFS staging mount left behind): refused, the mounted data stays"
mkdir -p /srv/export/other-node /var/lib/nodevol/nfs/shared
echo "another node's data" >/srv/export/other-node/data
mount --bind /srv/export /var/lib/nodevol/nfs/shared
if out=$(dpkg -P nodevol-node 2>&1); then echo "$out"; vm_fail "purge succeeded with a mount below /var/lib/nodevol"; fi
echo "$out" | sed 's/^/    | /'
grep -q "something is still mounted at or below /var/lib/nodevol" <<<"$out" || vm_fail "no clear refusal message"
[[ -f /srv/export/other-node/data ]] || vm_fail "the purge deleted through the mount point"
umount /var/lib/nodevol/nfs/shared
vm_run dpkg -P nodevol-node
[[ -f /srv/export/other-node/data ]] || vm_fail "the purge deleted data outside /var/lib/nodevol"
for p in /etc/nodevol /var/lib/nodevol "$plugin/nodevol.io~volume" /usr/sbin/nodevold /lib/systemd/system/nodevold.service; do
  [[ ! -e $p ]] || vm_fail "$p left after purge"
done
! active || vm_fail "nodevold active after purge"
dpkg -s nodevol-node >/dev/null 2>&1 && vm_fail "nodevol-node still known to dpkg after purge"
vm_step "PASS (package install, upgrade, remove, purge)"
