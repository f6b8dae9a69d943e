// The FlexVolume driver's calls as kubelet makes them (flex/calls.h): the
// input is split at NUL bytes into argv (at most 8 arguments), the options
// JSON of mount among them. nodevold is stood in for by a thread serving
// the flex door on a socket of the fuzzer's own, answering every request
// with success at once (the real door's side is fuzzed through node_api).
// It serves one connection at a time, and each input ends only when the
// door is done with every connection the input made: libFuzzer's leak
// check after an input must not find the door's thread half-way through
// a reply (found by run-long: a "leak" of the request and reply the
// thread still held, on a thread per connection).
// Properties: every argv gets one reply whose JSON parses, with status
// Success, Failure (with a message) or Not supported; a secret passed in
// the options (kubernetes.io/secret/*) never shows in the reply; every
// request reaching the door is a DoorRequest with a call set.
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/frame.h"
#include "calls.h"
#include "nodevol/v1/flex_door.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using nodevol::v1::DoorRequest;
using nodevol::v1::DoorResponse;

// What nodevold would answer to a call that succeeded.
DoorResponse Success(const DoorRequest& req) {
  DoorResponse resp;
  resp.set_code(0);
  switch (req.call_case()) {
    case DoorRequest::kPublish:
      resp.mutable_publish()->set_volume(req.publish().volume().empty() ? "inline-1" : req.publish().volume());
      resp.mutable_publish()->set_target(req.publish().target());
      break;
    case DoorRequest::kUnpublish:
      resp.mutable_unpublish()->set_was_published(true);
      break;
    case DoorRequest::kGetVolume: {
      auto* v = resp.mutable_get_volume()->mutable_volume();
      v->set_name(req.get_volume().name());
      v->set_size_bytes(1 << 20);
      break;
    }
    case DoorRequest::kExpandVolume: {
      auto* v = resp.mutable_expand_volume()->mutable_volume();
      v->set_name(req.expand_volume().name());
      v->set_size_bytes(req.expand_volume().size_bytes());
      break;
    }
    case DoorRequest::CALL_NOT_SET:
      nodevol::fuzz::Broken("the driver sent a DoorRequest without a call");
  }
  return resp;
}

void Serve(int fd) {
  for (;;) {
    std::string bytes;
    if (nodevol::ReadFrame(fd, 1 << 20, &bytes) != nodevol::FrameResult::kOk) break;
    DoorRequest req;
    if (!req.ParseFromString(bytes)) nodevol::fuzz::Broken("the driver sent bytes that are not a DoorRequest");
    std::string out;
    Success(req).SerializeToString(&out);
    if (nodevol::WriteFrame(fd, out) != nodevol::FrameResult::kOk) break;
  }
  ::close(fd);
}

// The driver's socket setting; the door is it with ".flex" appended.
const std::string& SocketBase() {
  static const std::string base = "/tmp/nodevol-fuzz-flex-" + std::to_string(::getpid()) + ".sock";
  return base;
}

sockaddr_un DoorAddress() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  (SocketBase() + ".flex").copy(addr.sun_path, sizeof addr.sun_path - 1);
  return addr;
}

void StartDoor() {
  const std::string& base = SocketBase();
  const std::string door = base + ".flex";
  ::unlink(door.c_str());
  int ls = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr = DoorAddress();
  if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(ls, 64) != 0)
    nodevol::fuzz::Broken("cannot serve the stand-in door at " + door);
  std::thread([ls] {
    for (;;) {
      int fd = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) Serve(fd);
    }
  }).detach();
  ::setenv("NODEVOL_FLEX_SOCKET", base.c_str(), 1);
  ::setenv("NODEVOL_FLEX_CONFIG", "/dev/null", 1);
}

// Returns when the door has closed every connection made before: it
// serves them in order, so once it closes one made now, it is done with
// the driver's, and its thread holds nothing of them.
void WaitForDoor() {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr = DoorAddress();
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    nodevol::fuzz::Broken("cannot reach the stand-in door");
  ::shutdown(fd, SHUT_WR);
  char c;
  while (::read(fd, &c, 1) > 0) {
  }
  ::close(fd);
}

// The driver's call. It arms a SIGALRM watchdog (flex/output.h), as a
// process of its own may; libFuzzer times inputs with SIGALRM too: keep its own.
nodevol::flex::Reply Run(const std::vector<std::string>& args) {
  struct sigaction fuzzer_alarm {};
  ::sigaction(SIGALRM, nullptr, &fuzzer_alarm);
  nodevol::flex::Reply reply = nodevol::flex::RunCall(args);
  struct itimerval off {};
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::sigaction(SIGALRM, &fuzzer_alarm, nullptr);
  WaitForDoor();
  return reply;
}

// Values of the options' secrets worth looking for in a reply. args[0] is
// the call's name, never options (kubelet picks it from a fixed set).
std::vector<std::string> Secrets(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 1; i < args.size(); ++i) {
    auto j = nlohmann::json::parse(args[i], nullptr, false);
    if (!j.is_object()) continue;
    for (const auto& [k, v] : j.items())
      if (k.rfind("kubernetes.io/secret/", 0) == 0 && v.is_string() && v.get<std::string>().size() >= 8)
        out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  StartDoor();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != 0) {
      args.back().push_back(static_cast<char>(data[i]));
    } else if (args.size() == 8) {
      break;
    } else {
      args.emplace_back();
    }
  }
  nodevol::flex::Reply reply = Run(args);
  std::string text = reply.ToJson();
  auto j = nlohmann::json::parse(text, nullptr, false);
  FUZZ_CHECK(j.is_object() && j.contains("status") && j["status"].is_string(), "a reply that is not one JSON object");
  const std::string status = j["status"];
  FUZZ_CHECK(status == "Success" || status == "Failure" || status == "Not supported", "an unknown status");
  if (status == "Failure") FUZZ_CHECK(!reply.message.empty(), "a failure without a message");
  // A secret's value may also be part of another argument that a reply
  // rightly names (found by run-long: a call named after a piece of the
  // options, echoed as an unknown call): only a value that leaves the
  // reply when the options' secret is replaced came from the secret. The
  // call's name stays as it is (found by run-long: a name that was itself
  // options JSON with a secret in it, which the replacement changed).
  for (const auto& secret : Secrets(args)) {
    if (text.find(secret) == std::string::npos) continue;
    std::vector<std::string> other = args;
    for (size_t i = 1; i < other.size(); ++i) {
      std::string& a = other[i];
      auto j = nlohmann::json::parse(a, nullptr, false);
      if (!j.is_object()) continue;
      bool changed = false;
      for (auto& el : j.items())
        if (el.key().rfind("kubernetes.io/secret/", 0) == 0 && el.value() == secret) {
          el.value() = "\x01replaced\x01";
          changed = true;
        }
      if (changed) a = j.dump();
    }
    FUZZ_CHECK(Run(other).ToJson().find(secret) != std::string::npos, "a secret in the reply");
  }
  return 0;
}
