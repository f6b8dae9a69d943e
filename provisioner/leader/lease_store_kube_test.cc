#include "leader/lease_store_kube.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "leader/leader_elector.h"

namespace nodevol::leader {
namespace {

using json = nlohmann::json;
using std::chrono::seconds;

const char kCollection[] = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";
const char kPath[] = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/nodevol.io-provisioner";

json StatusObject(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
          {"message", message}, {"reason", reason},  {"code", code}};
}

// An HTTP/1.1 stand-in for the apiserver's Lease endpoints, with its
// optimistic concurrency: one connection at a time, one request each.
class FakeLeaseServer {
 public:
  FakeLeaseServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeLeaseServer() {
    stopping_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    close(listen_fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::optional<json> lease() {
    std::lock_guard<std::mutex> guard(mu_);
    return lease_;
  }
  // Stores `lease` as if another client wrote it.
  void Put(json lease) {
    std::lock_guard<std::mutex> guard(mu_);
    lease["metadata"]["resourceVersion"] = std::to_string(++rv_);
    lease_ = lease;
  }
  void FailNextWith(int code) {
    std::lock_guard<std::mutex> guard(mu_);
    fail_next_ = code;
  }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> guard(mu_);
    return requests_;
  }

 private:
  void Serve() {
    while (!stopping_) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      HandleConnection(fd);
      close(fd);
    }
  }

