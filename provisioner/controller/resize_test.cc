#include "controller/resize.h"

#include <gtest/gtest.h>

#include "controller/fakes_test.h"
#include "controller/names.h"

namespace nodevol::provisioner {
namespace {

using namespace testing;  // NOLINT: the controller's fakes
using nlohmann::json;

json CsiPv(const std::string& uid, const std::string& size) {
  return {{"kind", "PersistentVolume"},
          {"apiVersion", "v1"},
          {"metadata", {{"name", "pvc-" + uid}, {"resourceVersion", "9"},
                        {"annotations", {{kAnnProvisionedBy, kProvisionerName}, {kAnnNode, "n1"}, {kAnnPool, "fast"},
                                         {kAnnBackend, "dir"}}}}},
          {"spec", {{"capacity", {{"storage", size}}},
                    {"csi", {{"driver", kProvisionerName}, {"volumeHandle", "pvc-" + uid}}},
                    {"claimRef", {{"namespace", "app"}, {"name", "data-" + uid}, {"uid", uid}}}}}};
}

json BoundTo(json claim, const std::string& phase, const std::string& capacity) {
  claim["spec"]["volumeName"] = "pvc-" + claim["metadata"]["uid"].get<std::string>();
  claim["status"] = {{"phase", phase}};
  if (!capacity.empty()) claim["status"]["capacity"] = {{"storage", capacity}};
  return claim;
}

int StatusPatches(FakeApi& api) {
  int n = 0;
  for (const auto& c : api.Calls())
    if (c.path.size() > 7 && c.path.compare(c.path.size() - 7, 7, "/status") == 0) ++n;
  return n;
}

TEST(Resize, AClaimBeingBoundIsLeftToThePvController) {
  // volumeName set, phase not yet Bound, no capacity: the PV controller's
  // next write sets both; a status patch here made that write conflict.
  World w;
  w.Load({BoundTo(Claim("u1"), "Pending", "")}, {CsiPv("u1", "1Gi")});
  EXPECT_EQ(ResizeClaim(w.ctx, "app/data-u1"), Workers::Outcome::kDone);
  EXPECT_EQ(StatusPatches(w.api), 0);
}

TEST(Resize, ABoundClaimBehindItsGrownPvGetsTheNewCapacity) {
  // A resize whose PV grew before a restart: the claim still says 1Gi.
  World w;
  w.Load({BoundTo(Claim("u2", "2Gi"), "Bound", "1Gi")}, {CsiPv("u2", "2Gi")});
  EXPECT_EQ(ResizeClaim(w.ctx, "app/data-u2"), Workers::Outcome::kDone);
  ASSERT_EQ(StatusPatches(w.api), 1);
  EXPECT_EQ(w.api.Object("/api/v1/namespaces/app/persistentvolumeclaims/data-u2")["status"]["capacity"]["storage"],
            "2Gi");
}

}  // namespace
}  // namespace nodevol::provisioner
