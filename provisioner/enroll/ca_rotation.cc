#include "enroll/ca_rotation.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "kube/fields.h"

namespace nodevol::provisioner {
namespace {

// RFC 3339 in UTC, to the second, as the apiserver writes times.
std::string SinceText(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool ParseSince(const std::string& s, std::chrono::system_clock::time_point* out) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (!end || *end) return false;
  *out = std::chrono::system_clock::from_time_t(timegm(&tm));
  return true;
}

}  // namespace

PublishedCa ReadPublishedCa(const nlohmann::json& configmap) {
  PublishedCa p;
  p.certs = pki::SplitBundle(kube::Str(kube::Obj(configmap, "data"), "ca.crt"));
  const auto& annotations = kube::Obj(kube::Obj(configmap, "metadata"), "annotations");
  std::string since = kube::Str(annotations, kSignerSinceAnnotation);
  if (!since.empty()) ParseSince(since, &p.signer_since);
  // {"<fingerprint>": "<time>"}: anything that does not parse is unknown.
  nlohmann::json trusted = nlohmann::json::parse(kube::Str(annotations, kTrustedSinceAnnotation), nullptr, false);
  if (trusted.is_object())
    for (const auto& [fp, t] : trusted.items()) {
      std::chrono::system_clock::time_point at;
      if (t.is_string() && ParseSince(t.get<std::string>(), &at)) p.trusted_since[fp] = at;
    }
  return p;
}

nlohmann::json PublishedCaPatch(const PublishedCa& p) {
  nlohmann::json annotations = nlohmann::json::object();
  annotations[kSignerSinceAnnotation] =
      p.signer_since == std::chrono::system_clock::time_point{} ? nullptr : nlohmann::json(SinceText(p.signer_since));
  nlohmann::json trusted = nlohmann::json::object();
  for (const auto& c : p.certs)
    if (auto it = p.trusted_since.find(c.fingerprint); it != p.trusted_since.end())
      trusted[c.fingerprint] = SinceText(it->second);
  annotations[kTrustedSinceAnnotation] = trusted.empty() ? nlohmann::json(nullptr) : nlohmann::json(trusted.dump());
  return {{"metadata", {{"annotations", annotations}}}, {"data", {{"ca.crt", pki::JoinBundle(p.certs)}}}};
}

PublishedCa NextPublished(const PublishedCa& published, const pki::BundleCert& signer,
                          const std::vector<std::string>& node_cas, std::chrono::system_clock::time_point now,
                          const RotationTimes& times, std::string* why) {
  why->clear();
  PublishedCa next;
  // A time in the future (a clock that jumped, a hand edit) would hold a
  // rotation for as long: taken as now.
  auto sane = [&](std::chrono::system_clock::time_point t) { return t > now ? now : t; };
  if (published.certs.empty() || published.certs.front().fingerprint != signer.fingerprint) {
    next.certs.push_back(signer);
    next.signer_since = now;
    for (const auto& c : published.certs)
      if (c.fingerprint != signer.fingerprint && c.validity.not_after > now && next.certs.size() <= times.max_retiring)
        next.certs.push_back(c);
    // Trusted since it was first published: a CA that comes back first
    // (the Secret reverted) has been trusted all along.
    for (const auto& c : next.certs)
      if (auto it = published.trusted_since.find(c.fingerprint); it != published.trusted_since.end())
        next.trusted_since[c.fingerprint] = sane(it->second);
    bool was_published = false;
    for (const auto& c : published.certs) was_published = was_published || c.fingerprint == signer.fingerprint;
    if (!was_published) next.trusted_since[signer.fingerprint] = now;
    *why = published.certs.empty()
               ? "published CA " + pki::ShortFingerprint(signer.fingerprint)
               : fmt::format("the signing CA is now {}; {} older kept while the nodes move to it", pki::ShortFingerprint(signer.fingerprint),
                             next.certs.size() - 1);
    return next;
  }
  next.certs.push_back(published.certs.front());
  // Missing, garbage or in the future: from now, and written down (a
  // bundle from before rotations were tracked, or edited by hand, would
  // otherwise retire its older CAs at once).
  next.signer_since = published.signer_since;
  if (next.signer_since == std::chrono::system_clock::time_point{} || next.signer_since > now) {
    next.signer_since = now;
    *why = "signing CA " + pki::ShortFingerprint(signer.fingerprint) + " first since now (no usable " +
           kSignerSinceAnnotation + ")";
  }
  const bool all_moved = std::all_of(node_cas.begin(), node_cas.end(),
                                     [&](const std::string& fp) { return fp == signer.fingerprint; });
  const auto since = next.signer_since;
  const bool settled = now >= since + times.spread + times.settle;
  const bool none_valid = now >= since + times.max_node_cert + times.spread;
  std::vector<std::string> dropped;
  for (size_t i = 1; i < published.certs.size(); ++i) {
    const auto& c = published.certs[i];
    std::string reason;
    if (c.validity.not_after <= now) reason = "it expired";
    else if (next.certs.size() > times.max_retiring)
      reason = "more than " + std::to_string(times.max_retiring) + " are retiring";
    else if (settled && all_moved) reason = fmt::format("all {} nodes serve from the new one", node_cas.size());
    else if (none_valid) reason = "no certificate it signed can still be valid";
    if (reason.empty()) next.certs.push_back(c);
    else dropped.push_back("retired CA " + pki::ShortFingerprint(c.fingerprint) + " (" + reason + ")");
  }
  for (const auto& c : next.certs)
    if (auto it = published.trusted_since.find(c.fingerprint); it != published.trusted_since.end())
      next.trusted_since[c.fingerprint] = sane(it->second);
  for (const auto& d : dropped) *why += (why->empty() ? "" : "; ") + d;
  return next;
}

std::string ClientIssuer(const PublishedCa& published, const std::vector<std::string>& held,
                         std::chrono::system_clock::time_point now, const RotationTimes& times) {
  if (held.empty()) return "";
  // A published CA every live node trusts by now: in the bundle for
  // `spread` (unknown: from before the times were written, long ago).
  auto trusted = [&](const std::string& fp) {
    auto it = published.trusted_since.find(fp);
    return it == published.trusted_since.end() || now >= it->second + times.spread;
  };
  for (const std::string& fp : held)  // the signer first: it wins when it qualifies
    for (const auto& c : published.certs)
      if (c.fingerprint == fp && trusted(fp)) return fp;
  return held.front();
}

}  // namespace nodevol::provisioner
