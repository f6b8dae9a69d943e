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

constexpr const char* kById = "/dev/disk/by-id/";

// force=/dev/disk/by-id/NAME:SIGNATURE ... A kernel name (/dev/sdb) is
// refused: after a renumbering or a disk swap it is another disk.
Status ParseForce(const std::string& value, std::vector<DiskRules::Force>* out) {
  std::istringstream in(value);
  std::string word;
  const std::string form = "; write force=/dev/disk/by-id/NAME:SIGNATURE (e.g. force=/dev/disk/by-id/"
                           "nvme-Samsung_SSD_980_S64DNX0R123:ext4), naming the disk by a stable link and the "
                           "signature it may carry";
  while (in >> word) {
    size_t colon = word.rfind(':');
    std::string path = colon == std::string::npos ? word : word.substr(0, colon);
    std::string sig = colon == std::string::npos ? "" : word.substr(colon + 1);
    if (path.rfind(kById, 0) != 0 || path.size() == std::string(kById).size())
      return Status::InvalidArgument("pool option force=\"" + value + "\": \"" + word +
                                     "\" is not a /dev/disk/by-id path (a kernel name like /dev/sdb can be another "
                                     "disk after a reboot)" + form);
    if (path.find_first_of("*?[") != std::string::npos)
      return Status::InvalidArgument("pool option force=\"" + value + "\": \"" + word +
                                     "\" is a glob; force= names single disks" + form);
    if (sig.empty() || sig.find_first_of("/ ") != std::string::npos)
      return Status::InvalidArgument("pool option force=\"" + value + "\": \"" + word +
                                     "\" does not say which signature it overrides" + form);
    out->push_back({path, sig});
  }
  if (out->empty())
    return Status::InvalidArgument("pool option force is empty: give one or more /dev/disk/by-id/NAME:SIGNATURE");
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
  bool glob = false;
  bool by_id = false;  // an exact /dev/disk/by-id path: it pins one disk
};

