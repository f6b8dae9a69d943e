// The names nodevol-provisioner writes into the cluster, in one place.
#pragma once

namespace nodevol::provisioner {

// The StorageClass provisioner nodevol serves. A DNS subdomain, because it is
// also the name of the CSIDriver object that turns on kube-scheduler's
// capacity check (docs/scheduling.md) and of the CSI driver.
inline constexpr const char* kProvisionerName = "nodevol.io";
// The name before 0.2: classes that still say it are provisioned (a class's
// provisioner cannot be changed) but get no capacity objects, and PVs
// provisioned under it are deleted and resized as before.
inline constexpr const char* kLegacyProvisionerName = "nodevol.io/provisioner";
// The Lease the replicas elect a leader with: the name it had before the
// rename, so old and new replicas of a rolling upgrade compete for one lease.
inline constexpr const char* kDefaultLeaseName = "nodevol.io-provisioner";
inline constexpr const char* kFlexDriver = "nodevol.io/volume";
// PV controller's hand-over annotations (provisioner-contract.md §1).
inline constexpr const char* kAnnStorageProvisioner = "volume.kubernetes.io/storage-provisioner";
inline constexpr const char* kAnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner";
inline constexpr const char* kAnnBetaStorageClass = "volume.beta.kubernetes.io/storage-class";
inline constexpr const char* kAnnSelectedNode = "volume.kubernetes.io/selected-node";
inline constexpr const char* kAnnProvisionedBy = "pv.kubernetes.io/provisioned-by";
inline constexpr const char* kFinalizer = "external-provisioner.volume.kubernetes.io/finalizer";
// On our PVs: where the backing volume lives, even after the class is gone.
inline constexpr const char* kAnnNode = "nodevol.io/node";
inline constexpr const char* kAnnPool = "nodevol.io/pool";
inline constexpr const char* kAnnBackend = "nodevol.io/backend";
// On claims: the node CreateVolume was last sent to (controller/attempts.h).
inline constexpr const char* kAnnProvisioningNode = "nodevol.io/provisioning-node";
// kubectl apply's copy of the object it applied (never read here).
inline constexpr const char* kAnnLastApplied = "kubectl.kubernetes.io/last-applied-configuration";
// On Nodes: free bytes per pool, mirrored from nodevold (`kubectl describe node`).
inline constexpr const char* kAnnCapacityPrefix = "capacity.nodevol.io/";
// Where an enrolled nodevold listens (mountd/enroll/enroller.h).
inline constexpr const char* kAnnEndpoint = "nodevol.io/endpoint";

}  // namespace nodevol::provisioner
