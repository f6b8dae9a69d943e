#!/bin/bash
# Runs inside a vm-run --systemd guest: an upgrade from the last release
# whose daemon had no flex door (its driver spoke gRPC to the Node API
# socket) to this tree's package, while a pod keeps mounting and
# unmounting through the FlexVolume driver as kubelet does (retrying a
# failure), before, during and after the upgrade. Every mount and unmount
# must succeed; today's driver must never fail, and must reach kubelet's
# plugin dir only once the new daemon (and its door) serves; 0.1.0's
# driver may fail only while the daemon restarts (it never waited for a
# restarting daemon); a publication made before the upgrade stays
# mounted, adopted, with its data, and the new driver unmounts it.
#   package_upgrade_old_test.sh OLD_DEB NEW_DEB
source "$VM_LIB"
old=${1:?usage: package_upgrade_old_test.sh OLD_DEB NEW_DEB} new=${2:?}
[[ $VM_MODE == systemd && $(</proc/1/comm) == systemd ]] || vm_fail "needs vm-run --systemd"
ver() { dpkg-deb -f "$1" Version; }
v_old=$(ver "$old") v_new=$(ver "$new")
dpkg --compare-versions "$v_new" gt "$v_old" || vm_fail "$v_new does not sort after $v_old"
dpkg -s nodevol-node >/dev/null 2>&1 && vm_fail "nodevol-node is already installed on the host"
if [[ -e /usr/sbin/policy-rc.d ]]; then
  vm_log "removing the host's /usr/sbin/policy-rc.d in this guest (a real node has none)"
  rm -f /usr/sbin/policy-rc.d
fi
rm -f /var/lib/man-db/auto-update

plugin=/usr/libexec/kubernetes/kubelet-plugins/volume/exec
driver=$plugin/nodevol.io~volume/volume
sock=/run/nodevol/nodevold.sock
pods=/var/lib/kubelet/pods
ctl() { nodevolctl --socket $sock "$@"; }
mount_id() { awk -v t="$1" '$5 == t { print $1 }' /proc/1/mountinfo; }
running_version() { ctl -o json info | grep -o '"version": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/'; }
wait_active() {
  for _ in $(seq 150); do
    [[ $(systemctl is-active nodevold) == active && -S $sock ]] && return 0
    sleep 0.2
  done
  journalctl -u nodevold --no-pager | tail -20
  vm_fail "nodevold not active"
}
target_of() { echo "$pods/$1/volumes/nodevol.io~volume/data"; }
# kubelet's FlexVolume mount of VOLUME for pod UID, as kubelet calls it
# (the options JSON kubelet 1.3x passes); prints the driver's answer.
flex_mount() {
  "$driver" mount "$(target_of "$1")" \
    '{"kubernetes.io/fsType":"","kubernetes.io/pod.name":"p","kubernetes.io/pod.namespace":"default",'\
'"kubernetes.io/pod.uid":"'"$1"'","kubernetes.io/pvOrVolumeName":"data","kubernetes.io/readwrite":"rw",'\
'"kubernetes.io/serviceAccount.name":"default","volume":"'"$2"'"}' 2>&1 || true
}
flex_unmount() { "$driver" unmount "$(target_of "$1")" 2>&1 || true; }

vm_step "install the old release, $v_old: its daemon serves the Node API socket and no flex door"
vm_run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$old"
wait_active
[[ $(running_version) == "$v_old" ]] || vm_fail "daemon reports $(running_version), want $v_old"
[[ ! -e $sock.flex ]] || vm_fail "the old daemon serves a flex door ($sock.flex): not the release this test is about"
vm_run ctl volume create pv-keep --pool default --size 64Mi --param nodevol.io/pvc-namespace=default
vm_run ctl volume create pv-loop --pool default --size 64Mi --param nodevol.io/pvc-namespace=default
keep=0b2d6f1e-0000-4000-8000-0000000000aa
mkdir -p "$(target_of $keep)"
out=$(flex_mount $keep pv-keep)
grep -q '"status":"Success"' <<<"$out" || vm_fail "the old driver's mount: $out"
echo "written by $v_old" >"$(target_of $keep)/data"
id0=$(mount_id "$(target_of $keep)")
[[ -n $id0 ]] || vm_fail "no mount at $(target_of $keep)"
vm_log "pod $keep has pv-keep through the old driver (mount ID $id0)"

vm_step "a pod mounting and unmounting through kubelet's driver throughout; upgrade to $v_new"
# Each call as kubelet makes it: a failure is retried after 0.5 s (kubelet's
# first backoff), at most 20 times. Every line: time, the inode of the
# driver file that ran (which driver: the install renames a new file into
# place), the call, the try, the answer.
calls=$(mktemp) stop=$(mktemp -u)
ino_old=$(stat -c %i "$driver")
call() {  # call OP UID
  local try out ino
  for try in $(seq 20); do
    ino=$(stat -c %i "$driver")
    if [[ $1 == mount ]]; then out=$(flex_mount "$2" pv-loop); else out=$(flex_unmount "$2"); fi
    printf '%s %s %s %s try%s %s\n' "$(date +%s.%N)" "$ino" "$1" "$2" "$try" "$(tr '\n' ' ' <<<"$out")" >>"$calls"
    grep -q '"status":"Success"' <<<"$out" && return 0
    sleep 0.5
  done
}
( i=0
  until [[ -e $stop ]]; do
    i=$((i + 1))
    uid=0b2d6f1e-0000-4000-8000-$(printf '%012d' "$i")
    mkdir -p "$(target_of "$uid")"
    call mount "$uid"
    call unmount "$uid"
  done ) &
