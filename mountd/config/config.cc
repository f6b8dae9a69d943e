#include "config/config.h"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/names.h"
#include "base/parse.h"
#include "base/po_error.h"
#include "base/size.h"
#include "base/version.h"

namespace po = boost::program_options;

namespace nodevol {
namespace {

Status CheckAbsolute(const char* option, const std::string& path) {
  if (path.empty() || path[0] != '/')
    return Status::InvalidArgument("--" + std::string(option) + " must be an absolute path, not \"" + path + "\"");
  return Status::Ok();
}

// host:port with a non-empty host ([v6] allowed) and a port of 0-65535.
Status CheckListenAddress(const char* option, const std::string& address) {
  size_t colon = address.rfind(':');
  auto bad = [&] {
    return Status::InvalidArgument("--" + std::string(option) + " must be host:port (e.g. 0.0.0.0:9809 or [::]:9809), not \"" +
                                   address + "\"");
  };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = address.substr(0, colon);
  if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']')) return bad();
  uint64_t port = 0;
  if (!ParseUint("port", address.substr(colon + 1), 65535, &port).ok()) return bad();
  return Status::Ok();
}

// All four TLS options or none; paths absolute. Whether the files hold
// usable PEM is checked at start (server/tls_credentials.h).
Status CheckTls(const Config& c) {
  const std::pair<const char*, const std::string*> opts[] = {
      {"tls-listen", &c.tls_listen}, {"tls-ca", &c.tls_ca}, {"tls-cert", &c.tls_cert}, {"tls-key", &c.tls_key}};
  std::string missing;
  int given = 0;
  for (const auto& [name, value] : opts) {
    if (value->empty()) missing += (missing.empty() ? "--" : ", --") + std::string(name);
    else ++given;
  }
  if (given == 0) return Status::Ok();
  if (given < 4)
    return Status::InvalidArgument("the TCP listener needs all of --tls-listen, --tls-ca, --tls-cert and --tls-key; missing " +
                                   missing + " (or remove the others to serve the unix socket only)");
  NODEVOL_RETURN_IF_ERROR(CheckListenAddress("tls-listen", c.tls_listen));
  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("tls-ca", c.tls_ca));
  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("tls-cert", c.tls_cert));
  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("tls-key", c.tls_key));
  if (c.tls_refresh_seconds == 0) return Status::InvalidArgument("--tls-refresh-seconds must be at least 1");
  return Status::Ok();
}

