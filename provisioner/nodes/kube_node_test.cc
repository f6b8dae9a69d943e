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

TEST(KubeNode, DialsTheAnnouncedEndpointOnlyOnItsOwnAddresses) {
  KubeNode n = DecodeNode(nlohmann::json::parse(R"({"metadata": {"name": "n1",
      "annotations": {"nodevol.io/endpoint": "10.0.0.8:19809"}},
      "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                               {"type": "InternalIP", "address": "10.0.0.8"},
                               {"type": "InternalIP", "address": "fd00::7"},
                               {"type": "ExternalIP", "address": "203.0.113.9"}]}})"));
  EXPECT_EQ(n.endpoint, "10.0.0.8:19809");
  std::string ignored;
  EXPECT_EQ(DialAddress(n, 9809, &ignored), "10.0.0.8:19809");
  EXPECT_EQ(ignored, "");
  n.endpoint = "[fd00::7]:9000";
  EXPECT_EQ(DialAddress(n, 9809, &ignored), "[fd00::7]:9000");

  // Another host, an external address, no port, a bad port: ignored, said why.
  for (const char* foreign : {"192.0.2.1:9809", "203.0.113.9:9809", "10.0.0.8", "10.0.0.8:0", "10.0.0.8:99999",
                              "10.0.0.8:98a", "evil.example.com:9809"}) {
    n.endpoint = foreign;
    EXPECT_EQ(DialAddress(n, 9809, &ignored), "10.0.0.7:9809") << foreign;
    EXPECT_NE(ignored.find(foreign), std::string::npos) << ignored;
  }
  // No announcement: the first InternalIP and the configured port.
  n.endpoint = "";
  EXPECT_EQ(DialAddress(n, 9809, &ignored), "10.0.0.7:9809");
  EXPECT_EQ(ignored, "");
  n.internal_ip.clear();
  EXPECT_EQ(DialAddress(n, 9809, &ignored), "");
}

}  // namespace
}  // namespace nodevol::provisioner