  void HandleConnection(int fd) {
    std::string data;
    char buf[4096];
    size_t header_end;
    while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      data.append(buf, static_cast<size_t>(n));
    }
    std::string head = data.substr(0, header_end);
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t length = 0;
    if (size_t p = lower.find("content-length:"); p != std::string::npos) length = std::stoul(head.substr(p + 15));
    if (lower.find("expect: 100-continue") != std::string::npos) Send(fd, "HTTP/1.1 100 Continue\r\n\r\n");
    std::string body = data.substr(header_end + 4);
    while (body.size() < length) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      body.append(buf, static_cast<size_t>(n));
    }
    std::string method = head.substr(0, head.find(' '));
    size_t path_begin = method.size() + 1;
    std::string path = head.substr(path_begin, head.find(' ', path_begin) - path_begin);
    auto [code, answer] = Answer(method, path, body);
    std::string out = answer.dump();
    Send(fd, "HTTP/1.1 " + std::to_string(code) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(out.size()) + "\r\nConnection: close\r\n\r\n" + out);
  }

  static void Send(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  std::pair<int, json> Answer(const std::string& method, const std::string& path, const std::string& body) {
    std::lock_guard<std::mutex> guard(mu_);
    requests_.push_back(method + " " + path);
    if (fail_next_ != 0) {
      int code = std::exchange(fail_next_, 0);
      return {code, StatusObject(code, "InternalError", "injected failure")};
    }
    if (method == "POST" && path == kCollection) {
      if (lease_) return {409, StatusObject(409, "AlreadyExists", "leases \"nodevol.io-provisioner\" already exists")};
      json lease = json::parse(body);
      lease["metadata"]["resourceVersion"] = std::to_string(++rv_);
      lease_ = lease;
      return {201, lease};
    }
    if (path != kPath) return {404, StatusObject(404, "NotFound", "no such path")};
    if (!lease_) return {404, StatusObject(404, "NotFound", "leases \"nodevol.io-provisioner\" not found")};
    if (method == "GET") return {200, *lease_};
    if (method == "PUT") {
      json lease = json::parse(body);
      if (lease["metadata"].value("resourceVersion", "") != (*lease_)["metadata"].value("resourceVersion", "")) {
        return {409, StatusObject(409, "Conflict", "the object has been modified; please apply your changes to "
                                                    "the latest version and try again")};
      }
      lease["metadata"]["resourceVersion"] = std::to_string(++rv_);
      lease_ = lease;
      return {200, lease};
    }
    return {405, StatusObject(405, "MethodNotAllowed", method)};
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mu_;
  std::optional<json> lease_;
  int rv_ = 100;
  int fail_next_ = 0;
  std::vector<std::string> requests_;
};

std::unique_ptr<kube::Client> ClientFor(const std::string& url) {
  kube::Config config;
  config.server = url;
  kube::ClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(2000);
  options.request_timeout = std::chrono::milliseconds(5000);
  std::unique_ptr<kube::Client> client;
  Status st = kube::Client::New(config, options, &client);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return client;
}

TEST(KubeLeaseStoreTest, ElectionOverHttp) {
  FakeLeaseServer server;
  auto client = ClientFor(server.url());
  KubeLeaseStore store_a(client.get(), "ns", "nodevol.io-provisioner");
  KubeLeaseStore store_b(client.get(), "ns", "nodevol.io-provisioner");
  FakeClock clock;
  std::unique_ptr<LeaderElector> a, b;
  ASSERT_TRUE(LeaderElector::New(&store_a, &clock, {.identity = "a"}, {}, &a).ok());
  ASSERT_TRUE(LeaderElector::New(&store_b, &clock, {.identity = "b"}, {}, &b).ok());

  ASSERT_TRUE(a->TryAcquireOrRenew());  // GET 404, POST
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock.Advance(seconds(2));
  ASSERT_TRUE(a->TryAcquireOrRenew());  // fast path: PUT only
  EXPECT_EQ(server.requests(), (std::vector<std::string>{"GET " + std::string(kPath), "POST " + std::string(kCollection),
                                                         "GET " + std::string(kPath), "PUT " + std::string(kPath)}));
  json lease = *server.lease();
  EXPECT_EQ(lease["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(lease["kind"], "Lease");
  EXPECT_EQ(lease["metadata"]["name"], "nodevol.io-provisioner");
  EXPECT_EQ(lease["metadata"]["namespace"], "ns");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(lease["spec"]["renewTime"], FormatMicroTime(clock.WallNow()));
  EXPECT_EQ(lease["spec"]["acquireTime"], FormatMicroTime(clock.WallNow() - seconds(2)));

  // a dies; b takes over once the record has been still for 15 s.
  clock.Advance(seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock.Advance(seconds(15));
  EXPECT_TRUE(b->TryAcquireOrRenew());
  lease = *server.lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  // a comes back: its lease has expired by its own clock, so it reads
  // (no blind renewal) and finds b.
  EXPECT_FALSE(a->TryAcquireOrRenew());
  EXPECT_EQ(a->Leader(), "b");
}

TEST(KubeLeaseStoreTest, UpdateKeepsWhatOthersWrote) {
  FakeLeaseServer server;
  server.Put({{"apiVersion", "coordination.k8s.io/v1"},
              {"kind", "Lease"},
              {"metadata", {{"name", "nodevol.io-provisioner"}, {"namespace", "ns"}, {"labels", {{"team", "storage"}}}}},
              {"spec",
               {{"holderIdentity", "old"},
                {"leaseDurationSeconds", 15},
                {"leaseTransitions", 4},
                {"preferredHolder", "x"},
                {"renewTime", "2006-01-02T15:04:05.000000Z"}}}});
  auto client = ClientFor(server.url());
  KubeLeaseStore store(client.get(), "ns", "nodevol.io-provisioner");
  LeaseRecord record;
  std::string rv;
  ASSERT_TRUE(store.Get(&record, &rv).ok());
  EXPECT_EQ(record.holder_identity, "old");
  EXPECT_EQ(record.lease_transitions, 4);
  record.holder_identity = "new";
  record.lease_transitions = 5;
  std::string rv2;
  ASSERT_TRUE(store.Update(record, rv, &rv2).ok());
  EXPECT_NE(rv2, rv);
  json lease = *server.lease();
  EXPECT_EQ(lease["metadata"]["labels"]["team"], "storage");
  EXPECT_EQ(lease["spec"]["preferredHolder"], "x");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "new");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 5);
  EXPECT_EQ(lease["metadata"]["resourceVersion"], rv2);
}

TEST(KubeLeaseStoreTest, MapsApiserverErrors) {
  FakeLeaseServer server;
  auto client = ClientFor(server.url());
  KubeLeaseStore store(client.get(), "ns", "nodevol.io-provisioner");
  LeaseRecord record{.holder_identity = "a", .lease_duration_seconds = 15};
  std::string rv;
  EXPECT_EQ(store.Get(&record, &rv).code(), Status::Code::kNotFound);
  ASSERT_TRUE(store.Create(record, &rv).ok());
  EXPECT_EQ(store.Create(record, &rv).code(), Status::Code::kAlreadyExists);
  std::string rv2;
  EXPECT_EQ(store.Update(record, "1", &rv2).code(), Status::Code::kFailedPrecondition);  // stale
  server.FailNextWith(500);
  Status st = store.Get(&record, &rv);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("injected failure"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("ns/nodevol.io-provisioner"), std::string::npos) << st.message();
}

TEST(KubeLeaseStoreTest, UnreachableApiserverIsUnavailable) {
  std::string url;
  {
    FakeLeaseServer server;  // a port that was just free and is closed again
    url = server.url();
  }
  auto client = ClientFor(url);
  KubeLeaseStore store(client.get(), "ns", "nodevol.io-provisioner");
  LeaseRecord record;
  std::string rv;
  EXPECT_EQ(store.Get(&record, &rv).code(), Status::Code::kUnavailable);
}

}  // namespace
}  // namespace nodevol::leader
