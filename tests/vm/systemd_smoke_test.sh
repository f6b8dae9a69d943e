#!/bin/bash
# Runs inside a vm-run --systemd guest (tests/vm/CMakeLists.txt): the real
# systemd/nodevold.service, with ExecStart pointed at the built binary,
# under systemd as PID 1, with a dir pool, an lvm pool (VG built from
# the scratch disk by its udev by-id link; lvm runs with udevd, as on a
# real node, not with DM_DISABLE_UDEV as in the plain-mode lvm tests) and
# an nfs pool on the guest's own nfsd (nfs_lib.sh). The unit's seccomp
# filters apply to all of it: fsGroup, a mode=2775 volume and an NFS
# subdirectory volume are made here under the unit as shipped (issue 25:
# RestrictSUIDSGID=yes refused each of them with EPERM).
#   systemd_smoke_test.sh UNIT_FILE       env: NODEVOLD, NODEVOLCTL
#                                         disks: "lvm1" (>= 512M)
source "$VM_LIB"
source "$(dirname "$0")/nfs_lib.sh"

unit_src=${1:?usage: systemd_smoke_test.sh path/to/nodevold.service}
[[ $VM_MODE == systemd ]] || vm_fail "needs vm-run --systemd"
[[ $(</proc/1/comm) == systemd ]] || vm_fail "PID 1 is $(</proc/1/comm), not systemd"
virt=$(systemd-detect-virt --container || true)
[[ $virt == none ]] || vm_fail "systemd believes it runs in a container ($virt): /.dockerenv trap"
vm_log "PID 1: systemd $(systemctl --version | head -1 | cut -d' ' -f2); virtualization: $(systemd-detect-virt || true)"
[[ $(findmnt -n -o FSTYPE /tmp) == tmpfs ]] || vm_fail "guest /tmp is not its own tmpfs"

vm_step "install nodevold.service (ExecStart -> $NODEVOLD) and a config"
sed "s|^ExecStart=/usr/sbin/nodevold|ExecStart=$NODEVOLD|" "$unit_src" >/etc/systemd/system/nodevold.service
grep -q "^ExecStart=$NODEVOLD " /etc/systemd/system/nodevold.service || vm_fail "ExecStart not substituted"
mkdir -p /etc/nodevol /var/lib/nodevol/pools/default /var/lib/kubelet/pods
# udev names the scratch disk by its serial, as /dev/disk/by-id names a
# real node's disks; coldplug may still be running when this unit starts.
vm_run udevadm settle --timeout=60
lvm_disk=/dev/disk/by-id/virtio-lvm1
[[ -b $lvm_disk ]] || vm_fail "udev made no $lvm_disk (by-id: $(ls /dev/disk/by-id 2>&1 | tr '\n' ' '))"
vm_log "$lvm_disk -> $(readlink -f $lvm_disk); udevd: $([[ -e /run/udev/control ]] && echo running || echo absent)"
vm_step "an NFS server in the guest (rpcbind, mountd, nfsd by hand)"
systemctl stop rpcbind.socket rpcbind.service 2>/dev/null || true
nfs_server_start 32m
cat >/etc/nodevol/nodevold.conf <<EOF
pool = name=default,backend=dir,path=/var/lib/nodevol/pools/default
pool = name=shared,backend=nfs,server=127.0.0.1,share=/,mount-options=vers=4.2
pool = name=lvm,backend=lvm,vg=nv,type=thin,thinpool=tp,thinpool-size=80%,overprovision=2,devices=$lvm_disk
pods-root = /var/lib/kubelet/pods
EOF
vm_run systemctl daemon-reload
# With udevd and systemd, lvm registers the thin pool with dmeventd (socket-
# activated dm-event.service), as on a real node. dmeventd ignores SIGTERM
# while it monitors a device, which would hold the guest's forced poweroff
# for systemd-shutdown's 90 s: whatever happens, unregister the pool and
# stop dmeventd before the end.
unmonitor() {
  lvm vgchange --monitor n nv >/dev/null 2>&1 || true
  systemctl stop dm-event.service dm-event.socket 2>/dev/null || true
}
trap unmonitor EXIT

vm_step "systemctl start nodevold (Type=notify: returns once READY=1 is sent)"
t0=$(date +%s.%N)
systemctl start nodevold || { journalctl -u nodevold --no-pager | tail -30; vm_fail "systemctl start nodevold failed"; }
vm_log "started in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b - a}') s"
state=$(systemctl show -p ActiveState -p SubState -p MainPID -p Type -p NotifyAccess nodevold)
vm_log "$(tr '\n' ' ' <<<"$state")"
grep -qx "ActiveState=active" <<<"$state" || vm_fail "nodevold not active: $state"
mainpid=$(systemctl show -p MainPID --value nodevold)
[[ "$(readlink /proc/"$mainpid"/ns/mnt)" == "$(readlink /proc/1/ns/mnt)" ]] ||
  vm_fail "nodevold runs in a private mount namespace ($(readlink /proc/"$mainpid"/ns/mnt) vs PID 1's $(readlink /proc/1/ns/mnt))"
