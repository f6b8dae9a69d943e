#!/usr/bin/env bash
# csi-sanity (kubernetes-csi/csi-test, built by build-csi-sanity) against a
# real nodevold's CSI socket: Identity, the local Controller and Node, with
# real mounts, so run as root. Targets are made the way kubelet makes them,
# under the sandbox's <kubelet root>/pods/<uid>/volumes/kubernetes.io~csi/,
# since nodevold mounts nowhere else.
#
#   csi_sanity_test.sh NODEVOLD POOL_SPEC ACCESS SIZE
#     POOL_SPEC  a --pool for nodevold without name= (the pool is "sanity";
#                a "@" in it stands for the sandbox, e.g. backend=dir,path=@/pool)
#     ACCESS     mount | block (-csi.testvolumeaccesstype)
#     SIZE       bytes of each test volume
#
# Fails on any failed spec, and on skips other than those sanity-skips.txt
# lists (a capability gained or lost changes what is tested). Exit 77 when
# csi-sanity is not built or not root (CI: scripts/test builds it first).
# CSI_SANITY=PATH runs that csi-sanity instead of build-csi-sanity's (a VM
# guest, whose HOME is not the host's: tests/vm/csi_sanity_lvm_run); a
# CSI_SANITY that is not an executable fails the test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nodevold=$1 pool_spec=$2 access=$3 size=$4
[[ $(id -u) == 0 ]] || { echo "csi_sanity_test: needs root (real mounts)"; exit 77; }
if [[ -n ${CSI_SANITY:-} ]]; then
  [[ -x $CSI_SANITY ]] || { echo "csi_sanity_test: CSI_SANITY=$CSI_SANITY is not an executable"; exit 1; }
  sanity=$CSI_SANITY
else
  sanity=$("$here/build-csi-sanity" --check) || { echo "csi_sanity_test: csi-sanity not built: tests/csi/build-csi-sanity"; exit 77; }
fi

sb=$(mktemp -d /tmp/nodevol-csi-sanity.XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  # Anything left mounted below the sandbox is a leak; the test already
  # failed on it, this only tidies up.
  grep -o " $sb/[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$sb"
}
trap cleanup EXIT
kroot=$sb/kubelet
mkdir -p "$kroot/pods" "$sb/state" "$sb/pool"
: >"$sb/nodevold.conf"
"$nodevold" --config "$sb/nodevold.conf" --socket "$sb/nodevold.sock" --state-dir "$sb/state" \
  --kubelet-root "$kroot" --pool "name=sanity,${pool_spec//@/$sb}" --metrics-address off --csi-controller on \
  --log-target stderr --log-level debug 2>"$sb/nodevold.log" &
pid=$!
csi=$kroot/plugins/nodevol.io/csi.sock
# The Controller is on a socket of its own (docs/csi.md).
controller=$kroot/plugins/nodevol.io/controller.sock
for _ in $(seq 100); do [[ -S $csi && -S $controller ]] && break; sleep 0.1; done
[[ -S $csi && -S $controller ]] || { cat "$sb/nodevold.log"; echo "csi_sanity_test: no CSI socket $csi or $controller"; exit 1; }

# csi-sanity's path commands: the directory kubelet makes for a volume (a
# pod's <pods>/<uid>/volumes/kubernetes.io~csi/<pv>, or for raw block
# <kubelet root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>, where
# the driver makes the file <podUID>; csi-sanity's "target" stands for it),
# its removal, and what a path is now.
if [[ $access == block ]]; then
  cat >"$sb/mkpath" <<EOS
#!/bin/sh
d=$kroot/plugins/kubernetes.io/csi/volumeDevices/publish/pv-\$(cat /proc/sys/kernel/random/uuid)
mkdir -p "\$d" && echo "\$d"
EOS
  printf '#!/bin/sh\nrmdir "$1"\n' >"$sb/rmpath"
else
  cat >"$sb/mkpath" <<EOS
#!/bin/sh
d=$kroot/pods/\$(cat /proc/sys/kernel/random/uuid)/volumes/kubernetes.io~csi/pv-\$(basename "\$1")
mkdir -p "\$d" && echo "\$d"
EOS
  cat >"$sb/rmpath" <<'EOS'
#!/bin/sh
rmdir "$1" && rmdir "$(dirname "$(dirname "$(dirname "$1")")")/volumes/kubernetes.io~csi" "$(dirname "$(dirname "$(dirname "$1")")")/volumes" "$(dirname "$(dirname "$(dirname "$1")")")"
EOS
fi
cat >"$sb/checkpath" <<'EOS'
#!/bin/sh
if [ -L "$1" ]; then echo other; elif [ -d "$1" ]; then echo directory; elif [ -f "$1" ]; then echo file
elif [ -e "$1" ]; then echo other; else echo not_found; fi
EOS
chmod +x "$sb/mkpath" "$sb/rmpath" "$sb/checkpath"
# CSI_SANITY_PARAMS: more YAML lines of volume parameters (an NFS pool's
# pathPattern: csi-sanity passes no claim, and the default pattern needs one).
printf 'pool: sanity\n%s\n' "${CSI_SANITY_PARAMS:-}" >"$sb/params.yaml"

