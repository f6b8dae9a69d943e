// Claim parameters: volume parameters that describe who a volume is for,
// not how to make it. The provisioner passes them with every CreateVolume
// (nodevol.io/pvc-namespace, pvc-name, pv-name, pvc-annotation.<key>,
// pvc-label.<key>, storage-class, reclaim-policy, provisioner); every backend
// accepts and records them (NFS path patterns render some), none acts on
// them. They let an operator and the provisioner's orphan sweep tell which
// claim a volume was made for after the fact.
#pragma once

#include <string>

#include "base/status.h"

namespace nodevol {

inline constexpr const char* kClaimParamPrefix = "nodevol.io/";

// True for the keys listed above.
bool IsClaimParam(const std::string& key);

// The list above, for error messages.
const char* ClaimParamList();

// InvalidArgument unless the claim parameter key's <key> part is a
// Kubernetes-style key ([A-Za-z0-9._/-], at most 316 bytes) and its value
// is valid UTF-8 of at most 4096 bytes with no C0 control (tab and newline
// included), DEL or C1 control (U+0080..U+009F). Values come from pod
// authors and end up in records, paths and operators' terminals. The
// message never contains the value itself.
Status CheckClaimParam(const std::string& key, const std::string& value);

}  // namespace nodevol
