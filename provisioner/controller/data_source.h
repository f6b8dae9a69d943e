// ResolveDataSource: what a claim's volume is to be made from, read from
// spec.dataSourceRef (else spec.dataSource): a VolumeSnapshot of driver
// nodevol.io (through its bound VolumeSnapshotContent's handle,
// snapshots/handle.h) or a claim of the same namespace and class whose PV
// is ours. Local storage: the volume can only be made on the node the
// source lives on; nodevold checks pool, size, filesystem and block-ness
// again (docs/snapshots.md).
//
//   no data source                          -> OK, kind kNone
//   a source, usable now                    -> OK, its node, name, least size
//   not usable yet (not ready, not bound, not there yet)
//                                           -> FAILED_PRECONDITION / NOT_FOUND: retry
//   never usable as asked (another driver, another namespace or class,
//   a request smaller than the source)     -> INVALID_ARGUMENT: give up until the claim changes
//   a kind nodevol does not fill (a volume populator's)
//                                           -> UNIMPLEMENTED: not ours to provision
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "controller/claim.h"
#include "controller/context.h"

namespace nodevol::provisioner {

struct VolumeSource {
  enum class Kind { kNone, kSnapshot, kVolume } kind = Kind::kNone;
  std::string node;         // the volume must be made here
  std::string name;         // the node-side snapshot or volume name
  uint64_t min_bytes = 0;   // the snapshot's restoreSize, the source volume's capacity
  std::string description;  // "VolumeSnapshot app/before-upgrade", for messages
};

Status ResolveDataSource(ControllerContext& ctx, const ClaimView& claim, VolumeSource* out);

}  // namespace nodevol::provisioner
