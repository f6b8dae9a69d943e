#!/bin/bash
# The nodevol-node rpm against the deb built from the same tree:
#   (a) the same files with the same modes and the same config files, but
#       for the differences listed in deb_to_rpm below;
#   (b) its scriptlets pass sh -n and bash -n;
#   (c) installed with rpm into scratch roots, twice: without systemd
#       (an image build or a container: the install must still work) and
#       with a recording fake systemctl and /run/systemd/system (the calls
#       systemd would get). In each root: install, erase (state kept),
#       install again, edit the config, upgrade to the same files
#       repackaged as a higher version (build-rpm --tree: a real rpm
#       upgrade without a rebuild; its scriptlets are the source tree's
#       spec's), erase.
# The scriptlets run for real, chrooted by rpm into the root, which holds
# the few programs they use (sh, bash, coreutils, sed, find) and a /proc of
# its own (nodevol-flex install copies /proc/self/exe); so the real maint
# installs the real nodevol-flex into kubelet's default plugin dir there.
# Not exercised: a real systemd starting nodevold (tests/vm does that with
# the deb), RHEL's dependency resolution (--nodeps: the rpm is built on
# Debian, its library dependencies name Debian's sonames).
#
#   rpm_test.sh DEB RPM BUILD_RPM
#   rpm_test.sh --dist DIR VERSION BUILD_RPM   (nodevol-node_VERSION_*.deb
#                                              and nodevol-node-VERSION-1*.rpm in DIR)
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
usage="usage: rpm_test.sh DEB RPM BUILD_RPM | --dist DIR VERSION BUILD_RPM"
if [[ ${1:-} == --dist ]]; then
  dist=${2:?$usage} version=${3:?$usage} build_rpm=${4:?$usage}
  debs=("$dist"/nodevol-node_"$version"_*.deb) rpms=("$dist"/nodevol-node-"$version"-1*.rpm)
  [[ -f ${debs[0]} && -f ${rpms[0]} ]] ||
    fail "no nodevol-node $version .deb and .rpm in $dist: build them first with scripts/package --out $dist (scripts/test does)"
  deb=${debs[0]} rpm=${rpms[0]}
else
  deb=${1:?$usage} rpm=${2:?$usage} build_rpm=${3:?$usage}
fi
[[ -f $deb ]] || fail "$deb: no such .deb"
[[ -f $rpm ]] || fail "$rpm: no such .rpm"
deb=$(realpath "$deb") rpm=$(realpath "$rpm") build_rpm=$(realpath "$build_rpm")
echo "deb: $deb"
echo "rpm: $rpm"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# --- (a) file lists ---------------------------------------------------------
# "MODE PATH" for every file that is not a directory.
dpkg-deb --fsys-tarfile "$deb" | tar -tvf - |
  awk '$1 !~ /^d/ { p = $6; sub(/^\./, "", p); print $1, p }' | sort >"$t/deb.files"
# The rpm's /usr/lib/.build-id links (rpm's convention on RHEL: they tie
# each binary to its debuginfo) have no counterpart in a deb.
rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpm" | awk '$1 !~ /^d/ && $2 !~ "^/usr/lib/[.]build-id/"' |
  sort >"$t/rpm.files"
# The documented differences (packaging/rpm/README.md): Debian's unit dir
# is /lib/systemd/system, RHEL's /usr/lib/systemd/system; changelog.gz
# (changelog.Debian.gz for a non-native version) is a Debian policy file
# (the rpm has %changelog in its header), as is the lintian override
# (nodevol-flex is static-pie); the licence is Debian's
# doc/copyright and RHEL's licenses/<package>/LICENSE.
deb_to_rpm() {
  sed -E -e 's# /lib/systemd/system/# /usr/lib/systemd/system/#' \
         -e '\# /usr/share/doc/nodevol-node/changelog(\.Debian)?\.gz$#d' \
         -e '\# /usr/share/lintian/overrides/nodevol-node$#d' \
         -e 's# /usr/share/doc/nodevol-node/copyright$# /usr/share/licenses/nodevol-node/LICENSE#'
}
deb_to_rpm <"$t/deb.files" | sort >"$t/deb.mapped"
if ! diff -u "$t/deb.mapped" "$t/rpm.files" >"$t/files.diff"; then
  cat "$t/files.diff" >&2
  fail "the rpm's files differ from the deb's (- deb mapped to rpm paths, + rpm) beyond the documented differences"