loop=$!
for _ in $(seq 100); do [[ $(grep -c ' unmount .*Success' "$calls") -ge 3 ]] && break; sleep 0.1; done
pid_old=$(systemctl show -p MainPID --value nodevold)
seen=$(mktemp)
( while sleep 0.02; do
    ino=$(stat -c %i "$driver" 2>/dev/null) || continue
    if [[ $ino != "$ino_old" ]]; then
      echo "$(date +%s.%N) driver replaced while nodevold pid $(systemctl show -p MainPID --value nodevold) ran, door $([[ -S $sock.flex ]] && echo up || echo missing)" >"$seen"
      break
    fi
  done ) &
watcher=$!
t_start=$(date +%s.%N)
vm_run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$new"
t_end=$(date +%s.%N)
wait_active
# A few more rounds through the new driver, then stop the pod's loop.
n=$(grep -c ' unmount .*Success' "$calls")
for _ in $(seq 300); do (($(grep -c ' unmount .*Success' "$calls") >= n + 3)) && break; sleep 0.1; done
touch "$stop"
wait "$loop" || true
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true

during=$(awk -v a="$t_start" -v b="$t_end" '$1 >= a && $1 <= b' "$calls" | wc -l)
new_calls=$(awk -v o="$ino_old" '$2 != o' "$calls" | wc -l)
vm_log "$(wc -l <"$calls") driver calls, $during of them while apt-get ran, $new_calls by the new driver"
vm_log "$(<"$seen")"
# Every pod's mount and unmount succeeded, retried or not.
gave_up=$(awk '{ k = $3 " " $4; if ($0 ~ /"status":"Success"/) ok[k] = 1; seen[k] = 1 }
               END { for (k in seen) if (!ok[k]) print k }' "$calls")
[[ -z $gave_up ]] || { sed 's/^/    | /' "$calls" | tail -20; vm_fail "calls never succeeded, 20 tries each: $gave_up"; }
# Today's driver never failed. 0.1.0's driver fails at once, without
# waiting, while its socket is gone during the daemon's restart (a
# 0.1.0 limit: today's driver waits for a restarting daemon); kubelet
# retries it. Any other failure fails the test.
failed=$(grep -v '"status":"Success"' "$calls" || true)
if [[ -n $failed ]]; then
  vm_log "retried failures (0.1.0's driver while the daemon restarted):"
  sed 's/^/    | /' <<<"$failed"
fi
bad=$(awk -v o="$ino_old" '$2 != o' <<<"$failed")
[[ -z $bad ]] || vm_fail "today's driver failed across the upgrade: $bad"
bad=$(grep -v -e 'failed to connect to all addresses.*nodevold.sock: \(No such file or directory\|Connection refused\)' <<<"$failed" || true)
[[ -z $bad ]] || vm_fail "0.1.0's driver failed for another reason than the restarting daemon: $bad"
((during >= 2)) || vm_fail "only $during driver calls ran during the upgrade: the loop proves nothing"
((new_calls >= 3)) || vm_fail "only $new_calls calls by the new driver"
[[ -s $seen ]] || vm_fail "the upgrade did not replace the driver in $plugin"
grep -q " pid $pid_old ran" "$seen" && vm_fail "the new driver went in while the old daemon (pid $pid_old) still ran: $(<"$seen")"
grep -q "door up" "$seen" || vm_fail "the new driver went in with no flex door to answer it: $(<"$seen")"

vm_step "after the upgrade: $v_new serves the door, pv-keep is still mounted with its data, the new driver unmounts it"
[[ $(running_version) == "$v_new" ]] || vm_fail "daemon reports $(running_version), want $v_new"
[[ -S $sock.flex ]] || vm_fail "no flex door at $sock.flex"
"$driver" version | grep -qF "$v_new" || vm_fail "driver in the plugin dir: $("$driver" version)"
[[ $(mount_id "$(target_of $keep)") == "$id0" ]] || vm_fail "pv-keep was remounted or lost across the upgrade"
[[ $(<"$(target_of $keep)/data") == "written by $v_old" ]] || vm_fail "pv-keep's data is not readable after the upgrade"
out=$(flex_unmount $keep)
grep -q '"status":"Success"' <<<"$out" || vm_fail "the new driver's unmount of the old publication: $out"
[[ -z $(mount_id "$(target_of $keep)") ]] || vm_fail "pv-keep still mounted after the unmount"
[[ -z $(awk -v p="$pods/" 'index($5, p) == 1' /proc/1/mountinfo) ]] || vm_fail "mounts left under $pods"
vm_run ctl volume delete pv-keep
vm_run ctl volume delete pv-loop
vm_step "PASS (upgrade from $v_old with the driver in use throughout)"
