#include "kube/config.h"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "base/host_port.h"
#include "kube/base64.h"

namespace nodevol::kube {
namespace {

namespace fs = std::filesystem;

// An entry of clusters/users/contexts with the file it came from.
struct Entry {
  YAML::Node node;
  std::string file;
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_file;
};

std::string Where(const std::string& file, const std::string& key) { return file + ": " + key; }

// Reads an optional scalar string field.
Status GetString(const YAML::Node& node, const char* key, const std::string& where, std::string* out) {
  YAML::Node v = node[key];
  if (!v || v.IsNull()) return Status::Ok();
  if (!v.IsScalar()) return Status::InvalidArgument(Where(where, key) + " must be a string");
  *out = v.as<std::string>();
  return Status::Ok();
}

Status GetBool(const YAML::Node& node, const char* key, const std::string& where, bool* out) {
  YAML::Node v = node[key];
  if (!v || v.IsNull()) return Status::Ok();
  try {
    *out = v.as<bool>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument(Where(where, key) + " must be true or false");
  }
  return Status::Ok();
}

// A path from the kubeconfig made absolute against the file's directory.
std::string Resolve(const std::string& path, const std::string& file) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::absolute(fs::path(file)).parent_path() / path).lexically_normal().string();
}

// Reads an optional path field, resolved against `file`'s directory; the
// file it names must exist.
Status GetPath(const YAML::Node& node, const char* key, const std::string& where, const std::string& file,
               std::string* out) {
  NODEVOL_RETURN_IF_ERROR(GetString(node, key, where, out));
  *out = Resolve(*out, file);
  std::error_code ec;
  if (!out->empty() && !fs::exists(*out, ec)) {
    return Status::NotFound(Where(where, key) + ": " + *out + " does not exist");
  }
  return Status::Ok();
}

Status GetData(const YAML::Node& node, const char* key, const std::string& where, std::string* out) {
  std::string b64;
  NODEVOL_RETURN_IF_ERROR(GetString(node, key, where, &b64));
  if (b64.empty()) return Status::Ok();
  if (!DecodeBase64(b64, out)) return Status::InvalidArgument(Where(where, key) + " is not valid base64");
  return Status::Ok();
}

// Adds the named entries of `list` (clusters, users or contexts) that are
// not defined yet: the first file to define a name wins.
Status MergeList(const YAML::Node& doc, const char* list, const char* inner, const std::string& file,
                 std::map<std::string, Entry>* into) {
  YAML::Node l = doc[list];
  if (!l || l.IsNull()) return Status::Ok();
  if (!l.IsSequence()) return Status::InvalidArgument(Where(file, list) + " must be a list");
  for (size_t i = 0; i < l.size(); ++i) {
    std::string where = file + ": " + list + "[" + std::to_string(i) + "]";
    const YAML::Node& e = l[i];
    if (!e.IsMap() || !e["name"] || !e["name"].IsScalar()) return Status::InvalidArgument(where + " has no name");
    std::string name = e["name"].as<std::string>();
    YAML::Node body = e[inner];
    if (!body || !body.IsMap()) {
      return Status::InvalidArgument(where + " (\"" + name + "\") has no " + inner + " map");
    }
    into->emplace(name, Entry{body, file});
  }
  return Status::Ok();
}

Status ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno("cannot read " + path, errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

}  // namespace

std::vector<std::string> DefaultKubeconfigFiles() {
  std::vector<std::string> files;
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string s(env);
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) files.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    if (!files.empty()) return files;
  }
  const char* home = std::getenv("HOME");
  files.push_back(std::string(home != nullptr ? home : "") + "/.kube/config");
  return files;
}

