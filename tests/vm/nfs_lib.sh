# NFS server helpers for the NFS VM tests (sourced after $VM_LIB).
#
# The guest's root is an overlay, which nfsd cannot export, and NFSv4
# mounts reach an export through the server's pseudo-root, which includes
# "/" (the overlay) unless an export is the root itself: so the export is a
# tmpfs at /srv/nfs marked fsid=0, the NFSv4 root, mounted as "SERVER:/".
# No systemd: rpcbind, mountd and the kernel nfsd are started by hand.

NFS_EXPORT=/srv/nfs

# nfs_server_start [TMPFS SIZE | DIR]: an export at $NFS_EXPORT, served on
# loopback: a fresh tmpfs, or DIR (on a disk, to outlive a power cut)
# bind-mounted there.
nfs_server_start() {
  local size=${1:-64m} m
  for m in nfsd nfs nfsv3 nfsv4; do modprobe "$m" || vm_fail "modprobe $m"; done
  mkdir -p "$NFS_EXPORT" /var/lib/nfs/rpc_pipefs /run/rpcbind
  if [[ $size == /* ]]; then
    mount --bind "$size" "$NFS_EXPORT" || vm_fail "bind $size at $NFS_EXPORT"
  else
    mount -t tmpfs -o "size=$size,mode=0755" tmpfs "$NFS_EXPORT"
  fi
  mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
  mountpoint -q /var/lib/nfs/rpc_pipefs || mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs
  echo "$NFS_EXPORT 127.0.0.1(rw,sync,no_subtree_check,no_root_squash,fsid=0)" >/etc/exports
  rpcbind -w || vm_fail "rpcbind"
  exportfs -ra || vm_fail "exportfs"
  rpc.mountd || vm_fail "rpc.mountd"
  rpc.nfsd 4 || vm_fail "rpc.nfsd"
  vm_log "nfsd serves $NFS_EXPORT (versions: $(cat /proc/fs/nfsd/versions))"
}

# nfs_export_leftovers: what the export holds besides the directory of
# shared records (.nodevol/volumes): nothing once every volume is deleted.
nfs_export_leftovers() { (cd "$NFS_EXPORT" && find . -mindepth 1 ! -path ./.nodevol ! -path ./.nodevol/volumes); }

# nfs_server_stop: nfsd stops answering (no threads); clients with hard
# mounts wait, exactly as for a server that died.
nfs_server_stop() { rpc.nfsd 0; vm_log "nfsd stopped (threads: $(cat /proc/fs/nfsd/threads))"; }
nfs_server_resume() { rpc.nfsd 4; vm_log "nfsd answers again (threads: $(cat /proc/fs/nfsd/threads))"; }

# /proc/self/mountinfo as "id dev root target fstype source options" lines
# (the optional fields before " - " vary in number).
nfs_mountinfo() {
  awk '{for (i = 7; i <= NF; i++) if ($i == "-") break; print $1, $3, $4, $5, $(i + 1), $(i + 2), $6 "," $(i + 3)}' \
    /proc/self/mountinfo
}
# NFS mounts below DIR (staging mounts and binds alike), in that format.
nfs_mounts_below() { nfs_mountinfo | awk -v d="$1/" 'index($4, d) == 1 && ($5 == "nfs4" || $5 == "nfs")'; }
# The staging mounts: NFS mounts at <state>/nfs/<16 hex digits>.
nfs_staging_mounts() {
  nfs_mounts_below "$VM_STATE/nfs" | awk -v s="$VM_STATE/nfs/" '{n = substr($4, length(s) + 1)} n ~ /^[0-9a-f]+$/ && length(n) == 16'
}
# The mount at exactly PATH, in that format ("" when none).
nfs_mount_at() { nfs_mountinfo | awk -v t="$1" '$4 == t' | tail -1; }
# Device (maj:min) of the mount at exactly PATH.
nfs_dev_of() { nfs_mount_at "$1" | awk '{print $2}'; }

# nfs_expect_unmounted WHY: no NFS mount below the state dir, allowing a
# few seconds for a capacity poll's short-lived mount of the export to go.
nfs_expect_unmounted() {
  for _ in $(seq 50); do [[ -z $(nfs_mounts_below "$VM_STATE/nfs") ]] && return 0; sleep 0.1; done
  vm_fail "$1: $(nfs_mounts_below "$VM_STATE/nfs")"
}

# Milliseconds since the epoch (for wall-clock bounds, which include a
# nodevolctl start: slow and noisy under TCG on a loaded host).
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# daemon_ms METHOD PATTERN: how long nodevold itself took (duration_ms of its
# log line, whole ms) for the last METHOD call whose line matches PATTERN.
daemon_ms() {
  local d
  d=$(grep " $1 " "${VM_NODEVOLD_LOG:?}" | grep -- "$2" | tail -1 | sed -n 's/.*duration_ms=\([0-9]*\).*/\1/p')
  [[ -n $d ]] || vm_fail "no $1 call matching '$2' in the nodevold log"
  echo "$d"
}
