// The rotation's rules as pure functions: the signer goes first and the old
// CA stays while nodes move; the client certificate waits for the nodes to
// trust the new CA; an old CA goes when every node moved, when it expired,
// or when nothing it signed can still be valid.
#include "enroll/ca_rotation.h"

#include <gtest/gtest.h>

#include "pki/ca.h"

namespace nodevol::provisioner {
namespace {

using namespace std::chrono_literals;

struct Cas {
  pki::Ca a, b;
  pki::BundleCert ca, cb;
  Cas() {
    EXPECT_TRUE(pki::Ca::Make("a", 24h * 365, &a).ok());
    EXPECT_TRUE(pki::Ca::Make("b", 24h * 365, &b).ok());
    ca = pki::SplitBundle(a.cert_pem()).front();
    cb = pki::SplitBundle(b.cert_pem()).front();
  }
};

RotationTimes Times() {
  RotationTimes t;
  t.spread = 15min;
  t.settle = 5min;
  t.max_node_cert = 24h * 30;
  return t;
}

TEST(CaRotation, ANewSignerGoesFirstAndTheOldStays) {
  Cas c;
  auto now = std::chrono::system_clock::now();
  std::string why;
  PublishedCa first = NextPublished({}, c.ca, {}, now, Times(), &why);
  ASSERT_EQ(first.certs.size(), 1u);
  EXPECT_FALSE(why.empty());
  PublishedCa same = NextPublished(first, c.ca, {"x"}, now + 1h, Times(), &why);
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(same.certs.size(), 1u);

  PublishedCa rotated = NextPublished(first, c.cb, {c.ca.fingerprint}, now + 2h, Times(), &why);
  ASSERT_EQ(rotated.certs.size(), 2u);
  EXPECT_EQ(rotated.certs[0].fingerprint, c.cb.fingerprint);
  EXPECT_EQ(rotated.certs[1].fingerprint, c.ca.fingerprint);
  EXPECT_EQ(rotated.signer_since, now + 2h);
  EXPECT_NE(why.find("older kept"), std::string::npos) << why;

  // The ConfigMap carries it all: a new leader reads the same state.
  nlohmann::json cm = PublishedCaPatch(rotated);
  PublishedCa read = ReadPublishedCa(cm);
  ASSERT_EQ(read.certs.size(), 2u);
  EXPECT_EQ(read.certs[0].fingerprint, c.cb.fingerprint);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(read.signer_since - rotated.signer_since).count(), 0);
  ASSERT_EQ(read.trusted_since.size(), 2u);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(read.trusted_since[c.cb.fingerprint] - (now + 2h)).count(), 0);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(read.trusted_since[c.ca.fingerprint] - now).count(), 0);
}

TEST(CaRotation, TheOldCaGoesOnlyWhenEveryNodeMovedAndTheTimesPassed) {
  Cas c;
  auto t0 = std::chrono::system_clock::now();
  std::string why;
  PublishedCa rotated = NextPublished(NextPublished({}, c.ca, {}, t0, Times(), &why), c.cb, {}, t0, Times(), &why);
  auto b = c.cb.fingerprint, a = c.ca.fingerprint;
  // Every node moved, but too soon: the replicas' client certificates may
  // still come from the old CA.
  EXPECT_EQ(NextPublished(rotated, c.cb, {b, b}, t0 + 10min, Times(), &why).certs.size(), 2u);
  // Late enough, but one node still serves from the old one, or says nothing.
  EXPECT_EQ(NextPublished(rotated, c.cb, {b, a}, t0 + 1h, Times(), &why).certs.size(), 2u);
  EXPECT_EQ(NextPublished(rotated, c.cb, {b, ""}, t0 + 1h, Times(), &why).certs.size(), 2u);
  PublishedCa done = NextPublished(rotated, c.cb, {b, b}, t0 + 21min, Times(), &why);
  ASSERT_EQ(done.certs.size(), 1u);
  EXPECT_EQ(done.certs[0].fingerprint, b);
  EXPECT_NE(why.find("serve from the new one"), std::string::npos) << why;
  // A node that never says (an old nodevold, or one that is down) holds it
  // at most until nothing the old CA signed can be valid.
  PublishedCa late = NextPublished(rotated, c.cb, {""}, t0 + 24h * 30 + 16min, Times(), &why);
  EXPECT_EQ(late.certs.size(), 1u);
  EXPECT_NE(why.find("can still be valid"), std::string::npos) << why;
}

