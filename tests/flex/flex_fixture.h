// FlexTest: the integration fixture's real nodevold plus the driver run as
// kubelet runs it, pointed at that daemon through the environment (and away
// from any /etc/nodevol/flex.conf on the host).
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <vector>

#include "daemon_fixture.h"
#include "flex_runner.h"

namespace nodevol::testing {

using Options = std::map<std::string, std::string>;

// The contract's output rules for any call (one JSON object, a string
// status, exit 0 exactly for Success/Not supported, the pipe closed at exit)
// plus the wanted status.
::testing::AssertionResult HasStatus(const FlexResult& r, const std::string& want);

class FlexTest : public DaemonFixture {
 protected:
  void SetUp() override;

  std::map<std::string, std::string> Env(const std::map<std::string, std::string>& extra = {}) const;
  FlexResult Flex(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env = {},
                  Capture capture = Capture::kCombined) const;

  // What kubelet puts in a mount call's JSON for pod uid's volume dir name,
  // then the user's options (which win).
  static Options MountOptions(const std::string& uid, const std::string& name, const Options& user);
  // mount <target> <json>, with target = MakeTarget(uid, name).
  FlexResult Mount(const std::string& target, const Options& opts, Capture capture = Capture::kCombined) const;
  FlexResult Unmount(const std::string& target, Capture capture = Capture::kCombined) const;
  // A volume as the provisioner makes it for a claim in `ns` (the pods of
  // MountOptions are in "default"): nodevold publishes it only there.
  grpc::Status CreateVolume(const std::string& name, uint64_t size, const std::string& pool = "default",
                            const std::string& ns = "default");

};

// Pod UIDs as kubelet names their directories.
inline const std::string kPod1 = "3f1c0a2e-8b4d-4c7e-9a51-6d2f0e7b9c11";
inline const std::string kPod2 = "a7d3e9b0-1c2f-4e5a-8b6d-0f9e8d7c6b5a";

}  // namespace nodevol::testing
