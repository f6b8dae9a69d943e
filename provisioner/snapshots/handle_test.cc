#include "snapshots/handle.h"

#include <gtest/gtest.h>

namespace nodevol::provisioner {
namespace {

TEST(SnapshotHandle, RoundTrips) {
  SnapshotHandle h{"worker-1.example", "snapshot-0b7c"};
  SnapshotHandle back;
  ASSERT_TRUE(ParseSnapshotHandle(FormatSnapshotHandle(h), &back).ok());
  EXPECT_EQ(back.node, "worker-1.example");
  EXPECT_EQ(back.name, "snapshot-0b7c");
}

TEST(SnapshotHandle, RefusesWhatIsNotNodeSlashName) {
  SnapshotHandle h;
  for (const char* bad : {"", "snap", "/snap", "node/", "Node/snap", "node/../x", "node/a/b", "-node/snap",
                          "node/.hidden"}) {
    Status st = ParseSnapshotHandle(bad, &h);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
  }
}

TEST(SnapshotHandle, NameFollowsTheVolumeSnapshotUid) {
  EXPECT_EQ(SnapshotNameFor("6a1f"), "snapshot-6a1f");
}

}  // namespace
}  // namespace nodevol::provisioner
