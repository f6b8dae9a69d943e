#include "kube/result.h"

#include <nlohmann/json.hpp>

namespace nodevol::kube {
namespace {

using Code = Result::Code;

// Status.reason values (k8s.io/apimachinery/pkg/apis/meta/v1 StatusReason)
// that decide the class on their own.
bool CodeForReason(std::string_view reason, Code* code) {
  struct Entry {
    std::string_view reason;
    Code code;
  };
  static constexpr Entry kTable[] = {
      {"NotFound", Code::kNotFound},
      {"AlreadyExists", Code::kAlreadyExists},
      {"Conflict", Code::kConflict},
      {"Expired", Code::kExpired},
      {"Gone", Code::kExpired},
      {"TooManyRequests", Code::kTooManyRequests},
      {"Unauthorized", Code::kUnauthorized},
      {"Forbidden", Code::kForbidden},
      {"Invalid", Code::kInvalid},
      {"BadRequest", Code::kBadRequest},
      {"Timeout", Code::kServerError},
      {"ServerTimeout", Code::kServerError},
      {"InternalError", Code::kServerError},
      {"ServiceUnavailable", Code::kServerError},
  };
  for (const Entry& e : kTable) {
    if (e.reason == reason) {
      *code = e.code;
      return true;
    }
  }
  return false;
}

Code CodeForHttpStatus(int status) {
  if (status >= 200 && status < 300) return Code::kOk;
  switch (status) {
    case 400: return Code::kBadRequest;
    case 401: return Code::kUnauthorized;
    case 403: return Code::kForbidden;
    case 404: return Code::kNotFound;
    case 409: return Code::kConflict;
    case 410: return Code::kExpired;
    case 422: return Code::kInvalid;
    case 429: return Code::kTooManyRequests;
  }
  if (status >= 500 && status < 600) return Code::kServerError;
  return Code::kOther;
}

Result Classify(int http_status, const std::string& reason, std::string message) {
  Code code = CodeForHttpStatus(http_status);
  // A 2xx is a success whatever the body says; otherwise the reason wins.
  if (code != Code::kOk) CodeForReason(reason, &code);
  return Result(code, http_status, reason, std::move(message));
}

}  // namespace

Result Result::FromStatusObject(const nlohmann::json& status) {
  int http = 0;
  std::string reason, message;
  long retry = -1;
  if (status.is_object()) {
    if (auto it = status.find("code"); it != status.end() && it->is_number_integer()) http = it->get<int>();
    if (auto it = status.find("reason"); it != status.end() && it->is_string()) reason = it->get<std::string>();
    if (auto it = status.find("message"); it != status.end() && it->is_string()) message = it->get<std::string>();
    if (auto d = status.find("details"); d != status.end() && d->is_object()) {
      if (auto r = d->find("retryAfterSeconds"); r != d->end() && r->is_number_integer()) retry = r->get<long>();
    }
  }
  // A Status without a code (some watch ERROR events) is still an error.
  if (http == 0) http = 500;
  Result r = Classify(http, reason, message.empty() ? "server error without message" : message);
  if (retry > 0) r.set_retry_after(std::chrono::seconds(retry));
  return r;
}

Result Result::FromHttp(int http_status, std::string_view body, long retry_after) {
  Result r;
  if (http_status >= 200 && http_status < 300) {
    r = Ok(http_status);
  } else {
    nlohmann::json status = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (status.is_object() && status.value("kind", "") == "Status") {
      std::string reason = status.value("reason", "");
      std::string message = status.value("message", "");
      r = Classify(http_status, reason, message.empty() ? "HTTP " + std::to_string(http_status) : message);
      if (auto d = status.find("details"); d != status.end() && d->is_object()) {
        if (auto ra = d->find("retryAfterSeconds"); ra != d->end() && ra->is_number_integer() && ra->get<long>() > 0) {
          r.set_retry_after(std::chrono::seconds(ra->get<long>()));
        }
      }
    } else {
      // Not a Status (a proxy's HTML page, plain text): keep a bounded excerpt.
      std::string excerpt(body.substr(0, 200));
      r = Classify(http_status, "", "HTTP " + std::to_string(http_status) + (excerpt.empty() ? "" : ": " + excerpt));
    }
  }
  if (retry_after > 0) r.set_retry_after(std::chrono::seconds(retry_after));
  return r;
}

std::string_view Result::CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kConflict: return "Conflict";
    case Code::kExpired: return "Expired";
    case Code::kTooManyRequests: return "TooManyRequests";
    case Code::kUnauthorized: return "Unauthorized";
    case Code::kForbidden: return "Forbidden";
    case Code::kInvalid: return "Invalid";
    case Code::kBadRequest: return "BadRequest";
    case Code::kServerError: return "ServerError";
    case Code::kNetworkError: return "NetworkError";
    case Code::kCancelled: return "Cancelled";
    case Code::kOther: return "Other";
  }
  return "Unknown";
}

std::string Result::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code_));
  if (http_status_ != 0) s += " (" + std::to_string(http_status_) + ")";
  return s + ": " + message_;
}

}  // namespace nodevol::kube
