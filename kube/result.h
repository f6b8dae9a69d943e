// Result: the outcome of one Kubernetes API request, classified the way
// callers branch on it.
//
// The apiserver answers errors with a Status object whose `reason` is the
// stable, documented discriminator (409 alone does not tell a stale
// resourceVersion from an existing name), so classification goes by reason
// first and falls back to the HTTP code only when the reason is missing or
// unknown, as client-go's ReasonForError does. The server's message is kept
// verbatim for logs and events.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace nodevol::kube {

class Result {
 public:
  enum class Code {
    kOk,
    kNotFound,          // 404, reason NotFound
    kAlreadyExists,     // 409, reason AlreadyExists (create of an existing name)
    kConflict,          // 409, reason Conflict (stale resourceVersion, failed precondition)
    kExpired,           // 410, reasons Expired / Gone: relist or restart the list
    kTooManyRequests,   // 429: wait retry_after()
    kUnauthorized,      // 401
    kForbidden,         // 403
    kInvalid,           // 422: the object was rejected by validation
    kBadRequest,        // 400
    kServerError,       // 5xx, server timeouts
    kNetworkError,      // no HTTP answer: DNS, connect, TLS, reset, client timeout
    kCancelled,         // the caller cancelled a streaming request
    kOther,             // any other HTTP status
  };

  Result() = default;
  Result(Code code, int http_status, std::string reason, std::string message)
      : code_(code), http_status_(http_status), reason_(std::move(reason)), message_(std::move(message)) {}

  static Result Ok(int http_status = 200) { return Result(Code::kOk, http_status, "", ""); }
  static Result NetworkError(std::string message) { return Result(Code::kNetworkError, 0, "", std::move(message)); }
  static Result Cancelled() { return Result(Code::kCancelled, 0, "", "cancelled"); }

  // Classifies an HTTP answer. `body` is the response body (a Status object
  // for errors, or anything else); `retry_after` is the Retry-After header
  // value in seconds (-1 when absent).
  static Result FromHttp(int http_status, std::string_view body, long retry_after = -1);
  // Classifies a Status object (a response body or a watch ERROR event's
  // object). Uses the Status's own `code` as the HTTP status.
  static Result FromStatusObject(const nlohmann::json& status);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  int http_status() const { return http_status_; }
  // Status.reason as sent by the server ("" when none).
  const std::string& reason() const { return reason_; }
  const std::string& message() const { return message_; }
  // How long the server asked us to wait (Retry-After header or
  // details.retryAfterSeconds); zero when it did not say.
  std::chrono::seconds retry_after() const { return retry_after_; }
  void set_retry_after(std::chrono::seconds s) { retry_after_ = s; }

  // True for errors worth retrying the same request after a backoff.
  bool IsTransient() const {
    return code_ == Code::kNetworkError || code_ == Code::kTooManyRequests || code_ == Code::kServerError;
  }

  static std::string_view CodeName(Code code);
  // "Conflict (409): <message>" or "OK"; for logs and error messages.
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  int http_status_ = 0;
  std::string reason_;
  std::string message_;
  std::chrono::seconds retry_after_{0};
};

}  // namespace nodevol::kube
