#include "kube/simple_client.h"

#include <fstream>
#include <sstream>

#include "base/host_port.h"
#include "kube/connection.h"

namespace nodevol::kube {
namespace {

std::string ReadFileOr(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read " + path;
    return "";
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Status SimpleClient::New(Config config, std::string user_agent, std::chrono::milliseconds timeout,
                         std::unique_ptr<SimpleClient>* out) {
  const std::string scheme = "https://";
  if (config.server.rfind(scheme, 0) != 0)
    return Status::InvalidArgument("the apiserver must be an https:// URL, not \"" + config.server + "\"");
  std::string rest = config.server.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::unique_ptr<SimpleClient> c(new SimpleClient());
  c->prefix_ = slash == std::string::npos ? "" : rest.substr(slash);
  while (!c->prefix_.empty() && c->prefix_.back() == '/') c->prefix_.pop_back();
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    c->host_ = authority.substr(0, colon);
    c->port_ = authority.substr(colon + 1);
  } else {
    c->host_ = authority;
    c->port_ = "443";
  }
  if (c->host_.size() > 2 && c->host_.front() == '[' && c->host_.back() == ']') c->host_ = c->host_.substr(1, c->host_.size() - 2);
  if (c->host_.empty() || c->port_.empty())
    return Status::InvalidArgument("the apiserver URL \"" + config.server + "\" names no host");
  c->config_ = std::move(config);
  c->user_agent_ = std::move(user_agent);
  c->timeout_ = timeout;
  *out = std::move(c);
  return Status::Ok();
}

Result SimpleClient::Do(const char* method, const std::string& path, std::string_view content_type,
                        const std::string* body, nlohmann::json* out) {
  // The files are read now, so that rotated ones apply.
  std::shared_ptr<TlsContext> tls;
  if (Status st = TlsContext::Make(config_, &tls); !st.ok()) return Result::NetworkError(st.message());
  Exchange x;
  x.method = method;
  x.target = prefix_ + path;
  x.headers = {{"User-Agent", user_agent_}, {"Accept", "application/json"}, {"Connection", "close"}};
  std::string error;
  std::string token = config_.token;
  if (token.empty() && !config_.token_file.empty()) {
    token = ReadFileOr(config_.token_file, &error);
    if (!error.empty()) return Result::NetworkError(error);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  }
  if (!token.empty()) x.headers.emplace_back("Authorization", "Bearer " + token);
  if (body) {
    x.headers.emplace_back("Content-Type", std::string(content_type));
    x.body = body;
  }
  x.deadline = Exchange::Clock::now() + timeout_;

  Endpoint e{host_, port_, true, config_.tls_server_name.empty() ? host_ : config_.tls_server_name};
  std::unique_ptr<Connection> c;
  Connection::Outcome o = Connection::Open(e, std::move(tls), x.deadline, &c, &error);
  if (o == Connection::Outcome::kOk) o = c->Do(x, &error);
  if (o != Connection::Outcome::kOk) {
    if (o == Connection::Outcome::kTimedOut) error = "no answer within " + std::to_string(timeout_.count()) + " ms (" + error + ")";
    return Result::NetworkError(std::string(method) + " " + config_.server + path + ": " + error);
  }
  Result r = Result::FromHttp(x.status, x.response, x.retry_after);
  if (r.ok() && out) {
    *out = nlohmann::json::parse(x.response, nullptr, /*allow_exceptions=*/false);
    if (out->is_discarded())
      return Result(Result::Code::kOther, x.status, "", std::string(method) + " " + path + ": the answer is not JSON");
  }
  return r;
}

}  // namespace nodevol::kube
