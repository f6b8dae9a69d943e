// Integration tests of the Kubernetes client against a real kube-apiserver
// (tests/k8s/kube_client_test.sh runs this under tests/k8s/cluster-up, in the
// cluster's network namespace). KUBE_IT_KUBECONFIG names the admin
// kubeconfig (client certificates). Each run works in a namespace of its own.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/list_watcher.h"
#include "kube/watch.h"

namespace nodevol::kube {
namespace {

using json = nlohmann::json;
using Code = Result::Code;
using namespace std::chrono_literals;

Config g_config;
std::unique_ptr<Client> g_client;
std::string g_ns;

std::string CmPath(const std::string& name = "") {
  return "/api/v1/namespaces/" + g_ns + "/configmaps" + (name.empty() ? "" : "/" + name);
}

json ConfigMap(const std::string& name, const std::string& value, const std::string& label = "") {
  json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}, {"data", {{"v", value}}}};
  if (!label.empty()) cm["metadata"]["labels"] = {{"it", label}};
  return cm;
}

std::string Rv(const json& o) { return o["metadata"]["resourceVersion"].get<std::string>(); }

template <typename F>
bool Eventually(F cond, std::chrono::seconds limit = 60s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return cond();
}

class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* kc = std::getenv("KUBE_IT_KUBECONFIG");
    ASSERT_NE(kc, nullptr) << "KUBE_IT_KUBECONFIG is not set (run tests/k8s/kube_client_test.sh)";
    Status st = LoadKubeconfig({kc}, "", &g_config);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(Client::New(g_config, ClientOptions{}, &g_client).ok());
    g_ns = "kube-client-it-" + std::to_string(::getpid());
    json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", g_ns}}}};
    Result r = g_client->Create("/api/v1/namespaces", ns);
    ASSERT_TRUE(r.ok()) << r.ToString();
  }
  void TearDown() override {
    if (!g_client) return;
    json ns;
    if (g_client->Get("/api/v1/namespaces/" + g_ns, &ns).ok()) {
      g_client->Delete("/api/v1/namespaces/" + g_ns, {ns["metadata"]["uid"].get<std::string>(), ""});
    }
    g_client.reset();
  }
};

TEST(KubeClientIt, ClientCertificatesFromKubeconfig) {
  ASSERT_FALSE(g_config.client_cert_file.empty());
  json version;
  Result r = g_client->Get("/version", &version);
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_TRUE(version.contains("gitVersion"));
  // The admin is system:masters: it may read kube-system.
  json list;
  EXPECT_TRUE(g_client->Get("/api/v1/namespaces/kube-system/configmaps", &list).ok());
}

TEST(KubeClientIt, WrongCaIsANetworkError) {
  Config c = g_config;
  c.ca_file.clear();
  c.ca_data = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::New(c, ClientOptions{}, &client).ok());
  Result r = client->Get("/version", nullptr);
  EXPECT_EQ(r.code(), Code::kNetworkError) << r.ToString();
}

TEST(KubeClientIt, TlsServerNameIsVerified) {
  // The apiserver's certificate names "kubernetes" but not "wrong.example";
  // both connect to the configured address.
  Config c = g_config;
  c.tls_server_name = "kubernetes";
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::New(c, ClientOptions{}, &client).ok());
  Result r = client->Get("/version", nullptr);
  EXPECT_TRUE(r.ok()) << r.ToString();
  c.tls_server_name = "wrong.example";
  ASSERT_TRUE(Client::New(c, ClientOptions{}, &client).ok());
  r = client->Get("/version", nullptr);
  EXPECT_EQ(r.code(), Code::kNetworkError) << r.ToString();
}

TEST(KubeClientIt, CreateGetUpdateConflictAlreadyExists) {
  json created;
  Result r = g_client->Create(CmPath(), ConfigMap("cgu", "1"), &created);
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(r.http_status(), 201);
  json got;
  ASSERT_TRUE(g_client->Get(CmPath("cgu"), &got).ok());
  EXPECT_EQ(got["data"]["v"], "1");
  EXPECT_EQ(Rv(got), Rv(created));

  json v2 = got;
  v2["data"]["v"] = "2";
  json updated;
  r = g_client->Update(CmPath("cgu"), v2, &updated);
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_NE(Rv(updated), Rv(got));

  // The same stale resourceVersion again: Conflict, with the server's words.
  json v3 = got;
  v3["data"]["v"] = "3";
  r = g_client->Update(CmPath("cgu"), v3);
  EXPECT_EQ(r.code(), Code::kConflict) << r.ToString();
  EXPECT_EQ(r.reason(), "Conflict");
  EXPECT_NE(r.message().find("modified"), std::string::npos) << r.message();

  r = g_client->Create(CmPath(), ConfigMap("cgu", "x"));
  EXPECT_EQ(r.code(), Code::kAlreadyExists) << r.ToString();
  EXPECT_EQ(r.http_status(), 409);

  r = g_client->Get(CmPath("does-not-exist"), &got);
  EXPECT_EQ(r.code(), Code::kNotFound) << r.ToString();

  json bad = ConfigMap("Not_A_Valid_Name", "x");
  r = g_client->Create(CmPath(), bad);
  EXPECT_EQ(r.code(), Code::kInvalid) << r.ToString();
}

