#include "test_certs.h"

#include <gtest/gtest.h>

#include <fstream>

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

constexpr const char* kOpenssl = "/usr/bin/openssl";

bool Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), kOpenssl);
  std::string out, err;
  int rc = RunCommand(args, &out, &err);
  if (rc != 0) ADD_FAILURE() << "openssl " << args[1] << " failed (" << rc << "):\n" << err;
  return rc == 0;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

}  // namespace

TestCa MakeCa(const std::string& dir, const std::string& name) {
  std::string conf = dir + "/" + name + "-ca.cnf";
  Write(conf,
        "[req]\ndistinguished_name = dn\nx509_extensions = v3\nprompt = no\n"
        "[dn]\nCN = " + name + "\n"
        "[v3]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
        "subjectKeyIdentifier = hash\n");
  TestCa ca{dir + "/" + name + "-ca.crt", dir + "/" + name + "-ca.key"};
  if (!Openssl({"req", "-x509", "-config", conf, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", ca.key, "-out", ca.cert, "-days", "30"}))
    return {};
  return ca;
}

TestCert MakeCert(const TestCa& ca, const std::string& dir, const std::string& name,
                  const std::vector<std::string>& sans, CertUse use) {
  std::string base = dir + "/" + name;
  Write(base + ".cnf", "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = " + name + "\n");
  std::string ext = "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n"
                    "authorityKeyIdentifier = keyid\n";
  if (use != CertUse::kAny)
    ext += "extendedKeyUsage = " + std::string(use == CertUse::kServer ? "serverAuth" : "clientAuth") + "\n";
  if (!sans.empty()) {
    ext += "subjectAltName = ";
    for (size_t i = 0; i < sans.size(); ++i) ext += (i ? "," : "") + sans[i];
    ext += "\n";
  }
  Write(base + ".ext", ext);
  TestCert c{base + ".crt", base + ".key"};
  if (!Openssl({"req", "-new", "-config", base + ".cnf", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", c.key, "-out", base + ".csr"}) ||
      !Openssl({"x509", "-req", "-in", base + ".csr", "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-out",
                c.cert, "-days", "30", "-extfile", base + ".ext"}))
    return {};
  return c;
}

std::string ReadPem(const std::string& path) { return ReadAll(path); }

}  // namespace nodevol::testing
