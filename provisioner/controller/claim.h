// ClaimView: the parts of a PersistentVolumeClaim the provisioner acts on,
// read from its JSON; the claim cache keeps these, not the objects. And
// ShouldProvision, the PV controller hand-over rules
// (provisioner-contract.md §1) deciding whether a claim is ours to
// provision now.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "controller/events.h"

namespace nodevol::provisioner {

struct ClaimView {
  // Why the claim cannot be provisioned as it is (INVALID_ARGUMENT naming
  // the field: no uid, a request that is not a quantity or is zero...).
  // The other fields hold what could be read.
  Status error;
  std::string ns, name, uid, resource_version;
  std::string class_name;  // the beta annotation wins over spec.storageClassName
  bool has_class = false;
  uint64_t request_bytes = 0;
  std::vector<std::string> access_modes;
  std::string volume_mode;  // "Filesystem" when unset
  std::string volume_name;  // spec.volumeName ("" = unbound)
  std::string selected_node;
  std::string provisioner;  // storage-provisioner annotation (GA, else beta)
  // For path patterns (${.PVC.annotations.<key>}). Without kubectl's
  // last-applied-configuration: a copy of the whole object, and no pattern's.
  std::map<std::string, std::string> annotations, labels;
  bool deleting = false;  // metadata.deletionTimestamp set
  // spec.dataSourceRef, else spec.dataSource (kind "" = none).
  struct DataSource {
    std::string kind, api_group, name, ns;
  } data_source;
  bool bound = false;              // status.phase is Bound
  uint64_t status_bytes = 0;       // status.capacity.storage (0: none)
  nlohmann::json conditions;       // status.conditions, null when none

  std::string Key() const { return ns + "/" + name; }
  // The PV this claim's volume gets: "pvc-<uid>".
  std::string PvName() const { return "pvc-" + uid; }
  ObjectRef Ref() const { return {"PersistentVolumeClaim", "v1", ns, name, uid, resource_version}; }
};

// Never fails: a malformed claim gets its reason in `error`.
ClaimView DecodeClaim(const nlohmann::json& pvc);
// DecodeClaim into *out; returns its `error`.
Status ParseClaim(const nlohmann::json& pvc, ClaimView* out);

enum class ClaimAction {
  kProvision,   // ours, now
  kIgnore,      // not ours or not yet (why in *reason)
};

// `binding_mode` of the claim's class ("Immediate" or "WaitForFirstConsumer").
ClaimAction ShouldProvision(const ClaimView& claim, const std::string& provisioner_name,
                            const std::string& binding_mode, std::string* reason);

}  // namespace nodevol::provisioner
