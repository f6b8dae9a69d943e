#include "backend/lvm/lvm.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <sstream>

#include "base/atomic_file.h"

namespace nodevol {
namespace {

// lvm's size argument in bytes ("-L 1073741824b").
std::string LvmBytes(uint64_t bytes) { return std::to_string(bytes) + "b"; }

// The tags of an lvcreate's arguments, when tags are all they add (else
// false: e.g. --type raid1 takes more than the size from the VG, which the
// cache cannot tell).
bool OnlyTags(const std::vector<std::string>& extra_args, std::vector<std::string>* tags) {
  for (size_t i = 0; i < extra_args.size(); i += 2) {
    if (extra_args[i] != "--addtag" || i + 1 >= extra_args.size()) return false;
    tags->push_back(extra_args[i + 1]);
  }
  return true;
}

}  // namespace

struct Lvm::Flight {
  uint64_t changes = 0;  // changes_ when it began
  bool done = false;
  Status status;
  LvmReport report;
};

Lvm::Lvm(std::string binary, bool udev, Runner runner, std::shared_ptr<LvmProbe> probe)
    : binary_(std::move(binary)), runner_(std::move(runner)), probe_(std::move(probe)) {
  if (!runner_) runner_ = RunChecked;
  options_.timeout = std::chrono::minutes(2);
  if (!udev) options_.env.push_back("DM_DISABLE_UDEV=1");
}

void Lvm::RememberPvsIn(const std::string& dir) {
  std::string text;
  std::vector<std::string> pvs;
  if (ReadWholeFile(dir + "/pvs", &text).ok()) {
    std::istringstream in(text);
    // Only absolute device paths: the file is ours, but a torn or edited
    // one must not make the stamp read anything else.
    for (std::string line; std::getline(in, line);)
      if (line.rfind("/dev/", 0) == 0 && line.find("..") == std::string::npos) pvs.push_back(line);
  }
  std::lock_guard<std::mutex> l(mu_);
  pvs_dir_ = dir;
  if (known_pvs_.empty()) known_pvs_ = pvs;
}

uint64_t Lvm::commands_run() const {
  std::lock_guard<std::mutex> l(mu_);
  return commands_;
}

std::string Lvm::StampOf(const LvmReport& report, Status* why) {
  std::vector<std::string> pvs;
  for (const LvmPv& pv : report.pvs) pvs.push_back(pv.name);
  std::string stamp;
  if (!probe_ || pvs.empty()) return "";
  if (Status st = probe_->MetadataStamp(pvs, &stamp); !st.ok()) {
    if (why) *why = st;
    return "";
  }
  return stamp;
}

void Lvm::DropCache() {
  cache_.reset();
  cache_stamp_.clear();
}

Status Lvm::Command(std::vector<std::string> args, RunResult* result, Edit edit) {
  args.insert(args.begin(), binary_);
  RunResult local;
  bool changes = args[1] != "fullreport" && args[1] != "lvs";  // anything else may change state
  {
    std::lock_guard<std::mutex> l(mu_);
    ++commands_;
    if (changes) {
      // Someone else changed the VG since the report: the cache cannot
      // follow this command on top of that. (Without a stamp, only age
      // limits what the cache may have missed, edited or not.)
      if (changing_ == 0 && cache_ && !cache_stamp_.empty() && StampOf(*cache_) != cache_stamp_) DropCache();
      ++changing_;
      ++changes_;
    }
  }
  Status st = runner_(args, options_, result ? result : &local);
  // What lvm says when it cannot read or change a VG, most often because
  // one of its disks is missing or failing: a state of the node to name,
  // not an internal error.
  if (st.code() == Status::Code::kInternal && st.message().find("Cannot process volume group") != std::string::npos)
    st = Status::FailedPrecondition(st.message() + " (is a disk of the volume group missing or failing? see pvs and the kernel log)");
  if (changes) {
    std::lock_guard<std::mutex> l(mu_);
    --changing_;
    ++changes_;
    // Copy on write: readers may hold the kept report (Kept).
    std::shared_ptr<LvmReport> edited = cache_ && st.ok() && edit ? std::make_shared<LvmReport>(*cache_) : nullptr;
    if (!edited || !edit(edited.get())) DropCache();
    else cache_ = std::move(edited);
    // The metadata now on disk is this command's (and any other of ours
    // that ran alongside, whose edits are in too).
    if (cache_ && changing_ == 0) cache_stamp_ = StampOf(*cache_);
  }
  return st.WithContext(args[1]);
}

bool Lvm::CacheServes(std::chrono::milliseconds max_age) {
  if (!cache_) return false;
  // (max() is special: in nanoseconds it would overflow.)
  if (max_age == std::chrono::milliseconds::max()) return true;
  const auto age = std::chrono::steady_clock::now() - cache_time_;
  for (const LvmVg& vg : cache_->vgs)
    if (vg.missing_pvs > 0 && age >= degraded_age_) return false;
  const bool young = age < max_age;
  // A command of ours is changing the VG: its edit comes when it ends.
  if (changing_ > 0 || cache_stamp_.empty()) return young;
  if (age >= kStampedReportAge) return false;
  Status why;
  std::string now = StampOf(*cache_, &why);
  if (!now.empty()) return now == cache_stamp_;
  // A PV that was read cannot be: its disk was pulled or fails, and lvm
  // says which at once (a thick pool's figures were otherwise the cached
  // report's for up to max_age). A read that hangs (the bounded probe's
  // UNAVAILABLE) would hang the report too: age decides then.
  return why.code() == Status::Code::kUnavailable ? young : false;
}

void Lvm::OverlayThinUsage(LvmReport* report) {
  if (!probe_) return;
  for (LvmLv& lv : report->lvs) {
    if (!lv.thin_pool() || !lv.active()) continue;
    const LvmVg* vg = report->FindVg(lv.vg);
    double data = 0, meta = 0;
    if (!vg) continue;
    Status st = probe_->ThinPoolUsage(vg->uuid, lv.uuid, &data, &meta);
    lv.fault = st.code() == Status::Code::kFailedPrecondition ? st.message() : "";
    if (st.ok()) {
      lv.data_percent = data;
      lv.metadata_percent = meta;
    }
  }
}

Status Lvm::Report(LvmReport* out, bool fresh) {
  return Report(out, fresh ? std::chrono::milliseconds(0) : std::chrono::milliseconds::max());
}

Status Lvm::Report(LvmReport* out, std::chrono::milliseconds max_age) { return TakeReport(out, max_age, false); }

Status Lvm::Kept(std::shared_ptr<const LvmReport>* out) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (cache_) {
      *out = cache_;
      return Status::Ok();
    }
  }
  auto report = std::make_shared<LvmReport>();
  NODEVOL_RETURN_IF_ERROR(TakeReport(report.get(), std::chrono::milliseconds::max(), false));
  *out = std::move(report);
  return Status::Ok();
}