TEST(KubeClientIt, MergePatchWithResourceVersion) {
  json cm = ConfigMap("patch", "1");
  cm["data"]["drop"] = "me";
  json created;
  ASSERT_TRUE(g_client->Create(CmPath(), cm, &created).ok());
  json patched;
  Result r = g_client->MergePatch(
      CmPath("patch"), {{"metadata", {{"resourceVersion", Rv(created)}}}, {"data", {{"v", "2"}, {"drop", nullptr}}}},
      &patched);
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(patched["data"]["v"], "2");
  EXPECT_FALSE(patched["data"].contains("drop"));  // null deleted the key
  // A patch carrying the old resourceVersion must not overwrite the newer state.
  r = g_client->MergePatch(CmPath("patch"),
                           {{"metadata", {{"resourceVersion", Rv(created)}}}, {"data", {{"v", "stale"}}}});
  EXPECT_EQ(r.code(), Code::kConflict) << r.ToString();
  json got;
  ASSERT_TRUE(g_client->Get(CmPath("patch"), &got).ok());
  EXPECT_EQ(got["data"]["v"], "2");
}

TEST(KubeClientIt, DeleteWithUidPrecondition) {
  json created;
  ASSERT_TRUE(g_client->Create(CmPath(), ConfigMap("del", "1"), &created).ok());
  Result r = g_client->Delete(CmPath("del"), {"00000000-0000-0000-0000-000000000000", ""});
  EXPECT_EQ(r.code(), Code::kConflict) << r.ToString();
  EXPECT_NE(r.message().find("UID in the precondition"), std::string::npos) << r.message();
  ASSERT_TRUE(g_client->Get(CmPath("del"), nullptr).ok());  // still there
  // Right uid, stale resourceVersion: refused too.
  json cur;
  ASSERT_TRUE(g_client->MergePatch(CmPath("del"), {{"data", {{"v", "2"}}}}, &cur).ok());
  r = g_client->Delete(CmPath("del"), {created["metadata"]["uid"].get<std::string>(), Rv(created)});
  EXPECT_EQ(r.code(), Code::kConflict) << r.ToString();
  r = g_client->Delete(CmPath("del"), {created["metadata"]["uid"].get<std::string>(), Rv(cur)});
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(g_client->Get(CmPath("del"), nullptr).code(), Code::kNotFound);
  EXPECT_EQ(g_client->Delete(CmPath("del"), {created["metadata"]["uid"].get<std::string>(), ""}).code(),
            Code::kNotFound);
}