bool IsGlob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<Entry> ResolveEntries(const std::vector<std::string>& texts) {
  std::vector<Entry> out;
  for (const auto& text : texts) {
    Entry e{text, {}, IsGlob(text), false};
    e.by_id = !e.glob && text.rfind(kById, 0) == 0;
    std::vector<std::string> paths;
    if (e.glob) {
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

// The first word of each thing ProbeSignature found: "ext4 filesystem,
// dos partition table" -> {"ext4", "dos"}.
std::vector<std::string> SignatureKeys(const std::string& what) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (start < what.size()) {
    size_t comma = what.find(", ", start);
    std::string part = what.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    keys.push_back(part.substr(0, part.find(' ')));
    if (comma == std::string::npos) break;
    start = comma + 2;
  }
  return keys;
}

// The force= entry that lets this disk be taken despite `what`: it names
// the disk and `what` is exactly the signature it gives. Something using
// the disk ("in use by dm-0") or partitions the kernel knows are never
// forced.
const DiskRules::Force* ForceFor(const std::vector<DiskRules::Force>& force, const std::vector<Entry>& resolved,
                                 const DiskInfo& d, const std::string& what, std::string* mismatch) {
  for (size_t i = 0; i < force.size(); ++i) {
    if (!Names(resolved[i], d)) continue;
    for (const auto& key : SignatureKeys(what))
      if (key != force[i].signature) {
        *mismatch = "force= lists it (" + resolved[i].text + ") for signature " + force[i].signature + ", not " + key;
        return nullptr;
      }
    return &force[i];
  }
  return nullptr;
}

// What EnsureVolumeGroup logs at which level.
enum class Kind { kNotSelected, kMember, kTaken, kRefused };

struct Selection {
  std::vector<DiskDecision> decisions;
  std::vector<Kind> kinds;                  // one per decision
  std::vector<bool> forced;                 // one per decision: taken despite a signature
  std::vector<std::string> unused_devices;  // devices= entries that named no disk
};

Selection Select(const DiskRules& rules, const std::string& vg, const LvmReport& report,
                 const std::vector<DiskInfo>& disks, const SignatureProbe& probe) {
  Selection s;
  const std::vector<Entry> devices = ResolveEntries(rules.devices);
  std::vector<std::string> force_paths;
  for (const auto& f : rules.force) force_paths.push_back(f.path);
  const std::vector<Entry> force = ResolveEntries(force_paths);
  std::vector<bool> used(devices.size(), false);
  const bool match_rules = HasMatchRules(rules);
  const std::string not_added = "; not added to VG " + vg;
  const LvmVg* existing = report.FindVg(vg);

  for (const auto& d : disks) {
    DiskDecision dec{d, false, ""};
    Kind kind = Kind::kRefused;
    bool forced_take = false;
    const std::string desc = Describe(d);

    // Selected by devices= or by the match-* rules (either suffices). A
    // partition or a device of another driver is selected only by an
    // exact entry (a by-id one for the latter): a glob or a rule matches
    // what it was never meant to (a partition inherits its disk's model
    // and serial; a cloud or SAN volume looks like any disk).
    const Entry* named = nullptr;
    std::string named_loosely;
    for (size_t i = 0; i < devices.size(); ++i) {
      if (!Names(devices[i], d)) continue;
      used[i] = true;
      const bool exact_enough = d.foreign.empty() ? !(d.partition && devices[i].glob) : devices[i].by_id;
      if (!exact_enough) {
        if (named_loosely.empty()) named_loosely = devices[i].text;
      } else if (!named) {
        named = &devices[i];
      }
    }
    std::string miss = match_rules ? MatchFailure(rules, d) : "no match-* rule set";
    std::string selected_by;
    if (named) selected_by = "named in devices= (" + named->text + ")";
    const bool matched = match_rules && miss.empty() && !d.partition && d.foreign.empty();
    if (matched) selected_by += (selected_by.empty() ? "" : " and ") + ("matched by " + MatchRulesText(rules));
    // Pinned: the rule can only ever mean this disk.
    const bool pinned = (named && named->by_id) || (matched && !rules.serial.empty());

    if (selected_by.empty()) {
      if (!d.foreign.empty() && (!named_loosely.empty() || (match_rules && miss.empty()))) {
        dec.reason = desc + ": " + d.foreign + "; another driver or machine may own it, so only an exact " +
                     "/dev/disk/by-id path in devices= selects it" + not_added;
      } else if (d.partition && (!named_loosely.empty() || (match_rules && miss.empty()))) {
        dec.reason = desc + ": a partition is used only when devices= names it exactly (not by a glob or a match-* "
                            "rule)" + not_added;
      } else {
        dec.reason = desc + ": not selected (" + miss + ")";
        kind = Kind::kNotSelected;
      }
    } else if (const LvmPv* pv = FindPv(report, d); pv && pv->vg == vg) {
      dec.reason = desc + ": already a physical volume of VG " + vg;
      kind = Kind::kMember;
    } else if (pv && !pv->vg.empty()) {
      dec.reason = desc + ": " + selected_by + ", but it is a physical volume of VG " + pv->vg + not_added +
                   ", force= or not (to use it, free it first: vgreduce " + pv->vg + " " + d.devnode +
                   "; pvremove " + d.devnode + ")";
    } else if (d.read_only) {
      dec.reason = desc + ": " + selected_by + ", but it is read-only" + not_added;
    } else if (existing && !existing->HasTag(kManagedTag)) {
      dec.reason = desc + ": " + selected_by + ", but VG " + vg + " was not made by nodevold (no tag " + kManagedTag +
                   ")" + not_added + "; nodevold never extends a VG it did not make (vgextend it yourself)";
    } else if (existing && !pinned) {
      dec.reason = desc + ": " + selected_by + ", but VG " + vg + " exists and only disks pinned by match-serial= or "
                   "an exact /dev/disk/by-id path in devices= are added to it (a size, model, rotational or kernel-"
                   "name rule would take any disk attached later, another tenant's included)" + not_added;
    } else {
      std::string what;
      Status st = probe(d.devnode, &what);
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
        std::string mismatch;
        const DiskRules::Force* f = ForceFor(rules.force, force, d, what, &mismatch);
        if (pv) what += ", a physical volume in no volume group";
        if (f) {
          dec.take = forced_take = true;
          dec.reason = desc + ": not blank (" + what + ") but listed in force= (" + f->path + ":" + f->signature +
                       "), " + selected_by + "; taken for VG " + vg + ", its contents will be lost";
        } else {
          dec.reason = desc + ": " + selected_by + ", but it is not blank (" + what + ")" + not_added +
                       (mismatch.empty() ? " (list it in force= as /dev/disk/by-id/NAME:SIGNATURE to override; its "
                                           "contents would be lost)"
                                         : " (" + mismatch + ")");
        }
      }
      if (dec.take) kind = Kind::kTaken;
    }
    s.decisions.push_back(std::move(dec));
    s.kinds.push_back(kind);
    s.forced.push_back(forced_take);
  }
  for (size_t i = 0; i < devices.size(); ++i)
    if (!used[i]) s.unused_devices.push_back(devices[i].text);
  return s;
}

// Looks the taken disk up again right before lvm gets it: the same device
// (number, serial, size) and still what the selection saw (blank, or only
// its forced signature). *path: a by-id link to it when there is one, so
// lvm is not given a kernel name that could mean another disk by now.
Status Recheck(const DiskInfo& chosen, bool forced, const std::vector<DiskInfo>& now, const SignatureProbe& probe,
               std::string* path) {
  const DiskInfo* d = nullptr;
  for (const auto& n : now)
    if (n.devnum == chosen.devnum && n.devnode == chosen.devnode) d = &n;
  if (!d || d->serial != chosen.serial || d->size != chosen.size)
    return Status::Aborted(chosen.devnode + " changed since it was selected (gone, or another disk now)");
  *path = d->devnode;
  for (const auto& l : d->links) {
    struct stat st {};
    if (stat(l.c_str(), &st) == 0 && S_ISBLK(st.st_mode) && st.st_rdev == d->devnum) {
      *path = l;
      break;
    }
  }
  struct stat st {};
  if (stat(path->c_str(), &st) != 0 || !S_ISBLK(st.st_mode) || st.st_rdev != d->devnum)
    return Status::Aborted(*path + " is no longer the device selected");
  if (forced) return Status::Ok();  // lvm asks, and -y answers, for the signature force= names
  std::string what;
  NODEVOL_RETURN_IF_ERROR(probe(*path, &what));
  if (!what.empty()) return Status::Aborted(chosen.devnode + " is no longer blank (" + what + ")");
  return Status::Ok();
}

}  // namespace

