#include "reply.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace nodevol::flex {
namespace {

TEST(FlexReply, InitSpellsOutEveryCapabilityAsBoolean) {
  Reply r = Reply::Init();
  EXPECT_EQ(r.exit_code(), 0);
  auto j = nlohmann::json::parse(r.ToJson());
  EXPECT_EQ(j["status"], "Success");
  const auto& caps = j["capabilities"];
  ASSERT_TRUE(caps.is_object());
  for (const char* key : {"attach", "selinuxRelabel", "supportsMetrics", "fsGroup", "requiresFSResize"})
    EXPECT_TRUE(caps[key].is_boolean()) << key;
  EXPECT_EQ(caps["attach"], false);
  EXPECT_EQ(caps["fsGroup"], false);
  EXPECT_EQ(caps["supportsMetrics"], true);
  EXPECT_EQ(caps["requiresFSResize"], true);
}

TEST(FlexReply, StatusesAndExitCodes) {
  EXPECT_EQ(nlohmann::json::parse(Reply::Failure("x").ToJson())["status"], "Failure");
  EXPECT_EQ(Reply::Failure("x").exit_code(), 1);
  EXPECT_EQ(nlohmann::json::parse(Reply::NotSupported("y").ToJson())["status"], "Not supported");
  EXPECT_EQ(Reply::NotSupported("y").exit_code(), 0);
  EXPECT_FALSE(nlohmann::json::parse(Reply::Success().ToJson()).contains("capabilities"));
}

TEST(FlexReply, OneLineEvenWithInvalidUtf8) {
  std::string json = Reply::Failure("bad path \xff\xfe here\nsecond line").ToJson();
  EXPECT_EQ(json.find('\n'), json.size() - 1);
  EXPECT_NO_THROW(nlohmann::json::parse(json));
}

}  // namespace
}  // namespace nodevol::flex