TEST(KubeClientIt, ListPagesThroughContinueTokens) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(g_client->Create(CmPath(), ConfigMap("page-" + std::to_string(i), "x", "paging")).ok());
  }
  // The server does page at limit=2 (a continue token), so List must follow it.
  json page;
  ASSERT_TRUE(g_client->Get(CmPath() + "?limit=2&labelSelector=it%3Dpaging", &page).ok());
  ASSERT_EQ(page["items"].size(), 2u);
  ASSERT_FALSE(page["metadata"].value("continue", "").empty());

  ListOptions o;
  o.limit = 2;
  o.label_selector = "it=paging";
  json list;
  Result r = g_client->List(CmPath(), o, &list);
  ASSERT_TRUE(r.ok()) << r.ToString();
  std::set<std::string> names;
  for (const auto& item : list["items"]) names.insert(item["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"page-0", "page-1", "page-2", "page-3", "page-4"}));
  EXPECT_FALSE(list["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_FALSE(list["metadata"].contains("continue"));

}

TEST(KubeClientIt, WatchSeesAddedModifiedDeleted) {
  json list;
  ListOptions o;
  o.label_selector = "it=watch";
  ASSERT_TRUE(g_client->List(CmPath(), o, &list).ok());
  WatchOptions wo;
  wo.resource_version = list["metadata"]["resourceVersion"];
  wo.label_selector = "it=watch";
  Watch w(g_client.get(), CmPath(), wo);
  EXPECT_NE(w.RequestPath().find("allowWatchBookmarks=true"), std::string::npos);
  std::mutex mu;
  std::vector<std::string> seen;
  Result end;
  std::thread t([&] {
    end = w.Run([&](const WatchEvent& e) {
      if (e.type == WatchEvent::Type::kBookmark) return true;
      std::lock_guard<std::mutex> l(mu);
      seen.push_back(std::string(WatchEventTypeName(e.type)) + " " + e.object["metadata"]["name"].get<std::string>());
      return true;
    });
  });
  json created;
  ASSERT_TRUE(g_client->Create(CmPath(), ConfigMap("w", "1", "watch"), &created).ok());
  ASSERT_TRUE(g_client->MergePatch(CmPath("w"), {{"data", {{"v", "2"}}}}).ok());
  ASSERT_TRUE(g_client->Delete(CmPath("w"), {created["metadata"]["uid"].get<std::string>(), ""}).ok());
  bool all = Eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return seen.size() >= 3;
  });
  w.Cancel();  // from this thread while Run blocks in another
  t.join();
  ASSERT_TRUE(all);
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED w", "MODIFIED w", "DELETED w"}));
  EXPECT_EQ(end.code(), Code::kCancelled) << end.ToString();
}

// 410 needs history the server no longer has. ConfigMaps are served from
// the watch cache, which keeps (at least 75 s of) history from its own
// start, so an old resourceVersion is not refused there; Events have no
// watch cache (kube-apiserver's default), so their watches and continue
// tokens go to etcd, and after a compaction of etcd an old resourceVersion
// is 410 Expired, as it would be in a long-running cluster.
std::string EventsPath(const std::string& name = "") {
  return "/api/v1/namespaces/" + g_ns + "/events" + (name.empty() ? "" : "/" + name);
}

json Event(const std::string& name, const std::string& label) {
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name}, {"labels", {{"it", label}}}}},
          {"involvedObject", {{"kind", "ConfigMap"}, {"name", "x"}, {"namespace", g_ns}}},
          {"reason", "Test"},
          {"message", "m"},
          {"type", "Normal"}};
}

// Compacts etcd (KUBE_IT_ETCD, its JSON gateway) up to its current revision.
void CompactEtcd() {
  const char* etcd = std::getenv("KUBE_IT_ETCD");
  ASSERT_NE(etcd, nullptr) << "KUBE_IT_ETCD is not set";
  Config c;
  c.server = etcd;
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::New(c, ClientOptions{}, &client).ok());
  json range;
  Result r = client->Create("/v3/kv/range", {{"key", "AA=="}}, &range);
  ASSERT_TRUE(r.ok()) << r.ToString();
  std::string rev = range["header"]["revision"];
  r = client->Create("/v3/kv/compaction", {{"revision", rev}, {"physical", true}});
  ASSERT_TRUE(r.ok()) << r.ToString();
}

TEST(KubeClientIt, WatchFromCompactedResourceVersionIsExpired) {
  ASSERT_TRUE(g_client->Create(EventsPath(), Event("ancient", "ancient")).ok());
  CompactEtcd();
  WatchOptions wo;
  wo.resource_version = "1";
  Watch w(g_client.get(), EventsPath(), wo);
  int events = 0;
  Result r = w.Run([&](const WatchEvent&) {
    ++events;
    return true;
  });
  EXPECT_EQ(r.code(), Code::kExpired) << r.ToString();  // the ERROR event's Status
  EXPECT_EQ(r.http_status(), 410);
  EXPECT_EQ(events, 0);
}

TEST(KubeClientIt, CompactedContinueTokenIsExpired) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(g_client->Create(EventsPath(), Event("cont-" + std::to_string(i), "cont")).ok());
  json page;
  ASSERT_TRUE(g_client->Get(EventsPath() + "?limit=1&labelSelector=it%3Dcont", &page).ok());
  std::string cont = page["metadata"].value("continue", "");
  ASSERT_FALSE(cont.empty());
  ASSERT_TRUE(g_client->Create(EventsPath(), Event("cont-later", "other")).ok());
  CompactEtcd();
  Result r = g_client->Get(EventsPath() + "?limit=1&labelSelector=it%3Dcont&continue=" + Client::EscapeQuery(cont), &page);
  EXPECT_EQ(r.code(), Code::kExpired) << r.ToString();  // what Client::List restarts on
  EXPECT_NE(r.message().find("continue"), std::string::npos) << r.message();
}

