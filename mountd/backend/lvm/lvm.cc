#include "backend/lvm/lvm.h"

namespace nodevol {
namespace {

std::string Bytes(uint64_t bytes) { return std::to_string(bytes) + "b"; }

}  // namespace

Lvm::Lvm(std::string binary, bool udev, Runner runner) : binary_(std::move(binary)), runner_(std::move(runner)) {
  if (!runner_) runner_ = RunChecked;
  options_.timeout = std::chrono::minutes(2);
  if (!udev) options_.env.push_back("DM_DISABLE_UDEV=1");
}

uint64_t Lvm::commands_run() const {
  std::lock_guard<std::mutex> l(mu_);
  return commands_;
}

Status Lvm::Command(std::vector<std::string> args, RunResult* result) {
  args.insert(args.begin(), binary_);
  RunResult local;
  bool changes = args[1] != "fullreport";  // anything else may change state
  {
    std::lock_guard<std::mutex> l(mu_);
    ++commands_;
    if (changes) {
      cache_.reset();
      ++changes_;
    }
  }
  Status st = runner_(args, options_, result ? result : &local);
  if (changes) {
    // Again: a report taken while the command ran may predate its change.
    std::lock_guard<std::mutex> l(mu_);
    cache_.reset();
    ++changes_;
  }
  return st.WithContext(args[1]);
}

Status Lvm::Report(LvmReport* out, bool fresh) {
  return Report(out, fresh ? std::chrono::milliseconds(0) : std::chrono::milliseconds::max());
}

Status Lvm::Report(LvmReport* out, std::chrono::milliseconds max_age) {
  uint64_t changes_before = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    // (max() is special: in nanoseconds it would overflow.)
    if (cache_ && (max_age == std::chrono::milliseconds::max() ||
                   std::chrono::steady_clock::now() - cache_time_ < max_age)) {
      *out = *cache_;
      return Status::Ok();
    }
    changes_before = changes_;
  }
  RunResult r;
  NODEVOL_RETURN_IF_ERROR(Command(FullReportArgs(), &r));
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(ParseFullReport(r.out, &report));
  std::lock_guard<std::mutex> l(mu_);
  if (changes_ == changes_before) {  // else it may predate a change: do not cache
    cache_ = report;
    cache_time_ = std::chrono::steady_clock::now();
  }
  *out = std::move(report);
  return Status::Ok();
}

Status Lvm::CreateThick(const std::string& vg, const std::string& lv, const std::string& volume, uint64_t bytes,
                        const std::vector<std::string>& extra_args) {
  // -Wy -Zy: wipe old signatures and zero the start, so a new volume never
  // shows a previous tenant's filesystem; -y answers lvm's questions.
  std::vector<std::string> args = {"lvcreate", "-y",      "-Wy",         "-Zy", "-n",
                                   lv,         "-L",      Bytes(bytes), "--addtag", kManagedTag,
                                   "--addtag", kVolumeTagPrefix + volume};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back(vg);
  return Command(std::move(args));
}

Status Lvm::CreateThin(const std::string& vg, const std::string& pool, const std::string& lv,
                       const std::string& volume, uint64_t bytes, const std::vector<std::string>& extra_args) {
  // Thin LVs read as zeros where never written: nothing to wipe.
  std::vector<std::string> args = {"lvcreate", "-y", "-n",       lv,          "-V",
                                   Bytes(bytes), "--thinpool", vg + "/" + pool, "--addtag", kManagedTag,
                                   "--addtag", kVolumeTagPrefix + volume};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return Command(std::move(args));
}

Status MapLvmNoSpace(Status st) {
  if (!st.ok() && st.message().find("nsufficient") != std::string::npos)
    return Status::ResourceExhausted(st.message());
  return st;
}

Status Lvm::CreateSnapshot(const std::string& vg, const std::string& origin, const std::string& lv,
                           const std::vector<std::string>& tags, bool activatable) {
  // No size: a thin snapshot, sharing the origin's blocks in its pool.
  std::vector<std::string> args = {"lvcreate", "-y", "-s", "-n", lv, "-k", activatable ? "n" : "y",
                                   "--addtag", kManagedTag};
  for (const std::string& t : tags) args.insert(args.end(), {"--addtag", t});
  args.push_back(vg + "/" + origin);
  return Command(std::move(args));
}