Status Lvm::NewReport(LvmReport* out) { return TakeReport(out, std::chrono::milliseconds(0), true); }

bool Lvm::PlainMapping(const LvmLv& lv) {
  std::vector<std::string> types;
  if (!probe_ || !lv.active() || lv.kernel_major < 0 ||
      !probe_->TargetTypes(lv.kernel_major, lv.kernel_minor, &types).ok() || types.empty())
    return false;
  for (const std::string& t : types)
    if (t != "linear" && t != "striped") return false;
  return true;
}

Status Lvm::TakeReport(LvmReport* out, std::chrono::milliseconds max_age, bool force) {
  std::unique_lock<std::mutex> l(mu_);
  if (!force && CacheServes(max_age)) {
    *out = *cache_;
    l.unlock();
    OverlayThinUsage(out);
    return Status::Ok();
  }
  // One report at a time: one that began after the last change of ours is
  // as good as a new one.
  if (!force && flight_ && flight_->changes == changes_) {
    std::shared_ptr<Flight> f = flight_;
    flight_done_.wait(l, [&] { return f->done; });
    if (!f->status.ok()) return f->status;
    *out = f->report;
    return Status::Ok();
  }
  auto f = std::make_shared<Flight>();
  f->changes = changes_;
  flight_ = f;
  std::vector<std::string> pvs = known_pvs_;
  l.unlock();
  // The stamp before the report: a change between the two shows as a
  // stamp that no longer matches (one report too many), never as a change
  // the cache missed.
  std::string stamp;
  if (probe_ && !pvs.empty() && !probe_->MetadataStamp(pvs, &stamp).ok()) stamp.clear();
  RunResult r;
  LvmReport report;
  Status st = Command(FullReportArgs(), &r);
  if (st.ok()) st = ParseFullReport(r.out, &report);
  l.lock();
  std::vector<std::string> now_pvs;
  for (const LvmPv& pv : report.pvs) now_pvs.push_back(pv.name);
  if (st.ok() && now_pvs != known_pvs_) {
    known_pvs_ = now_pvs;
    if (!pvs_dir_.empty()) {
      std::string text;
      for (const std::string& pv : now_pvs) text += pv + "\n";
      Status w = EnsureDir(pvs_dir_, 0700);
      if (w.ok()) w = WriteFileAtomic(pvs_dir_, "pvs", text);
      if (!w.ok()) spdlog::warn("cannot keep the list of physical volumes in {}: {}", pvs_dir_, w.message());
    }
  }
  if (st.ok() && changes_ == f->changes) {  // else it may predate a change: do not cache
    cache_ = std::make_shared<const LvmReport>(report);
    cache_time_ = std::chrono::steady_clock::now();
    // A new PV is not in the stamp: the next fresh caller reads again.
    cache_stamp_ = now_pvs == pvs ? stamp : "";
  }
  f->done = true;
  f->status = st;
  f->report = report;
  if (flight_ == f) flight_.reset();
  flight_done_.notify_all();
  if (!st.ok()) return st;
  *out = std::move(report);
  return Status::Ok();
}

