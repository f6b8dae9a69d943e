// Status: the outcome of every domain operation in nodevold.
//
// A Status is either OK or carries a code and a message meant for a person
// ("pool \"fast\" has 1.2 GiB free, 5 GiB asked"). The codes are gRPC's with
// the same numeric values so the transport maps them 1:1 both ways (the
// domain uses the first group; clients of the Node API may meet any), but
// nothing here depends on gRPC.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace nodevol {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument = 3,
    kDeadlineExceeded = 4,
    kNotFound = 5,
    kAlreadyExists = 6,
    kResourceExhausted = 8,
    kFailedPrecondition = 9,
    kInternal = 13,
    kUnavailable = 14,
    // Made by the transport (nodevold's TCP listener) or met by clients of the
    // Node API (the provisioner); the domain does not make them.
    kCancelled = 1,
    kUnknown = 2,
    kPermissionDenied = 7,
    kAborted = 10,
    kOutOfRange = 11,
    kUnimplemented = 12,
    kDataLoss = 15,
    kUnauthenticated = 16,
  };

  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }
  static Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
  static Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {Code::kOutOfRange, std::move(m)}; }
  static Status Unknown(std::string m) { return {Code::kUnknown, std::move(m)}; }
  // An INTERNAL status for a failed system call: "<what>: <strerror(err)>".
  static Status FromErrno(std::string_view what, int err);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // Upper-case gRPC spelling of the code, e.g. "INVALID_ARGUMENT".
  std::string_view code_name() const;
  // "CODE: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with "<context>: ".
  Status WithContext(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace nodevol

// Returns the status from the enclosing function when it is not OK.
#define NODEVOL_RETURN_IF_ERROR(expr)            \
  do {                                           \
    ::nodevol::Status _st = (expr);              \
    if (!_st.ok()) return _st;                   \
  } while (0)
