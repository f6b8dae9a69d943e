// LvmReport: what `lvm fullreport` says about volume groups, physical
// volumes and logical volumes, read from its JSON in one call rather than
// one command per question. FullReportArgs() is the exact invocation
// (sizes in bytes, only the columns read here) and ParseFullReport its
// parser; every value arrives as a string there.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace nodevol {

// Tags on every LV nodevold makes: kManagedTag, and the volume's (or the
// snapshot's) name. Nothing without kManagedTag is ever changed.
inline constexpr const char* kManagedTag = "nodevol.io/managed";
inline constexpr const char* kVolumeTagPrefix = "nodevol.io/volume=";
inline constexpr const char* kSnapshotTagPrefix = "nodevol.io/snapshot=";
// The pool an LV belongs to (pools may share a volume group).
inline constexpr const char* kPoolTagPrefix = "nodevol.io/pool=";
// A scratch LV zeroing the extents a volume grows onto (lvm_backend.h).
inline constexpr const char* kGrowTagPrefix = "nodevol.io/grow-of=";

struct LvmVg {
  std::string name, uuid;
  uint64_t size = 0, free = 0, extent_size = 0;
  std::vector<std::string> tags;
  uint64_t missing_pvs = 0;  // PVs its metadata names that lvm cannot find

  bool HasTag(std::string_view tag) const;
};

struct LvmPv {
  std::string name, vg;  // vg "" for a PV in no VG
  uint64_t size = 0, free = 0;
};

struct LvmLv {
  std::string name, vg, uuid, path, attr, pool_lv;
  std::string origin;                             // snapshots: the LV they are of
  uint64_t size = 0, metadata_size = 0;
  int64_t created_unix = 0;                       // lv_time, seconds since the epoch
  double data_percent = 0, metadata_percent = 0;  // thin pools and thin volumes
  std::vector<std::string> tags;
  int kernel_major = -1, kernel_minor = -1;       // -1 when not active
  // A thin pool that takes no new volume as device-mapper reports it
  // (failed, read-only): why, for the capacity; empty when healthy or
  // unknown (lvm.h OverlayThinUsage).
  std::string fault;

  bool thin_pool() const { return !attr.empty() && attr[0] == 't'; }
  bool thin_volume() const { return !attr.empty() && attr[0] == 'V'; }
  bool active() const { return attr.size() > 4 && attr[4] == 'a'; }
  // Its device-mapper device is suspended, or has no live table: what an
  // lvm command killed between its suspend and its resume leaves, and on
  // which every I/O (a mount) waits forever. lv_attr's state: (s)uspended,
  // suspended snapshot (S), suspended merge-failed snapshot (M), suspended
  // thin pool needing a check (C), (i)nactive table, (d)evice without a
  // table.
  bool needs_refresh() const {
    return attr.size() > 4 && std::string_view("sSMCid").find(attr[4]) != std::string_view::npos;
  }
  bool HasTag(std::string_view tag) const;
};

struct LvmReport {
  std::vector<LvmVg> vgs;
  std::vector<LvmPv> pvs;
  std::vector<LvmLv> lvs;

  const LvmVg* FindVg(std::string_view name) const;
  const LvmLv* FindLv(std::string_view vg, std::string_view name) const;
  // The same, to change the report (Lvm follows its own commands so).
  LvmVg* FindVg(std::string_view name) {
    return const_cast<LvmVg*>(static_cast<const LvmReport*>(this)->FindVg(name));
  }
  LvmLv* FindLv(std::string_view vg, std::string_view name) {
    return const_cast<LvmLv*>(static_cast<const LvmReport*>(this)->FindLv(vg, name));
  }
  // What removing `lv` would take along or break: its snapshots (thin or
  // thick) and a cache or writecache attached to it. Empty when nothing.
  // Thin snapshots nodevold made (kManagedTag) are not counted: in a thin
  // pool a snapshot shares blocks with its origin but does not need it,
  // and lvremove of the origin leaves it whole.
  std::vector<std::string> DependentsOf(const LvmLv& lv) const;
};

// Arguments after the lvm binary for the report ParseFullReport reads.
std::vector<std::string> FullReportArgs();

// INTERNAL with the reason when the JSON is not a fullreport.
Status ParseFullReport(std::string_view json, LvmReport* out);

}  // namespace nodevol
