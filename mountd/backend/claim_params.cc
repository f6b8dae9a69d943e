#include "backend/claim_params.h"

namespace nodevol {

bool IsClaimParam(const std::string& k) {
  auto starts = [&](const char* p) { return k.rfind(p, 0) == 0 && k.size() > std::char_traits<char>::length(p); };
  return k == "nodevol.io/pvc-namespace" || k == "nodevol.io/pvc-name" || k == "nodevol.io/pv-name" ||
         k == "nodevol.io/storage-class" || k == "nodevol.io/reclaim-policy" || k == "nodevol.io/provisioner" ||
         starts("nodevol.io/pvc-annotation.") || starts("nodevol.io/pvc-label.");
}

const char* ClaimParamList() {
  return "nodevol.io/pvc-namespace, nodevol.io/pvc-name, nodevol.io/pv-name, nodevol.io/pvc-annotation.KEY, "
         "nodevol.io/pvc-label.KEY, nodevol.io/storage-class, nodevol.io/reclaim-policy, nodevol.io/provisioner";
}

}  // namespace nodevol
