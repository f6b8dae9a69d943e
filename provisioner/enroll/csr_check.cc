#include "enroll/csr_check.h"

#include "base/names.h"

#include <arpa/inet.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <memory>
#include <set>

#include "kube/base64.h"
#include "kube/fields.h"
#include "pki/openssl_ptr.h"

namespace nodevol::provisioner {
namespace {

using kube::Obj;
using kube::Str;
using kube::Strings;

constexpr char kNodeUserPrefix[] = "system:node:";
constexpr char kNodesGroup[] = "system:nodes";

// A node name as Kubernetes allows it (a DNS-1123 subdomain): the name is
// written into a certificate and compared, so nothing else gets that far.
bool ValidNodeName(const std::string& n) {
  if (n.empty() || n.size() > 253) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  return n.front() != '-' && n.front() != '.' && n.back() != '-' && n.back() != '.';
}

std::string Text(const ASN1_STRING* s) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s));
}

std::string IpText(const unsigned char* p, int len) {
  char out[INET6_ADDRSTRLEN];
  if (len == 4) return inet_ntop(AF_INET, p, out, sizeof out) ? out : "";
  if (len == 16) return inet_ntop(AF_INET6, p, out, sizeof out) ? out : "";
  return "";
}

CsrVerdict Deny(CsrVerdict v, std::string reason, std::string message) {
  v.approve = false;
  v.reason = std::move(reason);
  v.message = std::move(message);
  return v;
}

// The key is one worth a certificate: EC P-256 or P-384, Ed25519, RSA of
// at least 2048 bits.
bool StrongKey(EVP_PKEY* key, std::string* what) {
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_EC: {
      char group[64] = {};
      size_t len = 0;
      if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) != 1) {
        *what = "an EC key of an unnamed curve";
        return false;
      }
      std::string g(group, len);
      *what = "an EC key on " + g;
      return g == "prime256v1" || g == "P-256" || g == "secp384r1" || g == "P-384";
    }
    case EVP_PKEY_ED25519:
      return true;
    case EVP_PKEY_RSA:
      *what = "an RSA key of " + std::to_string(EVP_PKEY_get_bits(key)) + " bits";
      return EVP_PKEY_get_bits(key) >= 2048;
    default:
      if (const char* sn = OBJ_nid2sn(EVP_PKEY_get_base_id(key))) *what = std::string("a key of type ") + sn;
      else *what = "a key of an unknown type";
      return false;
  }
}

}  // namespace

CsrRequest DecodeCsr(const nlohmann::json& csr) {
  CsrRequest r;
  const auto& meta = Obj(csr, "metadata");
  r.name = Str(meta, "name");
  r.uid = Str(meta, "uid");
  r.resource_version = Str(meta, "resourceVersion");
  const auto& spec = Obj(csr, "spec");
  r.signer = Str(spec, "signerName");
  r.username = Str(spec, "username");
  if (auto it = spec.find("groups"); it != spec.end()) r.groups = Strings(*it);
  if (auto it = spec.find("usages"); it != spec.end()) r.usages = Strings(*it);
  if (!kube::DecodeBase64(Str(spec, "request"), &r.request_pem)) r.request_pem.clear();
  if (auto it = spec.find("expirationSeconds"); it != spec.end() && it->is_number_integer())
    r.expiration_seconds = it->get<int64_t>();
  const auto& status = Obj(csr, "status");
  r.has_certificate = !Str(status, "certificate").empty();
  if (auto it = status.find("conditions"); it != status.end() && it->is_array())
    for (const auto& c : *it) {
      // status is required since 1.19; an older object's condition holds.
      const std::string s = Str(c, "status");
      if (!s.empty() && s != "True") continue;
      const std::string type = Str(c, "type");
      r.approved |= type == "Approved";
      r.denied |= type == "Denied";
      r.failed |= type == "Failed";
    }
  return r;
}

