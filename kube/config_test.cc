#include "kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace nodevol::kube {
namespace {

namespace fs = std::filesystem;

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kubeconfig_test." + std::to_string(::getpid()) + "." +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  fs::path dir_;
};

const char kBasic[] = R"y(apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: pki/ca.crt
- name: c2
  cluster:
    server: https://c2.example:443
    insecure-skip-tls-verify: true
    tls-server-name: kubernetes
users:
- name: u1
  user: {client-certificate: pki/u1.crt, client-key: /abs/u1.key}
- name: u2
  user: {token: secret-token, tokenFile: ignored}
contexts:
- name: one
  context: {cluster: c1, user: u1, namespace: storage}
- name: two
  context: {cluster: c2, user: u2}
current-context: one
)y";

TEST_F(KubeconfigTest, CurrentContextWithRelativePaths) {
  Write("pki/ca.crt", "ca");
  Write("pki/u1.crt", "cert");
  std::string key = Write("elsewhere/u1.key", "key");
  std::string text = kBasic;
  text.replace(text.find("/abs/u1.key"), 11, key);  // an absolute path stays as it is
  std::string f = Write("config", text);
  Config c;
  Status st = LoadKubeconfig({f}, "", &c);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.server, "https://10.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c.ca_file, (dir_ / "pki/ca.crt").string());
  EXPECT_EQ(c.client_cert_file, (dir_ / "pki/u1.crt").string());
  EXPECT_EQ(c.client_key_file, key);
  EXPECT_EQ(c.ns, "storage");
  EXPECT_FALSE(c.insecure_skip_tls_verify);
}

TEST_F(KubeconfigTest, ContextOverrideTokenWinsOverTokenFile) {
  std::string f = Write("config", kBasic);
  Config c;
  Status st = LoadKubeconfig({f}, "two", &c);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.server, "https://c2.example:443");
  EXPECT_TRUE(c.insecure_skip_tls_verify);
  EXPECT_EQ(c.tls_server_name, "kubernetes");
  EXPECT_EQ(c.token, "secret-token");
  EXPECT_EQ(c.token_file, "");
  EXPECT_EQ(c.ns, "default");
}

TEST_F(KubeconfigTest, DataFieldsAreBase64Decoded) {
  // "-----BEGIN CA-----\n" and friends, base64 with a line break inside.
  std::string f = Write("config", R"y(
clusters:
- name: c
  cluster:
    server: https://h:1
    certificate-authority-data: LS0tLS1CRUdJTiBDQS0t
      LS0tCg==
    certificate-authority: ignored-because-data-wins
users:
- name: u
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
)y");
  Config c;
  Status st = LoadKubeconfig({f}, "", &c);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.ca_data, "-----BEGIN CA-----\n");
  EXPECT_EQ(c.ca_file, "");
  EXPECT_EQ(c.client_cert_data, "cert");
  EXPECT_EQ(c.client_key_data, "key");
}

TEST_F(KubeconfigTest, SeveralFilesFirstDefinitionWins) {
  // File a: current-context and a cluster whose CA is relative to a's dir.
  std::string a = Write("a/config", R"y(
current-context: ctx
clusters:
- name: shared
  cluster: {server: "https://from-a:1", certificate-authority: ca.crt}
)y");
  Write("a/ca.crt", "ca");
  // File b: redefines the cluster (loses), defines the user and context,
  // and its own current-context (loses).
  std::string b = Write("b/config", R"y(
current-context: other
clusters:
- name: shared
  cluster: {server: "https://from-b:1"}
users:
- name: me
  user: {tokenFile: tok}
contexts:
- name: ctx
  context: {cluster: shared, user: me, namespace: ns-b}
- name: other
  context: {cluster: shared}
)y");
  Write("b/tok", "t");
  Config c;
  Status st = LoadKubeconfig({a, (dir_ / "missing").string(), b}, "", &c);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.server, "https://from-a:1");
  EXPECT_EQ(c.ca_file, (dir_ / "a/ca.crt").string());
  EXPECT_EQ(c.token_file, (dir_ / "b/tok").string());  // relative to b, where the user is
  EXPECT_EQ(c.ns, "ns-b");
}

TEST_F(KubeconfigTest, KubeconfigEnvironmentListsFiles) {
  ::setenv("KUBECONFIG", "/x/one::/y/two", 1);
  auto files = DefaultKubeconfigFiles();
  ::unsetenv("KUBECONFIG");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], "/x/one");
  EXPECT_EQ(files[1], "/y/two");
}

