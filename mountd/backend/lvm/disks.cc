// Disk rules, the selection of disks for a volume group, and setting the
// volume group up (disks.h). The udev side (ListDisks, DiskMonitor) is in
// disk_monitor.cc, the signature probe in signature.cc.
#include "backend/lvm/disks.h"

#include <fnmatch.h>
#include <glob.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <sstream>

#include "base/size.h"

namespace nodevol {
namespace {

// ---- rules ----

Status ParsePaths(const std::string& key, const std::string& value, std::vector<std::string>* out) {
  std::istringstream in(value);
  std::string word;
  while (in >> word) {
    if (word.front() != '/')
      return Status::InvalidArgument("pool option " + key + "=\"" + value + "\": \"" + word +
                                     "\" is not an absolute device path or glob (e.g. /dev/vdb or "
                                     "/dev/disk/by-id/nvme-*)");
    out->push_back(word);
  }
  if (out->empty())
    return Status::InvalidArgument("pool option " + key +
                                   " is empty: give one or more device paths or globs separated by spaces");
  return Status::Ok();
}

Status ParseSizeRange(const std::string& value, uint64_t* min, uint64_t* max) {
  const std::string bad = "pool option match-size=\"" + value + "\": ";
  size_t dash = value.find('-');
  if (dash == std::string::npos || value.find('-', dash + 1) != std::string::npos || value == "-")
    return Status::InvalidArgument(bad + "want MIN-MAX, MIN- or -MAX (e.g. 10G-2T, 100G-, -500G)");
  std::string lo = value.substr(0, dash), hi = value.substr(dash + 1);
  if (!lo.empty()) {
    auto v = ParseSize(lo);
    if (!v) return Status::InvalidArgument(bad + "minimum \"" + lo + "\" is not a size; " + std::string(kSizeForms));
    *min = *v;
  }
  if (!hi.empty()) {
    auto v = ParseSize(hi);
    if (!v) return Status::InvalidArgument(bad + "maximum \"" + hi + "\" is not a size; " + std::string(kSizeForms));
    *max = *v;
  }
  if (*min && *max && *min > *max)
    return Status::InvalidArgument(bad + "the minimum " + lo + " (" + FormatSize(*min) + ") is above the maximum " + hi +
                                   " (" + FormatSize(*max) + ")");
  return Status::Ok();
}

// A size in the operator's notation: "10G", "512Mi", else bytes.
std::string SizeText(uint64_t bytes) {
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"Ti", 1ULL << 40}, {"T", 1000ULL * 1000 * 1000 * 1000}, {"Gi", 1ULL << 30}, {"G", 1000ULL * 1000 * 1000},
      {"Mi", 1ULL << 20}, {"M", 1000ULL * 1000},               {"Ki", 1ULL << 10}, {"k", 1000ULL}};
  for (const auto& [unit, factor] : kUnits)
    if (bytes % factor == 0) return std::to_string(bytes / factor) + unit;
  return std::to_string(bytes);
}

bool HasMatchRules(const DiskRules& r) {
  return !r.model.empty() || !r.serial.empty() || r.min_size || r.max_size || r.rotational.has_value();
}