Status Lvm::CheckOwned(const std::string& vg, const std::string& lv) {
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(Report(&report));
  const LvmLv* found = report.FindLv(vg, lv);
  if (!found) return Status::NotFound("logical volume " + vg + "/" + lv + " does not exist");
  if (!found->HasTag(kManagedTag))
    return Status::FailedPrecondition("logical volume " + vg + "/" + lv + " lacks the tag " + kManagedTag +
                                      ": nodevold did not create it and will not change it");
  return Status::Ok();
}

Status Lvm::Extend(const std::string& vg, const std::string& lv, uint64_t bytes) {
  NODEVOL_RETURN_IF_ERROR(CheckOwned(vg, lv));
  return Command({"lvextend", "-L", Bytes(bytes), vg + "/" + lv});
}

Status Lvm::Remove(const std::string& vg, const std::string& lv, const std::string& uuid) {
  LvmReport report;
  // Any lvm command of ours drops the cache, so this is either a report
  // taken within the last seconds with nothing changed by us since, or a
  // new one. (A second fullreport right after the delete's own made every
  // delete pay two: lvm_bench, +650 ms per delete under TCG.)
  NODEVOL_RETURN_IF_ERROR(Report(&report, std::chrono::milliseconds(kRemoveReportAge)));
  const LvmLv* found = report.FindLv(vg, lv);
  if (!found) return Status::NotFound("logical volume " + vg + "/" + lv + " does not exist");
  if (!found->HasTag(kManagedTag))
    return Status::FailedPrecondition("logical volume " + vg + "/" + lv + " lacks the tag " + kManagedTag +
                                      ": nodevold did not create it and will not change it");
  if (uuid.empty() || found->uuid != uuid)
    return Status::FailedPrecondition("logical volume " + vg + "/" + lv + " is not the one nodevold looked at (UUID " +
                                      found->uuid + ", expected " + (uuid.empty() ? "none" : uuid) +
                                      "); not removed");
  if (auto deps = report.DependentsOf(*found); !deps.empty()) {
    std::string list;
    for (const auto& d : deps) list += (list.empty() ? "" : ", ") + d;
    return Status::FailedPrecondition("logical volume " + vg + "/" + lv + " has " + list +
                                      ": lvremove would take them along; remove or split them first (lvremove, "
                                      "lvconvert --splitcache), nodevold will not");
  }
  // By UUID: the name alone could meanwhile be another LV.
  return Command({"lvremove", "-y", "--select", "lv_uuid=" + uuid, vg});
}

Status Lvm::Activate(const std::string& vg, const std::string& lv) {
  NODEVOL_RETURN_IF_ERROR(CheckOwned(vg, lv));
  return Command({"lvchange", "-ay", "-K", vg + "/" + lv});
}

Status Lvm::Refresh(const std::string& vg, const std::string& lv) {
  return Command({"lvchange", "--refresh", vg + "/" + lv});
}

Status Lvm::CreateVg(const std::string& vg, const std::vector<std::string>& devices,
                     const std::vector<std::string>& forced) {
  if (devices.empty() && forced.empty()) return Status::InvalidArgument("vgcreate " + vg + " without devices");
  // -qq: "no" to every question, e.g. whether to wipe a signature.
  std::vector<std::string> args = {"vgcreate", devices.empty() ? "-y" : "-qq", "--addtag", kManagedTag, vg};
  args.insert(args.end(), devices.empty() ? forced.begin() : devices.begin(), devices.empty() ? forced.end() : devices.end());
  NODEVOL_RETURN_IF_ERROR(Command(std::move(args)));
  return devices.empty() ? Status::Ok() : ExtendVg(vg, {}, forced);
}

Status Lvm::ExtendVg(const std::string& vg, const std::vector<std::string>& devices,
                     const std::vector<std::string>& forced) {
  if (!devices.empty()) {
    std::vector<std::string> args = {"vgextend", "-qq", vg};
    args.insert(args.end(), devices.begin(), devices.end());
    NODEVOL_RETURN_IF_ERROR(Command(std::move(args)));
  }
  if (!forced.empty()) {
    std::vector<std::string> args = {"vgextend", "-y", vg};
    args.insert(args.end(), forced.begin(), forced.end());
    NODEVOL_RETURN_IF_ERROR(Command(std::move(args)));
  }
  return Status::Ok();
}

Status Lvm::CreateThinPool(const std::string& vg, const std::string& pool, uint64_t bytes) {
  // -Zy: blocks are zeroed when first provisioned, so a thin volume never
  // reads another's old data. (lvm refuses -W for thin pools.)
  return Command({"lvcreate", "-y", "-Zy", "--type", "thin-pool", "-n", pool, "-L", Bytes(bytes),
                  "--addtag", kManagedTag, vg});
}

}  // namespace nodevol