TEST_F(KubeconfigTest, ErrorsNameFileAndKey) {
  struct Case {
    const char* yaml;
    const char* context;
    std::vector<std::string> want;  // substrings of the message
  } cases[] = {
      {"clusters: [{name: c, cluster: {server: https://h}}]\ncontexts: [{name: x, context: {cluster: c}}]\n", "",
       {"no current-context"}},
      {"current-context: nope\n", "", {"context \"nope\" is not defined"}},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: gone}}]\n", "",
       {"contexts[x].context: cluster", "\"gone\""}},
      {"current-context: x\nclusters: [{name: c, cluster: {insecure-skip-tls-verify: true}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\n",
       "", {"clusters[c].cluster: server is missing"}},
      {"current-context: x\nclusters: [{name: c, cluster: {server: https://h}}]\n"
       "users: [{name: u, user: {exec: {command: aws}}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
       "", {"users[u].user: exec", "not supported"}},
      {"current-context: x\nclusters: [{name: c, cluster: {server: https://h, certificate-authority-data: \"@@\"}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\n",
       "", {"certificate-authority-data is not valid base64"}},
      {"current-context: x\nclusters: [{name: c, cluster: {server: https://h, certificate-authority: nothere.crt}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\n",
       "", {"certificate-authority: ", "nothere.crt does not exist"}},
      {"current-context: x\nclusters: [{name: c, cluster: {server: https://h}}]\n"
       "users: [{name: u, user: {client-certificate-data: Y2VydA==}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
       "", {"client-certificate and client-key must be given together"}},
      {"clusters: [{name: c, cluster: {server: ftp://h}}]\ncontexts: [{name: x, context: {cluster: c}}]\n", "x",
       {"not an http(s) URL"}},
      {"clusters: {a: b}\n", "x", {"clusters must be a list"}},
      {"clusters: [\n", "", {"not a valid kubeconfig"}},
  };
  int i = 0;
  for (const Case& tc : cases) {
    std::string f = Write("config" + std::to_string(i++), tc.yaml);
    Config c;
    Status st = LoadKubeconfig({f}, tc.context, &c);
    ASSERT_FALSE(st.ok()) << tc.yaml;
    EXPECT_NE(st.message().find(f), std::string::npos) << st.message();
    for (const auto& w : tc.want) EXPECT_NE(st.message().find(w), std::string::npos) << st.message();
  }
}

TEST_F(KubeconfigTest, TokenNeverInErrors) {
  std::string f = Write("config", R"y(
current-context: x
clusters: [{name: c, cluster: {server: "ftp://h"}}]
users: [{name: u, user: {token: s3cr3t-value}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)y");
  Config c;
  Status st = LoadKubeconfig({f}, "", &c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find("s3cr3t"), std::string::npos);
}

TEST_F(KubeconfigTest, NoFileAtAll) {
  Config c;
  Status st = LoadKubeconfig({(dir_ / "none").string()}, "", &c);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_NE(st.message().find("none"), std::string::npos);
}

TEST_F(KubeconfigTest, InCluster) {
  Write("var/run/secrets/kubernetes.io/serviceaccount/token", "tok");
  Write("var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "ca");
  Write("var/run/secrets/kubernetes.io/serviceaccount/namespace", "nodevol-system\n");
  InClusterSource src{dir_.string(), "10.0.0.1", "443"};
  Config c;
  Status st = LoadInCluster(src, &c);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.server, "https://10.0.0.1:443");
  EXPECT_EQ(c.token_file, (dir_ / "var/run/secrets/kubernetes.io/serviceaccount/token").string());
  EXPECT_EQ(c.ca_file, (dir_ / "var/run/secrets/kubernetes.io/serviceaccount/ca.crt").string());
  EXPECT_EQ(c.token, "");  // read through token_file so it can rotate
  EXPECT_EQ(c.ns, "nodevol-system");

  src.host = "fd00::1";
  ASSERT_TRUE(LoadInCluster(src, &c).ok());
  EXPECT_EQ(c.server, "https://[fd00::1]:443");
}

TEST_F(KubeconfigTest, InClusterErrors) {
  Config c;
  EXPECT_EQ(LoadInCluster(InClusterSource{dir_.string(), "", ""}, &c).code(), Status::Code::kFailedPrecondition);
  Status st = LoadInCluster(InClusterSource{dir_.string(), "10.0.0.1", "443"}, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("token"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol::kube
