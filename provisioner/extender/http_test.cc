#include "extender/http.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "placement/seen_test.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using nlohmann::json;

struct ExtenderHttpTest : ::testing::Test {
  CapacityLedger ledger{[] {
    return std::vector<PoolSeen>{Seen("n1", "fast", "dir", 100 * MiB, true, 100 * MiB, 0, true),
                                 Seen("n2", "fast", "dir", 300 * MiB, true, 300 * MiB, 0, true)};
  }};
  Extender ext{&ledger,
               [](const std::string& ns, const std::vector<std::string>& names) {
                 PodClaims out;
                 for (const auto& n : names)
                   if (ns == "ns" && n == "data") out.pending.push_back({"uid-data", n, "fast", "", 150 * MiB});
                   else if (n == "late") out.unknown.push_back(n);
                 return out;
               },
               PlacementPolicy::kMostFree};
  Extender* current = &ext;
  httpd::PostHandlers h = ExtenderHandlers([this] { return current; });

  static std::string Request(const std::string& claim, const json& nodes = {"n1", "n2", "n9"}) {
    json pod = {{"metadata", {{"namespace", "ns"}, {"name", "p"}, {"uid", "u"}}},
                {"spec", {{"volumes", {{{"name", "v"}, {"persistentVolumeClaim", {{"claimName", claim}}}}}}}}};
    json req = {{"Pod", pod}};
    if (!nodes.is_null()) req["NodeNames"] = nodes;
    return req.dump();
  }
};

TEST_F(ExtenderHttpTest, FilterAnswersInKubeSchedulersShape) {
  auto r = h["/filter"](Request("data"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, std::string(kJsonContentType));
  json a = json::parse(r.body);
  EXPECT_EQ(a["NodeNames"], json({"n2"}));
  EXPECT_TRUE(a["FailedNodes"].contains("n1"));
  EXPECT_TRUE(a["FailedAndUnresolvableNodes"].contains("n9"));
  EXPECT_EQ(a["Error"], "");
}

TEST_F(ExtenderHttpTest, AClaimNotCachedYetIsAnErrorSoTheSchedulerRetries) {
  auto r = h["/filter"](Request("late"));
  ASSERT_EQ(r.status, 200) << r.body;
  json a = json::parse(r.body);
  EXPECT_NE(a["Error"].get<std::string>().find("ns/late is not in nodevol-provisioner's cache"), std::string::npos)
      << r.body;
  EXPECT_TRUE(a["NodeNames"].is_array());
  EXPECT_TRUE(a["NodeNames"].empty());
}

TEST_F(ExtenderHttpTest, NodeNamesIsAlwaysAListEvenWhenEmpty) {
  auto r = h["/filter"](Request("data", json::array({"n1"})));
  json a = json::parse(r.body);
  ASSERT_TRUE(a["NodeNames"].is_array());
  EXPECT_TRUE(a["NodeNames"].empty());
  EXPECT_TRUE(a["FailedAndUnresolvableNodes"].is_object());
}

TEST_F(ExtenderHttpTest, PrioritizeAnswersHostScorePairs) {
  auto r = h["/prioritize"](Request("data"));
  ASSERT_EQ(r.status, 200) << r.body;
  json a = json::parse(r.body);
  ASSERT_TRUE(a.is_array());
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1]["Host"], "n2");
  EXPECT_EQ(a[1]["Score"], kMaxScore);
  EXPECT_EQ(a[0]["Score"], 0);  // n1 has no room for 150 MiB
}

TEST_F(ExtenderHttpTest, BadRequestsGet400WithTheReasonAndChangeNothing) {
  for (const std::string& body : {std::string("{"), std::string("[]"), std::string("{\"Pod\":7}"),
                                 std::string(100, '['), Request("data", nullptr)}) {
    for (const char* path : {"/filter", "/prioritize"}) {
      auto r = h[path](body);
      EXPECT_EQ(r.status, 400) << path << " " << body.substr(0, 40);
      json a = json::parse(r.body);
      EXPECT_FALSE(a.value("Error", "").empty());
    }
  }
  EXPECT_NE(json::parse(h["/filter"](Request("data", nullptr)).body)["Error"].get<std::string>().find(
                "nodeCacheCapable"),
            std::string::npos);
  std::string node, pool;
  CapacityLedger::Kind kind;
  EXPECT_FALSE(ledger.Find("uid-data", &node, &pool, &kind));
}

TEST_F(ExtenderHttpTest, AReplicaThatDoesNotLeadRefusesWith503) {
  current = nullptr;
  auto r = h["/filter"](Request("data"));
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("not the leader"), std::string::npos);
}

}  // namespace
}  // namespace nodevol::provisioner