// Settles whether this nodevold enrolls (Config::enroll) and what that
// implies for the TLS options.
Status ResolveEnrollment(Config* c) {
  if (c->enroll != "off" && c->enroll != "on" && c->enroll != "auto")
    return Status::InvalidArgument("--enroll must be off, on or auto, not \"" + c->enroll + "\"");
  if (c->enroll == "off") return Status::Ok();
  if (!c->tls_cert.empty()) {
    c->enroll_note = "--enroll " + c->enroll + " ignored: certificate files are configured (--tls-cert), and they win";
    return Status::Ok();
  }
  if (!c->enroll_kubeconfig.empty()) {
    NODEVOL_RETURN_IF_ERROR(CheckAbsolute("enroll-kubeconfig", c->enroll_kubeconfig));
  } else {
    for (const char* k : kKubeletKubeconfigs)
      if (::access(k, R_OK) == 0) {
        c->enroll_kubeconfig = k;
        break;
      }
  }
  bool found = !c->enroll_kubeconfig.empty() && ::access(c->enroll_kubeconfig.c_str(), R_OK) == 0;
  if (!found) {
    std::string where = c->enroll_kubeconfig.empty() ? std::string(kKubeletKubeconfigs[0]) + " or " + kKubeletKubeconfigs[1]
                                                     : c->enroll_kubeconfig;
    if (c->enroll == "on")
      return Status::InvalidArgument("--enroll on: no kubelet kubeconfig to enroll with at " + where +
                                     " (set --enroll-kubeconfig, or join the node to the cluster first)");
    c->enroll_note = "enrollment off: no kubelet kubeconfig at " + where;
    return Status::Ok();
  }
  size_t slash = c->enroll_ca_configmap.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == c->enroll_ca_configmap.size() ||
      c->enroll_ca_configmap.find('/', slash + 1) != std::string::npos)
    return Status::InvalidArgument("--enroll-ca-configmap must be namespace/name, not \"" + c->enroll_ca_configmap + "\"");
  if (!c->announce_label.empty() && (c->announce_label.find('=') == std::string::npos || c->announce_label[0] == '='))
    return Status::InvalidArgument("--announce-label must be key=value or empty, not \"" + c->announce_label + "\"");
  if (c->enroll_lifetime_seconds < 600)
    return Status::InvalidArgument("--enroll-lifetime-seconds must be at least 600 (the CSR API's minimum)");
  if (c->enroll_recheck_seconds < 1 || c->enroll_recheck_seconds > 24 * 3600)
    return Status::InvalidArgument("--enroll-recheck-seconds must be between 1 and 86400");
  if (c->enroll_dir.empty()) c->enroll_dir = c->state_dir + "/tls";
  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("enroll-dir", c->enroll_dir));
  if (c->tls_listen.empty()) c->tls_listen = "0.0.0.0:9809";
  c->tls_ca = c->enroll_dir + "/ca.crt";
  c->tls_cert = c->enroll_dir + "/tls.crt";
  c->tls_key = c->enroll_dir + "/tls.key";
  c->enroll_active = true;
  c->enroll_note = "enrolling with " + c->enroll_kubeconfig + " (--enroll " + c->enroll + ")";
  return Status::Ok();
}

}  // namespace

Status ParsePoolSpec(const std::string& spec, PoolConfig* out) {
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::InvalidArgument("--pool \"" + spec + "\": \"" + item + "\" is not key=value");
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "name") out->name = v;
    else if (k == "backend") out->backend = v;
    else if (!out->options.emplace(k, v).second)
      return Status::InvalidArgument("--pool \"" + spec + "\": " + k + " given twice");
  }
  // inline and inline-max-size are the node's business, not the backend's.
  if (auto it = out->options.find("inline"); it != out->options.end()) {
    if (it->second != "on" && it->second != "off")
      return Status::InvalidArgument("--pool \"" + spec + "\": inline must be on or off, not \"" + it->second + "\"");
    out->inline_policy.allowed = it->second == "on";
    out->options.erase(it);
  }
  if (auto it = out->options.find("inline-max-size"); it != out->options.end()) {
    auto bytes = ParseSize(it->second);
    if (!bytes)
      return Status::InvalidArgument("--pool \"" + spec + "\": inline-max-size \"" + it->second + "\": " +
                                     std::string(kSizeForms));
    out->inline_policy.max_bytes = *bytes;
    out->options.erase(it);
  }
  if (out->name.empty() || out->backend.empty())
    return Status::InvalidArgument("--pool \"" + spec + "\" needs name=<pool> and backend=<kind>, "
                                   "e.g. name=default,backend=dir,path=/var/lib/nodevol/pools/default");
  return ValidatePoolName(out->name).WithContext("--pool \"" + spec + "\"");
}

