#include "placement/topology.h"

#include <gtest/gtest.h>

namespace nodevol::provisioner {
namespace {

TEST(Topology, AnyTermAllExpressions) {
  auto terms = nlohmann::json::parse(R"([
    {"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}, {"key": "disk", "values": ["ssd"]}]},
    {"matchLabelExpressions": [{"key": "kubernetes.io/hostname", "values": ["special"]}]}])");
  EXPECT_TRUE(NodeAllowedByTopologies({{"zone", "b"}, {"disk", "ssd"}}, terms));
  EXPECT_FALSE(NodeAllowedByTopologies({{"zone", "b"}, {"disk", "hdd"}}, terms));
  EXPECT_FALSE(NodeAllowedByTopologies({{"zone", "c"}, {"disk", "ssd"}}, terms));
  EXPECT_TRUE(NodeAllowedByTopologies({{"kubernetes.io/hostname", "special"}}, terms));
  EXPECT_TRUE(NodeAllowedByTopologies({}, nlohmann::json()));
  EXPECT_TRUE(NodeAllowedByTopologies({}, nlohmann::json::array()));
}

}  // namespace
}  // namespace nodevol::provisioner
