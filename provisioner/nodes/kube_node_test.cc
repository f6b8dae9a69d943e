#include "nodes/kube_node.h"

#include <gtest/gtest.h>

namespace nodevol::provisioner {
namespace {

TEST(KubeNode, KeepsAddressLabelsAndOnlyOurAnnotations) {
  auto node = nlohmann::json::parse(R"({
    "metadata": {"name": "n1", "resourceVersion": "4",
                 "labels": {"kubernetes.io/hostname": "host-1", "nodevol.io/node": "true"},
                 "annotations": {"capacity.nodevol.io/fast": "1024", "node.alpha.kubernetes.io/ttl": "0"}},
    "status": {"addresses": [{"type": "Hostname", "address": "host-1"},
                             {"type": "InternalIP", "address": "10.0.0.7"},
                             {"type": "InternalIP", "address": "fd00::7"}],
               "images": [{"names": ["registry/big:1"], "sizeBytes": 123456789}]}})");
  KubeNode n = DecodeNode(node);
  EXPECT_EQ(n.name, "n1");
  EXPECT_EQ(n.resource_version, "4");
  EXPECT_EQ(n.internal_ip, "10.0.0.7");  // the first, as before
  EXPECT_EQ(n.internal_ips, (std::vector<std::string>{"10.0.0.7", "fd00::7"}));  // every one, for the signer
  EXPECT_EQ(n.Hostname(), "host-1");
  EXPECT_EQ(n.labels.at("nodevol.io/node"), "true");
  EXPECT_EQ(n.capacity_annotations.size(), 1u);
  EXPECT_EQ(n.capacity_annotations.at("capacity.nodevol.io/fast"), "1024");
}

TEST(KubeNode, ANodeWithoutAddressesHasNone) {
  KubeNode n = DecodeNode(nlohmann::json::parse(R"({"metadata": {"name": "n2"}, "status": {"addresses": "x"}})"));
  EXPECT_EQ(n.name, "n2");
  EXPECT_EQ(n.internal_ip, "");
  EXPECT_EQ(n.Hostname(), "");
}

}  // namespace
}  // namespace nodevol::provisioner