CsrVerdict CheckNodeCsr(const CsrRequest& r, const NodeLookup& node_lookup) {
  CsrVerdict v;
  if (r.signer != kNodeServingSigner)
    return Deny(v, "UnknownSigner", "signer " + r.signer + " is not " + kNodeServingSigner);
  // Who asks: the apiserver's word, not the request's.
  if (r.username.rfind(kNodeUserPrefix, 0) != 0 ||
      std::find(r.groups.begin(), r.groups.end(), kNodesGroup) == r.groups.end())
    return Deny(v, "NotANode",
                "only a node (user system:node:<name> in group system:nodes) may ask for a node serving "
                "certificate; the requester is " + r.username);
  v.node = r.username.substr(sizeof kNodeUserPrefix - 1);
  if (!ValidNodeName(v.node)) return Deny(v, "NotANode", "the requester's node name is not a valid node name");
  if (Status named = CheckNodeIdentityName(v.node); !named.ok()) return Deny(v, "NameIsAnAddress", named.message());
  NodeFacts facts;
  if (Status st = node_lookup(v.node, &facts); !st.ok()) {
    if (st.code() == Status::Code::kNotFound)
      return Deny(v, "UnknownNode", "there is no Node " + v.node + " in the cluster");
    v.undecided = st;
    return v;
  }
  // Who may serve volumes is the cluster admin's decision, not the node's.
  if (!facts.storage_node)
    return Deny(v, "NotAStorageNode",
                "Node " + v.node + " lacks the label " + facts.storage_label +
                    ", which marks the nodes a cluster admin lets serve nodevol volumes (a node cannot set it "
                    "on itself); to let this one, run: kubectl label node " + v.node + " " + facts.storage_label);
  std::set<std::string> allowed_ips;
  for (const auto& ip : facts.internal_ips)
    if (auto n = CanonicalIp(ip); !n.empty()) allowed_ips.insert(n);

  // What for: serving, nothing else.
  static const std::set<std::string> kAllowedUsages = {"digital signature", "key encipherment", "server auth"};
  bool server_auth = false;
  for (const auto& u : r.usages) {
    if (!kAllowedUsages.count(u))
      return Deny(v, "BadUsages", "usage \"" + u + "\" is not allowed: ask for server auth (with digital "
                                  "signature, key encipherment) only");
    server_auth |= u == "server auth";
  }
  if (!server_auth) return Deny(v, "BadUsages", "the request does not ask for usage \"server auth\"");

  // The request itself: a PKCS#10 request signed by the key it carries.
  if (r.request_pem.empty()) return Deny(v, "BadRequest", "spec.request is empty or not base64");
  pki::BioPtr bio = pki::ReadBio(r.request_pem);
  pki::ReqPtr req(bio ? PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!req) return Deny(v, "BadRequest", "spec.request is not a PEM certificate request");
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());
  if (!key) return Deny(v, "BadRequest", "the certificate request carries no public key it can be checked with");
  if (X509_REQ_verify(req.get(), key) != 1)
    return Deny(v, "BadRequest", "the certificate request's signature does not match its key");
  if (std::string what; !StrongKey(key, &what))
    return Deny(v, "WeakKey", "the request carries " + what + ": use EC P-256 or P-384, Ed25519 or RSA of 2048 bits or more");

  // Whom for: subject CN=<n> and nothing else.
  X509_NAME* subject = X509_REQ_get_subject_name(req.get());
  if (!subject || X509_NAME_entry_count(subject) != 1 ||
      OBJ_obj2nid(X509_NAME_ENTRY_get_object(X509_NAME_get_entry(subject, 0))) != NID_commonName ||
      Text(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, 0))) != v.node)
    return Deny(v, "WrongSubject", "the subject must be CN=" + v.node + " and nothing else");

  // The names: DNS <n>, and only the Node's own InternalIP addresses.
  pki::ExtensionsPtr exts(X509_REQ_get_extensions(req.get()));
  bool seen_san = false;
  std::set<std::string> dns, ips;
  for (int i = 0; exts && i < sk_X509_EXTENSION_num(exts.get()); ++i) {
    X509_EXTENSION* ext = sk_X509_EXTENSION_value(exts.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) != NID_subject_alt_name) continue;  // never copied
    if (seen_san) return Deny(v, "ExtraNames", "the request has two subjectAltName extensions");
    seen_san = true;
    pki::NamesPtr names(static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(ext)));
    if (!names) return Deny(v, "BadRequest", "the request's subjectAltName cannot be read");
    for (int j = 0; j < sk_GENERAL_NAME_num(names.get()); ++j) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), j);
      if (g->type == GEN_DNS) {
        std::string name = Text(g->d.dNSName);
        if (name != v.node)
          return Deny(v, "ExtraNames", "DNS name \"" + name.substr(0, 253) + "\" is not the node's name " + v.node);
        dns.insert(name);
      } else if (g->type == GEN_IPADD) {
        std::string ip = IpText(ASN1_STRING_get0_data(g->d.iPAddress), ASN1_STRING_length(g->d.iPAddress));
        if (ip.empty() || !allowed_ips.count(ip))
          return Deny(v, "ExtraNames", "IP address " + (ip.empty() ? std::string("(malformed)") : ip) +
                                           " is not an InternalIP address of Node " + v.node);
        ips.insert(ip);
      } else {
        return Deny(v, "ExtraNames", "only DNS names and IP addresses may be asked for (an email, URI or "
                                     "other name was)");
      }
    }
  }
  if (!dns.count(v.node)) return Deny(v, "WrongSubject", "the request must name DNS name " + v.node);
  v.approve = true;
  v.dns_names.assign(dns.begin(), dns.end());
  v.ips.assign(ips.begin(), ips.end());
  return v;
}

}  // namespace nodevol::provisioner
