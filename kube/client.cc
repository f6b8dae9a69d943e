#include "kube/client.h"

#include "kube/call_timeout.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <mutex>
#include <optional>
#include <thread>

namespace nodevol::kube {
namespace {

using Clock = std::chrono::steady_clock;

// Idle connections kept for reuse; more are closed when returned.
constexpr size_t kMaxIdle = 32;

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
  long http_status = 0;
  std::string response;
  bool stopped_by_callback = false;
};

Status Client::New(Config config, ClientOptions options, std::unique_ptr<Client>* out) {
  Endpoint endpoint;
  std::string prefix;
  NODEVOL_RETURN_IF_ERROR(EndpointOf(config, &endpoint, &prefix));
  out->reset(new Client(std::move(config), std::move(options)));
  (*out)->endpoint_ = std::move(endpoint);
  (*out)->prefix_ = std::move(prefix);
  return Status::Ok();
}

Client::Client(Config config, ClientOptions options) : config_(std::move(config)), options_(std::move(options)) {
  if (!config_.token.empty()) {
    token_ = TokenSource::Fixed(config_.token);
  } else if (!config_.token_file.empty()) {
    token_ = TokenSource::File(config_.token_file, options_.token_refresh);
  }
}

Client::~Client() = default;

std::unique_ptr<Connection> Client::TakeIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!idle_.empty()) {
    std::unique_ptr<Connection> c = std::move(idle_.back());
    idle_.pop_back();
    if (c->Reusable()) return c;
  }
  return nullptr;
}

void Client::Keep(std::unique_ptr<Connection> connection) {
  if (!connection->Reusable()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(connection));
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

Result Client::Attempt(Request& r) {
  r.response.clear();
  r.http_status = 0;
  const std::string what = std::string(r.method) + " " + config_.server + r.path;
  // A ScopedCallTimeout on this thread caps the whole request.
  auto now = Clock::now();
  Clock::time_point deadline = now + r.timeout;
  Clock::time_point connect_deadline = now + options_.connect_timeout;
  if (auto call = ScopedCallTimeout::Deadline()) {
    if (*call <= now) return Result::NetworkError(what + ": not sent, its deadline has passed");
    deadline = std::min(deadline, *call);
    connect_deadline = std::min(connect_deadline, *call);
  }
  connect_deadline = std::min(connect_deadline, deadline);

  Exchange x;
  x.method = r.method;
  x.target = prefix_ + r.path;
  x.headers = {{"User-Agent", options_.user_agent}, {"Accept", "application/json"}};
  if (!r.content_type.empty()) x.headers.emplace_back("Content-Type", std::string(r.content_type));
  Status token_err;
  std::string token = token_.Get(&token_err);
  // The Authorization header lives only in this exchange.
  if (!token.empty()) x.headers.emplace_back("Authorization", "Bearer " + token);
  x.body = r.body;
  x.deadline = deadline;
  x.on_data = r.on_data;
  x.cancel = r.cancel;

  std::string error;
  Connection::Outcome o;
  bool fresh = false;
  std::unique_ptr<Connection> c = TakeIdle();
  // A pooled connection the server closed as the request went out fails
  // before any answer: sent again once on a new connection, unless it was
  // a POST (which might then have been carried out).
  for (int tries = 0;; ++tries) {
    if (c == nullptr) {
      std::shared_ptr<TlsContext> tls;
      if (endpoint_.tls) {
        Status st = TlsContext::Make(config_, &tls);
        if (!st.ok()) return Result::NetworkError(what + ": " + st.message());
      }
      o = Connection::Open(endpoint_, std::move(tls), connect_deadline, &c, &error);
      if (o != Connection::Outcome::kOk) {
        if (!token_err.ok()) error += "; " + token_err.message();
        return Result::NetworkError(what + ": " + error);
      }
      fresh = true;
    }
    o = c->Do(x, &error);
    if (o == Connection::Outcome::kFailed && !fresh && !x.answered && tries == 0 &&
        std::string_view(r.method) != "POST") {
      c.reset();
      continue;
    }
    break;
  }
  if (o == Connection::Outcome::kCancelled || (o == Connection::Outcome::kOk && x.stopped)) {
    r.stopped_by_callback = x.stopped;
    return Result::Cancelled();
  }
  if (o != Connection::Outcome::kOk) {
    if (!token_err.ok()) error += "; " + token_err.message();
    spdlog::debug("kube {} {}: {}", r.method, r.path, error);
    return Result::NetworkError(what + ": " + error);
  }
  Keep(std::move(c));
  r.http_status = x.status;
  r.response = std::move(x.response);
  Result result = Result::FromHttp(x.status, r.response, x.retry_after);
  // Whether this request paid for a new connection (TCP and TLS).
  spdlog::debug("kube {} {} -> {} in {} ms{}", r.method, r.path,
                result.ok() ? std::to_string(x.status) : result.ToString(),
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - now).count(),
                fresh ? " (new connection)" : "");
  return result;
}

Result Client::Perform(Request& r) {
  bool token_reread = false;
  for (int throttled = 0;;) {
    Result result = Attempt(r);
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
  // The server ending a watch at timeoutSeconds is normal; the client's own
  // timeout past it means the stream hung.
  return result;
}

}  // namespace nodevol::kube
