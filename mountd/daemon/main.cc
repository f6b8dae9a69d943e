// nodevold: wires configuration, state, backends, the Node domain, the
// capacity monitor, metrics and the gRPC server together, then waits for
// SIGTERM. Exit codes: 0 clean stop, 1 start failure, 2 bad configuration.
#include <signal.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "backend/registry.h"
#include "base/version.h"
#include "config/config.h"
#include "daemon/fd_limit.h"
#include "daemon/logging.h"
#include "csi/controller_service.h"
#include "csi/driver.h"
#include "csi/identity_service.h"
#include "csi/node_service.h"
#include "csi/registrar.h"
#include "daemon/socket_probe.h"
#include "enroll/enroller.h"
#include "kube/config.h"
#include "kube/simple_client.h"
#include "metrics/http_server.h"
#include "metrics/metrics.h"
#include "mount/target.h"
#include "node/capacity_monitor.h"
#include "node/node.h"
#include "server/flex_door.h"
#include "server/node_service.h"
#include "server/tcp_relay.h"
#include "server/tls_credentials.h"
#include "base/atomic_file.h"
#include "state/store.h"

namespace nodevol {
namespace {

// gRPC's synchronous server keeps MIN_POLLERS threads waiting for calls
// and ends a thread once more than MAX_POLLERS (default 2) are idle: with
// a few clients at once that is a thread made and ended per call, by the
// hundreds per second (publish_bench). Keeping up to kKeptPollers idle
// keeps the thread count flat under load; each idle one is a stack.
constexpr int kKeptPollers = 16;

void KeepPollers(grpc::ServerBuilder* b) {
  b->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  b->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kKeptPollers);
}

int Fail(const Status& st) {
  spdlog::critical("cannot start: {}", st.message());
  sd_notifyf(0, "STATUS=cannot start: %s", st.message().c_str());
  return 1;
}

// Removes a stale socket file (never anything else) so the bind succeeds.
Status PrepareSocket(const std::string& path) {
  std::filesystem::path p(path);
  NODEVOL_RETURN_IF_ERROR(EnsureDir(p.parent_path().string(), 0755, /*enforce_mode=*/false));
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::FailedPrecondition(path + " exists and is not a socket; remove it");
    ::unlink(path.c_str());
  }
  return Status::Ok();
}

// A gRPC server on a fresh root-only unix socket at path, serving services.
Status ServeUnix(const std::string& path, std::initializer_list<grpc::Service*> services,
                 std::unique_ptr<grpc::Server>* out) {
  NODEVOL_RETURN_IF_ERROR(PrepareSocket(path));
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  KeepPollers(&b);
  for (grpc::Service* s : services) b.RegisterService(s);
  *out = b.BuildAndStart();
  if (!*out) return Status::Unavailable("cannot listen on unix socket " + path);
  // Made under umask 077 already; the mode says so whatever the umask.
  if (::chmod(path.c_str(), 0600) != 0) return Status::FromErrno("chmod " + path, errno);
  return Status::Ok();
}

