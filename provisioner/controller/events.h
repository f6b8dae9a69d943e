// EventRecorder: core/v1 Events about claims and volumes, as kubectl
// describe shows them (provisioner-contract.md §2). A repeat of the same
// (object, type, reason, message) updates the earlier event's count and
// lastTimestamp instead of adding one, as client-go's correlator does, so a
// retrying claim does not flood the namespace. Failures to record are
// logged, never returned: an event is never worth failing the operation.
// Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace nodevol::kube {
class Client;
}

namespace nodevol::provisioner {

class EventRecorder {
 public:
  EventRecorder(kube::Client* client, std::string component) : client_(client), component_(std::move(component)) {}

  // `object`: the claim or volume JSON (kind, apiVersion, metadata).
  // `type`: "Normal" or "Warning".
  void Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
              const std::string& message);

 private:
  struct Seen {
    std::string ns, name;
    int count = 0;
  };
  kube::Client* client_;
  std::string component_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;  // correlation key -> event
};

// RFC 3339 UTC with seconds ("2026-11-21T16:00:00Z"), Events' Time format.
std::string NowRfc3339();

}  // namespace nodevol::provisioner
