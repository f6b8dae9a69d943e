// CapacityMonitor (mountd/node/capacity_monitor.h) over a real Node with a
// dir pool: the sample number a Poke promises must reach the streams, also
// when an earlier sample already saw the change. DaemonTest's
// CreateVolumeNamesTheFirstCapacitySampleWithTheVolume covers the same
// promise through gRPC, where the order is up to the scheduler; here it is
// forced.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>

#include "backend/registry.h"
#include "daemon_fixture.h"
#include "node/capacity_monitor.h"
#include "node/node.h"
#include "state/store.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class CapacityMonitorTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = std::make_unique<Store>(state_dir_);
    ASSERT_TRUE(store_->Open().ok());
    std::map<std::string, std::unique_ptr<Backend>> pools;
    ASSERT_TRUE(MakeBackend("default", "dir", {{"path", pool_dir_}}, &pools["default"]).ok());
    node_ = std::make_unique<Node>(fs::canonical(pods_root_).string(), store_.get(), std::move(pools));
    Status st = node_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    node_.reset();
    store_.reset();
    DaemonFixture::TearDown();
  }

  // Waits (5 s at most) for a version after `seen` and returns it with the
  // sample that made it.
  uint64_t NextVersion(CapacityMonitor* m, uint64_t seen, uint64_t* sample) {
    std::vector<PoolCapacityView> pools;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      uint64_t v = m->Snapshot(&pools, sample);
      if (v != seen) return v;
      m->WaitChange(seen, milliseconds(100));
    }
    return seen;
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<Node> node_;
};

TEST_F(CapacityMonitorTest, APokedSampleThatSeesNothingNewIsStillPublished) {
  // A poll far longer than the test: every sample after the first is poked.
  CapacityMonitor m(node_.get(), std::chrono::hours(1), nullptr);
  m.Start();
  uint64_t sample = 0;
  uint64_t v1 = NextVersion(&m, 0, &sample);
  ASSERT_EQ(v1, 1u) << "the first sample";

  VolumeSpec spec;
  spec.name = "c1";
  spec.pool = "default";
  spec.size_bytes = 1 << 20;
  VolumeView vol;
  ASSERT_TRUE(node_->CreateVolume(spec, &vol).ok());
  uint64_t promised = m.Poke();
  uint64_t v2 = NextVersion(&m, v1, &sample);
  ASSERT_NE(v2, v1);
  ASSERT_GE(sample, promised);

  // The change is in the figures already; this Poke's sample sees nothing
  // new, as when two creates race with one sample. Its number must still
  // come with a new version, or no stream ever sends it.
  promised = m.Poke();
  uint64_t v3 = NextVersion(&m, v2, &sample);
  EXPECT_NE(v3, v2) << "no new version for the sample Poke promised (" << promised << ")";
  EXPECT_GE(sample, promised);
  std::vector<PoolCapacityView> pools;
  m.Snapshot(&pools);
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].volume_count, 1u);
  m.Stop();
}

}  // namespace
}  // namespace nodevol::testing
