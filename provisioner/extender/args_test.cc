#include "extender/args.h"

#include <gtest/gtest.h>

#include <random>

namespace nodevol::provisioner {
namespace {

// What kube-scheduler v1.37 sends with nodeCacheCapable: true (Go field
// names as keys; the Pod whole).
const char* kArgs = R"({"Pod":{"metadata":{"name":"web-0","namespace":"shop","uid":"u-1"},
  "spec":{"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data-web-0"}},
                     {"name":"cfg","configMap":{"name":"c"}},
                     {"name":"scratch","ephemeral":{"volumeClaimTemplate":{}}},
                     {"name":"again","persistentVolumeClaim":{"claimName":"data-web-0"}}]}},
  "Nodes":null,"NodeNames":["n1","n2"]})";

TEST(ExtenderArgs, DecodesThePodItsClaimsAndTheNodes) {
  ExtenderArgs a;
  ASSERT_TRUE(DecodeExtenderArgs(kArgs, &a).ok());
  EXPECT_EQ(a.pod_namespace, "shop");
  EXPECT_EQ(a.pod_name, "web-0");
  EXPECT_EQ(a.pod_uid, "u-1");
  EXPECT_EQ(a.claim_names, (std::vector<std::string>{"data-web-0", "web-0-scratch"}));
  EXPECT_TRUE(a.node_names_given);
  EXPECT_EQ(a.node_names, (std::vector<std::string>{"n1", "n2"}));
  // nodeCacheCapable: false sends whole Node objects instead.
  ASSERT_TRUE(DecodeExtenderArgs(R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},
      "Nodes":{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}})",
                                 &a)
                  .ok());
  EXPECT_FALSE(a.node_names_given);
  EXPECT_EQ(a.node_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(a.claim_names.empty());
}

TEST(ExtenderArgs, WhatIsNotReadIsSkippedAndALaterDuplicateWins) {
  // Fields the decoder does not read, however many, cost nothing to keep;
  // volumes that name no claim are dropped as they are read.
  std::string junk = "[";
  for (int i = 0; i < 10000; ++i) junk += R"({"a":[1,{"b":"c"}]},)";
  junk += "null]";
  std::string body = R"({"x":)" + junk + R"(,"Pod":{"metadata":{"name":"old","namespace":"n"}},
      "Pod":{"spec":{"volumes":[{},7,{"name":"cfg","configMap":{"name":"c"}},
                                 {"name":"d","persistentVolumeClaim":{"claimName":"c1","readOnly":true}}]},
             "metadata":{"namespace":"n","name":"p","labels":)" + junk + R"(}},
      "NodeNames":["gone"],"NodeNames":["n1"]})";
  ExtenderArgs a;
  Status st = DecodeExtenderArgs(body, &a);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(a.pod_name, "p");
  EXPECT_EQ(a.claim_names, (std::vector<std::string>{"c1"}));
  EXPECT_EQ(a.node_names, (std::vector<std::string>{"n1"}));
  // One name a Node item, the last one; a container among NodeNames is no name.
  ASSERT_TRUE(DecodeExtenderArgs(R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},
      "Nodes":{"items":[{"metadata":{"name":"a","name":"b"}},{"metadata":{"name":"x"},"metadata":{"name":"c"}}]}})",
                                 &a)
                  .ok());
  EXPECT_EQ(a.node_names, (std::vector<std::string>{"b", "c"}));
  EXPECT_FALSE(DecodeExtenderArgs(R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},"NodeNames":["n1",{}]})", &a).ok());
  EXPECT_FALSE(DecodeExtenderArgs(R"({"Pod":{"metadata":{"name":"p","namespace":{}}}})", &a).ok());
}

TEST(ExtenderArgs, BadInputIsInvalidArgumentNamingWhat) {
  struct Case {
    const char* body;
    const char* says;
  } cases[] = {
      {"", "not JSON"},
      {"{", "not JSON"},
      {"[]", "not a JSON object"},
      {"{}", "no Pod"},
      {R"({"Pod":1})", "no Pod"},
      {R"({"Pod":{}})", "no metadata"},
      {R"({"Pod":{"metadata":{"name":"p"}}})", "no name or namespace"},
      {R"({"Pod":{"metadata":{"name":"p","namespace":"n"},"spec":{"volumes":{}}}})", "not a list"},
      {R"({"Pod":{"metadata":{"name":"p","namespace":"n"},"spec":{"volumes":[{"persistentVolumeClaim":{}}]}}})",
       "no claimName"},
      {R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},"NodeNames":"n1"})", "NodeNames is not a list"},
      {R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},"NodeNames":[1]})", "non-name"},
      {R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},"NodeNames":[""]})", "non-name"},
      {R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},"Nodes":{"items":[{}]}})", "has no name"},
  };
  for (const auto& c : cases) {
    ExtenderArgs a;
    Status st = DecodeExtenderArgs(c.body, &a);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << c.body;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.body << ": " << st.message();
  }
}

TEST(ExtenderArgs, DeepNestingIsRefusedBeforeParsing) {
  std::string deep = R"({"Pod":{"metadata":{"name":"p","namespace":"n"}},"x":)" + std::string(200000, '[') +
                     std::string(200000, ']') + "}";
  ExtenderArgs a;
  Status st = DecodeExtenderArgs(deep, &a);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("nested deeper"), std::string::npos) << st.message();
  // Brackets inside strings are not nesting.
  std::string quoted = R"({"Pod":{"metadata":{"name":"[[[[","namespace":"n\"{{{{"}}})";
  EXPECT_TRUE(DecodeExtenderArgs(quoted, &a).ok());
  EXPECT_EQ(a.pod_namespace, "n\"{{{{");
}

// Fuzz-style: random byte flips, cuts, splices and insertions of a valid
// request never crash or throw, and never yield OK without a pod name.
TEST(ExtenderArgs, MutatedRequestsNeverCrash) {
  std::mt19937 rng(15);
  const std::string base = kArgs;
  const std::string tokens[] = {"{", "}", "[", "]", "\"", "\\", ",", ":", "null", "1e999", "-", "\xff", "\"Pod\"",
                                "\"NodeNames\"", "\"metadata\""};
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = static_cast<char>(rng() % 256); break;
        case 1: s.erase(at, rng() % 16); break;
        case 2: s.insert(at, tokens[rng() % std::size(tokens)]); break;
        case 3: s = s.substr(0, at); break;
      }
    }
    ExtenderArgs a;
    Status st;
    ASSERT_NO_THROW(st = DecodeExtenderArgs(s, &a)) << s;
    if (st.ok()) {
      ++ok;
      EXPECT_FALSE(a.pod_name.empty());
      EXPECT_FALSE(a.pod_namespace.empty());
    } else {
      EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    }
  }
  EXPECT_GT(ok, 0);  // some mutations stay valid: the decoder is not refusing everything
}

}  // namespace
}  // namespace nodevol::provisioner