// Wraps the real ListWatcher; its first watch starts from resourceVersion
// "1", which the apiserver has long forgotten.
class AncientFirstWatch : public ListWatcher {
 public:
  explicit AncientFirstWatch(std::unique_ptr<ListWatcher> real) : real_(std::move(real)) {}
  Result List(const std::string& rv, const Item& each, const std::function<void()>& restart,
              std::string* list_rv) override {
    return real_->List(rv, each, restart, list_rv);
  }
  Result Watch(const std::string& rv, const Handler& h, const std::atomic<bool>* cancel) override {
    if (first_.exchange(false)) {
      last_ = real_->Watch("1", h, cancel);
      return last_;
    }
    return real_->Watch(rv, h, cancel);
  }
  std::atomic<bool> first_{true};
  Result last_;
  std::unique_ptr<ListWatcher> real_;
};

struct Seen {
  std::mutex mu;
  std::map<std::string, std::string> adds, deletes;  // name -> value
  int updates = 0;
  InformerHandlers Handlers() {
    InformerHandlers h;
    h.on_add = [this](const json& o) {
      std::lock_guard<std::mutex> l(mu);
      adds[o["metadata"]["name"]] = o.value("/data/v"_json_pointer, std::string());
    };
    h.on_update = [this](const json&, const json&) {
      std::lock_guard<std::mutex> l(mu);
      ++updates;
    };
    h.on_delete = [this](const json& o) {
      std::lock_guard<std::mutex> l(mu);
      deletes[o["metadata"]["name"]] = o.value("/data/v"_json_pointer, std::string());
    };
    return h;
  }
};

// The informer's cache equals a fresh list from the server.
bool Converged(const Informer& inf, const std::string& selector) {
  json list;
  ListOptions o;
  o.label_selector = selector;
  if (!g_client->List(CmPath(), o, &list).ok()) return false;
  std::map<std::string, std::string> server, cache;
  for (const auto& i : list["items"]) server[Informer::KeyOf(i)] = Rv(i);
  for (const auto& i : inf.List()) cache[Informer::KeyOf(*i)] = Rv(*i);
  return server == cache;
}

TEST(KubeClientIt, InformerConverges) {
  ASSERT_TRUE(g_client->Create(CmPath(), ConfigMap("inf-a", "1", "inf")).ok());
  json b;
  ASSERT_TRUE(g_client->Create(CmPath(), ConfigMap("inf-b", "1", "inf"), &b).ok());
  Seen seen;
  InformerOptions io;
  io.name = "configmaps";
  Informer inf(std::make_unique<ClientListWatcher>(g_client.get(), CmPath(), "it=inf"), seen.Handlers(), io);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(60s));
  // The first list asks for resourceVersion 0, as client-go does: the
  // apiserver's watch cache answers and may lag behind the two creates
  // (seen under load in CI); the watch then brings the rest.
  EXPECT_TRUE(Eventually([&] { return inf.List().size() == 2u; }));
  ASSERT_TRUE(g_client->MergePatch(CmPath("inf-a"), {{"data", {{"v", "2"}}}}).ok());
  ASSERT_TRUE(g_client->Delete(CmPath("inf-b"), {b["metadata"]["uid"].get<std::string>(), ""}).ok());
  ASSERT_TRUE(g_client->Create(CmPath(), ConfigMap("inf-c", "1", "inf")).ok());
  ASSERT_TRUE(g_client->Create(CmPath(), ConfigMap("other", "1", "not-inf")).ok());  // outside the selector
  EXPECT_TRUE(Eventually([&] { return Converged(inf, "it=inf") && (inf.Get(g_ns + "/inf-c") != nullptr); }));
  auto a = inf.Get(g_ns + "/inf-a");
  ASSERT_TRUE(a != nullptr);
  EXPECT_EQ((*a)["data"]["v"], "2");
  EXPECT_FALSE((inf.Get(g_ns + "/other") != nullptr));
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(seen.mu);
    return seen.adds.count("inf-c") == 1 && seen.deletes.count("inf-b") == 1 && seen.updates >= 1;
  }));
  inf.Stop();
  EXPECT_EQ(inf.list_count(), 1u);
}

