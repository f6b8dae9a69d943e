// The CSI driver nodevold is, as Kubernetes names it: the CSIDriver
// object, the provisioner's spec.csi PVs (driver) and kubelet's plugin
// registration must all say the same.
#pragma once

namespace nodevol::csi {

inline constexpr char kDriverName[] = "nodevol.io";

// The topology segment NodeGetInfo reports and CreateVolume answers with:
// kubelet labels the Node with it and lists the key in CSINode.
inline constexpr char kTopologyKey[] = "topology.nodevol.io/node";

// volume_context keys. Ours: the pool a volume lives in (NodePublish
// finds another node's NFS volume by it) and, for inline volumes, what a
// pod author may ask for. kubelet's (CSIDriver podInfoOnMount: true):
// who the pod is, and whether the volume is an inline one.
inline constexpr char kPoolKey[] = "pool";
inline constexpr char kSizeKey[] = "size";
inline constexpr char kFsTypeKey[] = "fsType";
inline constexpr char kPodName[] = "csi.storage.k8s.io/pod.name";
inline constexpr char kPodNamespace[] = "csi.storage.k8s.io/pod.namespace";
inline constexpr char kPodUid[] = "csi.storage.k8s.io/pod.uid";
inline constexpr char kServiceAccount[] = "csi.storage.k8s.io/serviceAccount.name";
inline constexpr char kEphemeral[] = "csi.storage.k8s.io/ephemeral";
// Keys Kubernetes reserves for itself in volume_context and parameters.
inline constexpr char kReservedPrefix[] = "csi.storage.k8s.io/";

}  // namespace nodevol::csi
