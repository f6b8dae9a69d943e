#include "kube/client.h"

#include "kube/call_timeout.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <mutex>
#include <optional>
#include <thread>

namespace nodevol::kube {
namespace {

// Bodies of error answers to streaming requests are kept up to this size.
constexpr size_t kMaxErrorBody = 64 * 1024;

struct UrlParts {
  std::string scheme, host, port, path;
};

bool SplitUrl(const std::string& url, UrlParts* p) {
  size_t s = url.find("://");
  if (s == std::string::npos) return false;
  p->scheme = url.substr(0, s);
  std::string rest = url.substr(s + 3);
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  p->path = slash == std::string::npos ? "" : rest.substr(slash);
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    p->host = authority.substr(0, colon);
    p->port = authority.substr(colon + 1);
  } else {
    p->host = authority;
    p->port = p->scheme == "https" ? "443" : "80";
  }
  return !p->host.empty();
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlSlist {
  curl_slist* list = nullptr;
  ~CurlSlist() { curl_slist_free_all(list); }
  void Add(const std::string& s) { list = curl_slist_append(list, s.c_str()); }
};

}  // namespace

struct Client::Request {
  const char* method = "GET";
  std::string path;
  std::string_view content_type;
  const std::string* body = nullptr;
  // Streaming: body bytes of a 2xx go here instead of into `response`.
  const std::function<bool(std::string_view)>* on_data = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  std::chrono::milliseconds timeout{0};
  // Out.
  CURL* curl = nullptr;
  long http_status = 0;
  std::string response;
  bool stopped_by_callback = false;
};

namespace {

size_t WriteCallback(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Client::Request*>(user);
  size_t len = size * n;
  if (r->on_data != nullptr) {
    long status = 0;
    curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
      if (!(*r->on_data)(std::string_view(data, len))) {
        r->stopped_by_callback = true;
        return 0;  // aborts the transfer
      }
      return len;
    }
    if (r->response.size() + len > kMaxErrorBody) return len;  // keep a bounded excerpt
  }
  r->response.append(data, len);
  return len;
}

int ProgressCallback(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* r = static_cast<Client::Request*>(user);
  // libcurl calls this about once a second even when no data flows.
  return r->cancel != nullptr && r->cancel->load() ? 1 : 0;
}

}  // namespace

Status Client::New(Config config, ClientOptions options, std::unique_ptr<Client>* out) {
  UrlParts u;
  if (!SplitUrl(config.server, &u) || (u.scheme != "https" && u.scheme != "http")) {
    return Status::InvalidArgument("apiserver URL \"" + config.server + "\" is not an http(s) URL");
  }
  GlobalInit();
  out->reset(new Client(std::move(config), std::move(options)));
  return Status::Ok();
}

Client::Client(Config config, ClientOptions options) : config_(std::move(config)), options_(std::move(options)) {
  if (!config_.token.empty()) {
    token_ = TokenSource::Fixed(config_.token);
  } else if (!config_.token_file.empty()) {
    token_ = TokenSource::File(config_.token_file, options_.token_refresh);
  }
  url_base_ = config_.server;
  UrlParts u;
  if (!config_.tls_server_name.empty() && SplitUrl(config_.server, &u)) {
    // Verify the certificate (and send SNI) for tls-server-name while
    // connecting to the configured host: ask for the name, route it there.
    url_base_ = u.scheme + "://" + config_.tls_server_name + ":" + u.port + u.path;
    connect_to_ = config_.tls_server_name + ":" + u.port + ":" + u.host + ":" + u.port;
  }
}

Client::~Client() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* Client::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      CURL* h = static_cast<CURL*>(idle_.back());
      idle_.pop_back();
      curl_easy_reset(h);  // keeps its connections and TLS sessions
      return h;
    }
  }
  return curl_easy_init();
}

void Client::Release(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(handle);
}

