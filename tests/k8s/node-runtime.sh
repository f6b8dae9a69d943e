# The node's container runtime for the Kubernetes tests, shared by
# cluster-up (node on the host) and vm-node (node in a guest):
#   source tests/k8s/node-runtime.sh
#   runtime_config DIR CNI_DIR RUNTIME_BIN [SNAPSHOTTER]
# writes DIR/config.toml for containerd 2.x (tests/k8s/build-runtime; config
# version 3: CRI's images and runtime are two plugins) and CNI_DIR/net.d with
# a bridge network; root, state, sockets, runc root and netns mounts all live
# below DIR, so a test's containerd touches nothing of the machine's.
runtime_config() {
  local dir=$1 cni=$2 rbin=$3 snapshotter=${4:-overlayfs}
  mkdir -p "$dir" "$cni/net.d"
  cat >"$cni/net.d/10-nodevol.conflist" <<CNI
{"cniVersion": "1.0.0", "name": "nodevol-k8s", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$cni/ipam",
            "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
CNI
  cat >"$dir/config.toml" <<TOML
version = 3
root = "$dir/root"
state = "$dir/state"
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "$snapshotter"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  netns_mounts_under_state_dir = true
  # Lowering oom_score_adj fails on the test machine (runc: "failed to
  # update /proc/self/oom_score_adj: Permission denied" for the sandbox's
  # -998; no CAP_SYS_RESOURCE): clamp it to containerd's own instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$rbin/runc"
        Root = "$dir/runc"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$cni/net.d"
TOML
}
