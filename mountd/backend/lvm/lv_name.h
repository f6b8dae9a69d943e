// LVM names: the rules lvm enforces on VG and LV names, and the LV name
// nodevold gives each volume.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace nodevol {

// 1-127 characters of [A-Za-z0-9+_.-], not starting with '-', not "." or
// "..", no reserved lvm suffix (_tdata, _rimage, ...). INVALID_ARGUMENT
// naming `what` otherwise.
Status ValidateLvmName(std::string_view what, std::string_view name);

// The LV of volume `volume` (a valid volume name): "nv-<volume>" when that
// is short (<= 67 characters: the device-mapper name doubles dashes and
// must stay under 128) and a valid LV name; otherwise "nv-", the first 40
// characters and 16 hex digits of the name's SHA-256. The LV's tag carries
// the full volume name either way, so nothing depends on reversing this.
std::string LvNameFor(std::string_view volume);
// The LV of snapshot `snapshot`: the same rule with "nvs-", which no
// volume's LV name ("nv-...") starts with.
std::string SnapshotLvNameFor(std::string_view snapshot);
// The scratch LV that zeroes the extents volume `volume` grows onto
// (LvmBackend::Expand of a raw block volume): "nvg-", the same rule.
std::string GrowLvNameFor(std::string_view volume);

}  // namespace nodevol
