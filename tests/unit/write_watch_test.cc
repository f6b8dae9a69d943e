// WriteWatch: the oldest write still running, as /healthz reports it.
#include "state/write_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "state/store.h"

namespace nodevol {
namespace {

using namespace std::chrono_literals;

TEST(WriteWatch, OldestRunningWriteAndItsAge) {
  WriteWatch w;
  std::string what = "untouched";
  EXPECT_EQ(w.Oldest(&what), 0ms);
  EXPECT_EQ(what, "untouched");
  std::optional<WriteWatch::Scope> a, b;
  a.emplace(&w, "volume a");
  std::this_thread::sleep_for(30ms);
  b.emplace(&w, "volume b");
  EXPECT_GE(w.Oldest(&what), 30ms);
  EXPECT_EQ(what, "volume a");
  a.reset();
  EXPECT_LT(w.Oldest(&what), 30ms) << "the age is the oldest running write's, not the first ever";
  EXPECT_EQ(what, "volume b");
  b.reset();
  EXPECT_EQ(w.Oldest(&what), 0ms);
}

TEST(WriteWatch, ScopesOnManyThreads) {
  WriteWatch w;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    std::string what;
    while (!stop) w.Oldest(&what);
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) WriteWatch::Scope s(&w, "volume " + std::to_string(t));
    });
  for (auto& t : writers) t.join();
  stop = true;
  reader.join();
  std::string what;
  EXPECT_EQ(w.Oldest(&what), 0ms) << "a scope was not removed";
}

TEST(WriteWatch, StoreWritesEndWhenTheyReturn) {
  char tmpl[] = "/tmp/nodevol-watch-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  {
    Store s(tmpl);
    ASSERT_TRUE(s.Open().ok());
    VolumeRecord v;
    v.spec.name = "v1";
    v.spec.pool = "default";
    ASSERT_TRUE(s.PutVolume(v).ok());
    PublicationRecord p;
    p.volume = "v1";
    p.target = "/pods/x/volumes/v";
    p.state = PublicationState::kPublishing;
    ASSERT_TRUE(s.PutPublication(p).ok());
    PublicationRecord published = p;
    published.state = PublicationState::kPublished;
    ASSERT_TRUE(s.MovePublication(published, PublicationState::kPublishing).ok());
    ASSERT_TRUE(s.RemovePublication(p.target).ok());
    ASSERT_TRUE(s.RemoveVolume("v1").ok());
    std::string what;
    EXPECT_EQ(s.writes().Oldest(&what), 0ms) << what;
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace nodevol
