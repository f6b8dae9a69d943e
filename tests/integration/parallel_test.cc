// Many publications at once: every call must succeed, every mount must
// exist exactly once, and unpublishing them all in parallel must leave no
// mount behind.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <thread>

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

using Clock = std::chrono::system_clock;

struct Job {
  std::string volume;
  std::string target;
};

class ParallelTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartDaemon();
  }

  // Runs fn(job, stub) for every job on its own thread with its own stub,
  // all released at once; returns the errors (one line each).
  template <typename Fn>
  std::vector<std::string> RunAll(const std::vector<Job>& jobs, Fn fn) {
    std::vector<std::unique_ptr<v1::Node::Stub>> stubs;
    for (size_t i = 0; i < jobs.size(); ++i) stubs.push_back(NewStub());
    std::latch start(static_cast<std::ptrdiff_t>(jobs.size()));
    std::mutex mu;
    std::vector<std::string> errors;
    std::vector<std::thread> threads;
    for (size_t i = 0; i < jobs.size(); ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        grpc::Status st = fn(jobs[i], stubs[i].get());
        if (!st.ok()) {
          std::lock_guard<std::mutex> l(mu);
          errors.push_back(jobs[i].volume + " @ " + jobs[i].target + ": " + std::to_string(st.error_code()) + " " +
                           st.error_message());
        }
      });
    }
    for (auto& t : threads) t.join();
    return errors;
  }

  static grpc::Status DoPublish(const Job& j, v1::Node::Stub* stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Clock::now() + std::chrono::seconds(60));
    ctx.set_wait_for_ready(true);
    v1::PublishRequest req;
    req.set_volume(j.volume);
    req.set_target(j.target);
    v1::PublishResponse resp;
    grpc::Status st = stub->Publish(&ctx, req, &resp);
    if (st.ok() && (resp.volume() != j.volume || resp.target() != j.target))
      return grpc::Status(grpc::StatusCode::INTERNAL, "response names " + resp.volume() + " @ " + resp.target());
    return st;
  }

  static grpc::Status DoUnpublish(const Job& j, v1::Node::Stub* stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Clock::now() + std::chrono::seconds(60));
    ctx.set_wait_for_ready(true);
    v1::UnpublishRequest req;
    req.set_target(j.target);
    v1::UnpublishResponse resp;
    grpc::Status st = stub->Unpublish(&ctx, req, &resp);
    if (st.ok() && !resp.was_published())
      return grpc::Status(grpc::StatusCode::INTERNAL, "was_published is false for a published target");
    return st;
  }

  int CountPublished() {
    grpc::ClientContext ctx;
    ctx.set_deadline(Clock::now() + std::chrono::seconds(10));
    v1::ListVolumesResponse resp;
    EXPECT_TRUE(stub()->ListVolumes(&ctx, v1::ListVolumesRequest(), &resp).ok());
    int n = 0;
    for (const auto& v : resp.volumes()) n += v.published_at_size();
    return n;
  }

  void PublishAndUnpublishAll(const std::vector<Job>& jobs) {
    std::vector<std::string> errors = RunAll(jobs, DoPublish);
    EXPECT_TRUE(errors.empty()) << errors.size() << " publish calls failed, first: " << errors[0];
    EXPECT_EQ(MountsBelow(pods_root_), static_cast<int>(jobs.size()));
    int unmounted = 0;
    for (const Job& j : jobs) unmounted += IsMountPoint(j.target) ? 0 : 1;
    EXPECT_EQ(unmounted, 0);
    EXPECT_EQ(CountPublished(), static_cast<int>(jobs.size()));

    errors = RunAll(jobs, DoUnpublish);
    EXPECT_TRUE(errors.empty()) << errors.size() << " unpublish calls failed, first: " << errors[0];
    EXPECT_EQ(MountsBelow(root_), 0);
    EXPECT_EQ(CountPublished(), 0);
  }
};

TEST_F(ParallelTest, TwentyVolumesEachPublishedToTenPods) {
  std::vector<Job> jobs;
  for (int v = 0; v < 20; ++v) {
    std::string name = "vol-" + std::to_string(v);
    ASSERT_TRUE(CreateVolume(name, 1 << 20).ok());
    for (int p = 0; p < 10; ++p) jobs.push_back({name, MakeTarget("pod-" + std::to_string(p), name)});
  }
  PublishAndUnpublishAll(jobs);
}

TEST_F(ParallelTest, TwoHundredVolumesPublishedAtOnce) {
  std::vector<Job> jobs;
  for (int v = 0; v < 200; ++v) {
    std::string name = "vol-" + std::to_string(v);
    jobs.push_back({name, MakeTarget("pod-" + std::to_string(v % 7), name)});
  }
  // The volumes are created in parallel too.
  std::vector<std::string> errors = RunAll(jobs, [](const Job& j, v1::Node::Stub* stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Clock::now() + std::chrono::seconds(60));
    v1::CreateVolumeRequest req;
    req.set_name(j.volume);
    req.set_pool("default");
    req.set_size_bytes(1 << 20);
    v1::CreateVolumeResponse resp;
    return stub->CreateVolume(&ctx, req, &resp);
  });
  ASSERT_TRUE(errors.empty()) << errors.size() << " create calls failed, first: " << errors[0];
  PublishAndUnpublishAll(jobs);
}

TEST_F(ParallelTest, ConcurrentPublishesOfTheSameTargetMakeOneMount) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  std::vector<Job> jobs(50, Job{"v1", t});
  std::vector<std::string> errors = RunAll(jobs, DoPublish);
  EXPECT_TRUE(errors.empty()) << errors.size() << " publish calls failed, first: " << errors[0];
  EXPECT_EQ(MountsBelow(pods_root_), 1);
  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_EQ(MountsBelow(root_), 0);
}

}  // namespace
}  // namespace nodevol::testing
