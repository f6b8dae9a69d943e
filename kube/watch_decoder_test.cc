#include "kube/watch_decoder.h"

#include <gtest/gtest.h>

namespace nodevol::kube {
namespace {

using Type = WatchEvent::Type;

const char kAdded[] =
    R"j({"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"11"},)j"
    R"j("data":{"k":"brace } in \"string\" {[","e":"\\","q":"\"}"}}})j"
    "\n";
const char kModified[] =
    R"j({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"12"}}})j"
    "\n";
const char kBookmark[] = R"j({"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"20"}}})j";
const char kExpired[] =
    R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",)j"
    R"j("message":"too old resource version: 1 (123)","reason":"Expired","code":410}})j";

std::vector<WatchEvent> FeedAll(WatchDecoder* d, const std::vector<std::string>& chunks) {
  std::vector<WatchEvent> out;
  for (const auto& c : chunks) {
    Status st = d->Feed(c, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return out;
}

TEST(WatchDecoder, OneEventOneChunk) {
  WatchDecoder d;
  auto events = FeedAll(&d, {kAdded});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, Type::kAdded);
  EXPECT_EQ(events[0].ResourceVersion(), "11");
  // The braces and escaped quote inside the string are data, not structure.
  EXPECT_EQ(events[0].object["data"]["k"], "brace } in \"string\" {[");
  EXPECT_EQ(events[0].object["data"]["e"], "\\");
  EXPECT_EQ(events[0].object["data"]["q"], "\"}");
  EXPECT_TRUE(d.Finish().ok());
}

TEST(WatchDecoder, EveryPossibleSplitPoint) {
  std::string stream = std::string(kAdded) + kModified;
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    WatchDecoder d;
    auto events = FeedAll(&d, {stream.substr(0, cut), stream.substr(cut)});
    ASSERT_EQ(events.size(), 2u) << "cut at " << cut;
    EXPECT_EQ(events[0].ResourceVersion(), "11");
    EXPECT_EQ(events[1].type, Type::kModified);
    EXPECT_EQ(events[1].ResourceVersion(), "12");
    EXPECT_TRUE(d.Finish().ok());
  }
}

TEST(WatchDecoder, OneByteAtATime) {
  std::string stream = std::string(kAdded) + kBookmark + kModified;
  WatchDecoder d;
  std::vector<std::string> chunks;
  for (char c : stream) chunks.emplace_back(1, c);
  auto events = FeedAll(&d, chunks);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].type, Type::kBookmark);
  EXPECT_EQ(events[1].ResourceVersion(), "20");
  EXPECT_EQ(events[2].ResourceVersion(), "12");
}

TEST(WatchDecoder, SeveralEventsInOneChunkWithWhitespace) {
  std::string stream = std::string("\n  ") + kAdded + "\r\n\t" + kBookmark + kModified + "\n\n";
  WatchDecoder d;
  auto events = FeedAll(&d, {stream});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, Type::kAdded);
  EXPECT_EQ(events[1].type, Type::kBookmark);
  EXPECT_EQ(events[2].type, Type::kModified);
  EXPECT_TRUE(d.Finish().ok());
}

TEST(WatchDecoder, PartialEventIsHeldBack) {
  std::string stream = std::string(kAdded) + kModified;
  WatchDecoder d;
  std::vector<WatchEvent> out;
  ASSERT_TRUE(d.Feed(stream.substr(0, stream.size() - 5), &out).ok());
  ASSERT_EQ(out.size(), 1u);  // only the first is complete
  EXPECT_FALSE(d.Finish().ok());  // the stream must not end here
  ASSERT_TRUE(d.Feed(stream.substr(stream.size() - 5), &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(d.Finish().ok());
}

TEST(WatchDecoder, ErrorEventExpired) {
  WatchDecoder d;
  auto events = FeedAll(&d, {kExpired});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, Type::kError);
  EXPECT_EQ(events[0].error.code(), Result::Code::kExpired);
  EXPECT_EQ(events[0].error.http_status(), 410);
  EXPECT_EQ(events[0].error.message(), "too old resource version: 1 (123)");
}

TEST(WatchDecoder, ErrorEventGoneWithoutReason) {
  WatchDecoder d;
  auto events = FeedAll(&d, {R"j({"type":"ERROR","object":{"kind":"Status","code":410,"message":"gone"}})j"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].error.code(), Result::Code::kExpired);
}

TEST(WatchDecoder, ErrorEventOtherStatus) {
  WatchDecoder d;
  auto events = FeedAll(
      &d, {R"j({"type":"ERROR","object":{"kind":"Status","code":500,"reason":"InternalError","message":"boom"}})j"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].error.code(), Result::Code::kServerError);
  EXPECT_EQ(events[0].error.message(), "boom");
}

TEST(WatchDecoder, MalformedJsonIsAnErrorAndSticks) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  EXPECT_FALSE(d.Feed(R"j({"type":"ADDED","object":{"a":1,}})j", &out).ok());
  EXPECT_TRUE(out.empty());
  // Broken for good: later valid input is refused too.
  EXPECT_FALSE(d.Feed(kModified, &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(d.Finish().ok());
}

TEST(WatchDecoder, GarbageBetweenEvents) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  EXPECT_FALSE(d.Feed(std::string(kModified) + "x" + kModified, &out).ok());
  EXPECT_EQ(out.size(), 1u);  // the event before the garbage was delivered
}

TEST(WatchDecoder, TopLevelArrayRefused) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  EXPECT_FALSE(d.Feed("[1,2]", &out).ok());
}

TEST(WatchDecoder, UnknownTypeRefused) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  EXPECT_FALSE(d.Feed(R"j({"type":"RENAMED","object":{}})j", &out).ok());
}

TEST(WatchDecoder, MissingObjectRefused) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  EXPECT_FALSE(d.Feed(R"j({"type":"ADDED"})j", &out).ok());
  WatchDecoder d2;
  EXPECT_FALSE(d2.Feed(R"j({"object":{}})j", &out).ok());
}

TEST(WatchDecoder, LargeObjectInManyChunks) {
  std::string big(1 << 20, 'x');
  nlohmann::json ev = {{"type", "ADDED"}, {"object", {{"metadata", {{"name", "big"}}}, {"data", {{"v", big}}}}}};
  std::string stream = ev.dump() + "\n";
  WatchDecoder d;
  std::vector<WatchEvent> out;
  for (size_t i = 0; i < stream.size(); i += 4096) ASSERT_TRUE(d.Feed(stream.substr(i, 4096), &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].object["data"]["v"].get<std::string>().size(), big.size());
}

TEST(WatchDecoder, EmptyStreamIsFine) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  EXPECT_TRUE(d.Feed("", &out).ok());
  EXPECT_TRUE(d.Feed("\n", &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(d.Finish().ok());
}

}  // namespace
}  // namespace nodevol::kube
