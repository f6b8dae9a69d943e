// Validation of names that end up in file names, paths and LVM names.
// Every check returns INVALID_ARGUMENT with a message that says the rule.
#pragma once

#include <string_view>

#include "base/status.h"

namespace nodevol {

// Volume names: 1-200 characters of [A-Za-z0-9._-], first one a letter or
// digit. Fits Kubernetes PV names ("pvc-<uid>") and file names with room
// for suffixes; rules out "/", NUL, "." and "..".
Status ValidateVolumeName(std::string_view name);
// Snapshot names: the same rule ("snapshot name ..." in messages).
Status ValidateSnapshotName(std::string_view name);

// Pool names: 1-63 characters of [a-z0-9-], first one a letter or digit.
Status ValidatePoolName(std::string_view name);

// The name a node's serving certificate is checked for (TLS server name):
// FAILED_PRECONDITION when it is an IP address literal ("10.0.0.5",
// "fd00::1"). TLS checks such a name against the certificate's IP
// addresses, and a node's addresses are what the node itself reports, so a
// node named like an address could be answered for by any node that lists
// that address (issue 57, item 6). nodevol verifies nodes by DNS name
// only: the signer (so such a node never enrolls), the provisioner's
// dialling and nodevolctl refuse such names with this message.
Status CheckNodeIdentityName(std::string_view name);

// One spelling per IP address ("FD00::1", "fd00:0::1" and "fd00::1" are
// one address; inet_ntop's form): "" when `text` is no address. Addresses
// are compared only so, never as the text someone wrote.
std::string CanonicalIp(std::string_view text);

}  // namespace nodevol