Status ParseConfig(int argc, const char* const* argv, Config* c, ParseOutcome* outcome, std::string* text) {
  *outcome = ParseOutcome::kRun;
  std::vector<std::string> pools;
  std::string csi, csi_controller;
  std::string client_names = "nodevol-provisioner";
  po::options_description general("nodevold options (flags, or key = value in the config file)");
  general.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("config", po::value(&c->config_file)->default_value(c->config_file),
       "config file; a missing default file is fine, a missing named one is an error")
      ("node-name", po::value(&c->node_name), "Kubernetes node name (default: the host name)")
      ("socket", po::value(&c->socket)->default_value(c->socket), "unix socket of the Node API (mode 0600)")
      ("state-dir", po::value(&c->state_dir)->default_value(c->state_dir), "where volume and publication records live")
      ("pods-root", po::value(&c->pods_root)->default_value(c->pods_root),
       "kubelet's pods directory; every publication target must lie below it")
      ("pool", po::value(&pools)->composing(),
       "a pool, repeatable: name=NAME,backend=dir,path=DIR[,quota=auto|off|required] or "
       "name=NAME,backend=lvm,vg=VG[,type=thick|thin,...] (docs/lvm.md) or "
       "name=NAME,backend=nfs,server=HOST,share=/PATH[,...] (docs/nfs.md); any pool also takes "
       "inline=on|off (pods' inline ephemeral volumes, default off) and inline-max-size=SIZE (default 1Gi)")
      ("metrics-address", po::value(&c->metrics_address)->default_value(c->metrics_address),
       "IP:port of the Prometheus /metrics endpoint, or off")
      ("log-level", po::value(&c->log_level)->default_value(c->log_level), "trace, debug, info, warn, error")
      ("log-target", po::value(&c->log_target)->default_value(c->log_target),
       "auto (journal under systemd, else stderr), journal or stderr")
      ("heartbeat-seconds", po::value(&c->heartbeat_seconds)->default_value(c->heartbeat_seconds),
       "default WatchCapacity heartbeat interval")
      ("capacity-poll-ms", po::value(&c->capacity_poll_ms)->default_value(c->capacity_poll_ms),
       "how often pool capacity is sampled for WatchCapacity")
      ("shutdown-grace-seconds", po::value(&c->shutdown_grace_seconds)->default_value(c->shutdown_grace_seconds),
       "how long SIGTERM waits for in-flight operations")
      ("lvm-timeout-seconds", po::value(&c->lvm_timeout_seconds)->default_value(c->lvm_timeout_seconds),
       "how long one lvm command may run before it is killed and its call fails")
      ("mkfs-timeout-seconds", po::value(&c->mkfs_timeout_seconds)->default_value(c->mkfs_timeout_seconds),
       "how long one mkfs, resize2fs or xfs_growfs may run before it is killed and its call fails; also how "
       "long an LVM volume's staging unmount or the wipe of its device is waited for")
      ("dir-io-timeout-seconds", po::value(&c->dir_io_timeout_seconds)->default_value(c->dir_io_timeout_seconds),
       "how long work on a pool's disk may go without progress (a disk that stopped answering) before its call "
       "fails: a dir pool's create, expand or delete, a dir or LVM pool's fsGroup walk, an LVM volume's staging "
       "mount; the pool then refuses new such work until the stuck one finishes")
      ("state-write-timeout-seconds",
       po::value(&c->state_write_timeout_seconds)->default_value(c->state_write_timeout_seconds),
       "how long a write to --state-dir may run before /healthz and the CSI Probe say unhealthy (a disk that "
       "stopped answering); the write goes on and finishes when the disk answers")
      ("tls-listen", po::value(&c->tls_listen),
       "host:port of the Node API over TCP with mutual TLS, for nodevol-provisioner (default: off); "
       "serves only the provisioner's methods, never Publish/Unpublish/GetVolumeStats; needs "
       "--tls-ca, --tls-cert and --tls-key (docs/tls.md)")
      ("tls-ca", po::value(&c->tls_ca), "CA bundle (PEM) that client certificates must chain to")
      ("tls-cert", po::value(&c->tls_cert), "this node's certificate chain (PEM) for --tls-listen")
      ("tls-key", po::value(&c->tls_key), "private key (PEM) of --tls-cert")
      ("tls-client-names", po::value(&client_names)->default_value(client_names),
       "comma-separated names a client certificate must carry (as its CN or a DNS subjectAltName, with "
       "extendedKeyUsage clientAuth) besides chaining to --tls-ca: the provisioner's, and an operator's for "
       "nodevolctl; any other certificate the CA signed is refused")
      ("tls-refresh-seconds", po::value(&c->tls_refresh_seconds)->default_value(c->tls_refresh_seconds),
       "how often the TLS files are re-read, so rotated certificates apply without a restart")
      ("enroll", po::value(&c->enroll)->default_value(c->enroll),
       "zero-touch enrollment (docs/enrollment.md): on, off, or auto (on when kubelet's kubeconfig is found): "
       "get the --tls-listen certificate from nodevol-provisioner through the Kubernetes CSR API, renew it, and "
       "announce this node; --tls-cert files win over it")
      ("enroll-kubeconfig", po::value(&c->enroll_kubeconfig),
       "the node's own kubeconfig (user system:node:<node>) to enroll with (default: /etc/kubernetes/kubelet.conf, "
       "else /var/lib/kubelet/kubeconfig)")
      ("enroll-dir", po::value(&c->enroll_dir), "where the enrolled key and certificates live (default: <state-dir>/tls)")
      ("enroll-ca-configmap", po::value(&c->enroll_ca_configmap)->default_value(c->enroll_ca_configmap),
       "namespace/name of the ConfigMap where nodevol-provisioner publishes its CA (ca.crt)")
      ("enroll-lifetime-seconds", po::value(&c->enroll_lifetime_seconds)->default_value(c->enroll_lifetime_seconds),
       "certificate lifetime asked for (the signer may cut it); renewed at two thirds")
      ("enroll-recheck-seconds", po::value(&c->enroll_recheck_seconds)->default_value(c->enroll_recheck_seconds),
       "how often the published CA bundle is read again and the certificate checked against it (a CA rotation "
       "waits for every node's next check)")
      ("announce-label", po::value(&c->announce_label)->default_value(c->announce_label),
       "key=value label an enrolled node sets on its Node, for nodevol-provisioner's --node-selector (\"\" for none)")
      ("max-tcp-connections", po::value(&c->max_tcp_connections)->default_value(c->max_tcp_connections),
       "connections --tls-listen holds at once (each costs 3 descriptors); when full, a newcomer takes the "
       "place of the oldest that has not authenticated, never an authenticated one's")
      ("max-metrics-connections", po::value(&c->max_metrics_connections)->default_value(c->max_metrics_connections),
       "connections --metrics-address holds at once; when full, a newcomer takes the place of the oldest "
       "that has sent no request yet, or of the longest idle")
      ("kubelet-plugin-dir", po::value(&c->kubelet_plugin_dir),
       "kubelet's FlexVolume plugin dir, where the packages install nodevol-flex (default: what the "
       "kubelet's flags or config say, else /usr/libexec/kubernetes/kubelet-plugins/volume/exec)")
      ("kubelet-root", po::value(&c->kubelet_root)->default_value(c->kubelet_root),
       "kubelet's --root-dir (default: the parent of --pods-root when only that is given)")
      ("csi", po::value(&csi)->default_value("on"),
       "on: serve kubelet as the CSI driver nodevol.io (csi.sock under <kubelet-root>/plugins/nodevol.io, "
       "registered through <kubelet-root>/plugins_registry); off: FlexVolume and the Node API only")
      ("csi-controller", po::value(&csi_controller)->default_value("off"),
       "on: also serve csi.v1.Controller for this node's pools on controller.sock beside csi.sock, for "
       "csi-sanity and CSI sidecars run per node (whoever holds it makes and deletes volumes); off: not at all");

  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, general), vm);
    if (vm.count("help")) {
      std::ostringstream os;
      os << "Usage: nodevold [options]\n\n" << general;
      *text = os.str();
      *outcome = ParseOutcome::kExit;
      return Status::Ok();
    }
    if (vm.count("version")) {
      *text = std::string("nodevold ") + nodevol::Version() + "\n";
      *outcome = ParseOutcome::kExit;
      return Status::Ok();
    }
    std::string file = vm["config"].as<std::string>();
    std::ifstream in(file);
    if (in) {
      po::store(po::parse_config_file(in, general), vm);
    } else if (!vm["config"].defaulted()) {
      return Status::InvalidArgument("--config " + file + ": cannot read the file");
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return Status::InvalidArgument(PoErrorText(e) + " (see nodevold --help)");
  }

  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("socket", c->socket));
  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("state-dir", c->state_dir));
  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("kubelet-root", c->kubelet_root));
  NODEVOL_RETURN_IF_ERROR(CheckAbsolute("pods-root", c->pods_root));
  while (c->kubelet_root.size() > 1 && c->kubelet_root.back() == '/') c->kubelet_root.pop_back();
  while (c->pods_root.size() > 1 && c->pods_root.back() == '/') c->pods_root.pop_back();
  if (vm["kubelet-root"].defaulted() && !vm["pods-root"].defaulted())
    c->kubelet_root = std::filesystem::path(c->pods_root).parent_path().string();
  else if (vm["pods-root"].defaulted())
    c->pods_root = c->kubelet_root + "/pods";
  if (csi != "on" && csi != "off") return Status::InvalidArgument("--csi must be on or off, not \"" + csi + "\"");
  c->csi = csi == "on";
  if (csi_controller != "on" && csi_controller != "off")
    return Status::InvalidArgument("--csi-controller must be on or off, not \"" + csi_controller + "\"");
  c->csi_controller = csi_controller == "on";
  if (c->csi_controller && !c->csi)
    return Status::InvalidArgument("--csi-controller=on needs --csi=on: the controller socket is the CSI driver's");
  NODEVOL_RETURN_IF_ERROR(ParseNameList("--tls-client-names", client_names, &c->tls_client_names));
  if (!c->kubelet_plugin_dir.empty())
    NODEVOL_RETURN_IF_ERROR(CheckAbsolute("kubelet-plugin-dir", c->kubelet_plugin_dir));
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
  if (!kLevels.count(c->log_level))
    return Status::InvalidArgument("--log-level must be trace, debug, info, warn or error, not \"" + c->log_level + "\"");
  if (c->log_target != "auto" && c->log_target != "journal" && c->log_target != "stderr")
    return Status::InvalidArgument("--log-target must be auto, journal or stderr, not \"" + c->log_target + "\"");
  if (c->heartbeat_seconds == 0) return Status::InvalidArgument("--heartbeat-seconds must be at least 1");
  if (c->capacity_poll_ms < 100) return Status::InvalidArgument("--capacity-poll-ms must be at least 100");
  if (c->lvm_timeout_seconds == 0 || c->mkfs_timeout_seconds == 0 || c->state_write_timeout_seconds == 0 ||
      c->dir_io_timeout_seconds == 0)
    return Status::InvalidArgument(
        "--lvm-timeout-seconds, --mkfs-timeout-seconds, --state-write-timeout-seconds and --dir-io-timeout-seconds "
        "must be at least 1");
  NODEVOL_RETURN_IF_ERROR(ResolveEnrollment(c));
  NODEVOL_RETURN_IF_ERROR(CheckTls(*c));
  if (c->max_tcp_connections == 0 || c->max_metrics_connections == 0)
    return Status::InvalidArgument("--max-tcp-connections and --max-metrics-connections must be at least 1");
  if (c->node_name.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    c->node_name = host;
  }
  if (pools.empty())
    return Status::InvalidArgument("no --pool configured; add one, e.g. --pool name=default,backend=dir,path=/var/lib/nodevol/pools/default");
  std::set<std::string> names;
  for (const std::string& spec : pools) {
    PoolConfig pc;
    NODEVOL_RETURN_IF_ERROR(ParsePoolSpec(spec, &pc));
    if (!names.insert(pc.name).second) return Status::InvalidArgument("--pool: pool " + pc.name + " is configured twice");
    c->pools.push_back(std::move(pc));
  }
  return Status::Ok();
}

}  // namespace nodevol
