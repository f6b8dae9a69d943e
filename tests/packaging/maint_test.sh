#!/bin/bash
# packaging/common/maint on a scratch root (NODEVOL_MAINT_ROOT) with a fake
# /proc: where the package finds kubelet's plugin dir (and which "kubelet"
# it believes), the atomic driver install with the real nodevol-flex, its
# move and its removal.
#   maint_test.sh MAINT NODEVOL_FLEX
set -euo pipefail
maint=${1:?usage: maint_test.sh MAINT NODEVOL_FLEX}
flex=${2:?usage: maint_test.sh MAINT NODEVOL_FLEX}
r=$(mktemp -d)
trap 'rm -rf "$r"' EXIT
export NODEVOL_MAINT_ROOT=$r NODEVOL_MAINT_FLEX=$flex
default=/usr/libexec/kubernetes/kubelet-plugins/volume/exec
fail() { echo "FAIL: $*" >&2; exit 1; }
# A hang (a FIFO read) fails the test instead of blocking it forever.
m() { timeout 60 "$maint" "$@"; }
dir_is() {  # dir_is EXPECTED WHY
  local got
  got=$(m plugin-dir 2>"$r/why") || fail "plugin-dir failed: $(cat "$r/why")"
  [[ $got == "$1" ]] || fail "plugin dir: got $got, want $1 ($2); stderr: $(cat "$r/why")"
  grep -q -- "$2" "$r/why" || fail "plugin dir $got: reason '$(cat "$r/why")' lacks '$2'"
  echo "ok: $got ($(tail -1 "$r/why"))"
}
reset() {
  rm -rf "${r:?}"/*
  mkdir -p "$r/etc/nodevol" "$r/proc/1/ns" "$r/var/lib/kubelet" "$r/etc/default" "$r/usr/bin"
  ln -s 'mnt:[4026531840]' "$r/proc/1/ns/mnt"
  printf '#!/bin/sh\n' >"$r/usr/bin/kubelet" && chmod 0755 "$r/usr/bin/kubelet"
}
# proc PID UID NS EXE ARG...: a fake process named kubelet.
proc() {
  local p=$r/proc/$1
  mkdir -p "$p/ns"
  echo kubelet >"$p/comm"
  printf 'Name:\tkubelet\nUid:\t%s\t%s\t%s\t%s\n' "$2" "$2" "$2" "$2" >"$p/status"
  ln -sfn "mnt:[$3]" "$p/ns/mnt"
  ln -sfn "$4" "$p/exe"
  shift 4
  printf '%s\0' "$@" >"$p/cmdline"
}
host_ns=4026531840

reset
dir_is $default "default"

echo 'volumePluginDir: "/var/lib/kubelet/from-yaml"   # kubeadm' >"$r/var/lib/kubelet/config.yaml"
dir_is /var/lib/kubelet/from-yaml "config.yaml"

echo 'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.1 --volume-plugin-dir=/opt/from-default --v=2"' >"$r/etc/default/kubelet"
dir_is /opt/from-default "/etc/default/kubelet"

# Issue 28 item 4: a commented-out flag is not a setting.
printf '# An example:\n#   --volume-plugin-dir=/commented\nKUBELET_EXTRA_ARGS=--v=2\n' >"$r/etc/default/kubelet"
dir_is /var/lib/kubelet/from-yaml "config.yaml"

# A running kubelet outranks the files: its flag, then its --config.
mkdir -p "$r/etc/kubelet"
printf 'volumePluginDir: /srv/from-running-config\n' >"$r/etc/kubelet/cfg.yaml"
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config /etc/kubelet/cfg.yaml --v=2
dir_is /srv/from-running-config "volumePluginDir in /etc/kubelet/cfg.yaml (--config of the running kubelet"
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config=/etc/kubelet/cfg.yaml -volume-plugin-dir /srv/from-flag
dir_is /srv/from-flag "volume-plugin-dir of the running kubelet"

# Issue 28 item 3: only a root kubelet in PID 1's mount namespace from a
# root-owned binary counts. Each impostor has a lower PID (found first)
# and names its own dir; a no-argument one would hide the real one.
proc 100 1000 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --volume-plugin-dir=/evil/uid
proc 101 0 4026532999 "$r/usr/bin/kubelet" /usr/bin/kubelet --volume-plugin-dir=/evil/container
cp "$r/usr/bin/kubelet" "$r/usr/bin/userkubelet" && chown 65534 "$r/usr/bin/userkubelet"
proc 102 0 $host_ns "$r/usr/bin/userkubelet" /usr/bin/kubelet --volume-plugin-dir=/evil/exe
cp "$r/usr/bin/kubelet" "$r/usr/bin/writable" && chmod 0777 "$r/usr/bin/writable"
proc 103 0 $host_ns "$r/usr/bin/writable" /usr/bin/kubelet --volume-plugin-dir=/evil/writable
proc 104 1000 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet
dir_is /srv/from-flag "volume-plugin-dir of the running kubelet (pid 4242)"
echo "ok: impostor kubelets (user, container, user's binary, writable binary, no arguments) ignored"
rm -rf "$r"/proc/10[0-4]

# --config must be a regular root-owned file of sane size: a FIFO would
# hang the package run, /dev/zero never ends, a user's file steers it.
mkfifo "$r/etc/kubelet/fifo"
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config=/etc/kubelet/fifo
dir_is /var/lib/kubelet/from-yaml "config.yaml"
grep -q "ignoring kubelet config /etc/kubelet/fifo" "$r/why" || fail "FIFO config not reported: $(cat "$r/why")"
mkdir -p "$r/dev" && mknod "$r/dev/zero" c 1 5
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config=/dev/zero
dir_is /var/lib/kubelet/from-yaml "config.yaml"
printf 'volumePluginDir: /evil/users-config\n' >"$r/etc/kubelet/user.yaml" && chown 65534 "$r/etc/kubelet/user.yaml"
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config=/etc/kubelet/user.yaml
dir_is /var/lib/kubelet/from-yaml "config.yaml"
head -c 2000000 /dev/zero | tr '\0' '#' >"$r/etc/kubelet/big.yaml" && echo 'volumePluginDir: /evil/big' >>"$r/etc/kubelet/big.yaml"
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config=/etc/kubelet/big.yaml
dir_is /var/lib/kubelet/from-yaml "config.yaml"
echo "ok: FIFO, device, user-owned and oversized --config ignored"

# A dir with a terminal escape is refused without printing it.
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet $'--volume-plugin-dir=/x\e]2;owned\a'
if m plugin-dir >"$r/out" 2>"$r/why"; then fail "a dir with an escape was accepted"; fi
if grep -q $'\e' "$r/why" "$r/out"; then fail "an escape sequence was printed: $(od -c "$r/why" | head)"; fi
grep -q "not a clean absolute path" "$r/why" || fail "no clear message: $(cat "$r/why")"
echo "ok: escape-laden dir refused, nothing unchecked printed"

# Issue 28 item 6: JSON KubeletConfiguration, --config-dir drop-ins
# (sorted, the last wins over --config).
printf '{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","volumePluginDir":"/srv/from-json"}\n' >"$r/etc/kubelet/cfg.json"
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config=/etc/kubelet/cfg.json
dir_is /srv/from-json "cfg.json (--config of"
mkdir -p "$r/etc/kubelet/conf.d"
printf 'volumePluginDir: /srv/from-dropin-10\n' >"$r/etc/kubelet/conf.d/10-a.conf"
printf '{"volumePluginDir": "/srv/from-dropin-20"}\n' >"$r/etc/kubelet/conf.d/20-b.conf"
printf 'volumePluginDir: /srv/ignored\n' >"$r/etc/kubelet/conf.d/30-c.yaml"
printf 'volumePluginDir: /evil/escape-name\n' >"$r/etc/kubelet/conf.d/"$'99-\e[2J.conf'
chown 65534 "$r/etc/kubelet/conf.d/"$'99-\e[2J.conf'
proc 4242 0 $host_ns "$r/usr/bin/kubelet" /usr/bin/kubelet --config=/etc/kubelet/cfg.json --config-dir /etc/kubelet/conf.d
dir_is /srv/from-dropin-20 "20-b.conf (--config-dir of"
if grep -q $'\e' "$r/why"; then fail "a drop-in name with an escape was printed"; fi
rm -rf "$r/proc/4242"

# Issue 28 item 2: kubelet stopped; its unit's drop-in sets the flag
# through an environment variable and an EnvironmentFile.
mkdir -p "$r/lib/systemd/system" "$r/etc/systemd/system/kubelet.service.d"
printf '[Service]\nExecStart=/usr/bin/kubelet\n' >"$r/lib/systemd/system/kubelet.service"
cat >"$r/etc/systemd/system/kubelet.service.d/10-kubeadm.conf" <<'EOF'
[Service]
Environment="KUBELET_CONFIG_ARGS=--config=/etc/kubelet/cfg.yaml" "KUBELET_X=1"
# Environment="KUBELET_CONFIG_ARGS=--volume-plugin-dir=/commented"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS
EOF
dir_is /srv/from-running-config "--config of kubelet.service"
echo 'KUBELET_KUBEADM_ARGS="--volume-plugin-dir=/srv/from-unit-env"' >"$r/var/lib/kubelet/kubeadm-flags.env"
dir_is /srv/from-unit-env "volume-plugin-dir of kubelet.service"
rm -rf "$r/lib/systemd" "$r/etc/systemd" "$r/var/lib/kubelet/kubeadm-flags.env"

# nodevold.conf outranks everything; commented lines do not count.
printf '# kubelet-plugin-dir = /commented\nkubelet-plugin-dir = /etc/from-conf/   # trailing comment\n' \
  >"$r/etc/nodevol/nodevold.conf"
dir_is /etc/from-conf "nodevold.conf"

printf 'kubelet-plugin-dir = ../relative\n' >"$r/etc/nodevol/nodevold.conf"
if m plugin-dir 2>"$r/why"; then fail "a relative plugin dir was accepted"; fi
grep -q "not a clean absolute path" "$r/why" || fail "no clear message for a relative dir: $(cat "$r/why")"
echo "ok: relative dir refused"

# A plugin dir that cannot be made: a clear failure naming the way out.
: >"$r/blocked"
printf 'kubelet-plugin-dir = /blocked/plugins\n' >"$r/etc/nodevol/nodevold.conf"
if m install-driver 2>"$r/why"; then fail "install-driver succeeded into an impossible dir"; fi
grep -q "set kubelet-plugin-dir in /etc/nodevol/nodevold.conf" "$r/why" || fail "no way out named: $(cat "$r/why")"
[[ ! -e $r/var/lib/nodevol/package/driver-dir ]] || fail "a failed install was recorded"
echo "ok: impossible plugin dir refused with a way out"

# install-driver: the real nodevol-flex copies itself in; init answers.
printf 'kubelet-plugin-dir = /plugins/a\n' >"$r/etc/nodevol/nodevold.conf"
m install-driver
drv=$r/plugins/a/nodevol.io~volume/volume
[[ -x $drv ]] || fail "no executable driver at $drv"
"$drv" init | grep -q '"status":"Success"' || fail "installed driver's init: $("$drv" init)"
[[ -z $(find "$r/plugins/a" -name '.*') ]] || fail "dot files left: $(find "$r/plugins/a" -name '.*')"
[[ $(cat "$r/var/lib/nodevol/package/driver-dir") == /plugins/a ]] || fail "install not recorded"
echo "ok: driver installed, init answers"

# An older nodevold still serving (its Node API socket, no flex door: its
# restart was forbidden or failed): the driver in place stays; once the
# door is there, it is replaced.
sock() { perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 1) or die "$!"' "$1"; }
mkdir -p "$r/run/nodevol"
sock "$r/run/nodevol/nodevold.sock" || fail "making a socket"
ino=$(stat -c %i "$drv")
out=$(m install-driver 2>&1) || fail "install-driver failed beside an older daemon: $out"
[[ $(stat -c %i "$drv") == "$ino" ]] || fail "the driver was replaced in front of a daemon without a flex door"
grep -q "older than this package" <<<"$out" || fail "no word of the older daemon: $out"
sock "$r/run/nodevol/nodevold.sock.flex" || fail "making the door socket"
m install-driver
[[ $(stat -c %i "$drv") != "$ino" ]] || fail "the driver was not replaced once the door served"
rm -f "$r/run/nodevol/nodevold.sock" "$r/run/nodevol/nodevold.sock.flex"
echo "ok: an older daemon without a flex door keeps the driver in place; with the door it is replaced"

# Issue 28 item 1: the same dir under other spellings ("//", a symlink)
# is not an old dir to clean up.
m install-driver
printf 'kubelet-plugin-dir = /plugins//a/\n' >"$r/etc/nodevol/nodevold.conf"
m install-driver
[[ -x $drv ]] || fail "'/plugins//a/' removed the driver from /plugins/a"
ln -s plugins "$r/plugins-link"
printf 'kubelet-plugin-dir = /plugins-link/a\n' >"$r/etc/nodevol/nodevold.conf"
m install-driver
[[ -x $drv ]] || fail "the symlinked spelling /plugins-link/a removed the driver from /plugins/a"
echo "ok: the same dir under three spellings keeps its driver"

# An explicit change moves the driver.
printf 'kubelet-plugin-dir = /plugins/b\n' >"$r/etc/nodevol/nodevold.conf"
m install-driver
[[ -x $r/plugins/b/nodevol.io~volume/volume ]] || fail "driver not in the new dir"
[[ ! -e $r/plugins/a/nodevol.io~volume ]] || fail "driver left in the old dir"
echo "ok: driver follows an explicitly changed plugin dir"

# Issue 28 item 2: with kubelet stopped and nothing else to go on, the
# recorded dir stays (no install into the default, no removal).
rm -f "$r/etc/nodevol/nodevold.conf" "$r/var/lib/kubelet/config.yaml" "$r/etc/default/kubelet"
m install-driver 2>"$r/why"
[[ -x $r/plugins/b/nodevol.io~volume/volume ]] || fail "the fallback removed the driver from the recorded dir: $(cat "$r/why")"
[[ ! -e $r$default/nodevol.io~volume ]] || fail "the fallback installed into the default dir"
grep -q "the dir of the last install" "$r/why" || fail "no reason given: $(cat "$r/why")"
echo "ok: kubelet stopped: the driver stays in the recorded dir"
# A dir found (not set) elsewhere: installed there, the old copy kept.
echo 'volumePluginDir: /plugins/c' >"$r/var/lib/kubelet/config.yaml"
m install-driver 2>"$r/why"
[[ -x $r/plugins/c/nodevol.io~volume/volume && -x $r/plugins/b/nodevol.io~volume/volume ]] ||
  fail "a found dir should add the driver and keep the old copy: $(cat "$r/why")"
echo "ok: a found dir adds the driver, the old copy stays"

# remove-driver removes it from every recorded dir, even when the config
# changed since.
printf 'kubelet-plugin-dir = /plugins/d\n' >"$r/etc/nodevol/nodevold.conf"
m remove-driver
for d in b c; do
  [[ ! -e $r/plugins/$d/nodevol.io~volume ]] || fail "driver still in /plugins/$d after remove-driver"
  [[ -z $(ls -A "$r/plugins/$d") ]] || fail "leftovers in plugin dir: $(ls -A "$r/plugins/$d")"
done
echo "ok: driver removed"

# Issue 28 item 7: removal refused while pod volumes are published.
mkdir -p "$r/srv/state/publications"
printf 'state-dir = /srv/state\n' >"$r/etc/nodevol/nodevold.conf"
: >"$r/srv/state/publications/abc.json"
if m check-published 2>"$r/why"; then fail "check-published passed with a publication"; fi
grep -q "1 pod volume(s) are still published" "$r/why" || fail "unclear refusal: $(cat "$r/why")"
NODEVOL_REMOVE_WITH_MOUNTS=yes m check-published || fail "the override did not apply"
chmod 000 "$r/srv/state/publications"
if [[ $(id -u) != 0 ]] && m check-published 2>/dev/null; then fail "an unreadable publications dir counted as none"; fi
chmod 755 "$r/srv/state/publications"
rm "$r/srv/state/publications/abc.json"
m check-published || fail "check-published failed with no publication"
echo "ok: removal refused while published, unless overridden"

echo PASS