fi
grep -q ' /usr/share/doc/nodevol-node/copyright$' "$t/deb.files" ||
  fail "mapping out of date: the deb has no copyright file to map away"
echo "ok: same $(wc -l <"$t/rpm.files") files and modes as the deb, unit dir and Debian policy files aside"
# Directories the rpm owns must be the package's own, and in the deb.
rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpm" | awk '$1 ~ /^d/ && $2 !~ "^/usr/lib/[.]build-id" { print $2 }' |
  sort >"$t/rpm.dirs"
[[ $(cat "$t/rpm.dirs") == $'/etc/nodevol\n/usr/lib/nodevol\n/usr/share/doc/nodevol-node\n/usr/share/licenses/nodevol-node' ]] ||
  fail "the rpm owns directories $(tr '\n' ' ' <"$t/rpm.dirs"), want /etc/nodevol /usr/lib/nodevol /usr/share/doc/nodevol-node /usr/share/licenses/nodevol-node"
dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles | sort >"$t/deb.conf"
rpm -qcp "$rpm" | sort >"$t/rpm.conf"
diff -u "$t/deb.conf" "$t/rpm.conf" || fail "config files differ (- deb conffiles, + rpm %config)"
rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpm" | grep -q '^cn /etc/nodevol/nodevold.conf$' ||
  fail "/etc/nodevol/nodevold.conf is not %config(noreplace)"
echo "ok: config files: $(tr '\n' ' ' <"$t/rpm.conf")(noreplace)"

# --- (b) scriptlets ----------------------------------------------------------
for s in PREIN POSTIN PREUN POSTUN POSTTRANS; do
  # rpm prints "(none)" for a missing scriptlet.
  rpm -qp --qf "%{$s}" "$rpm" | sed '1{/^(none)$/d}' >"$t/$s"
  prog=$(rpm -qp --qf "%{${s}PROG}" "$rpm")
  [[ $s == PREIN ]] && { [[ ! -s $t/$s ]] || fail "unexpected %pre"; continue; }
  [[ -s $t/$s ]] || fail "no $s scriptlet"
  [[ $prog == /bin/sh ]] || fail "$s runs with $prog, want /bin/sh"
  sh -n "$t/$s" || fail "$s: sh -n"
  bash -n "$t/$s" || fail "$s: bash -n"
done
echo "ok: %post, %preun, %postun, %posttrans pass sh -n and bash -n"

# --- (c) install, upgrade, erase in scratch roots ----------------------------
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP (c): installing into a scratch root needs root (chroot, mounts)"
  exit 77
fi
version=$(rpm -qp --qf '%{VERSION}' "$rpm")
# A higher version: one more numeric segment sorts newer in rpm, after
# any '+' or '~' (checked below by rpm itself: -U refuses a downgrade).
v2=$version.1
mkdir -p "$t/tree"
rpm2archive - <"$rpm" | tar -xzf - -C "$t/tree"
"$build_rpm" --tree "$t/tree" --version "$v2" --work "$t/rpmbuild" --out "$t/v2" >"$t/build-v2.log" 2>&1 ||
  { cat "$t/build-v2.log" >&2; fail "build-rpm --tree for the upgrade package"; }
rpm2=$(ls "$t"/v2/nodevol-node-"$v2"-1*.rpm)