[[ -S /run/nodevol/nodevold.sock ]] || vm_fail "no socket at /run/nodevol/nodevold.sock"

vm_step "the unit's device policy: block devices and device-mapper's control open, other character devices do not"
# From inside the unit's cgroup, where the BPF device program applies to
# every process (nodevold and the tools it runs alike).
cg=/sys/fs/cgroup$(cut -d: -f3 /proc/"$mainpid"/cgroup)
opens() { bash -c 'echo $$ >"$1/cgroup.procs" && exec 3<"$2"' _ "$cg" "$1" 2>/dev/null; }
mknod /root/not-a-watchdog c 1 11  # /dev/kmsg's numbers, under another name
for dev in /dev/null /dev/urandom /dev/mapper/control "$lvm_disk"; do
  opens "$dev" || vm_fail "$dev cannot be opened inside nodevold's cgroup"
done
for dev in /dev/kmsg /root/not-a-watchdog /dev/mem; do
  ! opens "$dev" || vm_fail "$dev was opened inside nodevold's cgroup: DevicePolicy does not hold"
done
exec 3</root/not-a-watchdog || vm_fail "the test's own shell (outside the unit) cannot open it: the check says nothing"
exec 3<&-
rm -f /root/not-a-watchdog
vm_log "opened: null, urandom, mapper/control, $lvm_disk; refused: kmsg, a char node planted under another name, mem"

vm_step "metrics endpoint answers /healthz"
if exec 3<>/dev/tcp/127.0.0.1/9808; then
  printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  reply=$(timeout 10 cat <&3 || true)
  exec 3<&-
  head -1 <<<"$reply" | grep -q " 200" || vm_fail "/healthz: $(head -1 <<<"$reply")"
  vm_log "$(head -1 <<<"$reply" | tr -d '\r')"
else
  vm_fail "nothing listens on 127.0.0.1:9808"
fi

vm_step "a publication made through nodevolctl is visible in PID 1's mount namespace"
VM_SOCKET=/run/nodevol/nodevold.sock
VM_PODS=/var/lib/kubelet/pods
vm_run vm_ctl volume create v1 --pool default --size 16Mi
target=$(vm_target 7f4c1d2e-0000-4000-8000-000000000001 v1)
vm_run vm_ctl publish --volume v1 --target "$target"
grep -q " $target " /proc/1/mountinfo || vm_fail "$target is not in /proc/1/mountinfo"
vm_log "$(grep " $target " /proc/1/mountinfo | cut -d' ' -f4-6)"
echo hello >"$target/file"
[[ $(</var/lib/nodevol/pools/default/v1/file) == hello ]] || vm_fail "the bind does not show the volume's directory"
vm_run vm_ctl unpublish --target "$target"
grep -q " $target " /proc/1/mountinfo && vm_fail "$target still mounted after unpublish"

vm_step "fsGroup under the unit: the volume root gets the group and setgid"
vm_run vm_ctl volume create g1 --pool default --size 16Mi
mkdir /var/lib/nodevol/pools/default/g1/sub
gtarget=$(vm_target 7f4c1d2e-0000-4000-8000-000000000003 g1)
vm_run vm_ctl publish --volume g1 --target "$gtarget" --fs-group 4242
for p in "$gtarget" "$gtarget/sub"; do
  [[ $(stat -c %g "$p") == 4242 && $(stat -c %A "$p") == d???rws* ]] || vm_fail "$p after fsGroup 4242: $(stat -c '%g %A' "$p")"
done
vm_log "g1 root: $(stat -c '%g %A' "$gtarget"); published $(grep " $gtarget " /proc/1/mountinfo | cut -d' ' -f6)"
grep " $gtarget " /proc/1/mountinfo | cut -d' ' -f6 | grep -q nosuid || vm_fail "$gtarget is not nosuid"
vm_run vm_ctl unpublish --target "$gtarget"
vm_run vm_ctl volume delete g1

vm_step "a mode=2775 dir volume under the unit"
vm_run vm_ctl volume create m1 --pool default --size 16Mi --param mode=2775
[[ $(stat -c %a /var/lib/nodevol/pools/default/m1) == 2775 ]] || vm_fail "m1 has mode $(stat -c %a /var/lib/nodevol/pools/default/m1), want 2775"
vm_run vm_ctl volume delete m1

