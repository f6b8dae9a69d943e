// The signer's policy: a node's own serving certificate, nothing else.
// Requests are made with OpenSSL here, as an attacker would make them.
#include "enroll/csr_check.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <memory>

#include "kube/base64.h"
#include "pki/cert.h"
#include "pki/openssl_ptr.h"

namespace nodevol::provisioner {
namespace {

using json = nlohmann::json;
using pki::BioPtr;
using pki::KeyPtr;
using pki::ReqPtr;

struct CsrSpec {
  std::vector<std::pair<int, std::string>> subject = {{NID_commonName, "n1"}};
  std::vector<std::string> san = {"DNS:n1", "IP:10.0.0.1"};  // OpenSSL's text form
  std::string key = "ec";                                    // ec, rsa1024, rsa2048
  bool tamper = false;  // sign, then swap in another key
};

std::string MakeCsrPem(const CsrSpec& s) {
  KeyPtr key(s.key == "rsa1024" ? EVP_RSA_gen(1024) : s.key == "rsa2048" ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256"));
  ReqPtr req(X509_REQ_new());
  X509_REQ_set_pubkey(req.get(), key.get());
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  for (const auto& [nid, v] : s.subject)
    X509_NAME_add_entry_by_NID(name, nid, MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(v.c_str()), -1, -1, 0);
  if (!s.san.empty()) {
    std::string text;
    for (const auto& n : s.san) text += (text.empty() ? "" : ",") + n;
    STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, nullptr, nullptr, req.get(), nullptr, 0);
    sk_X509_EXTENSION_push(exts, X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, text.c_str()));
    X509_REQ_add_extensions(req.get(), exts);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  }
  X509_REQ_sign(req.get(), key.get(), EVP_sha256());
  if (s.tamper) {
    KeyPtr other(EVP_EC_gen("P-256"));
    X509_REQ_set_pubkey(req.get(), other.get());
  }
  return pki::WritePem([&](BIO* b) { return PEM_write_bio_X509_REQ(b, req.get()); });
}

json CsrObject(const std::string& request_pem, const std::string& user = "system:node:n1") {
  return {{"metadata", {{"name", "csr-1"}, {"uid", "u1"}, {"resourceVersion", "7"}}},
          {"spec",
           {{"signerName", kNodeServingSigner},
            {"username", user},
            {"groups", {"system:nodes", "system:authenticated"}},
            {"usages", {"digital signature", "server auth"}},
            {"request", kube::EncodeBase64(request_pem)},
            {"expirationSeconds", 3600}}}};
}

// n1, n2: storage nodes; n4: a Node no admin marked one.
Status NodeIps(const std::string& name, NodeFacts* facts) {
  facts->storage_node = true;
  facts->storage_label = "node-restriction.kubernetes.io/nodevol-storage=true";
  if (name == "n1") facts->internal_ips = {"10.0.0.1", "fd00:0:0::1"};
  else if (name == "n2") facts->internal_ips = {"10.0.0.2"};
  else if (name == "n3") return Status::Unavailable("read Node n3: Forbidden (403)");
  else if (name == "n4") facts->internal_ips = {"10.0.0.4"}, facts->storage_node = false;
  else return Status::NotFound("no Node " + name);
  return Status::Ok();
}

CsrVerdict CheckCsr(const json& csr) { return CheckNodeCsr(DecodeCsr(csr), NodeIps); }

TEST(CsrCheck, ApprovesANodesOwnServingRequest) {
  CsrVerdict v = CheckCsr(CsrObject(MakeCsrPem({})));
  EXPECT_TRUE(v.approve) << v.reason << ": " << v.message;
  EXPECT_EQ(v.node, "n1");
  EXPECT_EQ(v.dns_names, std::vector<std::string>{"n1"});
  EXPECT_EQ(v.ips, std::vector<std::string>{"10.0.0.1"});

  // The request nodevold makes is one the signer approves, with an IPv6
  // address spelled otherwise than on the Node.
  std::string key, req;
  ASSERT_TRUE(pki::MakeKeyAndRequest("n1", {"n1"}, {"fd00::1"}, &key, &req).ok());
  v = CheckCsr(CsrObject(req));
  EXPECT_TRUE(v.approve) << v.reason << ": " << v.message;
  EXPECT_EQ(v.ips, std::vector<std::string>{"fd00::1"});

  CsrSpec rsa;
  rsa.key = "rsa2048";
  EXPECT_TRUE(CheckCsr(CsrObject(MakeCsrPem(rsa))).approve);
}

TEST(CsrCheck, DecodesTheObject) {
  json csr = CsrObject(MakeCsrPem({}));
  csr["status"] = {{"conditions", {{{"type", "Approved"}, {"status", "True"}}, {{"type", "Failed"}, {"status", "False"}}}},
                   {"certificate", "Zm9v"}};
  CsrRequest r = DecodeCsr(csr);
  EXPECT_EQ(r.name, "csr-1");
  EXPECT_EQ(r.expiration_seconds, 3600);
  EXPECT_TRUE(r.approved);
  EXPECT_FALSE(r.denied);
  EXPECT_FALSE(r.failed);
  EXPECT_TRUE(r.has_certificate);
  EXPECT_NE(r.request_pem.find("BEGIN CERTIFICATE REQUEST"), std::string::npos);
  EXPECT_TRUE(DecodeCsr(json::object()).request_pem.empty());
  EXPECT_TRUE(DecodeCsr(json::array()).name.empty());
}

struct DeniedCase {
  const char* what;
  json csr;
  const char* reason;
};

TEST(CsrCheck, DeniesAnythingElseWithAReason) {
  std::vector<DeniedCase> cases;
  auto with = [](CsrSpec s) { return CsrObject(MakeCsrPem(s)); };
  CsrSpec s;
  s.subject = {{NID_commonName, "n2"}};
  cases.push_back({"another node's name as subject", with(s), "WrongSubject"});
  s = {};
  s.subject = {{NID_commonName, "n1"}, {NID_organizationName, "system:masters"}};
  cases.push_back({"a group in the subject", with(s), "WrongSubject"});
  s = {};
  s.san = {"DNS:n1", "DNS:kubernetes.default"};
  cases.push_back({"an extra DNS name", with(s), "ExtraNames"});
  s = {};
  s.san = {"DNS:n1", "IP:10.0.0.2"};
  cases.push_back({"another node's address", with(s), "ExtraNames"});
  s = {};
  s.san = {"DNS:n1", "email:root@n1"};
  cases.push_back({"an email name", with(s), "ExtraNames"});
  s = {};
  s.san = {"DNS:n1", "URI:spiffe://cluster/ns/x"};
  cases.push_back({"a URI name", with(s), "ExtraNames"});
  s = {};
  s.san = {"IP:10.0.0.1"};
  cases.push_back({"no DNS name", with(s), "WrongSubject"});
  s = {};
  s.key = "rsa1024";
  cases.push_back({"an RSA key of 1024 bits", with(s), "WeakKey"});
  s = {};
  s.tamper = true;
  cases.push_back({"a signature by another key", with(s), "BadRequest"});

  cases.push_back({"a user that is no node", CsrObject(MakeCsrPem({}), "alice"), "NotANode"});
  cases.push_back({"a node name that is none", CsrObject(MakeCsrPem({}), "system:node:N1/.."), "NotANode"});
  cases.push_back({"a node that does not exist", CsrObject(MakeCsrPem({}), "system:node:n9"), "UnknownNode"});
  // Its own request in every other way, but no admin marked n4 a storage
  // node (a label n4 could set on itself would prove nothing).
  s = {};
  s.subject = {{NID_commonName, "n4"}};
  s.san = {"DNS:n4"};
  cases.push_back({"a node no admin marked a storage node", CsrObject(MakeCsrPem(s), "system:node:n4"), "NotAStorageNode"});
  // A node named like an address would be verified against IP SANs, which
  // nodes choose: "127.0.0.5" listing 127.0.0.6 passed as "127.0.0.6".
  s = {};
  s.subject = {{NID_commonName, "127.0.0.6"}};
  s.san = {"DNS:127.0.0.6", "IP:127.0.0.6"};
  cases.push_back({"a node named by an address", CsrObject(MakeCsrPem(s), "system:node:127.0.0.6"), "NameIsAnAddress"});
  cases.push_back({"n2 asking for n1's certificate", CsrObject(MakeCsrPem({}), "system:node:n2"), "WrongSubject"});
  json no_group = CsrObject(MakeCsrPem({}));
  no_group["spec"]["groups"] = {"system:authenticated"};
  cases.push_back({"a node user outside system:nodes", no_group, "NotANode"});
  json client = CsrObject(MakeCsrPem({}));
  client["spec"]["usages"] = {"digital signature", "server auth", "client auth"};
  cases.push_back({"client auth besides", client, "BadUsages"});
  json no_server = CsrObject(MakeCsrPem({}));
  no_server["spec"]["usages"] = {"digital signature"};
  cases.push_back({"no server auth", no_server, "BadUsages"});
  json signer = CsrObject(MakeCsrPem({}));
  signer["spec"]["signerName"] = "kubernetes.io/kubelet-serving";
  cases.push_back({"another signer", signer, "UnknownSigner"});
  json garbage = CsrObject("");
  garbage["spec"]["request"] = "not base64 !";
  cases.push_back({"a request that is not base64", garbage, "BadRequest"});
  cases.push_back({"a request that is not PEM", CsrObject("hello"), "BadRequest"});

  for (const auto& c : cases) {
    CsrVerdict v = CheckCsr(c.csr);
    EXPECT_FALSE(v.approve) << c.what;
    EXPECT_EQ(v.reason, c.reason) << c.what << ": " << v.message;
    EXPECT_FALSE(v.message.empty()) << c.what;
    EXPECT_TRUE(v.dns_names.empty() && v.ips.empty()) << c.what;
  }
}

TEST(CsrCheck, ANodeThatCannotBeReadIsNeitherApprovedNorDenied) {
  CsrVerdict v = CheckCsr(CsrObject(MakeCsrPem({}), "system:node:n3"));
  EXPECT_FALSE(v.approve);
  EXPECT_EQ(v.reason, "");
  EXPECT_EQ(v.undecided.code(), Status::Code::kUnavailable) << v.undecided.message();
}

}  // namespace
}  // namespace nodevol::provisioner
