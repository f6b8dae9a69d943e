// NodeCa: the node CA as this replica follows it (docs/enrollment.md).
// Load reads the CA Secret at start (LoadOrMakeCa, ca_store.h); then every
// `poll` (and at once on Wake, e.g. when this replica starts leading) it
// reads the Secret and the published bundle again:
//  - the Secret holds another CA (a cert-manager renewal, an operator's
//    replacement): it signs once the published bundle has it first; the
//    one before is kept in memory, to sign until then and for this
//    replica's client certificate while nodes may not trust the new one;
//  - while this replica leads it alone publishes the bundle, the Secret's
//    CA first, keeping older CAs while nodes move off them (ca_rotation.h),
//    and only from a Secret and a ConfigMap read in the same pass. A
//    standby that read a new Secret first publishes nothing;
//  - the CA this replica's client certificate comes from and the bundle it
//    trusts nodes' certificates with: on_change runs when either changed
//    (the ClientCertificate reissues);
//  - the signer's expiry: a gauge, and from `warn_expiry` before it a
//    warning in the log and, from the leader, a Warning event on the Secret
//    (reason NodeCaExpiring), once a day each.
// A Secret that cannot be read or holds no CA keeps the CA held, with a
// warning. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "enroll/ca_rotation.h"

namespace nodevol::kube {
class Api;
}
namespace nodevol::pki {
class Ca;
}

namespace nodevol::provisioner {

class EventRecorder;
class ProvisionerMetrics;

class NodeCa {
 public:
  struct Config {
    std::string ns, secret, configmap;
    std::chrono::seconds made_lifetime{std::chrono::hours(24 * 365 * 10)};  // of a CA this replica makes
    std::chrono::milliseconds poll{std::chrono::seconds(30)};
    RotationTimes times;
    std::chrono::seconds warn_expiry{std::chrono::hours(24 * 30)};
  };
  struct Hooks {
    std::function<bool()> leading;
    // The CA each nodevol node says it serves from (kServingCaAnnotation;
    // "" when it says nothing); nullopt while the nodes are not known yet.
    std::function<std::optional<std::vector<std::string>>()> node_cas;
    std::function<void()> on_change;
    EventRecorder* events = nullptr;
    ProvisionerMetrics* metrics = nullptr;
  };

  NodeCa(kube::Api* api, Config config);
  ~NodeCa();
  NodeCa(const NodeCa&) = delete;
  NodeCa& operator=(const NodeCa&) = delete;

  // The Secret's CA, or a new one stored there; then one Poll as a standby.
  Status Load();
  std::shared_ptr<const pki::Ca> Signer() const;
  std::shared_ptr<const pki::Ca> ClientIssuer() const;
  // PEM of every CA a node's certificate may chain to now.
  std::string TrustBundle() const;
  PublishedCa Published() const;

  // One round (the loop's, and tests'). True when the client issuer or the
  // trust bundle changed.
  bool Poll(bool leading, const std::optional<std::vector<std::string>>& node_cas);
  void Start(Hooks hooks);
  void Wake();
  void Stop();

 private:
  void Loop();
  // False when the Secret could not be read or held no CA.
  bool FollowSecret();
  void Publish(const std::optional<std::vector<std::string>>& node_cas, std::chrono::system_clock::time_point now);
  void CheckExpiry(bool leading, std::chrono::system_clock::time_point now);

  kube::Api* api_;
  Config config_;
  Hooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false, wake_ = false;
  // secret_ca_: what the Secret holds; previous_: what it held before (kept
  // in memory only); signer_: what signs (ca_rotation.h).
  std::shared_ptr<const pki::Ca> secret_ca_, previous_, signer_, client_issuer_;
  std::string trust_;
  PublishedCa published_;
  std::chrono::system_clock::time_point warned_{}, evented_{};
  std::thread thread_;
};

}  // namespace nodevol::provisioner
