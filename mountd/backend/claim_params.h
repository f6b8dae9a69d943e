// Claim parameters: volume parameters that describe who a volume is for,
// not how to make it. The provisioner passes them with every CreateVolume
// (nodevol.io/pvc-namespace, pvc-name, pv-name, pvc-annotation.<key>,
// pvc-label.<key>, storage-class, reclaim-policy, provisioner); every backend
// accepts and records them (NFS path patterns render some), none acts on
// them. They let an operator and the provisioner's orphan sweep tell which
// claim a volume was made for after the fact.
#pragma once

#include <string>

namespace nodevol {

inline constexpr const char* kClaimParamPrefix = "nodevol.io/";

// True for the keys listed above.
bool IsClaimParam(const std::string& key);

// The list above, for error messages.
const char* ClaimParamList();

}  // namespace nodevol
