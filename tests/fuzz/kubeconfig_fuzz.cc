// A kubeconfig (provisioner/kube/config.h): YAML an operator writes.
// Parsed or refused with a reason, never a crash or an exception.
#include "kube/config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nodevol::fuzz::MemFile file(data, size);
  nodevol::kube::Config c;
  nodevol::Status st = nodevol::kube::LoadKubeconfig({file.path()}, "", &c);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "a refused kubeconfig without a reason");
  if (st.ok()) FUZZ_CHECK(!c.server.empty(), "an accepted kubeconfig without a server");
  return 0;
}