TEST(KubeClientIt, InformerRelistsOnExpiredWatch) {
  json gone;
  ASSERT_TRUE(g_client->Create(EventsPath(), Event("rl-gone", "relist"), &gone).ok());
  ASSERT_TRUE(g_client->Create(EventsPath(), Event("rl-keep", "relist")).ok());
  CompactEtcd();
  auto* src = new AncientFirstWatch(std::make_unique<ClientListWatcher>(g_client.get(), EventsPath(), "it=relist"));
  Seen seen;
  InformerOptions io;
  io.name = "events-relist";
  Informer inf(std::unique_ptr<ListWatcher>(src), seen.Handlers(), io);
  // The first watch (from "1") fails at once with 410 and the relist may
  // come before or after these changes; either way the cache must converge.
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(60s));
  ASSERT_TRUE(g_client->Delete(EventsPath("rl-gone"), {gone["metadata"]["uid"].get<std::string>(), ""}).ok());
  ASSERT_TRUE(g_client->Create(EventsPath(), Event("rl-new", "relist")).ok());
  auto converged = [&] {
    json list;
    ListOptions o;
    o.label_selector = "it=relist";
    if (!g_client->List(EventsPath(), o, &list).ok()) return false;
    std::set<std::string> server, cache;
    for (const auto& i : list["items"]) server.insert(Informer::KeyOf(i) + "@" + Rv(i));
    for (const auto& i : inf.List()) cache.insert(Informer::KeyOf(*i) + "@" + Rv(*i));
    return server == cache;
  };
  EXPECT_TRUE(Eventually([&] { return inf.list_count() >= 2 && converged(); }));
  inf.Stop();
  EXPECT_EQ(src->last_.code(), Code::kExpired) << src->last_.ToString();  // the real server said 410
  EXPECT_GE(inf.list_count(), 2u);
  EXPECT_FALSE((inf.Get(g_ns + "/rl-gone") != nullptr));
  EXPECT_TRUE((inf.Get(g_ns + "/rl-new") != nullptr));
  std::lock_guard<std::mutex> l(seen.mu);
  EXPECT_EQ(seen.adds.count("rl-new"), 1u);
  EXPECT_EQ(seen.deletes.count("rl-gone"), 1u);
}

TEST(KubeClientIt, ServiceAccountTokenFileReReadAfter401) {
  // A service account with a token from the TokenRequest API.
  json sa = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "it"}}}};
  ASSERT_TRUE(g_client->Create("/api/v1/namespaces/" + g_ns + "/serviceaccounts", sa).ok());
  json tr = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"},
             {"spec", {{"expirationSeconds", 600}}}};
  json issued;
  Result r;
  ASSERT_TRUE(Eventually([&] {
    r = g_client->Create("/api/v1/namespaces/" + g_ns + "/serviceaccounts/it/token", tr, &issued);
    return r.ok();
  }, 20s)) << r.ToString();
  std::string token = issued["status"]["token"];

  auto dir = std::filesystem::temp_directory_path() / ("kube_it." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string token_file = (dir / "token").string();
  std::ofstream(token_file) << "not-a-valid-token";
  Config c = g_config;
  c.client_cert_file.clear();
  c.client_key_file.clear();
  c.token_file = token_file;
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::New(c, ClientOptions{}, &client).ok());
  r = client->Get("/version", nullptr);
  EXPECT_EQ(r.code(), Code::kUnauthorized) << r.ToString();
  EXPECT_EQ(r.message().find("not-a-valid-token"), std::string::npos);
  // The token rotates: the next 401 makes the client read the file again.
  std::ofstream(token_file) << token << "\n";
  r = client->Get("/version", nullptr);
  EXPECT_TRUE(r.ok()) << r.ToString();
  // Authenticated but not authorized.
  r = client->Get("/api/v1/namespaces/kube-system/secrets", nullptr);
  EXPECT_EQ(r.code(), Code::kForbidden) << r.ToString();
  std::filesystem::remove_all(dir);
}

TEST(KubeClientIt, ConcurrentRequestsFromManyThreads) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        std::string name = "conc-" + std::to_string(t) + "-" + std::to_string(i);
        json created;
        if (!g_client->Create(CmPath(), ConfigMap(name, "x"), &created).ok()) continue;
        if (!g_client->Get(CmPath(name), nullptr).ok()) continue;
        if (g_client->Delete(CmPath(name), {created["metadata"]["uid"].get<std::string>(), ""}).ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
}

}  // namespace
}  // namespace nodevol::kube

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new nodevol::kube::Env);
  return RUN_ALL_TESTS();
}
