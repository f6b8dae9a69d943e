// kube-scheduler's ExtenderArgs as the extender decodes them (provisioner/
// extender/args.h): a body from the network. Refused with a reason or
// decoded, within the documented bounds.
#include "extender/args.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nodevol::provisioner::ExtenderArgs a;
  nodevol::Status st =
      nodevol::provisioner::DecodeExtenderArgs(std::string_view(reinterpret_cast<const char*>(data), size), &a);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "refused args without a reason");
  if (st.ok()) {
    FUZZ_CHECK(a.node_names.size() <= nodevol::provisioner::kMaxExtenderNodes, "more nodes than the bound");
    for (size_t i = 0; i < a.claim_names.size(); ++i)
      for (size_t j = i + 1; j < a.claim_names.size(); ++j)
        FUZZ_CHECK(a.claim_names[i] != a.claim_names[j], "a claim name repeated");
  }
  return 0;
}
