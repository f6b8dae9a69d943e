// CaRotation: what the leader publishes as the nodes' CA bundle while the
// CA it signs with changes, and which CA each replica issues its own
// client certificate from meanwhile (docs/enrollment.md "Rotating the
// CA"). Pure functions of what is published, what this replica holds, what
// the nodes say and the time, so a new leader goes on where the last one
// stopped: the state is the ConfigMap.
//
// The published bundle (ca.crt) holds the signing CA first and the CAs
// being retired after it; annotation nodevol.io/signer-since says when
// the first one became first. Nodes trust all of them (the provisioner's
// client certificate may come from any) and ask for a new certificate
// when theirs does not chain to the first. So a rotation is:
//  1. the leader signs with the new CA and publishes [new, old...];
//  2. nodes read the bundle within their recheck (10 minutes), trust both
//     and re-enroll; each says on its Node which CA it serves from
//     (nodevol.io/serving-ca);
//  3. replicas issue their client certificates from a CA that has been in
//     the bundle for `spread` (by then every live node trusts it): the old
//     one until `spread` after the new was first published, then the new;
//  4. an old CA leaves the bundle once every node serves from the new one
//     and `spread + settle` has passed, or when it has expired, or at the
//     latest `max_node_cert + spread` after the rotation, when no
//     certificate it signed can still be valid (a node that never says,
//     an old nodevold, or a node that is down).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pki/bundle.h"

namespace nodevol::provisioner {

inline constexpr char kSignerSinceAnnotation[] = "nodevol.io/signer-since";
// JSON {"<fingerprint>": "<RFC 3339 time>"}: when each CA of the bundle was
// first published, so trusted by every live node `spread` later.
inline constexpr char kTrustedSinceAnnotation[] = "nodevol.io/trusted-since";
inline constexpr char kServingCaAnnotation[] = "nodevol.io/serving-ca";

struct PublishedCa {
  std::vector<pki::BundleCert> certs;  // first: the signer's
  // When certs[0] became first; {}: unknown (a bundle published before
  // rotations were tracked, or edited), written as now at the next pass.
  std::chrono::system_clock::time_point signer_since{};
  // When each was first published (kTrustedSinceAnnotation); a CA not here
  // was published before these times were kept: long ago.
  std::map<std::string, std::chrono::system_clock::time_point> trusted_since;
};

// From the ConfigMap (data ca.crt, the annotation); empty when it has none.
PublishedCa ReadPublishedCa(const nlohmann::json& configmap);
// The merge patch that makes a ConfigMap say `p`.
nlohmann::json PublishedCaPatch(const PublishedCa& p);

struct RotationTimes {
  // Nodes re-read the bundle every 10 minutes, and gRPC takes new files
  // up within a minute: after this every live node trusts a new CA.
  std::chrono::seconds spread{std::chrono::minutes(15)};
  // After the replicas' client certificates moved to the new CA (they
  // look every 30 s; gRPC re-reads within a minute), before an old CA goes.
  std::chrono::seconds settle{std::chrono::minutes(5)};
  // --node-cert-max-lifetime-seconds: no certificate an old CA signed is
  // valid this long after the rotation.
  std::chrono::seconds max_node_cert{std::chrono::hours(24 * 30)};
  size_t max_retiring = 3;  // older CAs beyond these go at once
};

// What the leader publishes next. `node_cas`: for every nodevol node, the
// fingerprint it says it serves from ("" when it says nothing). `*why`
// says what changed, "" when nothing did (the result is `published`).
PublishedCa NextPublished(const PublishedCa& published, const pki::BundleCert& signer,
                          const std::vector<std::string>& node_cas, std::chrono::system_clock::time_point now,
                          const RotationTimes& times, std::string* why);

// The fingerprint of the CA a replica issues its client certificate from,
// among `held` (the ones it has keys of, the signer first): the first of
// them that has been published for `spread`, else (none has) the signer.
std::string ClientIssuer(const PublishedCa& published, const std::vector<std::string>& held,
                         std::chrono::system_clock::time_point now, const RotationTimes& times);

}  // namespace nodevol::provisioner
