// SyncContent: one pass of the snapshot controller over one
// VolumeSnapshotContent (key = its name): the CSI snapshotter sidecar's
// part for driver nodevol.io (csi-contract.md §5), over the Node API:
//
//   not ours                                   -> done
//   being deleted and the snapshot-controller let it go
//     policy Delete: DeleteSnapshot on the handle's node, clear the status
//     drop the bound-protection finalizer      -> done
//   dynamic (spec.source.volumeHandle), no status yet, or not ready
//     being-created annotation; CreateSnapshot "snapshot-<VolumeSnapshot uid>"
//     on the source PV's node; status: snapshotHandle "<node>/<name>",
//     readyToUse, creationTime (ns), restoreSize; annotation dropped
//   static (spec.source.snapshotHandle)        -> GetSnapshot, the same status
//   failure                                    -> status.error and a Warning
//                                                 event, retry with backoff
//
// Every step is idempotent (the name is the VolumeSnapshot's uid), so a
// provisioner killed anywhere finishes the same snapshot on its next pass.
// The being-created annotation is dropped on a definite refusal only, so a
// snapshot that may exist is never forgotten by a content deleted meanwhile.
#pragma once

#include <string>

#include "controller/context.h"
#include "kube/informer.h"
#include "queue/workers.h"

namespace nodevol::provisioner {

Workers::Outcome SyncContent(ControllerContext& ctx, kube::Informer* contents, const std::string& name);

}  // namespace nodevol::provisioner
