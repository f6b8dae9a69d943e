#include "kube/simple_client.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/host_port.h"

namespace nodevol::kube {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

struct Exchange {
  http::request<http::string_body> request;
  http::response<http::string_body> response;
};

// One exchange, step by step: each step is an asynchronous operation run
// to completion on `io`, so the stream's deadline (expires_after) bounds
// the connect, the handshake and the reads, which blocking calls would not.
beast::error_code Run(asio::io_context& io, ssl::context& ctx, const std::string& host, const std::string& port,
                      const std::string& server_name, std::chrono::milliseconds timeout, Exchange& x) {
  beast::error_code ec;
  auto step = [&](auto&& start) {
    ec = {};
    start([&ec](beast::error_code e, auto&&...) { ec = e; });
    io.restart();
    io.run();
    return !ec;
  };
  tcp::resolver resolver(io);
  tcp::resolver::results_type endpoints;
  if (!step([&](auto h) {
        resolver.async_resolve(host, port, [&endpoints, h](beast::error_code e, tcp::resolver::results_type r) {
          endpoints = std::move(r);
          h(e);
        });
      }))
    return ec;
  beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
  boost::system::error_code not_ip;
  asio::ip::make_address(server_name, not_ip);
  if (not_ip && !SSL_set_tlsext_host_name(stream.native_handle(), server_name.c_str()))
    return beast::error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
  stream.set_verify_callback(ssl::host_name_verification(server_name));
  beast::get_lowest_layer(stream).expires_after(timeout);
  if (!step([&](auto h) { beast::get_lowest_layer(stream).async_connect(endpoints, h); })) return ec;
  if (!step([&](auto h) { stream.async_handshake(ssl::stream_base::client, h); })) return ec;
  if (!step([&](auto h) { http::async_write(stream, x.request, h); })) return ec;
  beast::flat_buffer buffer;
  if (!step([&](auto h) { http::async_read(stream, buffer, x.response, h); })) return ec;
  // The answer is whole (its length was read) and the request said
  // "Connection: close": no TLS shutdown to wait for, the socket just closes.
  return {};
}

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

// The TLS context of one call: files are read now, so rotated ones apply.
bool MakeContext(const Config& c, ssl::context* ctx, std::string* error) {
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  if (c.insecure_skip_tls_verify) {
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    ctx->set_verify_mode(ssl::verify_peer);
    if (!c.ca_data.empty()) ctx->add_certificate_authority(asio::buffer(c.ca_data), ec);
    else if (!c.ca_file.empty()) ctx->load_verify_file(c.ca_file, ec);
    else ctx->set_default_verify_paths(ec);
    if (ec) return *error = "the apiserver's CA: " + ec.message(), false;
  }
  std::string cert = c.client_cert_data, key = c.client_key_data;
  if (cert.empty() && !c.client_cert_file.empty()) cert = ReadFileOr(c.client_cert_file, error);
  if (key.empty() && !c.client_key_file.empty()) key = ReadFileOr(c.client_key_file, error);
  if (!error->empty()) return false;
  if (!cert.empty()) {
    ctx->use_certificate_chain(asio::buffer(cert), ec);
    if (!ec) ctx->use_private_key(asio::buffer(key), ssl::context::pem, ec);
    if (ec) return *error = "the client certificate or its key: " + ec.message(), false;
  }
  return true;
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
  ssl::context ctx(ssl::context::tls_client);
  std::string error;
  if (!MakeContext(config_, &ctx, &error)) return Result::NetworkError(error);

  Exchange x;
  x.request.method_string(method);
  x.request.target(prefix_ + path);
  x.request.version(11);
  x.request.set(http::field::host, JoinHostPort(host_, port_));
  x.request.set(http::field::user_agent, user_agent_);
  x.request.set(http::field::accept, "application/json");
  x.request.set(http::field::connection, "close");
  std::string token = config_.token;
  if (token.empty() && !config_.token_file.empty()) {
    token = ReadFileOr(config_.token_file, &error);
    if (!error.empty()) return Result::NetworkError(error);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  }
  if (!token.empty()) x.request.set(http::field::authorization, "Bearer " + token);
  if (body) {
    x.request.set(http::field::content_type, std::string(content_type));
    x.request.body() = *body;
  }
  x.request.prepare_payload();

  const std::string server_name = config_.tls_server_name.empty() ? host_ : config_.tls_server_name;
  asio::io_context io;
  if (beast::error_code ec = Run(io, ctx, host_, port_, server_name, timeout_, x)) {
    std::string what = ec == beast::error::timeout ? "no answer within " + std::to_string(timeout_.count()) + " ms"
                                                   : ec.message();
    return Result::NetworkError(std::string(method) + " " + config_.server + path + ": " + what);
  }
  long retry_after = -1;
  if (auto it = x.response.find(http::field::retry_after); it != x.response.end()) {
    try {
      retry_after = std::stol(std::string(it->value()));
    } catch (...) {
    }
  }
  int status = static_cast<int>(x.response.result_int());
  Result r = Result::FromHttp(status, x.response.body(), retry_after);
  if (r.ok() && out) {
    *out = nlohmann::json::parse(x.response.body(), nullptr, /*allow_exceptions=*/false);
    if (out->is_discarded())
      return Result(Result::Code::kOther, status, "", std::string(method) + " " + path + ": the answer is not JSON");
  }
  return r;
}

}  // namespace nodevol::kube
