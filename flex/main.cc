// nodevol-flex: the FlexVolume driver kubelet executes as
// <plugin dir>/nodevol.io~volume/volume. Each call is forwarded to nodevold
// and answered with exactly one JSON object on stdout (see calls.h, reply.h);
// `install`, `uninstall` and `version` are for operators and print text.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "base/version.h"
#include "calls.h"
#include "install.h"
#include "log.h"
#include "output.h"

namespace nodevol::flex {
namespace {

int Operator(const std::vector<std::string>& args) {
  const std::string& cmd = args[0];
  if (cmd == "version") {
    std::printf("nodevol-flex %s\n", nodevol::Version());
    return 0;
  }
  if (args.size() > 2) {
    std::fprintf(stderr, "usage: nodevol-flex %s [PLUGIN_DIR]\n", cmd.c_str());
    return 2;
  }
  std::string dir = args.size() == 2 ? args[1] : kDefaultPluginDir;
  std::string message;
  bool ok = cmd == "install" ? InstallDriver(dir, &message) : UninstallDriver(dir, &message);
  std::fprintf(ok ? stdout : stderr, "nodevol-flex %s: %s\n", cmd.c_str(), message.c_str());
  return ok ? 0 : 1;
}

int Kubelet(const std::vector<std::string>& args) {
  TakeStdout();
  OpenLog();
  auto start = std::chrono::steady_clock::now();
  Reply reply;
  try {
    reply = RunCall(args);
  } catch (const std::exception& e) {
    reply = Reply::Failure(std::string("nodevol-flex internal error: ") + e.what());
  } catch (...) {
    reply = Reply::Failure("nodevol-flex internal error");
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  // The call and its target only: never the options JSON (it may carry secrets).
  std::string line = (args.empty() ? std::string("(no call)") : args[0]);
  if (args.size() > 1 && (args[0] == "mount" || args[0] == "unmount")) line += " " + args[1];
  std::string json = reply.ToJson();
  line += ": " + json.substr(0, json.size() - 1) + " in " + std::to_string(ms.count()) + " ms";
  if (reply.kind == Reply::Kind::kFailure)
    LogError(line);
  else if (args.empty() || args[0] != "init")  // kubelet probes often; success there is noise
    LogInfo(line);
  WriteReply(reply);
  // Skip static destructors and gRPC's shutdown: the answer is out.
  ::_exit(reply.exit_code());
}

}  // namespace
}  // namespace nodevol::flex

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "install" || args[0] == "uninstall" || args[0] == "version"))
    return nodevol::flex::Operator(args);
  return nodevol::flex::Kubelet(args);
}
