// nodevol-provisioner: watches claims of nodevol StorageClasses and
// provisions their volumes on nodes whose nodevold has room
// (provisioner/README.md). Flags: --help.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <iostream>
#include <thread>

#include "base/po_error.h"
#include "base/version.h"
#include "controller/controller.h"
#include "enroll/node_ca.h"
#include "enroll/client_certificate.h"
#include "base/parse.h"
#include "extender/http.h"
#include "extender/serving_label.h"
#include "httpd/http_server.h"
#include "kube/client.h"
#include "kube/config.h"
#include "leader/leader_elector.h"
#include "leader/lease_store_kube.h"
#include "metrics/metrics.h"
#include "metrics/status_server.h"
#include "pki/ca.h"

namespace po = boost::program_options;
using namespace nodevol;
using namespace nodevol::provisioner;

namespace {

void SplitLabel(const std::string& selector, std::string* key, std::string* value) {
  auto eq = selector.find('=');
  *key = selector.substr(0, eq);
  *value = eq == std::string::npos ? "" : selector.substr(eq + 1);
}

}  // namespace

int main(int argc, char** argv) {
  ControllerConfig cc;
  cc.storage_node_label = kStorageNodeLabel;
  std::string kubeconfig, context, placement = "most-free", log_level = "info";
  std::string lease_namespace, lease_name, identity;
  bool leader_elect = true;
  // client-go's defaults, as kube-controller-manager and the sig-storage
  // sidecars use them.
  long lease_seconds = 15, renew_seconds = 10, retry_seconds = 2;
  std::string metrics_address = "0.0.0.0:9810";
  std::string extender_address = "off";
  httpd::TlsFiles extender_tls;
  std::string extender_client_names = "kube-scheduler";
  bool extender_unauthenticated = false;
  std::string node_ca_secret, node_ca_configmap = "nodevol-ca", tls_dir = "/run/nodevol-provisioner/tls";
  long ca_poll_seconds = 30, ca_spread_seconds = 900, ca_settle_seconds = 300;
  long node_cert_max_seconds = 30L * 24 * 3600;
  unsigned tls_refresh_seconds = 60;
  po::options_description desc(
      "Usage: nodevol-provisioner [options]\n\n"
      "Provisions nodevol volumes for PersistentVolumeClaims of StorageClasses whose\n"
      "provisioner is nodevol.io, on nodes whose nodevold reports room.\n\nOptions");
  desc.add_options()("help", "show this help")
      ("kubeconfig", po::value(&kubeconfig), "kubeconfig file(s) (':'-separated); default: $KUBECONFIG, else in-cluster")
      ("context", po::value(&context), "kubeconfig context (default: current-context)")
      ("node-selector", po::value(&cc.node_selector)->default_value(cc.node_selector),
       "label (key=value) of the nodes running nodevold (each sets it on itself)")
      ("storage-node-label", po::value(&cc.storage_node_label)->default_value(cc.storage_node_label),
       "label (key=value) a cluster admin puts on the nodes that may serve volumes; the signer and placement "
       "ignore other nodes. Keep it under node-restriction.kubernetes.io/ (NodeRestriction forbids kubelets "
       "to set it); empty: any node that enrolls (docs/enrollment.md)")
      ("node-port", po::value(&cc.node_port)->default_value(cc.node_port), "nodevold's --tls-listen port on every node")
      ("tls-ca", po::value(&cc.tls.ca), "CA bundle nodevold certificates chain to (default: the node CA's, with "
       "--node-ca-secret)")
      ("tls-cert", po::value(&cc.tls.cert), "the provisioner's client certificate (default: issued by the node CA)")
      ("tls-key", po::value(&cc.tls.key), "its private key")
      ("node-ca-secret", po::value(&node_ca_secret),
       "sign the nodes' serving certificates (signer nodevol.io/node-serving, docs/enrollment.md) with the CA in "
       "this kubernetes.io/tls Secret of the provisioner's namespace, made when absent; and issue this "
       "provisioner's own client certificate from it")
      ("node-ca-configmap", po::value(&node_ca_configmap)->default_value(node_ca_configmap),
       "ConfigMap of the provisioner's namespace where the leader publishes the CA certificates nodevold trusts "
       "(ca.crt: the signing CA first, then CAs being retired)")
      ("node-ca-poll-seconds", po::value(&ca_poll_seconds)->default_value(ca_poll_seconds),
       "how often each replica reads the CA Secret and the published bundle again (a rotated CA is followed)")
      ("ca-rotation-spread-seconds", po::value(&ca_spread_seconds)->default_value(ca_spread_seconds),
       "after a CA rotation, how long until every live node trusts the new CA (nodes re-read the bundle every 10 "
       "minutes): until then the client certificate comes from the old CA")
      ("ca-rotation-settle-seconds", po::value(&ca_settle_seconds)->default_value(ca_settle_seconds),
       "after that, how long before an old CA may leave the bundle once every node serves from the new one")
      ("node-cert-max-lifetime-seconds", po::value(&node_cert_max_seconds)->default_value(node_cert_max_seconds),
       "the longest certificate the signer issues (nodes ask for 7 days); the provisioner's own lives at most a day")
      ("node-certs-per-hour", po::value(&cc.node_certs_per_hour)->default_value(cc.node_certs_per_hour),
       "serving certificates the signer issues to one node in an hour at most; more requests are denied "
       "(TooManyRequests) until the hour has passed (0: no limit)")
      ("tls-dir", po::value(&tls_dir)->default_value(tls_dir),
       "where the issued client certificate is written (a tmpfs)")
      ("tls-refresh-seconds", po::value(&tls_refresh_seconds)->default_value(tls_refresh_seconds),
       "how often the TLS files are re-read, so renewed or rotated certificates apply to new connections")
      ("placement", po::value(&placement)->default_value(placement), "most-free (spread) or binpack (fill)")
      ("claim-workers", po::value(&cc.claim_workers)->default_value(cc.claim_workers), "claim worker threads")
      ("creates-per-node", po::value(&cc.creates_per_node)->default_value(cc.creates_per_node),
       "CreateVolume calls in flight to one node at most, so a slow node cannot hold every claim worker (0: "
       "claim-workers - 1)")
      ("volume-workers", po::value(&cc.volume_workers)->default_value(cc.volume_workers), "volume worker threads")
      ("event-defer-ms", po::value<long>()->default_value(cc.event_defer.count()),
       "in a burst, events wait while claims are queued, at most this long (0: never)")
      ("orphan-sweep-seconds", po::value<long>()->default_value(600),
       "how often to look for volumes whose claim and PV are gone (0 = never)")
      ("orphan-grace-seconds", po::value<long>()->default_value(120),
       "how old such a volume must be before it is deleted (this replica's own passes in progress are always "
       "skipped; the grace covers another replica's)")
      ("capacity-objects", po::value(&cc.capacity_objects)->default_value(true),
       "publish a CSIStorageCapacity per class and node for kube-scheduler (docs/scheduling.md); with false, set "
       "storageCapacity: false in the CSIDriver nodevol.io too, or the scheduler rejects every node")
      ("snapshots", po::value(&cc.snapshots)->default_value(true),
       "take and delete snapshots for VolumeSnapshotContents of driver nodevol.io, once the snapshot CRDs are "
       "installed (docs/snapshots.md)")
      ("capacity-namespace", po::value(&cc.capacity_namespace),
       "namespace of those objects (default: the pod's or kubeconfig's)")
      ("leader-elect", po::value(&leader_elect)->default_value(true),
       "run only while holding the Lease (more than one replica); false: run at once")
      ("lease-namespace", po::value(&lease_namespace), "namespace of the Lease (default: the pod's or kubeconfig's)")
      ("lease-name", po::value(&lease_name), "name of the Lease (default: nodevol.io-provisioner)")
      ("lease-duration-seconds", po::value(&lease_seconds)->default_value(lease_seconds),
       "how long a standby waits, after the leader's last renewal, before it takes the Lease (a leader killed "
       "without releasing it is replaced this much later)")
      ("renew-deadline-seconds", po::value(&renew_seconds)->default_value(renew_seconds),
       "how long the leader keeps trying to renew before it gives up leading and exits (less than the lease "
       "duration)")
      ("retry-period-seconds", po::value(&retry_seconds)->default_value(retry_seconds),
       "how often the leader renews and a standby tries to take the Lease (renew deadline > 1.2 x this)")
      ("identity", po::value(&identity), "this replica's name in the Lease (default: <host name>_<random>)")
      ("metrics-address", po::value(&metrics_address)->default_value(metrics_address),
       "HTTP /metrics, /healthz and /readyz on host:port or [v6]:port, or off")
      ("extender-address", po::value(&extender_address)->default_value(extender_address),
       "serve kube-scheduler's extender (POST /filter, /prioritize; docs/scheduling.md) on host:port while "
       "leading, or off")
      ("extender-tls-cert", po::value(&extender_tls.cert), "serve the extender over TLS with this certificate (PEM chain)")
      ("extender-tls-key", po::value(&extender_tls.key), "its private key")
      ("extender-tls-client-ca", po::value(&extender_tls.client_ca),
       "accept only clients (kube-scheduler) with a certificate chained to this CA (mutual TLS)")
      ("extender-unauthenticated", po::bool_switch(&extender_unauthenticated),
       "serve the extender to callers without a client certificate (plain HTTP, or TLS without "
       "--extender-tls-client-ca): anyone who reaches the port can then hold nodes' room; a trusted network only")
      ("extender-tls-client-names", po::value(&extender_client_names)->default_value(extender_client_names),
       "with --extender-tls-client-ca: comma-separated names the client certificate must carry (its CN or a DNS "
       "subjectAltName, with extendedKeyUsage clientAuth); any other certificate of that CA is refused")
      ("log-level", po::value(&log_level)->default_value(log_level), "trace, debug, info, warn, error");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "nodevol-provisioner: " << nodevol::PoErrorText(e) << " (see --help)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "nodevol-provisioner: " << e.what() << " (see --help)\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  cc.sweep_interval = std::chrono::seconds(vm["orphan-sweep-seconds"].as<long>());
  cc.orphan_grace = std::chrono::seconds(vm["orphan-grace-seconds"].as<long>());
  cc.event_defer = std::chrono::milliseconds(std::max(0L, vm["event-defer-ms"].as<long>()));
  Status st = ParsePlacementPolicy(placement, &cc.options.policy);
  const bool manual_tls = !cc.tls.ca.empty() || !cc.tls.cert.empty() || !cc.tls.key.empty();
  cc.tls.refresh_seconds = tls_refresh_seconds;
  if (st.ok() && (manual_tls || node_ca_secret.empty())) {
    if (cc.tls.ca.empty() || cc.tls.cert.empty() || cc.tls.key.empty())
      st = Status::InvalidArgument("give all of --tls-ca, --tls-cert and --tls-key, or --node-ca-secret to have "
                                   "them issued (docs/enrollment.md)");
    else
      st = nodes::CheckTlsClientFiles(cc.tls);
  }
  // Each is one key=value term of a label selector: nothing that would
  // add or change terms (",", "!", spaces) gets through.
  // (A key: [prefix/]name, one "/" at most; a value: no "/".)
  auto label_ok = [](const std::string& l) {
    auto eq = l.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == l.size()) return false;
    if (std::count(l.begin(), l.begin() + eq, '/') > 1 || l.find('/', eq) != std::string::npos) return false;
    for (size_t i = 0; i < l.size(); ++i)
      if (i != eq && !std::isalnum(static_cast<unsigned char>(l[i])) && l[i] != '.' && l[i] != '-' && l[i] != '_' &&
          l[i] != '/')
        return false;
    return true;
  };
  if (st.ok() && !label_ok(cc.node_selector))
    st = Status::InvalidArgument("--node-selector must be one label key=value, not \"" + cc.node_selector + "\"");
  if (st.ok() && !cc.storage_node_label.empty() && !label_ok(cc.storage_node_label))
    st = Status::InvalidArgument("--storage-node-label must be one label key=value (or empty), not \"" +
                                 cc.storage_node_label + "\"");
  // The node's own label cannot be the admin's mark.
  if (st.ok() && !cc.storage_node_label.empty() &&
      cc.storage_node_label.substr(0, cc.storage_node_label.find('=')) == cc.node_selector.substr(0, cc.node_selector.find('=')))
    st = Status::InvalidArgument("--storage-node-label must be another label than --node-selector's, which each node "
                                 "sets on itself");
  if (st.ok() && !cc.storage_node_label.empty() && cc.storage_node_label.rfind("node-restriction.kubernetes.io/", 0) != 0)
    spdlog::warn("--storage-node-label {} is not under node-restriction.kubernetes.io/: unless something else stops "
                 "kubelets setting it, a node can mark itself a storage node",
                 cc.storage_node_label);
  if (st.ok() && node_cert_max_seconds < 60)
    st = Status::InvalidArgument("--node-cert-max-lifetime-seconds must be at least 60");
  leader::LeaderElectorConfig ec;
  // Clamped only so that a huge typo cannot overflow the clock's
  // nanoseconds; CheckTimings refuses anything above a day.
  auto capped = [](long v) { return std::chrono::seconds(std::clamp(v, -1L, 86401L)); };
  ec.lease_duration = capped(lease_seconds);
  ec.renew_deadline = capped(renew_seconds);
  ec.retry_period = capped(retry_seconds);
  if (st.ok() && leader_elect) {
    st = leader::LeaderElector::CheckTimings(ec);
    if (!st.ok())
      st = Status::InvalidArgument(st.message() + " (--lease-duration-seconds " + std::to_string(lease_seconds) +
                                   ", --renew-deadline-seconds " + std::to_string(renew_seconds) +
                                   ", --retry-period-seconds " + std::to_string(retry_seconds) + ")");
  }
  if (!st.ok()) {
    std::cerr << "nodevol-provisioner: " << st.message() << "\n";
    return 2;
  }
  SplitLabel(cc.node_selector, &cc.options.node_label_key, &cc.options.node_label_value);

  kube::Config config;
  if (kubeconfig.empty() && std::getenv("KUBECONFIG")) kubeconfig = std::getenv("KUBECONFIG");
  if (!kubeconfig.empty()) {
    std::vector<std::string> files;
    for (size_t start = 0;;) {
      size_t colon = kubeconfig.find(':', start);
      files.push_back(kubeconfig.substr(start, colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    st = kube::LoadKubeconfig(files, context, &config);
  } else {
    st = kube::LoadInCluster(kube::InClusterSource::FromEnvironment(), &config);
  }
  std::unique_ptr<kube::Client> client;
  if (st.ok()) st = kube::Client::New(config, {}, &client);
  if (!st.ok()) {
    std::cerr << "nodevol-provisioner: " << st.message() << "\n";
    return 1;
  }

  if (cc.capacity_namespace.empty()) cc.capacity_namespace = config.ns;
  // In a pod (the Deployment sets POD_NAME and POD_NAMESPACE): the capacity
  // objects are owned by the Deployment, so uninstalling removes them.
  if (cc.capacity_objects && std::getenv("POD_NAME") && std::getenv("POD_NAMESPACE")) {
    Status os = FindDeploymentOwner(client.get(), std::getenv("POD_NAMESPACE"), std::getenv("POD_NAME"),
                                    &cc.capacity_owner);
    if (os.ok())
      spdlog::info("capacity objects owned by {} {}", cc.capacity_owner.value("kind", ""),
                   cc.capacity_owner.value("name", ""));
    else
      spdlog::warn("capacity objects get no owner (uninstalling will not remove them): {}", os.message());
  }

  // Node enrollment (docs/enrollment.md): every replica follows the CA
  // Secret and holds a client certificate of its own from a CA the nodes
  // trust; the leader signs and publishes the bundle (enroll/node_ca.h).
  std::unique_ptr<NodeCa> node_ca;
  std::unique_ptr<ClientCertificate> own_cert;
  if (!node_ca_secret.empty()) {
    const char* pod_ns = std::getenv("POD_NAMESPACE");
    NodeCa::Config nc;
    nc.ns = pod_ns && *pod_ns ? pod_ns : config.ns;
    nc.secret = node_ca_secret;
    nc.configmap = node_ca_configmap;
    nc.poll = std::chrono::seconds(std::clamp(ca_poll_seconds, 1L, 3600L));
    nc.times.spread = std::chrono::seconds(std::clamp(ca_spread_seconds, 0L, 86400L));
    nc.times.settle = std::chrono::seconds(std::clamp(ca_settle_seconds, 0L, 86400L));
    nc.times.max_node_cert = std::chrono::seconds(node_cert_max_seconds);
    node_ca = std::make_unique<NodeCa>(client.get(), nc);
    st = node_ca->Load();
    if (st.ok() && !manual_tls) {
      auto lifetime = std::min(std::chrono::seconds(node_cert_max_seconds), std::chrono::seconds(24 * 3600));
      NodeCa* ca = node_ca.get();
      own_cert = std::make_unique<ClientCertificate>([ca] { return ca->ClientIssuer(); },
                                                     [ca] { return ca->TrustBundle(); }, tls_dir, lifetime);
      st = own_cert->Issue();
      cc.tls = own_cert->files();
      cc.tls.refresh_seconds = tls_refresh_seconds;
    }
    if (!st.ok()) {
      std::cerr << "nodevol-provisioner: node CA: " << st.message() << "\n";
      return 1;
    }
    NodeCa* ca = node_ca.get();
    cc.node_ca = [ca] { return ca->Signer(); };
    cc.node_cert_lifetime = std::chrono::seconds(node_cert_max_seconds);
    spdlog::info("node CA from Secret {}/{}, published by the leader in ConfigMap {}/{}; {}", nc.ns, node_ca_secret,
                 nc.ns, node_ca_configmap,
                 own_cert ? "client certificate issued into " + tls_dir : "client certificate from --tls-cert");
    if (own_cert) own_cert->Start();
  }

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  ProvisionerMetrics metrics;
  cc.metrics = &metrics;
  Controller controller(client.get(), cc);
  std::atomic<int> exit_code{0};
  std::atomic<bool> stopping{false};
  // The extender is served by the leader only, from its ledger: a
  // standby does not listen (docs/scheduling.md, "Failover").
  std::mutex extender_mu;
  std::condition_variable extender_ready;
  auto start = [&] {
    if (!controller.Start(std::chrono::minutes(2))) {
      if (stopping) return;  // a signal ended the sync: not a failure
      spdlog::error("caches did not sync within 2 minutes; is the apiserver reachable and RBAC in place?");
      exit_code = 1;
      kill(getpid(), SIGTERM);
      return;
    }
    spdlog::info("nodevol-provisioner {} running", nodevol::Version());
    if (extender_address != "off") extender_ready.notify_all();
  };

  // Served before the caches sync (liveness holds meanwhile) and declared
  // after the controller, so it stops before the controller goes.
  std::atomic<bool> leading{false};
  // Until this replica has removed a serving label left from before a
  // restart (only in a pod that serves the extender).
  std::atomic<bool> unlabelled{true};
  StatusServer::Options so;
  so.metrics = &metrics;
  so.refresh = [&] {
    metrics.SetNodes(controller.NodeStates());
    metrics.SetQueueDepth("claim", controller.ClaimQueueDepth());
    metrics.SetQueueDepth("volume", controller.VolumeQueueDepth());
    metrics.SetLeader(leader_elect ? leading.load() : controller.Ready());
  };
  // A standby replica is ready: only the leader runs the controller.
  so.ready = [&](std::string* why) {
    if (stopping) return *why = "stopping", false;
    if (!unlabelled) return *why = std::string("removing this pod's ") + kServingLabel + " label", false;
    if (leader_elect && !leading) return true;
    if (!controller.Ready()) return *why = "caches not synced yet", false;
    return true;
  };
  StatusServer status(std::move(so));
  std::unique_ptr<EventRecorder> ca_events;
  if (node_ca) {
    ca_events = std::make_unique<EventRecorder>(client.get(), cc.options.provisioner_name);
    NodeCa::Hooks hooks;
    hooks.leading = [&] { return (leader_elect ? leading.load() : true) && !stopping; };
    hooks.node_cas = [&] { return controller.NodeServingCas(); };
    hooks.on_change = [&] {
      if (own_cert) own_cert->Reissue();
    };
    hooks.events = ca_events.get();
    hooks.metrics = &metrics;
    node_ca->Start(std::move(hooks));
    if (!leader_elect) node_ca->Wake();
  }
  // Its thread uses what is declared since it was made: stopped first on
  // every way out.
  struct StopCa {
    NodeCa* ca;
    ~StopCa() {
      if (ca) ca->Stop();
    }
  } stop_ca{node_ca.get()};
  if (metrics_address != "off") {
    if (Status hs = status.Start(metrics_address); !hs.ok()) {
      std::cerr << "nodevol-provisioner: --metrics-address: " << hs.message() << "\n";
      return 2;
    }
    spdlog::info("metrics and probes on {} port {} (/metrics, /healthz, /readyz)", metrics_address, status.port());
  }

  httpd::HttpServer extender(
      {}, ExtenderHandlers([&]() -> Extender* { return controller.ServingExtender(); }), kMaxExtenderBody,
      "extender");
  {
    // Four handlers at once: one call waiting up to 2 s for a claim to be
    // cached (controller.cc) must not hold up kube-scheduler's next.
    httpd::Limits el;
    el.handler_threads = 4;
    (void)extender.SetLimits(el);
  }
  std::thread extender_thread;
  const bool in_pod = std::getenv("POD_NAME") && std::getenv("POD_NAMESPACE");
  const std::string pod_name = in_pod ? std::getenv("POD_NAME") : "";
  const std::string pod_namespace = in_pod ? std::getenv("POD_NAMESPACE") : "";
  if (extender_address != "off") {
    if (Status as = httpd::CheckAddress("extender", extender_address); !as.ok()) {
      std::cerr << "nodevol-provisioner: --extender-address: " << as.message() << "\n";
      return 2;
    }
    if (!extender_tls.cert.empty() || !extender_tls.key.empty() || !extender_tls.client_ca.empty()) {
      Status ts = extender_tls.cert.empty() || extender_tls.key.empty()
                      ? Status::InvalidArgument("--extender-tls-cert and --extender-tls-key go together")
                      : ParseNameList("--extender-tls-client-names", extender_client_names, &extender_tls.client_names);
      if (ts.ok()) ts = extender.EnableTls(extender_tls);
      if (!ts.ok()) {
        std::cerr << "nodevol-provisioner: " << ts.message() << "\n";
        return 2;
      }
    }
    // Whoever calls the extender chooses the pod, its claims and the nodes,
    // and can promise a tenant's pending claims anywhere (issue 57, item 3):
    // only kube-scheduler may, unless the operator says otherwise.
    if (extender_tls.client_ca.empty()) {
      if (!extender_unauthenticated) {
        std::cerr << "nodevol-provisioner: --extender-address without --extender-tls-client-ca would let anyone who "
                     "reaches the port call the extender; give kube-scheduler a client certificate (docs/tls.md), or "
                     "--extender-unauthenticated on a trusted network\n";
        return 2;
      }
      spdlog::warn("scheduler extender serves callers without a client certificate (--extender-unauthenticated): "
                   "use it on a trusted network only");
    }
    if (in_pod) unlabelled = false;
    // Bound once the controller runs; until then (and on a standby) the
    // port is free, or held by a leader that is still exiting: retried.
    extender_thread = std::thread([&] {
      std::unique_lock<std::mutex> lock(extender_mu);
      auto wait = [&](std::chrono::milliseconds d) {
        extender_ready.wait_for(lock, d);
        return !stopping.load();
      };
      // This replica does not serve (yet): a label left from before a
      // restart must not route kube-scheduler here. Until it is gone the
      // replica says it is not ready, so the Service skips it either way.
      if (in_pod && !MarkServingUntilDone(client.get(), pod_namespace, pod_name, false, wait)) return;
      unlabelled = true;
      while (!stopping && !controller.Ready()) extender_ready.wait_for(lock, std::chrono::seconds(1));
      for (int tries = 0; !stopping; ++tries) {
        Status bs = extender.Start(extender_address);
        if (bs.ok()) {
          spdlog::info("scheduler extender on {} port {} (/filter, /prioritize{})", extender_address, extender.port(),
                       extender_tls.cert.empty() ? "" : ", TLS");
          // In a pod: route the Service to this replica (serving_label.h).
          if (in_pod && MarkServingUntilDone(client.get(), pod_namespace, pod_name, true, wait))
            spdlog::info("pod labelled {}={}", kServingLabel, kServingValue);
          return;
        }
        if (tries % 30 == 0) spdlog::warn("scheduler extender: {}; retrying", bs.message());
        extender_ready.wait_for(lock, std::chrono::seconds(1));
      }
    });
  }

  // Leader election on its own client whose requests end well within the
  // renew deadline (each renewal's requests are also capped at the time
  // left to it).
  std::unique_ptr<kube::Client> lease_client;
  std::unique_ptr<leader::KubeLeaseStore> store;
  std::unique_ptr<leader::LeaderElector> elector;
  std::thread election;
  if (leader_elect) {
    kube::ClientOptions lo;
    lo.request_timeout = std::min<std::chrono::milliseconds>(
        std::chrono::seconds(5), std::chrono::duration_cast<std::chrono::milliseconds>(ec.renew_deadline / 2));
    lo.connect_timeout = std::min<std::chrono::milliseconds>(std::chrono::seconds(3), lo.request_timeout);
    st = kube::Client::New(config, lo, &lease_client);
    if (identity.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      unsigned r = 0;
      FILE* f = fopen("/dev/urandom", "rb");
      if (f) {
        if (fread(&r, sizeof r, 1, f) != 1) r = static_cast<unsigned>(getpid());
        fclose(f);
      }
      char suffix[16];
      snprintf(suffix, sizeof suffix, "_%08x", r);
      identity = std::string(host) + suffix;
    }
    if (lease_namespace.empty()) lease_namespace = config.ns;
    if (lease_name.empty()) lease_name = kDefaultLeaseName;
    store = std::make_unique<leader::KubeLeaseStore>(lease_client.get(), lease_namespace, lease_name);
    ec.identity = identity;
    ec.release_on_cancel = true;
    leader::LeaderCallbacks cb;
    cb.on_started_leading = [&] {
      leading = true;
      spdlog::info("leading as {} (lease {})", identity, store->Describe());
      if (node_ca) node_ca->Wake();  // publishes the bundle from the CA it signs with
      std::thread(start).detach();
    };
    // As client-go's users do: a replica that lost the lease exits at
    // once, without draining its queues or releasing the lease (a
    // successor may lead as soon as the lease expires; nothing of ours may
    // still act then). Whatever was in flight is finished by the next
    // leader: every step is idempotent, and a new leader reads the nodes'
    // volumes before it places a claim (controller/seed_attempts.h).
    cb.on_stopped_leading = [&] {
      leading = false;
      if (stopping) {
        spdlog::info("stopped leading {}", store->Describe());
        return;
      }
      spdlog::error("lost the lease {}; exiting at once", store->Describe());
      spdlog::shutdown();
      std::_Exit(1);
    };
    cb.on_new_leader = [&](const std::string& who) {
      if (who != identity) spdlog::info("leader is now {}", who.empty() ? "(none)" : who);
    };
    if (st.ok()) st = leader::LeaderElector::New(store.get(), Clock::Real(), ec, cb, &elector);
    if (!st.ok()) {
      std::cerr << "nodevol-provisioner: " << st.message() << "\n";
      return 1;
    }
    election = std::thread([&] { elector->Run(); });
  } else {
    start();
  }
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("signal {}: stopping", sig);
  stopping = true;  // /readyz says so while the controller stops
  // The workers stop first (queued keys dropped, running ones finished);
  // only then does the elector release the lease for the standby.
  {
    std::lock_guard<std::mutex> lock(extender_mu);
    extender_ready.notify_all();
  }
  if (extender_thread.joinable()) extender_thread.join();
  extender.Stop();
  controller.Stop();
  if (elector) {
    elector->Stop();
    election.join();
  }
  return exit_code.load();
}
