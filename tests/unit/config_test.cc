#include "config/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace nodevol {
namespace {

Status Parse(std::vector<std::string> args, Config* c, ParseOutcome* o = nullptr, std::string* text = nullptr) {
  std::vector<const char*> argv = {"nodevold", "--config=/dev/null"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  ParseOutcome oo;
  std::string tt;
  return ParseConfig(static_cast<int>(argv.size()), argv.data(), c, o ? o : &oo, text ? text : &tt);
}

const std::string kPool = "--pool=name=default,backend=dir,path=/srv";

TEST(Config, DefaultsAndPools) {
  Config c;
  ASSERT_TRUE(Parse({kPool, "--pool=name=fast,backend=dir,path=/fast,quota=required"}, &c).ok());
  EXPECT_EQ(c.socket, "/run/nodevol/nodevold.sock");
  EXPECT_EQ(c.state_dir, "/var/lib/nodevol");
  EXPECT_EQ(c.pods_root, "/var/lib/kubelet/pods");
  EXPECT_EQ(c.dir_io_timeout_seconds, 30u);
  EXPECT_FALSE(c.node_name.empty()) << "defaults to the host name";
  ASSERT_EQ(c.pools.size(), 2u);
  EXPECT_EQ(c.pools[1].name, "fast");
  EXPECT_EQ(c.pools[1].backend, "dir");
  EXPECT_EQ(c.pools[1].options.at("quota"), "required");
}

TEST(Config, ConfigFileIsReadAndFlagsWin) {
  std::string path = ::testing::TempDir() + "/nodevold-test.conf";
  std::ofstream(path) << "# comment\nsocket = /run/x.sock\nlog-level = debug\n"
                         "pool = name=a,backend=dir,path=/a\npool = name=b,backend=dir,path=/b\n";
  Config c;
  std::vector<const char*> argv = {"nodevold", "--config", path.c_str(), "--log-level=warn"};
  ParseOutcome o;
  std::string text;
  ASSERT_TRUE(ParseConfig(4, argv.data(), &c, &o, &text).ok());
  EXPECT_EQ(c.socket, "/run/x.sock");
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_EQ(c.pools.size(), 2u);
  std::filesystem::remove(path);
}

TEST(Config, BadValuesNameTheOption) {
  struct Case {
    std::vector<std::string> args;
    std::string mention;
  };
  for (const Case& k : std::vector<Case>{
           {{kPool, "--log-level=loud"}, "--log-level"},
           {{kPool, "--log-target=file"}, "--log-target"},
           {{kPool, "--socket=relative.sock"}, "--socket"},
           {{kPool, "--state-dir=var/lib"}, "--state-dir"},
           {{kPool, "--heartbeat-seconds=0"}, "--heartbeat-seconds"},
           {{kPool, "--dir-io-timeout-seconds=0"}, "--dir-io-timeout-seconds"},
           {{kPool, "--capacity-poll-ms=abc"}, "capacity-poll-ms"},
           {{}, "--pool"},
           {{"--pool=backend=dir,path=/x"}, "name="},
           {{"--pool=name=Bad,backend=dir,path=/x"}, "pool name"},
           {{"--pool=name=a,backend=dir,path"}, "key=value"},
           {{kPool, kPool}, "configured twice"},
           {{kPool, "--no-such-flag"}, "no-such-flag"},
           {{kPool, "--csi-controller=yes"}, "--csi-controller"},
           {{kPool, "--csi=off", "--csi-controller=on"}, "needs --csi=on"},
       }) {
    Config c;
    Status st = Parse(k.args, &c);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << k.mention;
    EXPECT_NE(st.message().find(k.mention), std::string::npos) << st.message();
  }
}

// inline and inline-max-size are the node's: taken out of the backend's
// options (which would refuse them), off and 1Gi unless given.
TEST(Config, InlinePolicyPerPool) {
  Config c;
  ASSERT_TRUE(Parse({kPool, "--pool=name=fast,backend=dir,path=/fast,inline=on,inline-max-size=2Gi"}, &c).ok());
  EXPECT_FALSE(c.pools[0].inline_policy.allowed);
  EXPECT_EQ(c.pools[0].inline_policy.max_bytes, uint64_t{1} << 30);
  EXPECT_TRUE(c.pools[1].inline_policy.allowed);
  EXPECT_EQ(c.pools[1].inline_policy.max_bytes, uint64_t{2} << 30);
  EXPECT_EQ(c.pools[1].options.count("inline"), 0u);
  EXPECT_EQ(c.pools[1].options.count("inline-max-size"), 0u);
  for (const char* bad : {"--pool=name=a,backend=dir,path=/a,inline=yes", "--pool=name=a,backend=dir,path=/a,inline-max-size=lots"}) {
    Config b;
    Status st = Parse({bad}, &b);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("inline"), std::string::npos) << st.message();
  }
  Config z;
  EXPECT_EQ(Parse({kPool, "--max-tcp-connections=0"}, &z).code(), Status::Code::kInvalidArgument);
}

TEST(Config, MissingNamedConfigFileIsAnError) {
  Config c;
  std::vector<const char*> argv = {"nodevold", "--config=/nonexistent/nodevold.conf", kPool.c_str()};
  ParseOutcome o;
  std::string text;
  Status st = ParseConfig(3, argv.data(), &c, &o, &text);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("/nonexistent/nodevold.conf"), std::string::npos);
}

