// The real nodevolctl against the real daemon: table and JSON output, exit
// codes, and the hints it gives when things go wrong.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class CtlTest : public DaemonFixture {
 protected:
  // Runs nodevolctl -o json ARGS, expects exit 0 and returns the parsed output.
  json CtlJson(std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "json"});
    std::string out, err;
    int rc = Ctl(args, &out, &err);
    EXPECT_EQ(rc, 0) << "nodevolctl " << Join(args) << ":\n" << err;
    try {
      return json::parse(out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "nodevolctl " << Join(args) << " printed no JSON (" << e.what() << "):\n" << out;
      return json();
    }
  }

  static std::string Join(const std::vector<std::string>& args) {
    std::string s;
    for (const std::string& a : args) s += (s.empty() ? "" : " ") + a;
    return s;
  }
};

TEST_F(CtlTest, VolumeLifecycleInTableForm) {
  StartDaemon();
  std::string out, err;
  ASSERT_EQ(Ctl({"volume", "create", "c1", "--pool", "default", "--size", "10Mi", "--param", "mode=0750"}, &out, &err), 0)
      << err;
  EXPECT_TRUE(Contains(out, "c1")) << out;
  EXPECT_TRUE(Contains(out, "10485760 bytes")) << out;
  EXPECT_TRUE(Contains(out, "READY")) << out;
  EXPECT_TRUE(Contains(out, "mode=0750")) << out;
  struct stat st;
  ASSERT_EQ(::stat((pool_dir_ + "/c1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);

  // Idempotent: the same create again succeeds.
  EXPECT_EQ(Ctl({"volume", "create", "c1", "--pool", "default", "--size", "10Mi", "--param", "mode=0750"}, &out, &err), 0)
      << err;

  ASSERT_EQ(Ctl({"volume", "list"}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "NAME")) << out;
  EXPECT_TRUE(Contains(out, "c1")) << out;
  EXPECT_TRUE(Contains(out, "10.0MiB")) << out;

  ASSERT_EQ(Ctl({"volume", "expand", "c1", "--size", "20Mi"}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "20971520 bytes")) << out;
  ASSERT_EQ(Ctl({"volume", "get", "c1"}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "20971520 bytes")) << out;

  std::string t = MakeTarget("pod-1", "data");
  ASSERT_EQ(Ctl({"publish", "--volume", "c1", "--target", t}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "published volume c1 at " + t)) << out;
  EXPECT_TRUE(IsMountPoint(t));
  ASSERT_EQ(Ctl({"stats", "--target", t}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "VOLUME")) << out;
  EXPECT_TRUE(Contains(out, "c1")) << out;

  ASSERT_EQ(Ctl({"unpublish", "--target", t}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "unpublished " + t)) << out;
  EXPECT_FALSE(IsMountPoint(t));
  ASSERT_EQ(Ctl({"unpublish", "--target", t}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "nothing was published at " + t)) << out;

  ASSERT_EQ(Ctl({"volume", "delete", "c1"}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "volume c1 deleted")) << out;
  EXPECT_FALSE(fs::exists(pool_dir_ + "/c1"));
  ASSERT_EQ(Ctl({"volume", "delete", "c1"}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "did not exist")) << out;
}

TEST_F(CtlTest, JsonOutputHasTheFields) {
  StartDaemon();
  json v = CtlJson({"volume", "create", "j1", "--pool", "default", "--size", "1Mi"});
  ASSERT_TRUE(v.contains("volume")) << v.dump();
  EXPECT_EQ(v["volume"]["name"], "j1");
  EXPECT_EQ(v["volume"]["pool"], "default");
  EXPECT_EQ(v["volume"]["backend"], "dir");
  EXPECT_EQ(v["volume"]["size_bytes"], "1048576");  // 64-bit integers are strings in proto JSON
  EXPECT_EQ(v["volume"]["state"], "VOLUME_STATE_READY");
  EXPECT_EQ(v["volume"]["ephemeral"], false);
  EXPECT_EQ(v["volume"]["attributes"]["path"], pool_dir_ + "/j1");

  json list = CtlJson({"volume", "list"});
  ASSERT_TRUE(list["volumes"].is_array()) << list.dump();
  ASSERT_EQ(list["volumes"].size(), 1u);
  EXPECT_EQ(list["volumes"][0]["name"], "j1");

  json expanded = CtlJson({"volume", "expand", "j1", "--size", "2Mi"});
  EXPECT_EQ(expanded["volume"]["size_bytes"], "2097152");

  std::string t = MakeTarget("pod-1", "data");
  json pub = CtlJson({"publish", "--volume", "j1", "--target", t, "--read-only", "--mount-option", "noexec"});
  EXPECT_EQ(pub["volume"], "j1");
  EXPECT_EQ(pub["target"], t);
  int fd = ::open((t + "/x").c_str(), O_CREAT | O_WRONLY, 0644);
  EXPECT_LT(fd, 0);
  EXPECT_EQ(errno, EROFS);
  if (fd >= 0) ::close(fd);

  json got = CtlJson({"volume", "get", "j1"});
  ASSERT_TRUE(got["volume"]["published_at"].is_array()) << got.dump();
  EXPECT_EQ(got["volume"]["published_at"], json::array({t}));
  EXPECT_GT(got["volume"]["created_unix"].get<std::string>().size(), 0u);

  json stats = CtlJson({"stats", "--target", t});
  EXPECT_EQ(stats["volume"], "j1");
  ASSERT_TRUE(stats["total_bytes"].is_string()) << stats.dump();
  EXPECT_GT(std::stoull(stats["total_bytes"].get<std::string>()), 0u);
  EXPECT_TRUE(stats.contains("used_bytes"));
  EXPECT_TRUE(stats.contains("available_bytes"));
  EXPECT_TRUE(stats.contains("free_inodes"));

  json info = CtlJson({"info"});
  EXPECT_FALSE(info["node_name"].get<std::string>().empty());
  EXPECT_FALSE(info["version"].get<std::string>().empty());
  EXPECT_EQ(info["api_versions"], json::array({"nodevol.v1"}));
  ASSERT_EQ(info["pools"].size(), 1u);
  EXPECT_EQ(info["pools"][0]["name"], "default");
  EXPECT_EQ(info["pools"][0]["backend"], "dir");
  EXPECT_TRUE(info["drift"].is_array());

  json cap = CtlJson({"capacity"});
  ASSERT_EQ(cap["pools"].size(), 1u);
  EXPECT_EQ(cap["pools"][0]["pool"], "default");
  EXPECT_EQ(cap["pools"][0]["allocated_bytes"], "2097152");
  EXPECT_EQ(cap["pools"][0]["volume_count"], 1);

  json unpub = CtlJson({"unpublish", "--target", t});
  EXPECT_EQ(unpub["was_published"], true);
  unpub = CtlJson({"unpublish", "--target", t});
  EXPECT_EQ(unpub["was_published"], false);

  json del = CtlJson({"volume", "delete", "j1"});
  EXPECT_EQ(del["existed"], true);
  del = CtlJson({"volume", "delete", "j1"});
  EXPECT_EQ(del["existed"], false);
  EXPECT_TRUE(CtlJson({"volume", "list"})["volumes"].empty());
}

TEST_F(CtlTest, InlineVolumeThroughTheCli) {
  StartDaemon();
  std::string t = MakeTarget("pod-1", "scratch");
  json pub = CtlJson({"publish", "--inline-pool", "default", "--inline-size", "1Mi", "--target", t});
  std::string name = pub["volume"];
  EXPECT_FALSE(name.empty());
  json v = CtlJson({"volume", "get", name});
  EXPECT_EQ(v["volume"]["ephemeral"], true);
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_EQ(CtlJson({"unpublish", "--target", t})["was_published"], true);
  std::string out, err;
  EXPECT_EQ(Ctl({"volume", "get", name}, &out, &err), 1);
  EXPECT_TRUE(Contains(err, "NOT_FOUND")) << err;
}

TEST_F(CtlTest, ServerErrorsExitOneWithTheMessage) {
  StartDaemon();
  ASSERT_EQ(Ctl({"volume", "create", "e1", "--pool", "default", "--size", "1Mi"}), 0);
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_EQ(Ctl({"publish", "--volume", "e1", "--target", t}), 0);

  std::string out, err;
  EXPECT_EQ(Ctl({"volume", "delete", "e1"}, &out, &err), 1);
  EXPECT_TRUE(Contains(err, "FAILED_PRECONDITION")) << err;
  EXPECT_TRUE(Contains(err, "published at " + t)) << err;
  EXPECT_TRUE(out.empty()) << out;
  EXPECT_TRUE(fs::exists(pool_dir_ + "/e1"));

  EXPECT_EQ(Ctl({"-o", "json", "volume", "delete", "e1"}, &out, &err), 1);
  EXPECT_TRUE(out.empty()) << "no JSON on failure: " << out;

  EXPECT_EQ(Ctl({"volume", "get", "nope"}, &out, &err), 1);
  EXPECT_TRUE(Contains(err, "NOT_FOUND")) << err;
  EXPECT_EQ(Ctl({"volume", "create", "e1", "--pool", "default", "--size", "2Mi"}, &out, &err), 1);
  EXPECT_TRUE(Contains(err, "ALREADY_EXISTS")) << err;
  EXPECT_EQ(Ctl({"volume", "create", "e2", "--pool", "nope", "--size", "1Mi"}, &out, &err), 1);
  EXPECT_TRUE(Contains(err, "INVALID_ARGUMENT")) << err;
  EXPECT_EQ(Ctl({"publish", "--volume", "e1", "--target", "/tmp"}, &out, &err), 1);
  EXPECT_TRUE(Contains(err, "INVALID_ARGUMENT")) << err;
}

TEST_F(CtlTest, UsageErrorsExitTwo) {
  StartDaemon();
  std::string out, err;
  EXPECT_EQ(Ctl({"frobnicate"}, &out, &err), 2);
  EXPECT_TRUE(Contains(err, "unknown command")) << err;
  EXPECT_EQ(Ctl({"volume"}, &out, &err), 2);
  EXPECT_EQ(Ctl({"volume", "create", "u1", "--size", "1Mi"}, &out, &err), 2) << "missing --pool";
  EXPECT_EQ(Ctl({"volume", "create", "u1", "--pool", "default", "--size", "lots"}, &out, &err), 2);
  EXPECT_EQ(Ctl({"volume", "get"}, &out, &err), 2);
  EXPECT_EQ(Ctl({"-o", "yaml", "volume", "list"}, &out, &err), 2);
  EXPECT_EQ(Ctl({"publish", "--target", MakeTarget("pod-1", "d")}, &out, &err), 2) << "no source";
  EXPECT_EQ(Ctl({"volume", "get", "nope"}, &out, &err), 1) << "sanity: the daemon answers";
  EXPECT_FALSE(fs::exists(pool_dir_ + "/u1"));
  ASSERT_EQ(Ctl({"--help"}, &out, &err), 0);
  for (const char* cmd : {"info", "capacity", "volume list", "volume get", "volume create", "volume delete",
                          "volume expand", "publish", "unpublish", "stats"})
    EXPECT_TRUE(Contains(out, cmd)) << cmd << " missing from --help";
}

TEST_F(CtlTest, MissingSocketHintsAtNodevold) {
  // No daemon started: the socket does not exist.
  ASSERT_FALSE(fs::exists(socket_));
  auto start = std::chrono::steady_clock::now();
  std::string out, err;
  EXPECT_EQ(Ctl({"volume", "list"}, &out, &err), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "must fail fast, not time out";
  EXPECT_TRUE(Contains(err, "hint:")) << err;
  EXPECT_TRUE(Contains(err, "nodevold")) << err;
  EXPECT_TRUE(Contains(err, socket_)) << err;
  EXPECT_TRUE(out.empty()) << out;
}

TEST_F(CtlTest, StaleSocketHintsAtNodevold) {
  StartDaemon();
  KillDaemon();  // a crash leaves the socket file behind
  ASSERT_TRUE(fs::exists(socket_));
  std::string out, err;
  EXPECT_EQ(Ctl({"info"}, &out, &err), 1);
  EXPECT_TRUE(Contains(err, "hint:")) << err;
  EXPECT_TRUE(Contains(err, "nodevold")) << err;
}

// Issue 28 item 8: nothing nodevold stores or says reaches the terminal
// raw. New values with control characters are refused by the daemon; a
// record written before that (an older nodevold) is shown escaped in
// tables and fields, and so is an error message quoting a bad key.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

bool HasTerminalControl(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f || c == 0x9b) return true;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9f)
      return true;
  }
  return false;
}

TEST_F(CtlTest, TerminalEscapesAreNeverPrintedRaw) {
  StartDaemon();
  const std::string title = "\x1b]2;owned\x07", csi = "\xc2\x9b" "2J";
  std::string out, err;
  EXPECT_EQ(Ctl({"volume", "create", "t1", "--pool", "default", "--size", "1Mi", "--param",
                 "nodevol.io/pvc-name=x" + title},
                &out, &err),
            1);
  EXPECT_TRUE(Contains(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(Contains(err, "control character")) << err;
  EXPECT_FALSE(fs::exists(pool_dir_ + "/t1"));
  EXPECT_EQ(Ctl({"volume", "create", "t1", "--pool", "default", "--size", "1Mi", "--param",
                 "nodevol.io/pvc-name=x" + csi},
                &out, &err),
            1);
  EXPECT_TRUE(Contains(err, "INVALID_ARGUMENT")) << err;
  EXPECT_EQ(Ctl({"volume", "create", "t1", "--pool", "default", "--size", "1Mi", "--param",
                 "nodevol.io/colour" + title + "=red"},
                &out, &err),
            1);
  EXPECT_TRUE(Contains(err, "unknown parameter")) << err;
  EXPECT_FALSE(HasTerminalControl(err)) << "raw escape in the error line";
  EXPECT_TRUE(Contains(err, "\\x1b]2;owned\\x07")) << err;

  // A record from before the check, with a title escape, a CSI and a
  // newline that would fake a table row.
  ASSERT_EQ(Ctl({"volume", "create", "t2", "--pool", "default", "--size", "1Mi", "--param", "nodevol.io/pvc-name=ok"}),
            0);
  StopDaemon();
  std::string path = state_dir_ + "/volumes/t2.json";
  json record = json::parse(ReadFile(path));
  record["parameters"]["nodevol.io/pvc-name"] = "x" + title + csi + "\nt9  default  1.0MiB  READY";
  WriteFile(path, record.dump(2));
  StartDaemon();
  ASSERT_EQ(Ctl({"volume", "get", "t2"}, &out, &err), 0) << err;
  EXPECT_FALSE(HasTerminalControl(out)) << "raw escape in volume get";
  EXPECT_TRUE(Contains(out, "x\\x1b]2;owned\\x07\\xc2\\x9b2J\\x0at9")) << out;
  EXPECT_FALSE(Contains(out, "\nt9 ")) << "a parameter faked an output line:\n" << out;
  // JSON escapes on its own and keeps the value exact.
  json v = CtlJson({"volume", "get", "t2"});
  EXPECT_EQ(v["volume"]["parameters"]["nodevol.io/pvc-name"], "x" + title + csi + "\nt9  default  1.0MiB  READY");
}

}  // namespace
}  // namespace nodevol::testing
