#include "config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>

namespace nodevol::flex {
namespace {

using std::chrono::milliseconds;

TEST(FlexConfig, Durations) {
  milliseconds d{};
  EXPECT_TRUE(ParseDuration("30s", &d));
  EXPECT_EQ(d, milliseconds(30000));
  EXPECT_TRUE(ParseDuration("250ms", &d));
  EXPECT_EQ(d, milliseconds(250));
  EXPECT_TRUE(ParseDuration("7", &d));
  EXPECT_EQ(d, milliseconds(7000));
  for (const char* bad : {"", "s", "0", "0ms", "-1s", "1.5s", "10m", "abc", "99999999999s"})
    EXPECT_FALSE(ParseDuration(bad, &d)) << bad;
}

class FlexConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nodevol-flexconf-XXXXXX";
    int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = tmpl;
    ::setenv("NODEVOL_FLEX_CONFIG", path_.c_str(), 1);
    ::unsetenv("NODEVOL_FLEX_SOCKET");
    ::unsetenv("NODEVOL_FLEX_TIMEOUT");
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::unsetenv("NODEVOL_FLEX_CONFIG");
    ::unsetenv("NODEVOL_FLEX_SOCKET");
    ::unsetenv("NODEVOL_FLEX_TIMEOUT");
  }
  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::string path_;
};

TEST_F(FlexConfigFile, FileThenEnvironment) {
  Write("# nodevol-flex\nsocket = /run/x.sock\ntimeout = 20s\nconnect-timeout = 2s\n");
  Config c;
  std::string error;
  ASSERT_TRUE(LoadConfig(&c, &error)) << error;
  EXPECT_EQ(c.socket, "/run/x.sock");
  EXPECT_EQ(c.timeout, milliseconds(20000));
  EXPECT_EQ(c.connect_timeout, milliseconds(2000));

  ::setenv("NODEVOL_FLEX_SOCKET", "/tmp/y.sock", 1);
  ::setenv("NODEVOL_FLEX_TIMEOUT", "500ms", 1);
  Config d;
  ASSERT_TRUE(LoadConfig(&d, &error)) << error;
  EXPECT_EQ(d.socket, "/tmp/y.sock");
  EXPECT_EQ(d.timeout, milliseconds(500));
  EXPECT_EQ(d.connect_timeout, milliseconds(500)) << "connecting is bounded by the whole call";
}

TEST_F(FlexConfigFile, AKeyHoldingAnErrorPlaceholderIsRefusedNotLoopedOn) {
  // boost::program_options' own message loops forever on a name holding
  // one of its placeholders (found by tests/fuzz): refused, named, at once.
  Write("socket = /run/x.sock\ntime%original_token%out = 2s\n");
  Config c;
  std::string error;
  EXPECT_FALSE(LoadConfig(&c, &error));
  EXPECT_NE(error.find("time?original_token?out"), std::string::npos) << error;
}

TEST_F(FlexConfigFile, MissingFileMeansDefaults) {
  ::setenv("NODEVOL_FLEX_CONFIG", "/nonexistent/flex.conf", 1);
  Config c;
  std::string error;
  ASSERT_TRUE(LoadConfig(&c, &error)) << error;
  EXPECT_EQ(c.socket, "/run/nodevol/nodevold.sock");
  EXPECT_EQ(c.timeout, milliseconds(30000));
}

TEST_F(FlexConfigFile, BadValuesNameTheirKey) {
  Config c;
  std::string error;
  Write("sokcet = /run/x.sock\n");
  EXPECT_FALSE(LoadConfig(&c, &error));
  EXPECT_NE(error.find("sokcet"), std::string::npos) << error;
  Write("timeout = soon\n");
  EXPECT_FALSE(LoadConfig(&c, &error));
  EXPECT_NE(error.find("timeout"), std::string::npos) << error;
  Write("socket = relative.sock\n");
  EXPECT_FALSE(LoadConfig(&c, &error));
  EXPECT_NE(error.find("absolute"), std::string::npos) << error;
  Write("");
  ::setenv("NODEVOL_FLEX_TIMEOUT", "0", 1);
  EXPECT_FALSE(LoadConfig(&c, &error));
  EXPECT_NE(error.find("NODEVOL_FLEX_TIMEOUT"), std::string::npos) << error;
}

}  // namespace
}  // namespace nodevol::flex
