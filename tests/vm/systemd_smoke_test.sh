#!/bin/bash
# Runs inside a vm-run --systemd guest (tests/vm/CMakeLists.txt): the real
# systemd/nodevold.service, with ExecStart pointed at the built binary,
# under systemd as PID 1.
#   systemd_smoke_test.sh UNIT_FILE       env: NODEVOLD, NODEVOLCTL
source "$VM_LIB"

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
cat >/etc/nodevol/nodevold.conf <<'EOF'
pool = name=default,backend=dir,path=/var/lib/nodevol/pools/default
pods-root = /var/lib/kubelet/pods
EOF
vm_run systemctl daemon-reload

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

vm_step "systemctl stop nodevold: a clean exit"
vm_run systemctl stop nodevold
res=$(systemctl show -p Result -p ExecMainStatus -p ActiveState nodevold)
vm_log "$(tr '\n' ' ' <<<"$res")"
grep -qx "Result=success" <<<"$res" || vm_fail "stop result: $res"
grep -qx "ExecMainStatus=0" <<<"$res" || vm_fail "exit status: $res"
grep -qx "ActiveState=inactive" <<<"$res" || vm_fail "state after stop: $res"

vm_step "journalctl shows nodevold's own lines"
journal=$(journalctl -u nodevold -o cat --no-pager)
for want in "starting" "ready:" "Publish volume=v1" "stopped"; do
  grep -q "$want" <<<"$journal" || { echo "$journal" | tail -20; vm_fail "no '$want' line from nodevold in the journal"; }
done
journalctl -u nodevold -o short-monotonic --no-pager | grep -E "nodevold\[|Started|Stopped" | head -8 | sed 's/^/    /'
vm_step "PASS (systemd)"
