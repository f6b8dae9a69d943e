#include "kube/result.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace nodevol::kube {
namespace {

using Code = Result::Code;

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  nlohmann::json j = {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"}, {"code", code},
                      {"message", message}};
  if (!reason.empty()) j["reason"] = reason;
  return j.dump();
}

TEST(Result, ConflictAndAlreadyExistsToldApartByReason) {
  Result c = Result::FromHttp(409, StatusBody(409, "Conflict", "the object has been modified"));
  EXPECT_EQ(c.code(), Code::kConflict);
  EXPECT_EQ(c.message(), "the object has been modified");
  EXPECT_EQ(c.reason(), "Conflict");
  Result a = Result::FromHttp(409, StatusBody(409, "AlreadyExists", "configmaps \"x\" already exists"));
  EXPECT_EQ(a.code(), Code::kAlreadyExists);
  EXPECT_EQ(a.http_status(), 409);
}

TEST(Result, HttpStatusFallbackWithoutReason) {
  EXPECT_EQ(Result::FromHttp(404, StatusBody(404, "", "x")).code(), Code::kNotFound);
  EXPECT_EQ(Result::FromHttp(409, "").code(), Code::kConflict);
  EXPECT_EQ(Result::FromHttp(410, "").code(), Code::kExpired);
  EXPECT_EQ(Result::FromHttp(401, "Unauthorized").code(), Code::kUnauthorized);
  EXPECT_EQ(Result::FromHttp(403, "").code(), Code::kForbidden);
  EXPECT_EQ(Result::FromHttp(422, "").code(), Code::kInvalid);
  EXPECT_EQ(Result::FromHttp(400, "").code(), Code::kBadRequest);
  EXPECT_EQ(Result::FromHttp(503, "<html>").code(), Code::kServerError);
  EXPECT_EQ(Result::FromHttp(418, "").code(), Code::kOther);
  EXPECT_TRUE(Result::FromHttp(201, "{}").ok());
}

TEST(Result, ReasonWinsOverHttpStatus) {
  // An apiserver timeout is 504 with reason Timeout; Gone and Expired are both 410.
  EXPECT_EQ(Result::FromHttp(504, StatusBody(504, "Timeout", "t")).code(), Code::kServerError);
  EXPECT_EQ(Result::FromHttp(410, StatusBody(410, "Gone", "g")).code(), Code::kExpired);
  EXPECT_EQ(Result::FromHttp(422, StatusBody(422, "Invalid", "spec.x: Required value")).message(),
            "spec.x: Required value");
}

TEST(Result, SuccessIgnoresBody) {
  EXPECT_TRUE(Result::FromHttp(200, StatusBody(409, "Conflict", "x")).ok());
}

TEST(Result, TooManyRequestsRetryAfter) {
  Result h = Result::FromHttp(429, StatusBody(429, "TooManyRequests", "slow down"), 7);
  EXPECT_EQ(h.code(), Code::kTooManyRequests);
  EXPECT_EQ(h.retry_after(), std::chrono::seconds(7));
  nlohmann::json body = nlohmann::json::parse(StatusBody(429, "TooManyRequests", "slow down"));
  body["details"] = {{"retryAfterSeconds", 3}};
  Result d = Result::FromHttp(429, body.dump());
  EXPECT_EQ(d.retry_after(), std::chrono::seconds(3));
  EXPECT_TRUE(d.IsTransient());
}

TEST(Result, NonStatusBodyKeptAsExcerpt) {
  Result r = Result::FromHttp(502, "Bad Gateway from proxy");
  EXPECT_EQ(r.code(), Code::kServerError);
  EXPECT_NE(r.message().find("Bad Gateway from proxy"), std::string::npos);
  EXPECT_NE(r.ToString().find("502"), std::string::npos);
}

TEST(Result, StatusObjectFromWatch) {
  Result r = Result::FromStatusObject(nlohmann::json::parse(StatusBody(410, "Expired", "too old")));
  EXPECT_EQ(r.code(), Code::kExpired);
  EXPECT_EQ(r.http_status(), 410);
  // No code at all: still an error, never OK.
  EXPECT_FALSE(Result::FromStatusObject(nlohmann::json::object()).ok());
}

}  // namespace
}  // namespace nodevol::kube