# make_root DIR: the programs the scriptlets and maint run, with their
# libraries, and the libraries nodevol-flex needs.
make_root() {
  local r=$1 p l
  mkdir -p "$r"/usr/{bin,sbin,lib,lib64} "$r"/{proc,dev,tmp,var/tmp,etc} "$r/var/lib/rpm"
  for l in bin sbin lib lib64; do ln -s usr/$l "$r/$l"; done
  touch "$r/dev/null"
  for p in sh dash bash install mkdir cat mv rm sed tail tr find wc printf echo ls \
           grep sort head stat readlink timeout md5sum cut dirname; do
    p=$(command -v "$p" | head -1)
    [[ $p == /* ]] || continue
    cp -L "$p" "$r/usr/bin/$(basename "$p")"
    echo "$p"
  done >"$t/progs"
  { cat "$t/progs"; echo "$t/tree/usr/lib/nodevol/nodevol-flex"; } | xargs ldd 2>/dev/null |
    grep -oE '/[^ ]+\.so[^ ]*' | sort -u | while read -r l; do
      mkdir -p "$r$(dirname "$l")"
      cp -L "$l" "$r$l"
    done
}

# in_root R CMD...: run CMD (an rpm --root R command) in private mount and
# pid namespaces: R gets /dev/null and a /proc that shows only this
# process tree (not a kubelet running on this host, which maint would read).
in_root() {
  local r=$1
  shift
  unshare --mount --pid --fork --propagation private -- bash -c '
    r=$1; shift
    mount --bind /dev/null "$r/dev/null"
    mount -t proc proc "$r/proc"
    "$@"' in_root "$r" "$@"
}
rpm_in() { local r=$1; shift; in_root "$r" rpm --root "$r" --dbpath /var/lib/rpm "$@"; }

plugin=/usr/libexec/kubernetes/kubelet-plugins/volume/exec/nodevol.io~volume/volume
conf=/etc/nodevol/nodevold.conf

scenario() {  # scenario NAME SYSTEMD(yes|no)
  local name=$1 systemd=$2 r=$t/root-$1
  echo "--- scratch root: $name"
  make_root "$r"
  if [[ $systemd == yes ]]; then
    mkdir -p "$r/run/systemd/system"
    # try-restart also notes which driver file kubelet would run then
    # (its inode: the install renames a new file into place).
    printf '#!/bin/sh\necho "$*" >>/systemctl.log\n[ "$1" != try-restart ] || stat -c %%i "%s" >/driver-at-restart\n' \
      "$plugin" >"$r/usr/bin/systemctl"
    chmod 0755 "$r/usr/bin/systemctl"
  fi
  rpm_in "$r" --initdb
  # The package under test's own install and erase, with state kept
  # across: a reinstall finds its volume records.
  install_v1 "$name"
  mkdir -p "$r/var/lib/nodevol/volumes"
  echo '{}' >"$r/var/lib/nodevol/volumes/v1.json"
  erase "$name" "$version"
  [[ ! -e $r$conf ]] || fail "$name: rpm -e left an unedited $conf"
  # Again, then upgrade: the old package's %preun/%postun with $1 = 1 are
  # the package under test's; the new one's scriptlets are the spec's in
  # the source tree (build-rpm --tree).
  install_v1 "$name"
  echo "node-name = edited-by-test" >>"$r$conf"
  rpm_in "$r" -U --nodeps "$rpm2" >"$t/out" 2>&1 || { cat "$t/out" >&2; fail "$name: rpm -U to $v2"; }
  cat "$t/out"
  [[ $(rpm_in "$r" -q --qf '%{VERSION}' nodevol-node) == "$v2" ]] || fail "$name: after rpm -U the installed version is not $v2"
  grep -q '^node-name = edited-by-test$' "$r$conf" || fail "$name: the upgrade lost the edit of $conf"
  [[ ! -e $r$conf.rpmnew && ! -e $r$conf.rpmsave ]] || fail "$name: the upgrade made .rpmnew/.rpmsave for an unchanged packaged config"
  [[ -x $r$plugin ]] || fail "$name: the driver is gone after the upgrade"
  echo "ok: upgraded to $v2; the config edit is in place, the driver too"
  if [[ $systemd == yes ]]; then
    # The new driver goes in only after the old package's %postun
    # restarted nodevold: a driver must never be newer than the daemon
    # answering it (0.1.0's daemon had no flex door).
    [[ -f $r/driver-at-restart ]] || fail "$name: the upgrade did not try-restart nodevold"
    [[ $(stat -c %i "$r$plugin") != "$(<"$r/driver-at-restart")" ]] ||
      fail "$name: the upgrade installed the new driver before nodevold restarted"
    echo "ok: the new driver went into the plugin dir after nodevold's restart"
  fi
  erase "$name" "$v2"
  [[ -f $r$conf.rpmsave ]] || fail "$name: rpm -e did not keep the edited config as $conf.rpmsave"
  echo "ok: the edited config stays as $conf.rpmsave"
  if [[ $systemd == yes ]]; then
    # install: enable, daemon-reload, start; erase: disable --now, then
    # daemon-reload; upgrade (the old package's %postun): daemon-reload and
    # try-restart, nothing that stops first.
    printf '%s\n' "enable nodevold.service" "daemon-reload" "start nodevold.service" \
      "disable --now nodevold.service" "daemon-reload" \
      "enable nodevold.service" "daemon-reload" "start nodevold.service" \
      "daemon-reload" "try-restart nodevold.service" \
      "disable --now nodevold.service" "daemon-reload" >"$t/want.log"
    # maint's read-only question for kubelet's MainPID (its plugin dir) is
    # not one of the calls that start, stop or enable anything.
    grep -v '^show -p MainPID --value kubelet.service$' "$r/systemctl.log" >"$t/got.log" || true
    diff -u "$t/want.log" "$t/got.log" || fail "$name: systemctl calls (- want, + got)"
    echo "ok: systemctl: $(paste -sd, "$r/systemctl.log")"
  else
    [[ ! -e $r/etc/systemd ]] || fail "$name: something wrote /etc/systemd without systemctl"
  fi
}

# install_v1 NAME, erase NAME VERSION: in root $r, with the checks every
# install and erase must pass.
install_v1() {
  rpm_in "$r" -i --nodeps "$rpm" >"$t/out" 2>&1 || { cat "$t/out" >&2; fail "$1: rpm -i"; }
  cat "$t/out"
  ! grep -qi 'warning\|error' "$t/out" || fail "$1: rpm -i printed a warning or error (above)"
  rpm_in "$r" -V --nodeps nodevol-node || fail "$1: rpm -V after install: files differ from the package"
  [[ -x $r$plugin ]] || fail "$1: %post did not install the driver at $plugin"
  cmp -s "$r$plugin" "$r/usr/lib/nodevol/nodevol-flex" || fail "$1: the driver in the plugin dir is not the package's nodevol-flex"
  [[ $(stat -c %a "$r/var/lib/nodevol/pools/default") == 700 ]] || fail "$1: /var/lib/nodevol/pools/default is not 0700"
  echo "ok: installed $version; the driver is in kubelet's plugin dir, the default pool dir is 0700"
}
erase() {
  rpm_in "$r" -e nodevol-node >"$t/out" 2>&1 || { cat "$t/out" >&2; fail "$1: rpm -e"; }
  cat "$t/out"
  [[ ! -e $r$plugin && ! -e $r/usr/sbin/nodevold ]] || fail "$1: driver or daemon left after rpm -e of $2"
  [[ ! -e $r/var/lib/nodevol/package/driver-dir ]] || fail "$1: maint's driver record left after rpm -e of $2"
  [[ -f $r/var/lib/nodevol/volumes/v1.json && -d $r/var/lib/nodevol/pools/default ]] ||
    fail "$1: rpm -e of $2 removed state in /var/lib/nodevol"
  echo "ok: erased $2; the driver is gone, /var/lib/nodevol stays"
}

scenario no-systemd no
scenario systemd yes
echo "PASS"