vm_step "an NFS subdirectory volume under the unit: made, published, written, deleted"
vm_run vm_ctl volume create n1 --pool shared --size 10Mi --param nodevol.io/pvc-namespace=team \
  --param nodevol.io/pvc-name=data --param nodevol.io/pv-name=pv-n1
[[ -d $NFS_EXPORT/team-data-pv-n1 ]] || vm_fail "no directory team-data-pv-n1 on the server: $(ls -la $NFS_EXPORT)"
ntarget=$(vm_target 7f4c1d2e-0000-4000-8000-000000000004 n1)
vm_run vm_ctl publish --volume n1 --target "$ntarget"
echo "nfs under systemd" >"$ntarget/file"
sync
[[ $(<"$NFS_EXPORT/team-data-pv-n1/file") == "nfs under systemd" ]] || vm_fail "the write did not reach the export"
vm_run vm_ctl unpublish --target "$ntarget"
vm_run vm_ctl volume delete n1
[[ -e $NFS_EXPORT/team-data-pv-n1 ]] && vm_fail "team-data-pv-n1 is left on the server after delete"
vm_log "export after delete: $(ls -A $NFS_EXPORT | tr '\n' ' ')"

vm_step "the lvm pool under systemd: VG nv from $lvm_disk, a thin pool; lvm runs with udevd"
journal=$(journalctl -u nodevold -o cat --no-pager)
grep -q "pool lvm: backend=lvm" <<<"$journal" || { echo "$journal" | tail -20; vm_fail "no 'pool lvm: backend=lvm' line in the journal"; }
vm_log "journal: $(grep "pool lvm: backend=lvm" <<<"$journal")"
vm_log "$(lvm vgs --noheadings -o vg_name,pv_name,vg_size,vg_tags nv 2>&1 | tr -s ' ')"
vm_log "$(lvm lvs --noheadings -o lv_name,lv_attr,lv_size nv 2>&1 | tr -s ' ')"
t0=$(date +%s%N)
vm_run vm_ctl volume create l1 --pool lvm --size 32Mi
vm_log "create took $((($(date +%s%N) - t0) / 1000000)) ms"
# Under udevd, lvm leaves the /dev/nv links to udev's rules.
[[ -b /dev/nv/nv-l1 ]] || vm_fail "no /dev/nv/nv-l1 after create"
props=$(udevadm info --query=property /dev/nv/nv-l1 2>&1) || true
grep -q "^DM_NAME=nv-nv--l1$" <<<"$props" || vm_fail "udev does not know /dev/nv/nv-l1: $props"
ltarget=$(vm_target 7f4c1d2e-0000-4000-8000-000000000002 l1)
vm_run vm_ctl publish --volume l1 --target "$ltarget"
for mi in /proc/self/mountinfo /proc/1/mountinfo; do
  grep -q " $ltarget " $mi || vm_fail "$ltarget is not in $mi: the unit's mount is hidden from this namespace"
done
lopts=$(grep " $ltarget " /proc/self/mountinfo | cut -d' ' -f6)
vm_log "published: $(grep " $ltarget " /proc/self/mountinfo | cut -d' ' -f4-6), $(findmnt -n -o FSTYPE,SOURCE "$ltarget" | tr -s ' ')"
echo "lvm under systemd" >"$ltarget/file"
sync
[[ $(</var/lib/nodevol/staging/lvm/l1/file) == "lvm under systemd" ]] || vm_fail "the bind does not show the LV's filesystem"

vm_step "systemctl restart nodevold with l1 published: the mount and the volume survive"
pid0=$(systemctl show -p MainPID --value nodevold)
t0=$(date +%s%N)
systemctl restart nodevold || { journalctl -u nodevold --no-pager | tail -30; vm_fail "systemctl restart nodevold failed"; }
vm_log "restarted in $((($(date +%s%N) - t0) / 1000000)) ms; MainPID $pid0 -> $(systemctl show -p MainPID --value nodevold)"
[[ $(systemctl show -p MainPID --value nodevold) != "$pid0" ]] || vm_fail "MainPID unchanged: nodevold was not restarted"
grep -qx "ActiveState=active" <<<"$(systemctl show -p ActiveState nodevold)" || vm_fail "nodevold not active after restart"
grep -q " $ltarget " /proc/self/mountinfo || vm_fail "$ltarget is no longer mounted after the restart"
[[ $(grep " $ltarget " /proc/self/mountinfo | cut -d' ' -f6) == "$lopts" ]] ||
  vm_fail "$ltarget was mounted $lopts, after the restart $(grep " $ltarget " /proc/self/mountinfo | cut -d' ' -f6)"
