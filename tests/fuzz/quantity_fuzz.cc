// Kubernetes quantities from claims and classes (provisioner/kube/
// quantity.h). Properties: a refusal says why; a size that converts to
// bytes formats to a quantity that parses back to the same bytes.
#include "kube/quantity.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  nodevol::kube::Quantity q;
  nodevol::Status st = nodevol::kube::Quantity::Parse(text, &q);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "a refused quantity without a reason");
  if (!st.ok()) return 0;
  uint64_t bytes = 0;
  if (!q.ToBytes(&bytes).ok()) return 0;
  std::string formatted = nodevol::kube::FormatBinaryBytes(bytes);
  nodevol::kube::Quantity back;
  FUZZ_CHECK(nodevol::kube::Quantity::Parse(formatted, &back).ok(), "a formatted size does not parse");
  uint64_t again = 0;
  FUZZ_CHECK(back.ToBytes(&again).ok() && again == bytes, "a formatted size parses to other bytes");
  FUZZ_CHECK(nodevol::kube::Quantity::FromBytes(bytes).ToBytes(&again).ok() && again == bytes,
             "FromBytes does not give its bytes back");
  return 0;
}
