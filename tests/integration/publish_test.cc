// Smoke test of the fixture itself; the full publication suite lives beside it.
#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

using PublishSmoke = DaemonFixture;

TEST_F(PublishSmoke, PublishMakesABindMountAndUnpublishRemovesIt) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  EXPECT_TRUE(IsMountPoint(t));
  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_FALSE(IsMountPoint(t));
}

}  // namespace
}  // namespace nodevol::testing