Status LoadKubeconfig(const std::vector<std::string>& files, const std::string& context, Config* out) {
  Merged m;
  int loaded = 0;
  for (const std::string& file : files) {
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    YAML::Node doc;
    try {
      doc = YAML::LoadFile(file);
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(file + ": not a valid kubeconfig: " + e.what());
    }
    ++loaded;
    if (doc.IsNull()) continue;  // an empty file is allowed
    if (!doc.IsMap()) return Status::InvalidArgument(file + ": not a valid kubeconfig: top level is not a map");
    NODEVOL_RETURN_IF_ERROR(MergeList(doc, "clusters", "cluster", file, &m.clusters));
    NODEVOL_RETURN_IF_ERROR(MergeList(doc, "users", "user", file, &m.users));
    NODEVOL_RETURN_IF_ERROR(MergeList(doc, "contexts", "context", file, &m.contexts));
    if (m.current_context.empty()) {
      NODEVOL_RETURN_IF_ERROR(GetString(doc, "current-context", file, &m.current_context));
      if (!m.current_context.empty()) m.current_context_file = file;
    }
  }
  std::string list;
  for (const auto& f : files) list += (list.empty() ? "" : ":") + f;
  if (loaded == 0) return Status::NotFound("no kubeconfig file found (looked at " + list + ")");

  std::string ctx_name = context.empty() ? m.current_context : context;
  if (ctx_name.empty()) {
    return Status::InvalidArgument("kubeconfig " + list + " has no current-context and no context was given");
  }
  auto ctx = m.contexts.find(ctx_name);
  if (ctx == m.contexts.end()) return Status::NotFound("context \"" + ctx_name + "\" is not defined in " + list);
  std::string cwhere = ctx->second.file + ": contexts[" + ctx_name + "].context";
  std::string cluster_name, user_name;
  Config c;
  NODEVOL_RETURN_IF_ERROR(GetString(ctx->second.node, "cluster", cwhere, &cluster_name));
  NODEVOL_RETURN_IF_ERROR(GetString(ctx->second.node, "user", cwhere, &user_name));
  NODEVOL_RETURN_IF_ERROR(GetString(ctx->second.node, "namespace", cwhere, &c.ns));
  if (c.ns.empty()) c.ns = "default";

  if (cluster_name.empty()) return Status::InvalidArgument(Where(cwhere, "cluster") + " is empty");
  auto cl = m.clusters.find(cluster_name);
  if (cl == m.clusters.end()) {
    return Status::NotFound(Where(cwhere, "cluster") + " names \"" + cluster_name + "\", which is not defined in " + list);
  }
  const YAML::Node& cn = cl->second.node;
  const std::string& cfile = cl->second.file;
  std::string where = cfile + ": clusters[" + cluster_name + "].cluster";
  NODEVOL_RETURN_IF_ERROR(GetString(cn, "server", where, &c.server));
  if (c.server.empty()) return Status::InvalidArgument(Where(where, "server") + " is missing");
  if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0) {
    return Status::InvalidArgument(Where(where, "server") + " \"" + c.server + "\" is not an http(s) URL");
  }
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  NODEVOL_RETURN_IF_ERROR(GetData(cn, "certificate-authority-data", where, &c.ca_data));
  if (c.ca_data.empty()) {
    NODEVOL_RETURN_IF_ERROR(GetPath(cn, "certificate-authority", where, cfile, &c.ca_file));
  }
  NODEVOL_RETURN_IF_ERROR(GetBool(cn, "insecure-skip-tls-verify", where, &c.insecure_skip_tls_verify));
  NODEVOL_RETURN_IF_ERROR(GetString(cn, "tls-server-name", where, &c.tls_server_name));
  if (cn["proxy-url"]) return Status::InvalidArgument(Where(where, "proxy-url") + " is not supported");

  if (!user_name.empty()) {
    auto us = m.users.find(user_name);
    if (us == m.users.end()) {
      return Status::NotFound(Where(cwhere, "user") + " names \"" + user_name + "\", which is not defined in " + list);
    }
    const YAML::Node& un = us->second.node;
    const std::string& ufile = us->second.file;
    std::string uwhere = ufile + ": users[" + user_name + "].user";
    for (const char* plugin : {"exec", "auth-provider"}) {
      if (un[plugin]) {
        return Status::InvalidArgument(Where(uwhere, plugin) +
                                       ": credential plugins are not supported; use a client certificate or a token");
      }
    }
    if (un["username"] || un["password"]) {
      return Status::InvalidArgument(Where(uwhere, "username") + ": basic authentication is not supported");
    }
    NODEVOL_RETURN_IF_ERROR(GetData(un, "client-certificate-data", uwhere, &c.client_cert_data));
    if (c.client_cert_data.empty()) {
      NODEVOL_RETURN_IF_ERROR(GetPath(un, "client-certificate", uwhere, ufile, &c.client_cert_file));
    }
    NODEVOL_RETURN_IF_ERROR(GetData(un, "client-key-data", uwhere, &c.client_key_data));
    if (c.client_key_data.empty()) {
      NODEVOL_RETURN_IF_ERROR(GetPath(un, "client-key", uwhere, ufile, &c.client_key_file));
    }
    bool has_cert = !c.client_cert_data.empty() || !c.client_cert_file.empty();
    bool has_key = !c.client_key_data.empty() || !c.client_key_file.empty();
    if (has_cert != has_key) {
      return Status::InvalidArgument(uwhere + ": client-certificate and client-key must be given together");
    }
    // As client-go: a literal token takes precedence over tokenFile.
    NODEVOL_RETURN_IF_ERROR(GetString(un, "token", uwhere, &c.token));
    if (c.token.empty()) {
      NODEVOL_RETURN_IF_ERROR(GetPath(un, "tokenFile", uwhere, ufile, &c.token_file));
    }
  }
  *out = std::move(c);
  return Status::Ok();
}

InClusterSource InClusterSource::FromEnvironment() {
  InClusterSource s;
  if (const char* h = std::getenv("KUBERNETES_SERVICE_HOST")) s.host = h;
  if (const char* p = std::getenv("KUBERNETES_SERVICE_PORT")) s.port = p;
  return s;
}

Status LoadInCluster(const InClusterSource& source, Config* out) {
  if (source.host.empty() || source.port.empty()) {
    return Status::FailedPrecondition(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  fs::path dir = fs::path(source.root) / "var/run/secrets/kubernetes.io/serviceaccount";
  Config c;
  c.server = "https://" + JoinHostPort(source.host, source.port);
  c.token_file = (dir / "token").string();
  c.ca_file = (dir / "ca.crt").string();
  std::string token;
  NODEVOL_RETURN_IF_ERROR(ReadFile(c.token_file, &token).WithContext("in-cluster service account token"));
  std::error_code ec;
  if (!fs::exists(c.ca_file, ec)) return Status::NotFound("in-cluster CA bundle " + c.ca_file + " does not exist");
  std::string ns;
  if (ReadFile((dir / "namespace").string(), &ns).ok()) {
    while (!ns.empty() && (ns.back() == '\n' || ns.back() == ' ')) ns.pop_back();
    if (!ns.empty()) c.ns = ns;
  }
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace nodevol::kube
