// The snapshot API's names the provisioner reads and writes, as the CSI
// snapshotter sidecar uses them (csi-contract.md §5; external-snapshotter
// pkg/utils/util.go).
#pragma once

namespace nodevol::provisioner {

inline constexpr const char* kSnapshotApi = "/apis/snapshot.storage.k8s.io/v1";
inline constexpr const char* kSnapshotApiGroup = "snapshot.storage.k8s.io";
// Set while a CreateSnapshot may be in flight: the snapshot-controller
// does not let the content go before the backend snapshot can be deleted.
inline constexpr const char* kAnnBeingCreated = "snapshot.storage.kubernetes.io/volumesnapshot-being-created";
// Set by the snapshot-controller when the content is to go: delete the
// backend snapshot (policy Delete), then drop the finalizer.
inline constexpr const char* kAnnBeingDeleted = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";
// nodevol's own, set with kAnnBeingCreated: the node the CreateSnapshot
// went to, so that an uncertain create is settled there even when its
// source PV is gone by the next pass.
inline constexpr const char* kAnnSnapshotNode = "nodevol.io/snapshot-node";
// Every annotation a pass itself sets and clears: a change of only these
// is the pass's own write, never a reason to queue another (OnlyOurWrites).
inline constexpr const char* kPassAnnotations[] = {kAnnBeingCreated, kAnnSnapshotNode};
inline constexpr const char* kContentFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
// Class parameters with this prefix are the snapshotter's own (secrets),
// never the driver's.
inline constexpr const char* kCsiParamPrefix = "csi.storage.k8s.io/";

}  // namespace nodevol::provisioner
