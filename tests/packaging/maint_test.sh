#!/bin/bash
# packaging/common/maint on a scratch root (NODEVOL_MAINT_ROOT): where the
# package finds kubelet's plugin dir, the atomic driver install with the
# real nodevol-flex, and its removal.
#   maint_test.sh MAINT NODEVOL_FLEX
set -euo pipefail
maint=${1:?usage: maint_test.sh MAINT NODEVOL_FLEX}
flex=${2:?usage: maint_test.sh MAINT NODEVOL_FLEX}
r=$(mktemp -d)
trap 'rm -rf "$r"' EXIT
export NODEVOL_MAINT_ROOT=$r NODEVOL_MAINT_FLEX=$flex
fail() { echo "FAIL: $*" >&2; exit 1; }
dir_is() {  # dir_is EXPECTED WHY
  local got
  got=$("$maint" plugin-dir 2>"$r/why") || fail "plugin-dir failed: $(cat "$r/why")"
  [[ $got == "$1" ]] || fail "plugin dir: got $got, want $1 ($2)"
  grep -q "$2" "$r/why" || fail "plugin dir $got: reason '$(cat "$r/why")' lacks '$2'"
  echo "ok: $got ($(cat "$r/why"))"
}
mkdir -p "$r/etc/nodevol" "$r/proc" "$r/var/lib/kubelet" "$r/etc/default"

dir_is /usr/libexec/kubernetes/kubelet-plugins/volume/exec "default"

echo 'volumePluginDir: "/var/lib/kubelet/from-yaml"   # kubeadm' >"$r/var/lib/kubelet/config.yaml"
dir_is /var/lib/kubelet/from-yaml "config.yaml"

echo 'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.1 --volume-plugin-dir=/opt/from-default --v=2"' >"$r/etc/default/kubelet"
dir_is /opt/from-default "/etc/default/kubelet"

# A running kubelet outranks the files: its --config first, then its flag.
mkdir -p "$r/proc/4242" "$r/etc/kubelet"
echo kubelet >"$r/proc/4242/comm"
printf 'volumePluginDir: /srv/from-running-config\n' >"$r/etc/kubelet/cfg.yaml"
printf '%s\0' /usr/bin/kubelet --config /etc/kubelet/cfg.yaml --v=2 >"$r/proc/4242/cmdline"
dir_is /srv/from-running-config "running kubelet's --config"
printf '%s\0' /usr/bin/kubelet --config=/etc/kubelet/cfg.yaml -volume-plugin-dir /srv/from-flag >"$r/proc/4242/cmdline"
dir_is /srv/from-flag "running kubelet's --volume-plugin-dir"

# nodevold.conf outranks everything; commented lines do not count.
printf '# kubelet-plugin-dir = /commented\nkubelet-plugin-dir = /etc/from-conf/   # trailing comment\n' \
  >"$r/etc/nodevol/nodevold.conf"
dir_is /etc/from-conf "nodevold.conf"

printf 'kubelet-plugin-dir = ../relative\n' >"$r/etc/nodevol/nodevold.conf"
if "$maint" plugin-dir 2>"$r/why"; then fail "a relative plugin dir was accepted"; fi
grep -q "not a clean absolute path" "$r/why" || fail "no clear message for a relative dir: $(cat "$r/why")"
echo "ok: relative dir refused"

# A plugin dir that cannot be made: a clear failure naming the way out.
: >"$r/blocked"
printf 'kubelet-plugin-dir = /blocked/plugins\n' >"$r/etc/nodevol/nodevold.conf"
if "$maint" install-driver 2>"$r/why"; then fail "install-driver succeeded into an impossible dir"; fi
grep -q "set kubelet-plugin-dir in /etc/nodevol/nodevold.conf" "$r/why" || fail "no way out named: $(cat "$r/why")"
[[ ! -e $r/var/lib/nodevol/package/driver-dir ]] || fail "a failed install was recorded"
echo "ok: impossible plugin dir refused with a way out"

# install-driver: the real nodevol-flex copies itself in; init answers.
printf 'kubelet-plugin-dir = /plugins/a\n' >"$r/etc/nodevol/nodevold.conf"
"$maint" install-driver
drv=$r/plugins/a/nodevol.io~volume/volume
[[ -x $drv ]] || fail "no executable driver at $drv"
"$drv" init | grep -q '"status":"Success"' || fail "installed driver's init: $("$drv" init)"
[[ -z $(find "$r/plugins/a" -name '.*') ]] || fail "dot files left: $(find "$r/plugins/a" -name '.*')"
[[ $(cat "$r/var/lib/nodevol/package/driver-dir") == /plugins/a ]] || fail "install not recorded"
echo "ok: driver installed, init answers"

# Re-running (an upgrade) is fine; a changed dir moves the driver.
"$maint" install-driver
printf 'kubelet-plugin-dir = /plugins/b\n' >"$r/etc/nodevol/nodevold.conf"
"$maint" install-driver
[[ -x $r/plugins/b/nodevol.io~volume/volume ]] || fail "driver not in the new dir"
[[ ! -e $r/plugins/a/nodevol.io~volume ]] || fail "driver left in the old dir"
echo "ok: driver follows a changed plugin dir"

# remove-driver uses the recorded dir even when the config changed since.
printf 'kubelet-plugin-dir = /plugins/c\n' >"$r/etc/nodevol/nodevold.conf"
"$maint" remove-driver
[[ ! -e $r/plugins/b/nodevol.io~volume ]] || fail "driver still installed after remove-driver"
[[ -z $(ls -A "$r/plugins/b") ]] || fail "leftovers in plugin dir: $(ls -A "$r/plugins/b")"
echo "ok: driver removed"

echo PASS
