// nodevold's configuration: command-line flags and a config file
// (/etc/nodevol/nodevold.conf by default) in Boost.Program_options' INI
// syntax, flags winning over the file. Every option is listed in --help;
// a bad value stops the start with a message naming the option.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

struct PoolConfig {
  std::string name;
  std::string backend;
  Params options;  // backend-specific, e.g. path=/srv/nodevol for dir
  InlinePolicy inline_policy;  // the node's, not the backend's: taken out of options
};

struct Config {
  std::string config_file = "/etc/nodevol/nodevold.conf";
  std::string node_name;  // default: the host name
  std::string socket = "/run/nodevol/nodevold.sock";
  std::string state_dir = "/var/lib/nodevol";
  std::string pods_root = "/var/lib/kubelet/pods";
  std::vector<PoolConfig> pools;
  std::string metrics_address = "127.0.0.1:9808";  // "off" = no metrics endpoint
  std::string log_level = "info";
  std::string log_target = "auto";  // auto | journal | stderr
  unsigned heartbeat_seconds = 10;
  unsigned capacity_poll_ms = 2000;
  unsigned shutdown_grace_seconds = 30;
  // How long one lvm command, and one mkfs or filesystem grow, may run
  // before it is killed and its call fails (DEADLINE_EXCEEDED): a disk that
  // stops answering must not hold a volume's operation for ever.
  unsigned lvm_timeout_seconds = 120;
  unsigned mkfs_timeout_seconds = 600;
  // How long a dir pool's create, expand or delete may go without progress
  // before its call fails (DEADLINE_EXCEEDED); the pool then takes nothing
  // new until the stuck one finishes (backend/disk_gate.h).
  unsigned dir_io_timeout_seconds = 30;
  // How long a write to the state directory may run before nodevold says
  // it is unhealthy (/healthz 503, CSI Probe not ready, an error logged):
  // the write itself cannot be given up, and waits for the disk.
  unsigned state_write_timeout_seconds = 30;
  // TCP listener with mutual TLS for nodevol-provisioner (docs/tls.md):
  // all of tls_listen, tls_ca, tls_cert, tls_key, or none (off).
  std::string tls_listen;  // host:port
  std::string tls_ca;      // CA bundle client certificates must chain to
  std::string tls_cert;    // this node's certificate chain
  std::string tls_key;     // its private key
  unsigned tls_refresh_seconds = 60;  // how often the three files are re-read
  // Whom the TCP listener lets in, besides chaining to tls_ca: a client
  // certificate with clientAuth whose CN or a DNS name is one of these
  // (pki/client_identity.h). --tls-client-names, comma-separated.
  std::vector<std::string> tls_client_names = {"nodevol-provisioner"};
  // Zero-touch enrollment (docs/enrollment.md): off, on, or auto (on when
  // kubelet's kubeconfig is found). Certificate files given by hand win:
  // with --tls-cert, enrollment stays off. When it is on, the TLS files
  // are the enrolled ones under enroll_dir and tls_listen defaults to
  // 0.0.0.0:9809. ParseConfig settles enroll_active and says why in
  // enroll_note, for the start-up log.
  std::string enroll = "off";
  std::string enroll_kubeconfig;  // default: the first of kKubeletKubeconfigs that exists
  std::string enroll_dir;         // default: <state_dir>/tls
  std::string enroll_ca_configmap = "nodevol-system/nodevol-ca";  // namespace/name
  unsigned enroll_lifetime_seconds = 7 * 24 * 3600;
  unsigned enroll_recheck_seconds = 600;
  std::string announce_label = "nodevol.io/node=true";  // key=value, or "" for none
  bool enroll_active = false;
  std::string enroll_note;
  // Clients the TCP and metrics listeners serve at once (daemon/fd_limit.h).
  unsigned max_tcp_connections = 64;
  unsigned max_metrics_connections = 16;
  // kubelet's FlexVolume plugin dir. The packages install nodevol-flex
  // there (empty: the kubelet's own setting or the default, found by
  // /usr/lib/nodevol/maint); nodevold only warns when the driver is missing.
  std::string kubelet_plugin_dir;
  // kubelet's --root-dir. Its pods directory is <kubelet root>/pods, so
  // either option gives the other: a --pods-root alone means its parent,
  // a --kubelet-root alone its pods/.
  std::string kubelet_root = "/var/lib/kubelet";
  // The CSI front door (docs/csi.md): csi.sock under <kubelet
  // root>/plugins/nodevol.io/ and kubelet's registration socket under
  // <kubelet root>/plugins_registry/.
  bool csi = true;
  // csi.v1.Controller for this node's own pools, on a socket of its own
  // (<kubelet root>/plugins/nodevol.io/controller.sock): whoever is given
  // it can make and delete volumes, which kubelet's node socket must not
  // offer. Off by default: nodevol-provisioner does not use it.
  bool csi_controller = false;
};

// Where kubelet's kubeconfig usually is (kubeadm's, then kubelet's own default).
inline constexpr const char* kKubeletKubeconfigs[] = {"/etc/kubernetes/kubelet.conf", "/var/lib/kubelet/kubeconfig"};

// Outcome of parsing: run, or print `text` to stdout and exit 0.
enum class ParseOutcome { kRun, kExit };

Status ParseConfig(int argc, const char* const* argv, Config* out, ParseOutcome* outcome, std::string* text);

// Parses one pool spec: "name=NAME,backend=KIND,key=value,...".
Status ParsePoolSpec(const std::string& spec, PoolConfig* out);

}  // namespace nodevol
