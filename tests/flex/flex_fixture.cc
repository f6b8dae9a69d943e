#include "flex_fixture.h"

namespace nodevol::testing {

::testing::AssertionResult HasStatus(const FlexResult& r, const std::string& want) {
  if (r.json.is_null()) return ::testing::AssertionFailure() << "not exactly one JSON object: " << Describe(r);
  if (!r.json.contains("status") || !r.json["status"].is_string())
    return ::testing::AssertionFailure() << "no string status: " << Describe(r);
  if (r.json.contains("message") && !r.json["message"].is_string())
    return ::testing::AssertionFailure() << "message is not a string: " << Describe(r);
  if (r.pipe_held || r.timed_out) return ::testing::AssertionFailure() << "pipe not closed: " << Describe(r);
  bool ok = r.status() == "Success" || r.status() == "Not supported";
  if (ok ? r.exit_code != 0 : r.exit_code != 1)
    return ::testing::AssertionFailure() << "exit code does not match status: " << Describe(r);
  if (r.status() != want) return ::testing::AssertionFailure() << "want " << want << ": " << Describe(r);
  return ::testing::AssertionSuccess();
}

void FlexTest::SetUp() {
  DaemonFixture::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  StartDaemon();
}

std::map<std::string, std::string> FlexTest::Env(const std::map<std::string, std::string>& extra) const {
  std::map<std::string, std::string> env = {{"NODEVOL_FLEX_SOCKET", socket_},
                                            {"NODEVOL_FLEX_CONFIG", "/nonexistent"}};
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

FlexResult FlexTest::Flex(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env,
                          Capture capture) const {
  return RunFlex(args, Env(extra_env), capture);
}

Options FlexTest::MountOptions(const std::string& uid, const std::string& name, const Options& user) {
  Options o = {{"kubernetes.io/fsType", ""},
               {"kubernetes.io/readwrite", "rw"},
               {"kubernetes.io/pvOrVolumeName", name},
               {"kubernetes.io/pod.name", "web-0"},
               {"kubernetes.io/pod.namespace", "default"},
               {"kubernetes.io/pod.uid", uid},
               {"kubernetes.io/serviceAccount.name", "default"}};
  for (const auto& [k, v] : user) o[k] = v;
  return o;
}

FlexResult FlexTest::Mount(const std::string& target, const Options& opts, Capture capture) const {
  return Flex({"mount", target, KubeletJson(opts)}, {}, capture);
}

FlexResult FlexTest::Unmount(const std::string& target, Capture capture) const {
  return Flex({"unmount", target}, {}, capture);
}

grpc::Status FlexTest::CreateVolume(const std::string& name, uint64_t size, const std::string& pool,
                                   const std::string& ns) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::CreateVolumeRequest req;
  req.set_name(name);
  req.set_pool(pool);
  req.set_size_bytes(size);
  (*req.mutable_parameters())["nodevol.io/pvc-namespace"] = ns;
  v1::CreateVolumeResponse resp;
  return stub()->CreateVolume(&ctx, req, &resp);
}

}  // namespace nodevol::testing
