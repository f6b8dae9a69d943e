#include "kube/token_source.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace nodevol::kube {
namespace {

namespace fs = std::filesystem;

TEST(TokenSource, FileIsReReadAfterIntervalAndAfterInvalidate) {
  fs::path p = fs::temp_directory_path() / ("token_source_test." + std::to_string(::getpid()));
  std::ofstream(p) << "one\n";
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  TokenSource ts = TokenSource::File(p.string(), std::chrono::seconds(60), [&] { return now; });
  EXPECT_EQ(ts.Get(), "one");
  std::ofstream(p) << "two";
  now += std::chrono::seconds(30);
  EXPECT_EQ(ts.Get(), "one");  // cached within the interval
  now += std::chrono::seconds(31);
  EXPECT_EQ(ts.Get(), "two");  // re-read after a minute
  std::ofstream(p) << "three";
  ts.Invalidate();
  EXPECT_EQ(ts.Get(), "three");  // re-read at once after a 401
  fs::remove(p);
  ts.Invalidate();
  Status err;
  EXPECT_EQ(ts.Get(&err), "three");  // the last good token survives a failed read
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.message().find("three"), std::string::npos);
}

TEST(TokenSource, FixedAndNone) {
  TokenSource f = TokenSource::Fixed("abc");
  f.Invalidate();
  EXPECT_EQ(f.Get(), "abc");
  TokenSource none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.Get(), "");
}

}  // namespace
}  // namespace nodevol::kube