Lvm::Edit Lvm::AddLv(const std::string& vg, const std::string& lv, uint64_t bytes, const std::string& attr,
                     std::vector<std::string> tags, std::string pool_lv, std::string origin, bool takes_vg_space) {
  return [=, this](LvmReport* report) {
    LvmVg* g = report->FindVg(vg);
    if (!g || report->FindLv(vg, lv) || !probe_) return false;
    LvmLv made;
    std::string vg_uuid;
    made.path = "/dev/" + vg + "/" + lv;
    if (!probe_->ActiveLv(made.path, &vg_uuid, &made.uuid, &made.kernel_major, &made.kernel_minor).ok() ||
        vg_uuid != g->uuid)
      return false;
    made.name = lv;
    made.vg = vg;
    made.size = bytes;
    made.attr = attr;
    made.tags = tags;
    made.pool_lv = pool_lv;
    made.origin = origin;
    made.created_unix = static_cast<int64_t>(::time(nullptr));
    if (takes_vg_space) {
      if (g->free < bytes) return false;
      g->free -= bytes;
    }
    report->lvs.push_back(std::move(made));
    return true;
  };
}

Status Lvm::CreateThick(const std::string& vg, const std::string& lv, const std::string& volume, uint64_t bytes,
                        const std::vector<std::string>& extra_args) {
  // -Wy -Zy: wipe old signatures and zero the start, so a new volume never
  // shows a previous tenant's filesystem; -y answers lvm's questions.
  std::vector<std::string> args = {"lvcreate", "-y",      "-Wy",         "-Zy", "-n",
                                   lv,         "-L",      LvmBytes(bytes), "--addtag", kManagedTag,
                                   "--addtag", kVolumeTagPrefix + volume};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back(vg);
  std::vector<std::string> tags = {kManagedTag, kVolumeTagPrefix + volume};
  if (!OnlyTags(extra_args, &tags)) return Command(std::move(args));
  return Command(std::move(args), nullptr, AddLv(vg, lv, bytes, "-wi-a-----", tags, "", "", /*takes_vg_space=*/true));
}