TEST(CaRotation, TheClientCertificateWaitsUntilNodesTrustTheNewCa) {
  Cas c;
  auto t0 = std::chrono::system_clock::now();
  std::string why;
  PublishedCa rotated =
      NextPublished(NextPublished({}, c.ca, {}, t0 - 1h, Times(), &why), c.cb, {}, t0, Times(), &why);
  auto b = c.cb.fingerprint, a = c.ca.fingerprint;
  EXPECT_EQ(ClientIssuer(rotated, {b, a}, t0 + 1min, Times()), a);
  EXPECT_EQ(ClientIssuer(rotated, {b, a}, t0 + 15min, Times()), b);
  // A replica that restarted holds the new CA only: nothing better.
  EXPECT_EQ(ClientIssuer(rotated, {b}, t0 + 1min, Times()), b);
  // A standby that read the new Secret before the leader published it: the
  // published CA is the one the nodes trust.
  PublishedCa old = NextPublished({}, c.ca, {}, t0 - 1h, Times(), &why);
  EXPECT_EQ(ClientIssuer(old, {b, a}, t0, Times()), a);
  // A bundle published before rotations were tracked: its CA is old enough.
  PublishedCa untracked = old;
  untracked.signer_since = {};
  untracked.trusted_since.clear();
  EXPECT_EQ(ClientIssuer(untracked, {a}, t0, Times()), a);
  // Reverted within the spread (a, then b, then a again): a has been
  // trusted all along, b only just; the client certificate stays on a.
  PublishedCa reverted = NextPublished(rotated, c.ca, {}, t0 + 2min, Times(), &why);
  ASSERT_EQ(reverted.certs.size(), 2u);
  EXPECT_EQ(reverted.certs[0].fingerprint, a);
  EXPECT_EQ(ClientIssuer(reverted, {a, b}, t0 + 3min, Times()), a);
  EXPECT_EQ(ClientIssuer(reverted, {b, a}, t0 + 3min, Times()), a) << "b is not yet trusted everywhere";
}

// A bundle whose signer-since is missing (from an older provisioner, or a
// hand edit) or in the future: from now, written down, and nothing retired
// at once for it.
TEST(CaRotation, AnUnusableSignerSinceCountsFromNow) {
  Cas c;
  auto now = std::chrono::system_clock::now();
  auto b = c.cb.fingerprint;
  for (auto since : {std::chrono::system_clock::time_point{}, now + 24h * 365}) {
    PublishedCa p;
    p.certs = pki::SplitBundle(c.b.cert_pem() + c.a.cert_pem());
    p.signer_since = since;
    std::string why;
    PublishedCa next = NextPublished(p, c.cb, {b, b}, now, Times(), &why);
    EXPECT_EQ(next.signer_since, now);
    EXPECT_EQ(next.certs.size(), 2u) << "the older CA went at once: " << why;
    EXPECT_NE(why.find("first since now"), std::string::npos) << why;
    // Read back from the ConfigMap, garbage included.
    nlohmann::json cm = PublishedCaPatch(p);
    cm["metadata"]["annotations"][kSignerSinceAnnotation] = "yesterday";
    cm["metadata"]["annotations"][kTrustedSinceAnnotation] = "{not json";
    PublishedCa read = ReadPublishedCa(cm);
    EXPECT_EQ(read.signer_since, std::chrono::system_clock::time_point{});
    EXPECT_TRUE(read.trusted_since.empty());
  }
}

TEST(CaRotation, ExpiredAndSurplusOldCasGoAtOnce) {
  Cas c;
  pki::Ca short_lived, d;
  ASSERT_TRUE(pki::Ca::Make("short", 1s, &short_lived).ok());
  ASSERT_TRUE(pki::Ca::Make("d", 24h, &d).ok());
  auto now = std::chrono::system_clock::now() + 1h;
  PublishedCa p;
  p.certs = pki::SplitBundle(c.b.cert_pem() + short_lived.cert_pem() + c.a.cert_pem() + d.cert_pem());
  p.signer_since = now - 1min;
  RotationTimes t = Times();
  t.max_retiring = 1;
  std::string why;
  PublishedCa next = NextPublished(p, c.cb, {""}, now, t, &why);
  ASSERT_EQ(next.certs.size(), 2u) << why;
  EXPECT_EQ(next.certs[1].fingerprint, c.ca.fingerprint);
  EXPECT_NE(why.find("expired"), std::string::npos) << why;
}

}  // namespace
}  // namespace nodevol::provisioner