bool DiskRules::empty() const { return devices.empty() && !HasMatchRules(*this); }

Status ParseDiskRules(const Params& options, DiskRules* out) {
  DiskRules r;
  for (const auto& [key, value] : options) {
    if (key == "devices") {
      NODEVOL_RETURN_IF_ERROR(ParsePaths(key, value, &r.devices));
    } else if (key == "force") {
      r.force.clear();
      NODEVOL_RETURN_IF_ERROR(ParseForce(value, &r.force));
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

Status EnsureVolumeGroup(Lvm* lvm, const std::string& vg, const DiskRules& rules, const SignatureProbe& probe,
                         const std::string& known_uuid) {
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm->Report(&report, /*fresh=*/true).WithContext("reading the LVM state"));
  const bool exists = report.FindVg(vg) != nullptr;
  if (rules.empty()) {
    if (exists) return Status::Ok();
    return Status::FailedPrecondition("volume group " + vg + " does not exist: create it (vgcreate " + vg +
                                      " DEVICE...), or give the pool devices= or match-* options so nodevold "
                                      "creates it from blank disks");
  }
  if (!exists && !known_uuid.empty())
    return Status::FailedPrecondition("volume group " + vg + " (UUID " + known_uuid +
                                      ") was here before and is not visible now (a disk missing or not up yet?): "
                                      "nodevold will not create another VG of that name; bring its disks back, or, "
                                      "if it is gone for good, remove the record of it in the state dir (lvm/" + vg +
                                      ".vg-uuid)");
  std::vector<DiskInfo> disks;
  NODEVOL_RETURN_IF_ERROR(ListDisks(&disks).WithContext("listing block devices"));
  Selection s = Select(rules, vg, report, disks, probe);

  for (const auto& e : s.unused_devices)
    spdlog::warn("VG {}: devices= entry {} names no usable block device now (device-mapper, loop, ram and zram "
                 "devices and empty drives are never used)",
                 vg, e);
  std::vector<size_t> take;
  std::string refused;
  for (size_t i = 0; i < s.decisions.size(); ++i) {
    const DiskDecision& d = s.decisions[i];
    switch (s.kinds[i]) {
      case Kind::kTaken:
        spdlog::info("VG {}: {}", vg, d.reason);
        take.push_back(i);
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
  // Between the selection and lvm a disk may have been swapped or written:
  // look again, and pass a stable name.
  std::vector<DiskInfo> now;
  NODEVOL_RETURN_IF_ERROR(ListDisks(&now).WithContext("listing block devices again"));
  std::vector<std::string> plain, forced;
  std::string list;
  for (size_t i : take) {
    std::string path;
    if (Status st = Recheck(s.decisions[i].disk, s.forced[i], now, probe, &path); !st.ok()) {
      spdlog::warn("VG {}: {}; not added", vg, st.message());
      continue;
    }
    (s.forced[i] ? forced : plain).push_back(path);
    list += (list.empty() ? "" : " ") + path;
  }
  if (list.empty()) return exists ? Status::Ok() : Status::Aborted("volume group " + vg + ": the disks selected changed; retrying at the next disk event or start");
  if (!exists) {
    spdlog::info("VG {}: creating it from {}", vg, list);
    return lvm->CreateVg(vg, plain, forced).WithContext("creating volume group " + vg + " from " + list);
  }
  spdlog::info("VG {}: adding {}", vg, list);
  return lvm->ExtendVg(vg, plain, forced).WithContext("adding " + list + " to volume group " + vg);
}

}  // namespace nodevol