rc=0
"$sanity" -csi.endpoint "$csi" -csi.controllerendpoint "$controller" -csi.testvolumeaccesstype "$access" -csi.testvolumesize "$size" \
  -csi.testvolumeexpandsize "$((size * 2))" -csi.testvolumeparameters "$sb/params.yaml" \
  -csi.createmountpathcmd "$sb/mkpath" -csi.createstagingpathcmd "$sb/mkpath" \
  -csi.removemountpathcmd "$sb/rmpath" -csi.removestagingpathcmd "$sb/rmpath" -csi.checkpathcmd "$sb/checkpath" \
  -ginkgo.v -ginkgo.no-color >"$sb/sanity.out" 2>&1 || rc=$?
grep -E "^(Ran|SUCCESS|FAIL)|Passed \|" "$sb/sanity.out" || true
if ((rc != 0)); then
  grep -E "^\s*\[FAIL\]|\[FAILED\]" "$sb/sanity.out" | head -40 || true
  echo "--- nodevold log (tail)"; tail -60 "$sb/nodevold.log"
  echo "csi_sanity_test: csi-sanity failed (rc $rc)"; exit 1
fi

# Skips: exactly the listed ones.
seen=$(awk '/^S \[SKIPPED\]/{s=1; next} s && /\[SKIPPED\] [^i[]/{sub(/^ *\[SKIPPED\] /,""); print; s=0}' \
  "$sb/sanity.out" | sort -u)
# Pools that take snapshots (lvm thin, dir) run the snapshot and clone specs.
if [[ ,$pool_spec, == *,type=thin,* || ,$pool_spec, == *,backend=dir,* ]]; then drop='^nosnap: '; else drop='^snap: '; fi
listed=$(grep -v '^#' "$here/sanity-skips.txt" | grep -v "$drop" | sed -E 's/^(no)?snap: //; s/ \| .*//' | sort -u)
unexpected=$(comm -23 <(echo "$seen") <(echo "$listed"))
gone=$(comm -13 <(echo "$seen") <(echo "$listed"))
echo "skipped ($(grep -c '^S \[SKIPPED\]' "$sb/sanity.out") specs), by reason:"
echo "$seen" | sed 's/^/  /'
if [[ -n $unexpected ]]; then echo "csi_sanity_test: skips sanity-skips.txt does not list:"; echo "$unexpected"; exit 1; fi
if [[ $access == mount && -n $gone ]]; then
  echo "csi_sanity_test: listed skips that no longer happen (update sanity-skips.txt):"; echo "$gone"; exit 1
fi
# How many specs ran and skipped, exactly as recorded for this pool kind
# and access (sanity-counts.txt): the reasons above are de-duplicated, so a
# second spec skipped for a listed reason, or specs that stop running
# without a skip (a csi-sanity upgrade, a focus), change only these.
case ,$pool_spec, in
  *,backend=dir,*) kind=dir ;;
  *,type=thin,*) kind=thin ;;
  *,backend=nfs,*) kind=nfs ;;
  *) kind=thick ;;
esac
ran=$(sed -n 's/^Ran \([0-9]*\) of \([0-9]*\) Specs.*/\1 \2/p' "$sb/sanity.out" | tail -1)
skipped=$(grep -c '^S \[SKIPPED\]' "$sb/sanity.out" || true)
got="$kind $access ran=${ran% *} of=${ran#* } skipped=$skipped"
want=$(grep -v '^#' "$here/sanity-counts.txt" | grep "^$kind $access " || true)
echo "specs: $got"
if [[ $got != "$want" ]]; then
  echo "csi_sanity_test: sanity-counts.txt says '${want:-nothing for $kind $access}'; what is tested changed (update it, and say why in the commit)"
  exit 1
fi

# Nothing left behind: no mount below the sandbox, no volume.
if grep -q " $sb/" /proc/self/mountinfo; then
  grep " $sb/" /proc/self/mountinfo; echo "csi_sanity_test: mounts leaked"; exit 1
fi
left=$(find "$sb/state" -name '*.json' -path '*volumes*' | wc -l)
((left == 0)) || { find "$sb/state"; echo "csi_sanity_test: $left volume records left"; exit 1; }
echo "csi_sanity_test: ok"