Status Lvm::CreateThin(const std::string& vg, const std::string& pool, const std::string& lv,
                       const std::string& volume, uint64_t bytes, const std::vector<std::string>& extra_args) {
  // Thin LVs read as zeros where never written: nothing to wipe.
  std::vector<std::string> args = {"lvcreate", "-y", "-n",       lv,          "-V",
                                   LvmBytes(bytes), "--thinpool", vg + "/" + pool, "--addtag", kManagedTag,
                                   "--addtag", kVolumeTagPrefix + volume};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<std::string> tags = {kManagedTag, kVolumeTagPrefix + volume};
  if (!OnlyTags(extra_args, &tags)) return Command(std::move(args));
  return Command(std::move(args), nullptr, AddLv(vg, lv, bytes, "Vwi-a-tz--", tags, pool, "", false));
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
  std::vector<std::string> all = {kManagedTag};
  all.insert(all.end(), tags.begin(), tags.end());
  uint64_t bytes = 0;
  std::string pool;
  {
    std::lock_guard<std::mutex> l(mu_);
    const LvmLv* o = cache_ ? cache_->FindLv(vg, origin) : nullptr;
    if (o) bytes = o->size, pool = o->pool_lv;
  }
  // A snapshot that skips activation has no device to learn its UUID
  // from: the cache goes, and the next fresh caller reads a report.
  Status st = !activatable || pool.empty()
                  ? Command(std::move(args))
                  : Command(std::move(args), nullptr, AddLv(vg, lv, bytes, "Vwi-a-tz--", all, pool, origin, false));
  if (!st.ok()) ResumeIfSuspended(vg, origin);
  return st;
}

