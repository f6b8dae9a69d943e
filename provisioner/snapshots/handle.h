// Snapshot handles: how a VolumeSnapshotContent names a nodevol snapshot.
// A snapshot lives on one node, and a content names it alone (a static
// content has nothing else), so the handle carries the node:
// "<node>/<snapshot name>", e.g. "worker-1/snapshot-3f2a...". Node names
// are DNS subdomains and snapshot names have no "/", so the split is
// unambiguous. docs/snapshots.md, "In the cluster".
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace nodevol::provisioner {

struct SnapshotHandle {
  std::string node, name;
};

std::string FormatSnapshotHandle(const SnapshotHandle& h);
// INVALID_ARGUMENT naming the rule for anything but "<node>/<name>" with a
// DNS-subdomain node and a valid snapshot name (base/names.h).
Status ParseSnapshotHandle(std::string_view text, SnapshotHandle* out);

// The node-side name of the snapshot of VolumeSnapshot `uid`, as the CSI
// snapshotter names it ("snapshot-" + uid): the same VolumeSnapshot always
// asks for the same snapshot, so a retried create finds the first.
std::string SnapshotNameFor(const std::string& volume_snapshot_uid);

}  // namespace nodevol::provisioner
