#include "snapshots/snapshot_controller.h"

#include <gtest/gtest.h>

#include "snapshots/names.h"

namespace nodevol::provisioner {
namespace {

using nlohmann::json;

json Content() {
  return {{"metadata", {{"name", "c"}, {"resourceVersion", "1"}, {"annotations", {{"a", "b"}}}}},
          {"spec", {{"driver", "nodevol.io"}, {"deletionPolicy", "Delete"}}}};
}

// A failed pass writes status and toggles its annotations (being-created,
// snapshot-node): queueing on those would retry at once, forever, past
// the backoff.
TEST(SnapshotController, ItsOwnWritesDoNotQueueAPassButRealChangesDo) {
  json a = Content(), b = Content();
  b["metadata"]["resourceVersion"] = "2";
  b["metadata"]["annotations"][kAnnBeingCreated] = "yes";
  // Set with it and cleared with it (b1e97eb): a failed create toggling
  // it re-queued itself at once, ~30 CreateSnapshot calls a second.
  b["metadata"]["annotations"][kAnnSnapshotNode] = "node-1";
  b["status"] = {{"readyToUse", false}, {"error", {{"message", "no"}}}};
  EXPECT_TRUE(OnlyOurWrites(a, b));
  EXPECT_TRUE(OnlyOurWrites(b, a));
  json deleting = b;
  deleting["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z";
  EXPECT_FALSE(OnlyOurWrites(b, deleting));
  json policy = a;
  policy["spec"]["deletionPolicy"] = "Retain";
  EXPECT_FALSE(OnlyOurWrites(a, policy));
  json being_deleted = a;
  being_deleted["metadata"]["annotations"][kAnnBeingDeleted] = "yes";
  EXPECT_FALSE(OnlyOurWrites(a, being_deleted));
  EXPECT_FALSE(OnlyOurWrites(a, a));  // a resync
}

}  // namespace
}  // namespace nodevol::provisioner