void Lvm::ResumeIfSuspended(const std::string& vg, const std::string& origin) {
  // lvcreate -s suspends the origin, a pod's live volume, to take the
  // snapshot, and lvextend the LV it grows; one killed at
  // --lvm-timeout-seconds (or failed) between suspend and resume left it
  // suspended, every write of its pod blocked, until nodevold restarted
  // (issue 69 item 8: only start-up refreshed).
  LvmReport report;
  if (!Report(&report, /*fresh=*/true).ok()) return;
  const LvmLv* o = report.FindLv(vg, origin);
  if (!o) return;
  std::vector<std::string> suspended;
  if (o->needs_refresh()) suspended.push_back(origin);
  const LvmLv* p = o->pool_lv.empty() ? nullptr : report.FindLv(vg, o->pool_lv);
  if (p && p->needs_refresh()) suspended.push_back(p->name);
  for (const std::string& name : suspended) {
    Status st = Refresh(vg, name);
    spdlog::warn("lvm: {}/{} was left suspended by an lvm command that failed; {}", vg, name,
                 st.ok() ? "resumed (lvchange --refresh)" : "resuming it failed: " + st.message());
  }
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

Status Lvm::Extend(const std::string& vg, const std::string& lv, uint64_t bytes,
                   const std::vector<std::string>& onto) {
  NODEVOL_RETURN_IF_ERROR(CheckOwned(vg, lv));
  // A volume's LV grows by what lvextend was asked; a thin pool (its
  // metadata may grow too) or anything else drops the cache.
  auto edit = [vg, lv, bytes](LvmReport* report) {
    LvmLv* found = report->FindLv(vg, lv);
    LvmVg* g = report->FindVg(vg);
    if (!found || !g || found->thin_pool() || (!found->pool_lv.empty() && !found->thin_volume()) ||
        found->size > bytes)
      return false;
    if (!found->thin_volume()) {
      if (g->free < bytes - found->size) return false;
      g->free -= bytes - found->size;
    }
    found->size = bytes;
    return true;
  };
  std::vector<std::string> args = {"lvextend", "-L", LvmBytes(bytes), vg + "/" + lv};
  args.insert(args.end(), onto.begin(), onto.end());
  // lvextend suspends the LV (a pod's live volume) to load its new table,
  // as lvcreate -s does its origin: the same rescue when it fails.
  Status st = Command(std::move(args), nullptr, edit);
  if (!st.ok()) ResumeIfSuspended(vg, lv);
  return st;
}

std::mutex& Lvm::AllocationLock(const std::string& vg) {
  std::lock_guard<std::mutex> l(mu_);
  auto& m = allocation_locks_[vg];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

Status Lvm::CreateScratch(const std::string& vg, const std::string& lv, uint64_t bytes,
                          const std::vector<std::string>& tags, const std::vector<std::string>& extra_args) {
  // -Zn: the caller zeroes all of it. -Wy: an old tenant's signature
  // (md, LVM) wiped at once, so nothing claims the device before the
  // caller's exclusive open.
  std::vector<std::string> args = {"lvcreate", "-y", "-Wy", "-Zn", "-n", lv, "-L", LvmBytes(bytes),
                                   "--addtag", kManagedTag};
  for (const std::string& t : tags) args.insert(args.end(), {"--addtag", t});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back(vg);
  std::vector<std::string> all = {kManagedTag};
  all.insert(all.end(), tags.begin(), tags.end());
  if (!OnlyTags(extra_args, &all)) return Command(std::move(args));
  return Command(std::move(args), nullptr, AddLv(vg, lv, bytes, "-wi-a-----", all, "", "", /*takes_vg_space=*/true));
}

Status Lvm::PeRanges(const std::string& vg, const std::string& lv, std::vector<std::string>* ranges) {
  ranges->clear();
  RunResult r;
  NODEVOL_RETURN_IF_ERROR(
      Command({"lvs", "--noheadings", "--segments", "-o", "seg_pe_ranges", vg + "/" + lv}, &r));
  // One line per segment; a striped segment lists its stripes, separated
  // by spaces (lvm 2.03) or commas (older).
  std::string token;
  auto flush = [&]() -> Status {
    if (token.empty()) return Status::Ok();
    size_t colon = token.rfind(':');
    if (token[0] != '/' || colon == std::string::npos || token.find('-', colon) == std::string::npos)
      return Status::FailedPrecondition("logical volume " + vg + "/" + lv + " lies on " + token +
                                        ", not on a physical volume's extents");
    ranges->push_back(token);
    token.clear();
    return Status::Ok();
  };
  for (char c : r.out) {
    if (c == ' ' || c == ',' || c == '\n' || c == '\t') {
      NODEVOL_RETURN_IF_ERROR(flush());
    } else {
      token += c;
    }
  }
  NODEVOL_RETURN_IF_ERROR(flush());
  if (ranges->empty()) return Status::Internal("lvs reports no extents for " + vg + "/" + lv);
  return Status::Ok();
}

Status Lvm::Remove(const std::string& vg, const std::string& lv, const std::string& uuid) {
  LvmReport report;
  // The cached report while the VG metadata is unchanged since (our own
  // commands keep it up to date), else one at most kRemoveReportAge old, or
  // a new one. (A second fullreport right after the delete's own made every
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
  auto edit = [uuid](LvmReport* report) {
    auto it = std::find_if(report->lvs.begin(), report->lvs.end(), [&](const LvmLv& x) { return x.uuid == uuid; });
    if (it == report->lvs.end()) return false;
    const LvmLv gone = *it;
    report->lvs.erase(it);
    // Its extents go back to the VG, unless it lived in a thin pool.
    LvmVg* g = report->FindVg(gone.vg);
    if (g && !gone.thin_volume()) g->free += gone.size;
    for (LvmLv& x : report->lvs)
      if (x.vg == gone.vg && x.origin == gone.name) x.origin.clear();
    return true;
  };
  return Command({"lvremove", "-y", "--select", "lv_uuid=" + uuid, vg}, nullptr, edit);
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
  return Command({"lvcreate", "-y", "-Zy", "--type", "thin-pool", "-n", pool, "-L", LvmBytes(bytes),
                  "--addtag", kManagedTag, vg});
}

}  // namespace nodevol
