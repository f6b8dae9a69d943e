#!/usr/bin/env bash
# Checks systemd/nodevold.service: systemd-analyze verify accepts it (with
# ExecStart pointed at the built binary), it is Type=notify with a watchdog,
# it has none of the options that would give nodevold a private mount
# namespace and hide its mounts from kubelet, and its device policy allows
# no character device beyond the ones it needs.
set -euo pipefail
unit_src=$1
nodevold=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=/usr/sbin/nodevold|ExecStart=$nodevold|" "$unit_src" >"$tmp/nodevold.service"

out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$tmp/nodevold.service" 2>&1) || {
  echo "systemd-analyze verify failed:"; echo "$out"; exit 1; }
# verify exits 0 on some warnings; treat any line about our unit as a failure.
if grep -F "nodevold.service" <<<"$out"; then echo "systemd-analyze reported problems"; exit 1; fi

fail=0
for opt in ProtectSystem ProtectHome PrivateTmp PrivateDevices PrivateMounts ProtectKernelTunables \
           ProtectKernelModules ProtectKernelLogs ProtectControlGroups ProtectProc ProcSubset \
           ReadWritePaths ReadOnlyPaths InaccessiblePaths TemporaryFileSystem BindPaths \
           BindReadOnlyPaths MountAPIVFS ProtectClock PrivateNetwork \
           RootDirectory RootImage DynamicUser; do
  if grep -Eq "^[[:space:]]*$opt=" "$tmp/nodevold.service"; then
    echo "forbidden option $opt is set (it would hide nodevold's mounts from kubelet)"; fail=1
  fi
done
for want in "Type=notify" "WatchdogSec=" "Restart=on-failure" "RuntimeDirectory=nodevol" "StateDirectory=nodevol"; do
  grep -q "^$want" "$tmp/nodevold.service" || { echo "missing $want"; fail=1; }
done
# The device policy (docs/systemd.md): closed, every block device, and of
# character devices only device-mapper's control node besides the pseudo
# devices: no char-* class, no other node.
grep -qx "DevicePolicy=closed" "$tmp/nodevold.service" || { echo "DevicePolicy is not closed"; fail=1; }
grep -qx "DeviceAllow=block-\* rwm" "$tmp/nodevold.service" || { echo "missing DeviceAllow=block-* rwm"; fail=1; }
others=$(grep "^DeviceAllow=" "$tmp/nodevold.service" | grep -vx "DeviceAllow=block-\* rwm" |
  grep -vx "DeviceAllow=/dev/mapper/control rw" || true)
[[ -z $others ]] || { echo "DeviceAllow beyond block devices and /dev/mapper/control: $others"; fail=1; }
[[ $fail -eq 0 ]] && echo "nodevold.service: verified"
exit $fail