int Run(const Config& c) {
  spdlog::info("nodevold {} starting: node={} socket={} state={} pods-root={}", nodevol::Version(), c.node_name,
               c.socket, c.state_dir, c.pods_root);
  // Everything nodevold creates is private unless it says otherwise.
  ::umask(077);

  // TLS files first: a bad one should stop the start before anything is touched.
  // Enrolled files are checked once they exist (enroll/enroller.h).
  TlsFiles files{c.tls_ca, c.tls_cert, c.tls_key};
  if (!c.enroll_note.empty()) spdlog::info("{}", c.enroll_note);
  if (!c.tls_listen.empty() && !c.enroll_active) {
    TlsFacts facts;
    if (Status st = CheckTlsFiles(files, &facts); !st.ok()) return Fail(st);
    if (facts.expired) spdlog::warn("--tls-cert {} is not valid now (valid until {})", c.tls_cert, facts.not_after);
    if (facts.key_readable_by_others) spdlog::warn("--tls-key is readable by group or others; chmod 0600 it");
  }

  // Only a hint for the operator: kubelet finds the driver, not nodevold.
  if (!c.kubelet_plugin_dir.empty()) {
    std::string driver = c.kubelet_plugin_dir + "/nodevol.io~volume/volume";
    if (::access(driver.c_str(), X_OK) != 0)
      spdlog::warn("--kubelet-plugin-dir {}: no nodevol-flex at {}; kubelet cannot mount nodevol volumes "
                   "until it is installed (nodevol-flex install {})", c.kubelet_plugin_dir, driver,
                   c.kubelet_plugin_dir);
  }

  // Every listener a non-root client can reach is capped; what is left is
  // the unix socket's (daemon/fd_limit.h).
  size_t capped = (c.tls_listen.empty() ? 0 : 3 * size_t{c.max_tcp_connections}) +
                  (c.metrics_address == "off" ? 0 : size_t{c.max_metrics_connections});
  size_t fd_limit = 0;
  if (Status st = EnsureFdBudget(capped, &fd_limit); !st.ok()) return Fail(st);
  spdlog::info("descriptors: limit {}, at most {} for TCP and metrics clients", fd_limit, capped);

  Status st = EnsureDir(c.pods_root, 0750, /*enforce_mode=*/false);
  std::string pods_root;
  if (st.ok()) st = ResolveConfiguredDir("--pods-root", c.pods_root, &pods_root);
  if (!st.ok()) return Fail(st);

  Store store(c.state_dir);
  if (st = store.Open(); !st.ok()) return Fail(st);

  std::map<std::string, std::unique_ptr<Backend>> pools;
  BackendEnv env{c.state_dir, nullptr, std::chrono::seconds(c.lvm_timeout_seconds),
                 std::chrono::seconds(c.mkfs_timeout_seconds), std::chrono::seconds(c.dir_io_timeout_seconds)};
  for (const PoolConfig& pc : c.pools) {
    std::unique_ptr<Backend> b;
    if (st = MakeBackend(pc.name, pc.backend, pc.options, &b, &env); !st.ok()) return Fail(st);
    spdlog::info("pool {}: backend={} size-enforced={}", pc.name, b->kind(), b->size_enforced());
    pools.emplace(pc.name, std::move(b));
  }

  Node node(pods_root, &store, std::move(pools));
  std::map<std::string, InlinePolicy> inline_policies;
  for (const PoolConfig& pc : c.pools) {
    inline_policies[pc.name] = pc.inline_policy;
    if (pc.inline_policy.allowed)
      spdlog::info("pool {}: pods may ask for inline volumes of up to {} bytes", pc.name, pc.inline_policy.max_bytes);
  }
  node.SetInlinePolicies(std::move(inline_policies));
  if (c.csi) {
    // Raw block volumes go below kubelet's CSI plugin dir: known only to
    // the CSI front door.
    std::string kubelet_root;
    if (st = EnsureDir(c.kubelet_root, 0750, /*enforce_mode=*/false); st.ok())
      st = ResolveConfiguredDir("--kubelet-root", c.kubelet_root, &kubelet_root);
    if (!st.ok()) return Fail(st);
    node.SetKubeletRoot(kubelet_root);
  }
  if (st = node.Start(); !st.ok()) return Fail(st);
  for (const std::string& d : node.Drift()) spdlog::warn("reconcile: {}", d);

  metrics::Registry registry;
  registry.SetDrift(node.Drift().size());
  CapacityMonitor capacity(&node, std::chrono::milliseconds(c.capacity_poll_ms),
                           [&](const std::vector<PoolCapacityView>& pools) {
                             for (const PoolCapacityView& p : pools) {
                               registry.SetPool(p.pool, p.backend, p.total_bytes, p.free_bytes, p.allocated_bytes,
                                                p.volume_count, p.snapshot_count);
                               if (p.data_percent && p.metadata_percent)
                                 registry.SetThinUsage(p.pool, *p.data_percent, *p.metadata_percent);
                             }
                           });
  capacity.Start();

  SocketProbe probe(c.socket, std::chrono::seconds(3));
  // A write to the state directory running past its limit: the disk under
  // it stopped answering. Said, not acted on: the write finishes when the
  // disk answers, and a restart could not interrupt it either.
  const std::chrono::seconds state_limit(c.state_write_timeout_seconds);
  auto state_failure_of = [&store, state_limit](std::chrono::milliseconds age, const std::string& what) {
    if (age < state_limit) return std::string();
    return "writing " + what + " to the state directory " + store.dir() + " has not finished in " +
           std::to_string(age.count() / 1000) +
           " s: the disk under it is not answering (see the kernel log), and calls that record volumes wait for it";
  };
  auto state_failure = [&store, &state_failure_of] {
    std::string what;
    auto age = store.writes().Oldest(&what);
    return state_failure_of(age, what);
  };
  auto unhealthy = [&probe, &state_failure] {
    std::string why = probe.Failure();
    return why.empty() ? state_failure() : why;
  };
  metrics::HttpServer http(&registry, unhealthy, c.max_metrics_connections);
  if (c.metrics_address != "off") {
    if (st = http.Start(c.metrics_address); !st.ok()) return Fail(st.WithContext("--metrics-address"));
    spdlog::info("metrics on {} port {} (/metrics)", c.metrics_address, http.port());
  }

  NodeService service(&node, &capacity, &registry, c.node_name, c.heartbeat_seconds);
  std::unique_ptr<grpc::Server> server;
  if (st = ServeUnix(c.socket, {&service}, &server); !st.ok()) return Fail(st);

  // The FlexVolume driver's door (server/flex_door.h): the same calls
  // without gRPC, next to the Node API socket.
  NodeService flex_service(&node, &capacity, &registry, c.node_name, c.heartbeat_seconds,
                           NodeService::Listener::kFlex);
  FlexDoor door(&flex_service);
  const std::string door_socket = c.socket + ".flex";
  if (st = PrepareSocket(door_socket); !st.ok()) return Fail(st);
  if (st = door.Start({door_socket}); !st.ok()) return Fail(st);

  // The TCP listener for the provisioner is a server of its own: gRPC binds
  // a service to a server, not to a port, and this one's NodeService
  // refuses the local-only methods.
  // Its TCP port is a TcpRelay (server/tcp_relay.h) in front of a private
  // unix socket: gRPC 1.51 cannot cap connections itself.
  NodeService remote_service(&node, &capacity, &registry, c.node_name, c.heartbeat_seconds,
                             NodeService::Listener::kRemote);
  if (c.csi) {
    service.SetCsiDriver(csi::kDriverName);
    remote_service.SetCsiDriver(csi::kDriverName);
  }
  std::unique_ptr<grpc::Server> remote_server;
  TcpRelay relay;
  std::string relay_socket = c.socket + ".tls";
  // Started here, or by the enroller once it holds a certificate.
  auto start_listener = [&]() -> Status {
    TlsFacts facts;
    NODEVOL_RETURN_IF_ERROR(CheckTlsFiles(files, &facts));
    NODEVOL_RETURN_IF_ERROR(PrepareSocket(relay_socket));
    grpc::ServerBuilder tcp;
    tcp.AddListeningPort("unix:" + relay_socket, MutualTlsServerCredentials(files, c.tls_refresh_seconds, c.tls_client_names));
    tcp.RegisterService(&remote_service);
    // A client that has not finished mutual TLS and sent its HTTP/2
    // settings by then is closed: the relay trusts the connections that
    // outlive this (server/tcp_relay.h).
    tcp.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, static_cast<int>(kTlsHandshakeTimeout.count()));
    tcp.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
    tcp.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
    remote_server = tcp.BuildAndStart();
    if (!remote_server) return Status::Unavailable("cannot listen on unix socket " + relay_socket);
    if (::chmod(relay_socket.c_str(), 0600) != 0) return Status::FromErrno("chmod " + relay_socket, errno);
    NODEVOL_RETURN_IF_ERROR(relay.Start({c.tls_listen, relay_socket, c.max_tcp_connections}));
    std::string names;
    for (const auto& n : c.tls_client_names) names += (names.empty() ? "" : ", ") + n;
    spdlog::info("mutual TLS listener on {} (port {}): client certificates must chain to {} ({} CA certificates) "
                 "and name {}; serving {} as {} (until {}), files re-read every {} s; "
                 "Publish/Unpublish/GetVolumeStats refused",
                 c.tls_listen, relay.port(), c.tls_ca, facts.ca_certificates, names, c.tls_cert, facts.subject,
                 facts.not_after, c.tls_refresh_seconds);
    return Status::Ok();
  };
  // Enrollment (enroll/enroller.h) as the node itself, with kubelet's kubeconfig.
  std::unique_ptr<kube::SimpleClient> kube_client;
  std::unique_ptr<enroll::Enroller> enroller;
  std::string listen_host = c.tls_listen.substr(0, c.tls_listen.rfind(':'));
  if (c.enroll_active) {
    kube::Config kc;
    st = kube::LoadKubeconfig({c.enroll_kubeconfig}, "", &kc);
    if (st.ok())
      st = kube::SimpleClient::New(kc, std::string("nodevold/") + nodevol::Version(), std::chrono::seconds(30),
                                   &kube_client);
    if (!st.ok()) return Fail(st.WithContext("--enroll-kubeconfig " + c.enroll_kubeconfig));
    enroll::EnrollConfig ec;
    ec.node = c.node_name;
    ec.files.dir = c.enroll_dir;
    size_t slash = c.enroll_ca_configmap.find('/');
    ec.ca_namespace = c.enroll_ca_configmap.substr(0, slash);
    ec.ca_configmap = c.enroll_ca_configmap.substr(slash + 1);
    ec.lifetime = std::chrono::seconds(c.enroll_lifetime_seconds);
    ec.recheck = std::chrono::seconds(c.enroll_recheck_seconds);
    size_t eq = c.announce_label.find('=');
    ec.label_key = c.announce_label.empty() ? "" : c.announce_label.substr(0, eq);
    ec.label_value = c.announce_label.empty() ? "" : c.announce_label.substr(eq + 1);
    enroller = std::make_unique<enroll::Enroller>(kube_client.get(), ec, [&] {
      if (Status ls = start_listener(); !ls.ok()) {
        spdlog::error("enrolled, but the TLS listener cannot start: {}; restart nodevold", ls.message());
        return;
      }
      enroller->Announce(listen_host, relay.port());
    });
  }
  if (!c.tls_listen.empty() && (!enroller || enroller->ready())) {
    if (st = start_listener(); !st.ok()) return Fail(st);
    if (enroller) enroller->Announce(listen_host, relay.port());
  } else if (enroller) {
    spdlog::info("the TLS listener {} starts once this node holds a certificate", c.tls_listen);
  }
  if (enroller) enroller->Start();

  // The CSI front door: kubelet's other way in, to the same Node. The CSI
  // socket answers before the registration socket appears (kubelet dials
  // it for NodeGetInfo as soon as it sees the registration).
  CallRunner csi_calls(&registry, "csi");
  auto ready = [&](std::string* why) {
    *why = unhealthy();
    return why->empty();
  };
  // CONTROLLER_SERVICE is the plugin's capability, said on both sockets
  // (csi-sanity asks the node socket's Identity), served on one.
  csi::IdentityService csi_identity(ready, /*controller=*/c.csi_controller);
  csi::NodeService csi_node(&node, &capacity, &csi_calls, c.node_name);
  std::unique_ptr<grpc::Server> csi_server;
  const std::string csi_dir = c.kubelet_root + "/plugins/" + csi::kDriverName;
  const std::string csi_socket = csi_dir + "/csi.sock";
  csi::Registrar registrar({c.kubelet_root + "/plugins_registry/" + csi::kDriverName + "-reg.sock", csi_socket,
                            csi::kDriverName});
  // The Controller makes and deletes volumes: never on the socket kubelet
  // (and whatever else is given the node plugin's socket) dials.
  csi::IdentityService controller_identity(ready, /*controller=*/true);
  csi::ControllerService csi_controller(&node, &capacity, &csi_calls, c.node_name);
  std::unique_ptr<grpc::Server> controller_server;
  const std::string controller_socket = csi_dir + "/controller.sock";
  if (c.csi_controller) {
    if (st = ServeUnix(controller_socket, {&controller_identity, &csi_controller}, &controller_server); !st.ok())
      return Fail(st.WithContext("--csi-controller"));
    spdlog::info("CSI controller for this node's pools on {}", controller_socket);
  } else if (struct stat sb; ::lstat(controller_socket.c_str(), &sb) == 0 && S_ISSOCK(sb.st_mode)) {
    // One a kill -9 left while it was on: nothing answers it any more.
    ::unlink(controller_socket.c_str());
  }
  if (c.csi) {
    if (st = ServeUnix(csi_socket, {&csi_identity, &csi_node}, &csi_server); !st.ok())
      return Fail(st.WithContext("--csi"));
    if (st = EnsureDir(c.kubelet_root + "/plugins_registry", 0750, /*enforce_mode=*/false); !st.ok()) return Fail(st);
    if (st = registrar.Start(); !st.ok()) return Fail(st.WithContext("--csi: kubelet registration"));
    spdlog::info("CSI driver {} on {}, registered with kubelet through {}", csi::kDriverName, csi_socket,
                 c.kubelet_root + "/plugins_registry");
  }

  spdlog::info("ready: {} pools, {} drift findings", c.pools.size(), node.Drift().size());
  probe.Run();
  sd_notifyf(0, "READY=1\nSTATUS=serving on %s", c.socket.c_str());

  // Wait for a signal, pinging the watchdog meanwhile.
  uint64_t watchdog_usec = 0;
  bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  // Every 2 s (or twice per watchdog period if that is shorter) the
  // socket is probed; the watchdog is pinged only while it answers.
  bool was_answering = true, state_answering = true;
  for (;;) {
    struct timespec ts = {2, 0};
    if (watchdog && watchdog_usec < 4000000)
      ts = {static_cast<time_t>(watchdog_usec / 2000000), static_cast<long>(watchdog_usec / 2 % 1000000 * 1000)};
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("signal {}: stopping after in-flight operations", sig);
      break;
    }
    bool answering = probe.Run();
    if (answering != was_answering) {
      if (answering) spdlog::info("the unix socket answers again");
      else spdlog::error("{}; /healthz says unhealthy and the watchdog is not pinged", probe.Failure());
      was_answering = answering;
    }
    // One reading for the gauge and the log, so they agree.
    std::string writing;
    auto age = store.writes().Oldest(&writing);
    registry.SetStateWriteOldest(age.count() / 1000.0);
    if (std::string why = state_failure_of(age, writing); why.empty() != state_answering) {
      if (why.empty()) spdlog::info("the state directory {} answers again", store.dir());
      else spdlog::error("{}; /healthz and the CSI Probe say unhealthy", why);
      state_answering = why.empty();
    }
    if (watchdog && answering && node.Healthy()) sd_notify(0, "WATCHDOG=1");
  }

  sd_notify(0, "STOPPING=1");
  // No listener starts after this.
  if (enroller) enroller->Stop();
  // kubelet deregisters the driver when the registration socket goes;
  // the CSI socket stays until the end for calls in flight.
  registrar.Stop();
  service.Shutdown();
  remote_service.Shutdown();
  capacity.Stop();
  auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(c.shutdown_grace_seconds);
  if (!service.WaitIdle(grace) || !remote_service.WaitIdle(grace) || !flex_service.WaitIdle(grace) ||
      !csi_calls.WaitIdle(grace))
    spdlog::warn("operations still running after {} s; stopping anyway", c.shutdown_grace_seconds);
  // Nothing is running now: cancel whatever arrives meanwhile instead of
  // waiting for idle client connections to close.
  relay.Stop();
  door.Stop(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  if (remote_server) remote_server->Shutdown(std::chrono::system_clock::now());
  server->Shutdown(std::chrono::system_clock::now());
  if (csi_server) csi_server->Shutdown(std::chrono::system_clock::now());
  if (controller_server) controller_server->Shutdown(std::chrono::system_clock::now());
  if (remote_server) remote_server->Wait();
  if (csi_server) csi_server->Wait();
  if (controller_server) controller_server->Wait();
  server->Wait();
  http.Stop();
  ::unlink(c.socket.c_str());
  if (remote_server) ::unlink(relay_socket.c_str());
  if (csi_server) ::unlink(csi_socket.c_str());
  if (controller_server) ::unlink(controller_socket.c_str());
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace nodevol

int main(int argc, char** argv) {
  // Block the stop signals before any thread exists; Run() waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  nodevol::Config config;
  nodevol::ParseOutcome outcome;
  std::string text;
  nodevol::Status st = nodevol::ParseConfig(argc, argv, &config, &outcome, &text);
  if (!st.ok()) {
    std::fprintf(stderr, "nodevold: %s\n", st.message().c_str());
    return 2;
  }
  if (outcome == nodevol::ParseOutcome::kExit) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  nodevol::SetupLogging(config.log_target, config.log_level);
  return nodevol::Run(config);
}
