// Enroller: nodevold's side of zero-touch enrollment (docs/enrollment.md).
// It runs on a thread of its own, so the unix socket, FlexVolume and CSI
// serve from the first second whatever the apiserver or the provisioner are
// doing. Each pass, as the node itself (kubelet's kubeconfig):
//  1. the CA bundle from the signer's ConfigMap into ca.crt;
//  2. a serving certificate (request_certificate.h) when none is held, when
//     two thirds of its lifetime have passed (counted from when it was
//     received: the signer backdates notBefore), when the Node's
//     InternalIP addresses are no longer the ones it names, or when it does
//     not chain to the first certificate of the published bundle, the CA
//     that signs now (the CA was replaced or is being rotated; the others
//     are trusted, pki/bundle.h);
//  3. on_ready, once, after the first usable pair is on disk: nodevold then
//     starts its TLS listener (at start, when the files already hold one,
//     ready() is true and on_ready is never called);
//  4. the announcement on the node's own Node object, once the listener's
//     port is known (Announce): the label the provisioner selects nodes by,
//     the annotation nodevol.io/endpoint = address:port and
//     nodevol.io/serving-ca, written only when they differ.
// A failed pass is retried after a backoff (1 s doubling to 1 min; a
// request the signer refused, after the recheck interval); a complete one
// sleeps until the renewal is due or 10 minutes, whichever is first (the
// CA bundle is re-read then, for CA rotation). A signed pair that cannot
// be written is kept and written on the next pass, not asked for again;
// a certificate not yet valid by this node's clock is kept (a warning
// says the clock is behind). The bundle's certificates are trust anchors
// as they are: an operator's intermediate CA works (pki::VerifyChain).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "enroll/enrolled_files.h"
#include "enroll/request_certificate.h"

namespace nodevol::kube {
class Api;
}

namespace nodevol::enroll {

inline constexpr char kEndpointAnnotation[] = "nodevol.io/endpoint";
// The fingerprint (SHA-256 of the DER, hex) of the published CA the
// serving certificate comes from: the provisioner retires an old CA once
// every node serves from the new one (provisioner/enroll/ca_rotation.h).
inline constexpr char kServingCaAnnotation[] = "nodevol.io/serving-ca";

struct EnrollConfig {
  std::string node;
  EnrolledFiles files;
  std::string ca_namespace = "nodevol-system", ca_configmap = "nodevol-ca";
  std::chrono::seconds lifetime{std::chrono::hours(24 * 7)};  // asked for; the signer may cut it
  std::string label_key = "nodevol.io/node", label_value = "true";  // key "": no label
  std::chrono::seconds recheck{std::chrono::minutes(10)};
};

class Enroller {
 public:
  Enroller(kube::Api* api, EnrollConfig config, std::function<void()> on_ready);
  ~Enroller();
  Enroller(const Enroller&) = delete;
  Enroller& operator=(const Enroller&) = delete;

  // Whether the files held a usable certificate when this was made.
  bool ready() const { return ready_at_start_; }
  void Start();
  // Ends a pass in progress at its next wait and joins the thread.
  void Stop();
  // The listener's address: a wildcard host (0.0.0.0, [::]) is announced
  // as the Node's first InternalIP address.
  void Announce(const std::string& host, int port);

  // For tests and the log: when the certificate held now expires
  // (time_point{} before the first one).
  std::chrono::system_clock::time_point not_after() const;

 private:
  void Loop();
  // One pass; *next says when the next one is due.
  Status Pass(std::chrono::system_clock::time_point* next);
  Status CheckIdentity();
  // Why the certificate `cert_pem` (with `facts`) cannot serve now: it
  // does not chain to `bundle` (at its notBefore, if that is later than
  // now), or names other addresses than `ips`; "" when it can.
  std::string WhyNotServing(const std::string& cert_pem, const pki::CertFacts& facts, const std::string& bundle,
                            const std::vector<std::string>& ips, std::chrono::system_clock::time_point now);
  Status AnnounceOn(const nlohmann::json& node, const std::vector<std::string>& ips, const std::string& serving_ca);
  bool SleepFor(std::chrono::milliseconds d);

  kube::Api* api_;
  EnrollConfig config_;
  std::function<void()> on_ready_;
  bool ready_at_start_ = false;
  bool ready_called_ = false;
  bool identity_checked_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool wake_ = false;
  std::string announce_host_;
  int announce_port_ = 0;
  pki::CertFacts held_;
  std::chrono::system_clock::time_point issued_;  // when held_ was received
  bool have_cert_ = false;
  // A pair the signer gave that could not be written yet (the loop's
  // thread only).
  struct Pending {
    std::string key, cert;
    pki::CertFacts facts;
    std::chrono::system_clock::time_point received;
  } pending_;
  bool clock_behind_said_ = false;
  std::thread thread_;
};

}  // namespace nodevol::enroll