[[ $(<"$ltarget/file") == "lvm under systemd" ]] || vm_fail "the data is not readable through $ltarget after the restart"
json=$(vm_ctl -o json volume get l1) || vm_fail "l1 is gone after the restart"
[[ $(vm_json_get "$json" state) == VOLUME_STATE_READY ]] || vm_fail "l1 after the restart: $json"
grep -q "\"$ltarget\"" <<<"$json" || vm_fail "l1 is no longer published at $ltarget: $json"
info=$(vm_ctl info)
grep -q "^Drift: none" <<<"$info" || vm_fail "the restart reported drift: $(sed -n '/^Drift/,$p' <<<"$info")"
vm_log "l1 READY, published, mounted $lopts; drift: none"

vm_step "kill -9 of nodevold: systemd restarts it (Restart=on-failure), the mount stays"
pid1=$(systemctl show -p MainPID --value nodevold)
restarts=$(systemctl show -p NRestarts --value nodevold)
kill -9 "$pid1"
for _ in $(seq 300); do
  pid2=$(systemctl show -p MainPID --value nodevold)
  [[ $pid2 != 0 && $pid2 != "$pid1" && $(systemctl show -p ActiveState --value nodevold) == active ]] && break
  sleep 0.1
done
[[ $pid2 != 0 && $pid2 != "$pid1" ]] || vm_fail "systemd did not restart nodevold within 30 s: $(systemctl show -p ActiveState -p SubState -p Result nodevold | tr '\n' ' ')"
vm_log "MainPID $pid1 -> $pid2; NRestarts $restarts -> $(systemctl show -p NRestarts --value nodevold)"
[[ $(grep " $ltarget " /proc/self/mountinfo | cut -d' ' -f6) == "$lopts" ]] || vm_fail "$ltarget after the kill and restart: $(grep " $ltarget " /proc/self/mountinfo)"
[[ $(<"$ltarget/file") == "lvm under systemd" ]] || vm_fail "the data is not readable through $ltarget after the kill"
info=$(vm_ctl info)
grep -q "^Drift: none" <<<"$info" || vm_fail "the restart after kill -9 reported drift: $(sed -n '/^Drift/,$p' <<<"$info")"

vm_step "unpublish and delete l1: the LV and the staging mount go"
vm_run vm_ctl unpublish --target "$ltarget"
vm_run vm_ctl volume delete l1
grep -q " /var/lib/nodevol/staging/lvm/l1 " /proc/self/mountinfo && vm_fail "staging of l1 still mounted after delete"
lvs_out=$(lvm lvs --noheadings -o lv_name nv)
grep -qw nv-l1 <<<"$lvs_out" && vm_fail "LV nv/nv-l1 left after delete"
[[ -e /dev/nv/nv-l1 ]] && vm_fail "/dev/nv/nv-l1 left after delete (udev did not remove the link)"
vm_log "LVs left: $(tr -s ' \n' ' ' <<<"$lvs_out")"

vm_step "systemctl stop nodevold: a clean exit"
vm_run systemctl stop nodevold
res=$(systemctl show -p Result -p ExecMainStatus -p ActiveState nodevold)
vm_log "$(tr '\n' ' ' <<<"$res")"
grep -qx "Result=success" <<<"$res" || vm_fail "stop result: $res"
grep -qx "ExecMainStatus=0" <<<"$res" || vm_fail "exit status: $res"
grep -qx "ActiveState=inactive" <<<"$res" || vm_fail "state after stop: $res"

vm_step "journalctl shows nodevold's own lines"
journal=$(journalctl -u nodevold -o cat --no-pager)
for want in "starting" "pool lvm: backend=lvm" "ready:" "Publish volume=v1" "Publish volume=l1" "stopped"; do
  grep -q "$want" <<<"$journal" || { echo "$journal" | tail -20; vm_fail "no '$want' line from nodevold in the journal"; }
done
journalctl -u nodevold -o short-monotonic --no-pager | grep -E "nodevold\[|Started|Stopped" | sed -n '1,8s/^/    /p'  # no head: SIGPIPE is ignored in a unit

vm_step "unmonitor the thin pool (dmeventd would delay the guest's poweroff by 90 s)"
vm_log "dm-event.service: $(systemctl is-active dm-event.service || true); dmeventd: $(pgrep -a dmeventd || echo none)"
unmonitor
pgrep -x dmeventd >/dev/null && vm_fail "dmeventd still runs: $(pgrep -a dmeventd)"
vm_step "PASS (systemd)"
