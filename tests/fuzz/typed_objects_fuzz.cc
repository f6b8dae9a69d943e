// Claims, PersistentVolumes and Nodes as the provisioner's typed caches
// read them (DecodeClaim, DecodeVolume, DecodeNode): objects from the
// apiserver, partly shaped by whoever may write a claim or label a node.
// The first byte picks the decoder, the rest is the object's JSON.
// Properties: no exception escapes (the informer's decode runs on every
// watch event), decoding is a function of the object, and a claim is
// either refused with a reason or has a namespace, name, uid and a
// positive request; a node keeps only capacity annotations.
#include <nlohmann/json.hpp>

#include "controller/claim.h"
#include "controller/volume_view.h"
#include "nodes/kube_node.h"
#include "tests/fuzz/fuzz_util.h"

using nodevol::provisioner::ClaimView;

namespace {

bool SameClaim(const ClaimView& a, const ClaimView& b) {
  return a.error.code() == b.error.code() && a.ns == b.ns && a.name == b.name && a.uid == b.uid &&
         a.request_bytes == b.request_bytes && a.class_name == b.class_name && a.access_modes == b.access_modes &&
         a.annotations == b.annotations && a.selected_node == b.selected_node;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t kind = data[0] % 3;
  // The watch decoder hands on whatever nlohmann parses; so does this.
  nlohmann::json obj = nlohmann::json::parse(data + 1, data + size, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) return 0;
  if (kind == 0) {
    ClaimView c = nodevol::provisioner::DecodeClaim(obj);
    FUZZ_CHECK(SameClaim(c, nodevol::provisioner::DecodeClaim(obj)), "a claim decoded twice differs");
    if (c.error.ok()) {
      FUZZ_CHECK(!c.ns.empty() && !c.name.empty() && !c.uid.empty(), "a claim without its names accepted");
      FUZZ_CHECK(c.request_bytes > 0, "a claim requesting nothing accepted");
      FUZZ_CHECK(!c.volume_mode.empty(), "a claim without a volume mode");
    } else {
      FUZZ_CHECK(!c.error.message().empty(), "a claim refused without a reason");
    }
    FUZZ_CHECK(!c.annotations.count("kubectl.kubernetes.io/last-applied-configuration"),
               "the last-applied copy kept in the cache");
  } else if (kind == 1) {
    auto v = nodevol::provisioner::DecodeVolume(obj);
    auto w = nodevol::provisioner::DecodeVolume(obj);
    FUZZ_CHECK(v.name == w.name && v.capacity_bytes == w.capacity_bytes && v.node == w.node && v.claim_uid == w.claim_uid,
               "a PV decoded twice differs");
  } else {
    auto n = nodevol::provisioner::DecodeNode(obj);
    for (const auto& [key, value] : n.capacity_annotations)
      FUZZ_CHECK(key.rfind("capacity.nodevol.io/", 0) == 0, "a node annotation outside capacity.nodevol.io/ kept");
    FUZZ_CHECK(n.Hostname() == nodevol::provisioner::DecodeNode(obj).Hostname(), "a node decoded twice differs");
  }
  return 0;
}
