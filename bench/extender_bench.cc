// extender_bench: the scheduler extender's latency as kube-scheduler sees
// it (issue 15; docs/benchmarks.md "extender_bench"): one keep-alive
// connection posting a pod's ExtenderArgs to /filter, then /prioritize,
// for N pods in a row, over the real HttpServer and the real extender
// handlers, with a ledger of --nodes nodes (two pools each) that fills
// with the pods' promises as a burst would. Baselines on the same server
// and connection, same bodies:
//   noop    the handler answers a constant without reading the body: the
//           HTTP (and TLS) round trip alone;
//   decode  DecodeExtenderArgs and an answer of every node: the JSON cost
//           without the ledger.
// Plain HTTP, then mutual TLS (certificates made with the openssl command,
// as docs/tls.md makes them) when openssl is on the PATH. Markdown on
// stdout. Goal (issue 15): filter+prioritize p99 under 5 ms at 100 nodes,
// far inside kube-scheduler's 5 s extender timeout.
//
//   build/bench/extender_bench [--nodes=100] [--pods=2000] [--claims=3]
#include <curl/curl.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "extender/extender.h"
#include "extender/http.h"
#include "httpd/http_server.h"

namespace {

using nlohmann::json;
using namespace nodevol;
using namespace nodevol::provisioner;
using Clock = std::chrono::steady_clock;
constexpr uint64_t GiB = 1ull << 30;

int Run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A CA, a server certificate for 127.0.0.1 and a client certificate in dir.
bool MakeCerts(const std::string& dir) {
  auto d = [&](const std::string& f) { return dir + "/" + f; };
  if (Run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
           "/CN=bench CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign", "-keyout", d("ca.key"), "-out", d("ca.crt"), "-days", "2"}) != 0)
    return false;
  for (auto [name, ext] : {std::pair<std::string, std::string>{"server", "extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1\n"},
                           {"client", "extendedKeyUsage = clientAuth\n"}}) {
    std::ofstream(d(name + ".ext")) << "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n" << ext;
    if (Run({"openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
             "/CN=" + name, "-keyout", d(name + ".key"), "-out", d(name + ".csr")}) != 0 ||
        Run({"openssl", "x509", "-req", "-in", d(name + ".csr"), "-CA", d("ca.crt"), "-CAkey", d("ca.key"),
             "-CAcreateserial", "-days", "2", "-extfile", d(name + ".ext"), "-out", d(name + ".crt")}) != 0)
      return false;
  }
  return true;
}

// What kube-scheduler sends for pod i: the whole Pod (a typical one: a
// container with env, resources, probes, mounts) and the node names.
std::string PodArgs(int i, int claims, const std::vector<std::string>& nodes) {
  json vols = json::array(), mounts = json::array();
  for (int c = 0; c < claims; ++c) {
    std::string n = "data-" + std::to_string(c);
    vols.push_back({{"name", n}, {"persistentVolumeClaim", {{"claimName", "pod-" + std::to_string(i) + "-" + n}}}});
    mounts.push_back({{"name", n}, {"mountPath", "/data/" + std::to_string(c)}});
  }
  vols.push_back({{"name", "kube-api-access"}, {"projected", {{"sources", json::array({{{"serviceAccountToken", {{"path", "token"}}}}})}}}});
  json env = json::array();
  for (int e = 0; e < 12; ++e) env.push_back({{"name", "VAR_" + std::to_string(e)}, {"value", std::string(24, 'v')}});
  json pod = {
      {"metadata",
       {{"name", "pod-" + std::to_string(i)},
        {"namespace", "apps"},
        {"uid", "0f1e2d3c-4b5a-6978-8695-" + std::to_string(100000000000 + i)},
        {"labels", {{"app", "db"}, {"tier", "storage"}, {"pod-template-hash", "5d8f7c9b6"}}},
        {"ownerReferences", json::array({{{"apiVersion", "apps/v1"}, {"kind", "StatefulSet"}, {"name", "db"}}})}}},
      {"spec",
       {{"containers", json::array({{{"name", "db"},
                                      {"image", "registry.example/db:16.4"},
                                      {"env", env},
                                      {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}}},
                                      {"readinessProbe", {{"tcpSocket", {{"port", 5432}}}, {"periodSeconds", 5}}},
                                      {"volumeMounts", mounts}}})},
        {"volumes", vols},
        {"schedulerName", "default-scheduler"}}},
      {"status", {{"phase", "Pending"}}}};
  return json({{"Pod", pod}, {"NodeNames", nodes}}).dump();
}

