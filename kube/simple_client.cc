#include "kube/simple_client.h"

namespace nodevol::kube {

Status SimpleClient::New(Config config, std::string user_agent, std::chrono::milliseconds timeout,
                         std::unique_ptr<SimpleClient>* out) {
  std::unique_ptr<SimpleClient> c(new SimpleClient());
  NODEVOL_RETURN_IF_ERROR(EndpointOf(config, &c->endpoint_, &c->prefix_));
  if (!c->endpoint_.tls)
    return Status::InvalidArgument("the apiserver must be an https:// URL, not \"" + config.server + "\"");
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
    if (!ReadWholeFile(config_.token_file, &token)) return Result::NetworkError("cannot read " + config_.token_file);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  }
  if (!token.empty()) x.headers.emplace_back("Authorization", "Bearer " + token);
  if (body) {
    x.headers.emplace_back("Content-Type", std::string(content_type));
    x.body = body;
  }
  x.deadline = Exchange::Clock::now() + timeout_;

  std::unique_ptr<Connection> c;
  Connection::Outcome o = Connection::Open(endpoint_, std::move(tls), x.deadline, &c, &error);
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
