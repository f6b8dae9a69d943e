// Capacity of an LVM pool, computed from one lvm report (pure, so every
// case is unit-tested without a disk).
//
// thick: total = VG size - spare, free = VG free - spare.
// thin:  total = thin pool size x overprovision.
//        free  = the smaller of
//                - total minus the virtual sizes of every thin LV in the
//                  pool (promised space), and
//                - (pool data not yet used - spare) x overprovision (real
//                  space: a pool filling up must stop taking promises
//                  before it runs out, whatever the ratio allows);
//        and 0 once metadata is kMetadataFullPercent used: a thin pool out
//        of metadata fails every writer, so it takes nothing more.
#pragma once

#include "backend/backend.h"
#include "backend/lvm/pool_options.h"
#include "backend/lvm/report.h"

namespace nodevol {

inline constexpr double kMetadataFullPercent = 90.0;

// FAILED_PRECONDITION when the VG or thin pool is missing from the report.
Status ComputeLvmCapacity(const LvmPoolOptions& pool, const LvmReport& report, Capacity* out);

// `bytes` rounded up to a whole number of the VG's extents.
uint64_t RoundToExtents(uint64_t bytes, uint64_t extent_size);

}  // namespace nodevol
