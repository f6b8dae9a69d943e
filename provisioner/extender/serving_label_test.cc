// The serving label is retried until the apiserver takes it: a standby
// whose one PATCH failed stayed behind the extender's Service, and
// kube-scheduler's calls reached a replica that does not serve.
#include "extender/serving_label.h"

#include <gtest/gtest.h>

#include "kube/fake_api.h"

namespace nodevol::provisioner {
namespace {

using kube::testing::FakeApi;
constexpr char kServingPod[] = "/api/v1/namespaces/nodevol-system/pods/prov-0";

TEST(ServingLabel, AFailedUnlabelIsRetriedUntilItIsGone) {
  FakeApi api;
  api.Put(kServingPod, {{"metadata", {{"name", "prov-0"}, {"labels", {{kServingLabel, kServingValue}}}}}});
  api.Script("PATCH", kServingPod, kube::Result::NetworkError("connection refused"));
  api.Script("PATCH", kServingPod, kube::Result::FromHttp(503, ""));
  int waits = 0;
  EXPECT_TRUE(MarkServingUntilDone(&api, "nodevol-system", "prov-0", false, [&](std::chrono::milliseconds) {
    ++waits;
    return true;
  }));
  EXPECT_EQ(waits, 2);
  EXPECT_EQ(api.Writes(kServingPod), 3);
  EXPECT_FALSE(api.Object(kServingPod)["metadata"]["labels"].contains(kServingLabel));
}

TEST(ServingLabel, GivingUpReturnsFalseWithTheLabelLeft) {
  FakeApi api;
  api.Put(kServingPod, {{"metadata", {{"name", "prov-0"}, {"labels", {{kServingLabel, kServingValue}}}}}});
  for (int i = 0; i < 5; ++i) api.Script("PATCH", kServingPod, kube::Result::NetworkError("connection refused"));
  int waits = 0;
  EXPECT_FALSE(MarkServingUntilDone(&api, "nodevol-system", "prov-0", false,
                                    [&](std::chrono::milliseconds) { return ++waits < 3; }));
  EXPECT_EQ(api.Writes(kServingPod), 3);
  EXPECT_TRUE(api.Object(kServingPod)["metadata"]["labels"].contains(kServingLabel));
}

}  // namespace
}  // namespace nodevol::provisioner