std::string Client::EscapeQuery(std::string_view value) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Result Client::Perform(Request& r) {
  bool token_reread = false;
  for (int throttled = 0;;) {
    CURL* h = static_cast<CURL*>(Acquire());
    if (h == nullptr) return Result::NetworkError("curl_easy_init failed");
    r.curl = h;
    r.response.clear();
    r.http_status = 0;
    char errbuf[CURL_ERROR_SIZE] = {0};
    std::string url = url_base_ + r.path;
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, options_.user_agent.c_str());
    // A ScopedCallTimeout on this thread caps the whole request (curl's 0
    // would mean "no limit": at least 1 ms).
    long connect_ms = static_cast<long>(options_.connect_timeout.count());
    long total_ms = static_cast<long>(r.timeout.count());
    if (auto deadline = ScopedCallTimeout::Deadline()) {
      long left = static_cast<long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0) {
        Release(h);
        r.curl = nullptr;
        return Result::NetworkError(std::string(r.method) + " " + config_.server + r.path +
                                    ": not sent, its deadline has passed");
      }
      connect_ms = std::min(connect_ms, left);
      total_ms = r.timeout.count() > 0 ? std::min(total_ms, left) : left;
    }
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 15L);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // gzip for large lists
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method);
    if (r.body != nullptr) {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body->data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body->size()));
    } else if (std::string_view(r.method) == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCallback);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    if (r.cancel != nullptr) {
      curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, ProgressCallback);
      curl_easy_setopt(h, CURLOPT_XFERINFODATA, &r);
    }
    // TLS.
    if (config_.insecure_skip_tls_verify) {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    curl_blob blob;
    if (!config_.ca_data.empty()) {
      blob = {const_cast<char*>(config_.ca_data.data()), config_.ca_data.size(), CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    } else if (!config_.ca_file.empty()) {
      curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_file.c_str());
    }
    if (!config_.client_cert_data.empty()) {
      blob = {const_cast<char*>(config_.client_cert_data.data()), config_.client_cert_data.size(), CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &blob);
      curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (!config_.client_cert_file.empty()) {
      curl_easy_setopt(h, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
    }
    if (!config_.client_key_data.empty()) {
      blob = {const_cast<char*>(config_.client_key_data.data()), config_.client_key_data.size(), CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &blob);
      curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (!config_.client_key_file.empty()) {
      curl_easy_setopt(h, CURLOPT_SSLKEY, config_.client_key_file.c_str());
    }
    CurlSlist connect_to;
    if (!connect_to_.empty()) {
      connect_to.Add(connect_to_);
      curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to.list);
    }
    // Headers. The Authorization header lives only in this list.
    CurlSlist headers;
    headers.Add("Accept: application/json");
    if (!r.content_type.empty()) headers.Add("Content-Type: " + std::string(r.content_type));
    Status token_err;
    std::string token = token_.Get(&token_err);
    if (!token.empty()) headers.Add("Authorization: Bearer " + token);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);

    auto t0 = std::chrono::steady_clock::now();
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.http_status);
    // For the debug line: whether this request paid for a new connection
    // (TCP and TLS) rather than reusing the handle's.
    long connects = 0;
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    long retry_after = -1;
    curl_header* hdr = nullptr;
    if (rc == CURLE_OK && curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1, &hdr) == CURLHE_OK) {
      retry_after = std::strtol(hdr->value, nullptr, 10);
    }
    // Options pointing at this frame's memory must not outlive it.
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(h, CURLOPT_CONNECT_TO, nullptr);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    Release(h);
    r.curl = nullptr;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();

    Result result;
    if (rc == CURLE_ABORTED_BY_CALLBACK || (rc == CURLE_WRITE_ERROR && r.stopped_by_callback)) {
      result = Result::Cancelled();
    } else if (rc != CURLE_OK) {
      std::string msg = std::string(r.method) + " " + config_.server + r.path + ": " + curl_easy_strerror(rc);
      if (errbuf[0] != '\0') msg += std::string(" (") + errbuf + ")";
      if (!token_err.ok()) msg += "; " + token_err.message();
      result = Result::NetworkError(msg);
    } else {
      result = Result::FromHttp(static_cast<int>(r.http_status), r.response, retry_after);
    }
    spdlog::debug("kube {} {} -> {} in {} ms{}", r.method, r.path,
                  result.ok() ? std::to_string(r.http_status) : result.ToString(), ms,
                  connects ? " (new connection)" : "");
    // A rotated token: re-read the file once and retry.
    if (result.code() == Result::Code::kUnauthorized && !token_reread && token_.from_file()) {
      token_reread = true;
      token_.Invalidate();
      continue;
    }
    if (auto wait = ThrottleWait(r, result, throttled)) {
      ++throttled;
      spdlog::info("kube {} {}: {}; sending it again in {} s ({} of {})", r.method, r.path, result.ToString(),
                   wait->count(), throttled, options_.throttle_retries);
      std::this_thread::sleep_for(*wait);
      continue;
    }
    return result;
  }
}

