// ClaimView: the parts of a PersistentVolumeClaim the provisioner acts on,
// read from its JSON; and ShouldProvision, the PV controller hand-over
// rules (provisioner-contract.md §1) deciding whether a claim is ours to
// provision now.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace nodevol::provisioner {

struct ClaimView {
  std::string ns, name, uid, resource_version;
  std::string class_name;  // the beta annotation wins over spec.storageClassName
  bool has_class = false;
  uint64_t request_bytes = 0;
  std::vector<std::string> access_modes;
  std::string volume_mode;  // "Filesystem" when unset
  std::string volume_name;  // spec.volumeName ("" = unbound)
  std::string selected_node;
  std::string provisioner;  // storage-provisioner annotation (GA, else beta)
  std::map<std::string, std::string> annotations, labels;
  bool deleting = false;  // metadata.deletionTimestamp set

  std::string Key() const { return ns + "/" + name; }
  // The PV this claim's volume gets: "pvc-<uid>".
  std::string PvName() const { return "pvc-" + uid; }
};

// INVALID_ARGUMENT naming the field when the claim is malformed (no uid, a
// request that is not a quantity or is zero...).
Status ParseClaim(const nlohmann::json& pvc, ClaimView* out);

enum class ClaimAction {
  kProvision,   // ours, now
  kIgnore,      // not ours or not yet (why in *reason)
};

// `binding_mode` of the claim's class ("Immediate" or "WaitForFirstConsumer").
ClaimAction ShouldProvision(const ClaimView& claim, const std::string& provisioner_name,
                            const std::string& binding_mode, std::string* reason);

}  // namespace nodevol::provisioner