struct Client {
  CURL* c = curl_easy_init();
  std::string body;
  ~Client() { curl_easy_cleanup(c); }
  static size_t Collect(char* p, size_t s, size_t n, void* out) {
    static_cast<std::string*>(out)->append(p, s * n);
    return s * n;
  }
  void Setup(const std::string& dir) {
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    if (!dir.empty()) {
      curl_easy_setopt(c, CURLOPT_CAINFO, (dir + "/ca.crt").c_str());
      curl_easy_setopt(c, CURLOPT_SSLCERT, (dir + "/client.crt").c_str());
      curl_easy_setopt(c, CURLOPT_SSLKEY, (dir + "/client.key").c_str());
    }
  }
  // Microseconds for one POST; aborts the run on any failure.
  double Post(const std::string& url, const std::string& data) {
    body.clear();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, data.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(data.size()));
    auto t0 = Clock::now();
    CURLcode rc = curl_easy_perform(c);
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200) {
      fprintf(stderr, "extender_bench: %s: %s, HTTP %ld: %s\n", url.c_str(), curl_easy_strerror(rc), status,
              body.substr(0, 200).c_str());
      exit(1);
    }
    return us;
  }
};

std::string Stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))] / 1000.0; };
  char buf[160];
  snprintf(buf, sizeof buf, "%.3f | %.3f | %.3f | %.3f", q(0.5), q(0.9), q(0.99), v.back() / 1000.0);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 100, pods = 2000, claims = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* k) { return a.rfind(k, 0) == 0 ? std::stoi(a.substr(strlen(k))) : -1; };
    if (val("--nodes=") > 0) nodes = val("--nodes=");
    else if (val("--pods=") > 0) pods = val("--pods=");
    else if (val("--claims=") > 0) claims = val("--claims=");
    else {
      fprintf(stderr, "usage: extender_bench [--nodes=100] [--pods=2000] [--claims=3]\n");
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  curl_global_init(CURL_GLOBAL_DEFAULT);

  // Nodes n000.. with pools "fast" (lvm) and "bulk" (dir), room for every
  // pod's promise to land somewhere: 200-400 GiB each.
  std::mt19937 rng(42);
  std::vector<std::string> names;
  std::vector<PoolSeen> seen;
  for (int n = 0; n < nodes; ++n) {
    char name[16];
    snprintf(name, sizeof name, "n%03d", n);
    names.push_back(name);
    uint64_t fast = (200 + rng() % 200) * GiB, bulk = (200 + rng() % 200) * GiB;
    seen.push_back({name, "fast", "lvm", fast, true, fast, 0, true});
    seen.push_back({name, "bulk", "dir", bulk, true, bulk, 0, false});
  }
  CapacityLedger ledger([&] { return seen; });
  // The claim lookup: the informer cache is a map, as here.
  std::map<std::string, PendingClaim> cache;
  for (int i = 0; i < pods; ++i)
    for (int c = 0; c < claims; ++c) {
      std::string n = "pod-" + std::to_string(i) + "-data-" + std::to_string(c);
      cache["apps/" + n] = {"uid-" + n, n, c % 2 ? "bulk" : "fast", "", (1 + rng() % 10) * GiB};
    }
  Extender ext(&ledger,
               [&](const std::string& ns, const std::vector<std::string>& want) {
                 PodClaims out;
                 for (const auto& n : want)
                   if (auto it = cache.find(ns + "/" + n); it != cache.end()) out.pending.push_back(it->second);
                   else out.unknown.push_back(n);
                 return out;
               },
               PlacementPolicy::kMostFree);

  auto handlers = ExtenderHandlers([&] { return &ext; });
  handlers["/noop"] = [](const std::string&) { return httpd::Response{200, "{\"NodeNames\":[]}", kJsonContentType}; };
  handlers["/decode"] = [](const std::string& body) {
    ExtenderArgs a;
    if (!DecodeExtenderArgs(body, &a).ok()) return httpd::Response{400, "{}", kJsonContentType};
    return httpd::Response{200, json({{"NodeNames", a.node_names}}).dump(), kJsonContentType};
  };

  std::vector<std::string> bodies;
  for (int i = 0; i < pods; ++i) bodies.push_back(PodArgs(i, claims, names));

  struct utsname u{};
  uname(&u);
  printf("### extender_bench: %d nodes, %d pods of %d claims (request %zu bytes)\n\n", nodes, pods, claims,
         bodies[0].size());
  printf("%s %s, %ld CPUs. Milliseconds per request, one keep-alive connection, requests in a row.\n\n", u.sysname,
         u.release, sysconf(_SC_NPROCESSORS_ONLN));
  printf("| transport | request | p50 | p90 | p99 | max |\n|---|---|---:|---:|---:|---:|\n");

  std::string certs;
  char tmpl[] = "/tmp/extender-bench-XXXXXX";
  if (mkdtemp(tmpl) && MakeCerts(tmpl)) certs = tmpl;
  for (bool tls : {false, true}) {
    if (tls && certs.empty()) {
      printf("| TLS | (skipped: openssl failed) | | | | |\n");
      continue;
    }
    httpd::HttpServer server({}, handlers, kMaxExtenderBody, "extender");
    if (tls && !server.EnableTls({certs + "/server.crt", certs + "/server.key", certs + "/ca.crt", {"client"}}).ok())
      return 1;
    if (!server.Start("127.0.0.1:0").ok()) return 1;
    std::string base = std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(server.port());
    Client client;
    client.Setup(tls ? certs : "");
    for (int w = 0; w < 50; ++w) client.Post(base + "/noop", bodies[w % pods]);  // warm up, connect
    std::vector<double> noop, decode, filter, prioritize, pair;
    for (int i = 0; i < pods; ++i) noop.push_back(client.Post(base + "/noop", bodies[i]));
    for (int i = 0; i < pods; ++i) decode.push_back(client.Post(base + "/decode", bodies[i]));
    for (int i = 0; i < pods; ++i) {
      double f = client.Post(base + "/filter", bodies[i]);
      double p = client.Post(base + "/prioritize", bodies[i]);
      filter.push_back(f);
      prioritize.push_back(p);
      pair.push_back(f + p);
    }
    const char* t = tls ? "mutual TLS" : "HTTP";
    printf("| %s | noop (baseline: the round trip) | %s |\n", t, Stats(noop).c_str());
    printf("| %s | decode (baseline: + JSON) | %s |\n", t, Stats(decode).c_str());
    printf("| %s | filter | %s |\n", t, Stats(filter).c_str());
    printf("| %s | prioritize | %s |\n", t, Stats(prioritize).c_str());
    printf("| %s | **filter + prioritize** | %s |\n", t, Stats(pair).c_str());
    fflush(stdout);
    // Every pod promised: the next transport starts from the same ledger.
    for (int i = 0; i < pods; ++i)
      for (int c = 0; c < claims; ++c) ledger.Release("uid-pod-" + std::to_string(i) + "-data-" + std::to_string(c));
  }
  if (!certs.empty()) std::filesystem::remove_all(certs);
  return 0;
}