std::optional<std::chrono::seconds> Client::ThrottleWait(const Request& r, const Result& result, int throttled) const {
  int status = result.http_status();
  bool asked = result.code() == Result::Code::kTooManyRequests || (status >= 500 && status <= 504);
  if (!asked || result.retry_after().count() <= 0 || r.on_data != nullptr || throttled >= options_.throttle_retries)
    return std::nullopt;
  auto wait = std::min<std::chrono::seconds>(result.retry_after(), std::chrono::seconds(60));
  // Not past the caller's deadline: it would rather have the answer.
  if (auto deadline = ScopedCallTimeout::Deadline(); deadline && std::chrono::steady_clock::now() + wait >= *deadline)
    return std::nullopt;
  return wait;
}

Result Client::Do(const char* method, const std::string& path, std::string_view content_type,
                  const std::string* body, nlohmann::json* out) {
  Request r;
  r.method = method;
  r.path = path;
  r.content_type = content_type;
  r.body = body;
  r.timeout = options_.request_timeout;
  Result result = Perform(r);
  if (result.ok() && out != nullptr) {
    *out = nlohmann::json::parse(r.response, nullptr, /*allow_exceptions=*/false);
    if (out->is_discarded()) {
      return Result(Result::Code::kOther, static_cast<int>(r.http_status), "",
                    std::string(method) + " " + path + ": the answer is not JSON");
    }
  }
  return result;
}

Result Client::List(const std::string& path, const ListOptions& options, nlohmann::json* out) {
  nlohmann::json items = nlohmann::json::array();
  std::string rv;
  Result r = ListEach(
      path, options, [&](nlohmann::json&& item) { items.push_back(std::move(item)); },
      [&] { items = nlohmann::json::array(); }, &rv);
  if (!r.ok()) return r;
  *out = {{"items", std::move(items)}, {"metadata", {{"resourceVersion", rv}}}};
  return r;
}

Result Client::ListEach(const std::string& path, const ListOptions& options,
                        const std::function<void(nlohmann::json&&)>& each, const std::function<void()>& restart,
                        std::string* list_rv) {
  // An expired continue token restarts the list; a few times at most, so a
  // server that keeps expiring them ends with an error, not a loop.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) restart();
    std::string cont;
    Result r;
    for (;;) {
      std::string q = path + (path.find('?') == std::string::npos ? "?" : "&") +
                      "limit=" + std::to_string(options.limit);
      if (!options.label_selector.empty()) q += "&labelSelector=" + EscapeQuery(options.label_selector);
      if (!options.field_selector.empty()) q += "&fieldSelector=" + EscapeQuery(options.field_selector);
      if (!cont.empty()) {
        q += "&continue=" + EscapeQuery(cont);
      } else if (!options.resource_version.empty()) {
        q += "&resourceVersion=" + EscapeQuery(options.resource_version);
      }
      Request req;
      req.method = "GET";
      req.path = q;
      req.timeout = options_.request_timeout;
      r = Perform(req);
      if (!r.ok()) break;
      // Each of the page's items is handed over as soon as the parser has
      // it, and dropped from the page: a watch-cache list ignores `limit`
      // (10,000 objects in one answer), and their JSON trees all at once
      // were most of the provisioner's peak memory.
      bool in_items = false;
      auto take_items = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (event == E::key && depth == 1) in_items = parsed == "items";
        if (event == E::object_end && depth == 2 && in_items) {
          each(std::move(parsed));
          return false;
        }
        return true;
      };
      nlohmann::json page = nlohmann::json::parse(req.response, take_items, /*allow_exceptions=*/false);
      req.response.clear();
      req.response.shrink_to_fit();
      if (page.is_discarded() || !page.is_object())
        return Result(Result::Code::kOther, static_cast<int>(req.http_status), "", "GET " + q + ": the answer is not a list");
      cont = page.value("/metadata/continue"_json_pointer, std::string());
      // The last page's resourceVersion is the list's.
      *list_rv = page.value("/metadata/resourceVersion"_json_pointer, std::string());
      if (cont.empty()) break;
    }
    if (r.code() == Result::Code::kExpired && !cont.empty()) {
      spdlog::info("kube list {}: continue token expired, restarting the list", path);
      continue;
    }
    return r;
  }
  return Result(Result::Code::kExpired, 410, "Expired", "list " + path + ": continue tokens kept expiring");
}

Result Client::Stream(const std::string& path_and_query, std::chrono::seconds total_timeout,
                      const std::function<bool(std::string_view)>& on_data, const std::atomic<bool>* cancel) {
  Request r;
  r.method = "GET";
  r.path = path_and_query;
  r.on_data = &on_data;
  r.cancel = cancel;
  r.timeout = total_timeout;
  Result result = Perform(r);
  // The server ending a watch at timeoutSeconds is normal; curl's own
  // timeout past it means the stream hung.
  return result;
}

}  // namespace nodevol::kube
