// Path patterns: the directory of a subdirectory volume below its export,
// rendered from the claim the volume was made for.
//
// Variables (the spellings of nfs-subdir-external-provisioner and
// csi-driver-nfs are accepted, so a StorageClass moves over unchanged):
//   ${namespace}  ${.PVC.namespace}  ${pvc.metadata.namespace}  <- nodevol.io/pvc-namespace
//   ${pvcName}    ${.PVC.name}       ${pvc.metadata.name}       <- nodevol.io/pvc-name
//   ${pvName}     ${.PV.name}        ${pv.metadata.name}        <- nodevol.io/pv-name,
//                                                                  else the volume's name
//   ${.PVC.annotations.KEY}  <- nodevol.io/pvc-annotation.KEY
//   ${.PVC.labels.KEY}       <- nodevol.io/pvc-label.KEY
// (the right-hand side: the volume parameter the provisioner fills in).
// A '$' not followed by '{' is literal.
//
// Errors, all INVALID_ARGUMENT, decided before anything is written:
// - an unknown variable, naming it; an unterminated "${";
// - a variable whose parameter is missing (an absent annotation or label
//   is an error, not ""), naming the parameter;
// - a rendered path that could leave the export or is not a plain relative
//   path: "" , absolute ("/x"), a trailing '/', an empty segment ("a//b"),
//   a segment "." or ".." or containing "..", NUL or another control
//   character, a segment over 255 bytes, more than 1024 bytes in all, or a
//   segment starting with ".nodevol" (reserved).
// Values are checked after substitution, so an annotation holding "../x"
// or "/" cannot escape either; a value with '/' makes nested directories.
#pragma once

#include <string>

#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

inline constexpr const char* kDefaultPathPattern = "${namespace}-${pvcName}-${pvName}";

// Renders `pattern` with the claim identity in `params` (volume parameters)
// for volume `volume`; *out is a checked relative path.
Status RenderPathPattern(const std::string& pattern, const Params& params, const std::string& volume,
                         std::string* out);

// The checks above, for a relative path below an export.
Status CheckSubdirPath(const std::string& path);

}  // namespace nodevol
