// EnrolledFiles: what an enrolled nodevold serves its TLS listener with,
// in one private directory (0700): tls.key (0600, made on this node and
// never sent anywhere), tls.crt (the certificate nodevol's signer issued
// for it) and ca.crt (the CA bundle the provisioner's client certificates
// must chain to, from the signer's ConfigMap). gRPC's file watcher reads
// the same paths (server/tls_credentials.h), so a rewrite applies to new
// connections without a restart.
//
// Each file is replaced whole (base/atomic_file.h); the key is written
// before its certificate. A crash between the two leaves a pair Load
// refuses, and the node enrolls again: never a certificate served with a
// key it does not belong to.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"
#include "pki/cert.h"
#include "server/tls_credentials.h"

namespace nodevol::enroll {

struct EnrolledFiles {
  std::string dir;

  TlsFiles tls() const { return {dir + "/ca.crt", dir + "/tls.crt", dir + "/tls.key"}; }

  // The certificate held for `node`, if it can serve now: present, its
  // key's, naming `node`, not expired, and a CA bundle next to it.
  // NOT_FOUND when nothing was enrolled yet; FAILED_PRECONDITION, with
  // what is wrong, for files that cannot serve. *written: when tls.crt
  // was written, i.e. issued (its notBefore is backdated for clock skew).
  Status Load(const std::string& node, pki::CertFacts* facts, std::chrono::system_clock::time_point* written) const;
  // Makes the directory when missing.
  Status WritePair(const std::string& key_pem, const std::string& cert_pem) const;
  // Rewrites ca.crt when it differs; *changed says whether it did.
  Status WriteCaBundle(const std::string& bundle_pem, bool* changed) const;
};

}  // namespace nodevol::enroll
