// Test certificates made with the openssl command (argv, no shell): a
// self-signed CA and leaf certificates it signs, as docs/tls.md tells an
// operator to make them (EC P-256, 30 days). A failure to make one fails
// the current test and returns empty paths.
#pragma once

#include <string>
#include <vector>

namespace nodevol::testing {

struct TestCa {
  std::string cert, key;  // <dir>/<name>-ca.crt, -ca.key
};

struct TestCert {
  std::string cert, key;  // <dir>/<name>.crt, .key
};

// A CA certificate (basicConstraints CA:TRUE) named CN=<name> in dir.
TestCa MakeCa(const std::string& dir, const std::string& name);

// kAny: no extendedKeyUsage at all, which OpenSSL takes as good for any purpose.
enum class CertUse { kServer, kClient, kAny };

// A leaf signed by ca with CN=<name>, the given subjectAltName entries
// ("DNS:node-a", "IP:127.0.0.1") and extendedKeyUsage serverAuth (nodevold)
// or clientAuth (the provisioner), or none (kAny).
TestCert MakeCert(const TestCa& ca, const std::string& dir, const std::string& name,
                  const std::vector<std::string>& sans, CertUse use);

// Reads a whole file (PEM) for SslCredentialsOptions.
std::string ReadPem(const std::string& path);

}  // namespace nodevol::testing