// The match-* rules as the operator wrote them, for reasons.
std::string MatchRulesText(const DiskRules& r) {
  std::vector<std::string> parts;
  if (!r.model.empty()) parts.push_back("match-model=" + r.model);
  if (!r.serial.empty()) parts.push_back("match-serial=" + r.serial);
  if (r.min_size || r.max_size)
    parts.push_back("match-size=" + (r.min_size ? SizeText(r.min_size) : "") + "-" +
                    (r.max_size ? SizeText(r.max_size) : ""));
  if (r.rotational) parts.push_back(std::string("match-rotational=") + (*r.rotational ? "1" : "0"));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

// Models come with spaces from sysfs ("QEMU HARDDISK") and with underscores
// from udev (ID_MODEL=QEMU_HARDDISK): the two spellings match alike.
bool ModelMatches(const std::string& glob, const std::string& model) {
  auto underscores = [](std::string s) {
    for (char& c : s)
      if (c == ' ') c = '_';
    return s;
  };
  return fnmatch(glob.c_str(), model.c_str(), 0) == 0 ||
         fnmatch(underscores(glob).c_str(), underscores(model).c_str(), 0) == 0;
}

// "" when the disk passes every match-* rule, else why not.
std::string MatchFailure(const DiskRules& r, const DiskInfo& d) {
  // A device without a model or serial never matches a rule on it, "*"
  // included: an operator's rule names disks it can identify.
  if (!r.model.empty() && (d.model.empty() || !ModelMatches(r.model, d.model)))
    return (d.model.empty() ? "no model known" : "model \"" + d.model + "\"") + " does not match match-model=" + r.model;
  if (!r.serial.empty() && (d.serial.empty() || fnmatch(r.serial.c_str(), d.serial.c_str(), 0) != 0))
    return (d.serial.empty() ? "no serial known" : "serial \"" + d.serial + "\"") +
           " does not match match-serial=" + r.serial;
  if (r.min_size && d.size < r.min_size)
    return "size " + FormatSize(d.size) + " is below the match-size minimum " + SizeText(r.min_size);
  if (r.max_size && d.size > r.max_size)
    return "size " + FormatSize(d.size) + " is above the match-size maximum " + SizeText(r.max_size);
  if (r.rotational && d.rotational != *r.rotational)
    return std::string(d.rotational ? "rotational" : "not rotational") + ", match-rotational=" +
           (*r.rotational ? "1" : "0");
  return "";
}

// ---- devices= and force= entries ----

// One devices= or force= entry and what it names on this machine: each
// path (the entry, or what its glob expands to) with its target resolved.
struct Entry {
  std::string text;
  struct Target {
    std::string real;  // realpath, "" if unresolvable
    dev_t rdev = 0;    // when a block device
  };
  std::vector<Target> targets;
};

bool IsGlob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<Entry> ResolveEntries(const std::vector<std::string>& texts) {
  std::vector<Entry> out;
  for (const auto& text : texts) {
    Entry e{text, {}};
    std::vector<std::string> paths;
    if (IsGlob(text)) {
      glob_t g{};
      if (glob(text.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) paths.push_back(g.gl_pathv[i]);
      globfree(&g);
    } else {
      paths.push_back(text);
    }
    for (const auto& p : paths) {
      Entry::Target t;
      char buf[PATH_MAX];
      if (realpath(p.c_str(), buf)) t.real = buf;
      struct stat st {};
      if (stat(p.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) t.rdev = st.st_rdev;
      if (!t.real.empty() || t.rdev) e.targets.push_back(t);
    }
    out.push_back(std::move(e));
  }
  return out;
}

// Whether the entry names the disk: by device number or resolved path on
// this machine, else as a pattern on the disk's /dev name and by-id links.
bool Names(const Entry& e, const DiskInfo& d) {
  for (const auto& t : e.targets) {
    if (t.rdev && d.devnum && t.rdev == d.devnum) return true;
    if (!t.real.empty() && t.real == d.devnode) return true;
  }
  if (fnmatch(e.text.c_str(), d.devnode.c_str(), FNM_PATHNAME) == 0) return true;
  for (const auto& l : d.links)
    if (fnmatch(e.text.c_str(), l.c_str(), FNM_PATHNAME) == 0) return true;
  return false;
}

const Entry* FirstNaming(const std::vector<Entry>& entries, const DiskInfo& d) {
  for (const auto& e : entries)
    if (Names(e, d)) return &e;
  return nullptr;
}

// The physical volume of `report` on this disk, if any.
const LvmPv* FindPv(const LvmReport& report, const DiskInfo& d) {
  for (const auto& pv : report.pvs) {
    if (pv.name == d.devnode) return &pv;
    for (const auto& l : d.links)
      if (pv.name == l) return &pv;
    struct stat st {};
    if (d.devnum && stat(pv.name.c_str(), &st) == 0 && S_ISBLK(st.st_mode) && st.st_rdev == d.devnum) return &pv;
  }
  return nullptr;
}

std::string Describe(const DiskInfo& d) {
  std::string s = d.devnode + " (";
  if (!d.serial.empty()) s += "serial " + d.serial + ", ";
  if (!d.model.empty()) s += "model " + d.model + ", ";
  s += FormatSize(d.size);
  if (d.partition) s += ", partition";
  return s + ")";
}

// What EnsureVolumeGroup logs at which level.
enum class Kind { kNotSelected, kMember, kTaken, kRefused };

struct Selection {
  std::vector<DiskDecision> decisions;
  std::vector<Kind> kinds;                  // one per decision
  std::vector<std::string> unused_devices;  // devices= entries that named no disk
};

Selection Select(const DiskRules& rules, const std::string& vg, const LvmReport& report,
                 const std::vector<DiskInfo>& disks, const SignatureProbe& probe) {
  Selection s;
  const std::vector<Entry> devices = ResolveEntries(rules.devices);
  const std::vector<Entry> force = ResolveEntries(rules.force);
  std::vector<bool> used(devices.size(), false);
  const bool match_rules = HasMatchRules(rules);
  const std::string not_added = "; not added to VG " + vg;

  for (const auto& d : disks) {
    DiskDecision dec{d, false, ""};
    Kind kind = Kind::kRefused;
    const std::string desc = Describe(d);

    // Selected by devices= or by the match-* rules (either suffices).
    const Entry* named = nullptr;
    for (size_t i = 0; i < devices.size(); ++i)
      if (Names(devices[i], d)) {
        used[i] = true;
        if (!named) named = &devices[i];
      }
    std::string miss = match_rules ? MatchFailure(rules, d) : "no match-* rule set";
    std::string selected_by;
    if (named) selected_by = "named in devices= (" + named->text + ")";
    if (match_rules && miss.empty())
      selected_by += (selected_by.empty() ? "" : " and ") + ("matched by " + MatchRulesText(rules));

    if (selected_by.empty()) {
      dec.reason = desc + ": not selected (" + miss + ")";
      kind = Kind::kNotSelected;
    } else if (const LvmPv* pv = FindPv(report, d); pv && pv->vg == vg) {
      dec.reason = desc + ": already a physical volume of VG " + vg;
      kind = Kind::kMember;
    } else if (pv && !pv->vg.empty()) {
      dec.reason = desc + ": " + selected_by + ", but it is a physical volume of VG " + pv->vg + not_added +
                   ", force= or not (to use it, free it first: vgreduce " + pv->vg + " " + d.devnode +
                   "; pvremove " + d.devnode + ")";
    } else if (d.read_only) {
      dec.reason = desc + ": " + selected_by + ", but it is read-only" + not_added;
    } else {
      std::string what;
      Status st = probe(d.devnode, &what);
      const Entry* forced = FirstNaming(force, d);
      if (!st.ok()) {
        dec.reason = desc + ": " + selected_by + ", but it cannot be checked for signatures (" + st.message() + ")" +
                     not_added;
      } else if (what.empty()) {
        dec.take = true;
        dec.reason = desc + ": blank, " + selected_by + "; taken for VG " + vg;
      } else if (what.rfind("LVM2_member", 0) == 0 && !pv) {
        // An LVM label lvm does not report (filtered, foreign or
        // incomplete VG): it may well belong to another volume group.
        dec.reason = desc + ": " + selected_by + ", but it carries an LVM label lvm does not report (" + what +
                     "; filtered by lvm.conf, or a foreign or incomplete VG?)" + not_added +
                     ", force= or not (check with pvs -a; pvremove it if it is unused)";
      } else {
        if (pv) what += ", a physical volume in no volume group";
        if (forced) {
          dec.take = true;
          dec.reason = desc + ": not blank (" + what + ") but listed in force= (" + forced->text + "), " +
                       selected_by + "; taken for VG " + vg + ", its contents will be lost";
        } else {
          dec.reason = desc + ": " + selected_by + ", but it is not blank (" + what + ")" + not_added +
                       " (list it in force= to override; its contents would be lost)";
        }
      }
      if (dec.take) kind = Kind::kTaken;
    }
    s.decisions.push_back(std::move(dec));
    s.kinds.push_back(kind);
  }
  for (size_t i = 0; i < devices.size(); ++i)
    if (!used[i]) s.unused_devices.push_back(devices[i].text);
  return s;
}

}  // namespace

bool DiskRules::empty() const { return devices.empty() && !HasMatchRules(*this); }

Status ParseDiskRules(const Params& options, DiskRules* out) {
  DiskRules r;
  for (const auto& [key, value] : options) {
    if (key == "devices") {
      NODEVOL_RETURN_IF_ERROR(ParsePaths(key, value, &r.devices));
    } else if (key == "force") {
      NODEVOL_RETURN_IF_ERROR(ParsePaths(key, value, &r.force));
    } else if (key == "match-model" || key == "match-serial") {
      if (value.empty())
        return Status::InvalidArgument("pool option " + key + " is empty: give a glob such as " +
                                       (key == "match-model" ? "\"Samsung SSD*\"" : "\"S4EVNX0N*\""));
      (key == "match-model" ? r.model : r.serial) = value;
    } else if (key == "match-size") {
      NODEVOL_RETURN_IF_ERROR(ParseSizeRange(value, &r.min_size, &r.max_size));
    } else if (key == "match-rotational") {
      if (value != "0" && value != "1")
        return Status::InvalidArgument("pool option match-rotational=\"" + value +
                                       "\": want 0 (SSD, NVMe, virtual disk) or 1 (spinning disk)");
      r.rotational = value == "1";
    }
  }
  if (!r.force.empty() && r.empty())
    return Status::InvalidArgument(
        "pool option force= selects nothing by itself: name the devices in devices= (or select them with a "
        "match-* rule) too; force= only lets a selected device that carries a signature be used");
  *out = std::move(r);
  return Status::Ok();
}

std::vector<DiskDecision> SelectDisks(const DiskRules& rules, const std::string& vg, const LvmReport& report,
                                      const std::vector<DiskInfo>& disks, const SignatureProbe& probe) {
  return Select(rules, vg, report, disks, probe).decisions;
}

Status EnsureVolumeGroup(Lvm* lvm, const std::string& vg, const DiskRules& rules, const SignatureProbe& probe) {
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm->Report(&report, /*fresh=*/true).WithContext("reading the LVM state"));
  const bool exists = report.FindVg(vg) != nullptr;
  if (rules.empty()) {
    if (exists) return Status::Ok();
    return Status::FailedPrecondition("volume group " + vg + " does not exist: create it (vgcreate " + vg +
                                      " DEVICE...), or give the pool devices= or match-* options so nodevold "
                                      "creates it from blank disks");
  }
  std::vector<DiskInfo> disks;
  NODEVOL_RETURN_IF_ERROR(ListDisks(&disks).WithContext("listing block devices"));
  Selection s = Select(rules, vg, report, disks, probe);

  for (const auto& e : s.unused_devices)
    spdlog::warn("VG {}: devices= entry {} names no usable block device now (device-mapper, loop, ram and zram "
                 "devices and empty drives are never used)",
                 vg, e);
  std::vector<std::string> take;
  std::string refused;
  for (size_t i = 0; i < s.decisions.size(); ++i) {
    const DiskDecision& d = s.decisions[i];
    switch (s.kinds[i]) {
      case Kind::kTaken:
        spdlog::info("VG {}: {}", vg, d.reason);
        take.push_back(d.disk.devnode);
        break;
      case Kind::kMember:
        spdlog::info("VG {}: {}", vg, d.reason);
        break;
      case Kind::kRefused:
        spdlog::warn("VG {}: {}", vg, d.reason);
        refused += (refused.empty() ? "" : "; ") + d.reason;
        break;
      case Kind::kNotSelected:
        spdlog::debug("VG {}: {}", vg, d.reason);
        break;
    }
  }
  if (take.empty()) {
    if (exists) return Status::Ok();
    std::string selection = MatchRulesText(rules);
    for (const auto& e : rules.devices) selection += (selection.empty() ? "devices=" : " devices=") + e;
    return Status::FailedPrecondition("volume group " + vg + " does not exist and no disk qualifies to create it (" +
                                      (refused.empty() ? "no block device is selected by " + selection : refused) +
                                      ")");
  }
  std::string list;
  for (const auto& t : take) list += (list.empty() ? "" : " ") + t;
  if (!exists) {
    spdlog::info("VG {}: creating it from {}", vg, list);
    return lvm->CreateVg(vg, take).WithContext("creating volume group " + vg + " from " + list);
  }
  spdlog::info("VG {}: adding {}", vg, list);
  return lvm->ExtendVg(vg, take).WithContext("adding " + list + " to volume group " + vg);
}

}  // namespace nodevol