TEST(Config, TlsListenerNeedsAllFourOptionsOrNone) {
  const std::vector<std::string> all = {kPool, "--tls-listen=0.0.0.0:9809", "--tls-ca=/etc/nodevol/ca.crt",
                                        "--tls-cert=/etc/nodevol/node.crt", "--tls-key=/etc/nodevol/node.key"};
  Config c;
  ASSERT_TRUE(Parse(all, &c).ok());
  EXPECT_EQ(c.tls_listen, "0.0.0.0:9809");
  EXPECT_EQ(c.tls_key, "/etc/nodevol/node.key");
  EXPECT_EQ(c.tls_refresh_seconds, 60u);
  Config off;
  ASSERT_TRUE(Parse({kPool}, &off).ok());
  EXPECT_TRUE(off.tls_listen.empty()) << "off by default";

  struct Case {
    std::vector<std::string> args;
    std::string mention;
  };
  for (const Case& k : std::vector<Case>{
           {{kPool, all[1]}, "missing --tls-ca, --tls-cert, --tls-key"},
           {{kPool, all[1], all[2], all[3]}, "missing --tls-key"},
           {{kPool, all[2], all[3], all[4]}, "missing --tls-listen"},
           {{kPool, "--tls-listen=9809", all[2], all[3], all[4]}, "--tls-listen must be host:port"},
           {{kPool, "--tls-listen=0.0.0.0:70000", all[2], all[3], all[4]}, "--tls-listen must be host:port"},
           {{kPool, "--tls-listen=::1:9809", all[2], all[3], all[4]}, "--tls-listen must be host:port"},
           {{kPool, all[1], "--tls-ca=ca.crt", all[3], all[4]}, "--tls-ca must be an absolute path"},
           {{kPool, all[1], all[2], all[3], all[4], "--tls-refresh-seconds=0"}, "--tls-refresh-seconds"},
       }) {
    Config bad;
    Status st = Parse(k.args, &bad);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << k.mention;
    EXPECT_NE(st.message().find(k.mention), std::string::npos) << st.message();
  }
  Config v6;
  std::vector<std::string> args = all;
  args[1] = "--tls-listen=[::]:9809";
  EXPECT_TRUE(Parse(args, &v6).ok());
}

TEST(Config, EnrollmentSettlesTheTlsFiles) {
  std::string kubeconfig = ::testing::TempDir() + "/enroll-kubelet.conf";
  std::ofstream(kubeconfig) << "apiVersion: v1\n";
  Config c;
  ASSERT_TRUE(Parse({kPool, "--enroll=on", "--enroll-kubeconfig=" + kubeconfig, "--state-dir=/var/lib/nv"}, &c).ok());
  EXPECT_TRUE(c.enroll_active);
  EXPECT_EQ(c.tls_listen, "0.0.0.0:9809");
  EXPECT_EQ(c.tls_cert, "/var/lib/nv/tls/tls.crt");
  EXPECT_EQ(c.tls_key, "/var/lib/nv/tls/tls.key");
  EXPECT_EQ(c.tls_ca, "/var/lib/nv/tls/ca.crt");

  // Files given by hand win.
  Config manual;
  ASSERT_TRUE(Parse({kPool, "--enroll=auto", "--enroll-kubeconfig=" + kubeconfig, "--tls-listen=0.0.0.0:1",
                     "--tls-ca=/a", "--tls-cert=/b", "--tls-key=/c"}, &manual).ok());
  EXPECT_FALSE(manual.enroll_active);
  EXPECT_EQ(manual.tls_cert, "/b");
  EXPECT_NE(manual.enroll_note.find("win"), std::string::npos) << manual.enroll_note;

  // auto without a kubeconfig: off, and says why; on without one: an error.
  Config none;
  ASSERT_TRUE(Parse({kPool, "--enroll=auto", "--enroll-kubeconfig=/nonexistent/kubelet.conf"}, &none).ok());
  EXPECT_FALSE(none.enroll_active);
  EXPECT_TRUE(none.tls_listen.empty());
  EXPECT_NE(none.enroll_note.find("/nonexistent/kubelet.conf"), std::string::npos) << none.enroll_note;
  Status st = Parse({kPool, "--enroll=on", "--enroll-kubeconfig=/nonexistent/kubelet.conf"}, &none);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("--enroll-kubeconfig"), std::string::npos) << st.message();

  for (const std::string& bad : {"--enroll=yes", "--enroll-ca-configmap=nodevol-ca", "--enroll-lifetime-seconds=60",
                                 "--announce-label=nolabel"}) {
    Config b;
    st = Parse({kPool, "--enroll=on", "--enroll-kubeconfig=" + kubeconfig, bad}, &b);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    std::string option = bad.substr(0, bad.find('='));
    EXPECT_NE(st.message().find(option), std::string::npos) << st.message();
  }
}

TEST(Config, HelpListsEveryOption) {
  Config c;
  ParseOutcome o;
  std::string text;
  ASSERT_TRUE(Parse({"--help"}, &c, &o, &text).ok());
  EXPECT_EQ(o, ParseOutcome::kExit);
  for (const char* opt : {"--config", "--node-name", "--socket", "--state-dir", "--pods-root", "--pool",
                          "--metrics-address", "--log-level", "--log-target", "--heartbeat-seconds",
                          "--capacity-poll-ms", "--shutdown-grace-seconds", "--tls-listen", "--tls-ca",
                          "--tls-cert", "--tls-key", "--tls-refresh-seconds", "--max-tcp-connections",
                          "--max-metrics-connections", "--dir-io-timeout-seconds"})
    EXPECT_NE(text.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace nodevol
