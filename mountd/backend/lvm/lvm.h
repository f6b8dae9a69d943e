// Lvm: the lvm command-line tools as nodevold uses them.
//
// Every command runs through Run (argv only, LC_ALL=C, a timeout); state is
// read with one `lvm fullreport` and cached rather than asked one command
// per question. The cache follows nodevold's own commands (a create adds
// the LV it made, a remove takes it out) instead of being dropped, and it
// counts as fresh while the VG metadata on disk is what it was when the
// report was taken (LvmProbe::MetadataStamp): so a volume's create runs
// lvcreate and mkfs, its delete lvremove, and the capacity monitor no lvm
// process at all while nothing changes (docs/benchmarks.md, lvm_bench).
// Only one report runs at a time: a caller arriving while one that began
// after the last change runs waits for it. Thin pool usage, which changes
// without lvm, is read from device-mapper on every Report.
//
// Each LV nodevold creates carries the tag kManagedTag and
// "nodevol.io/volume=<volume name>"; Extend and Remove refuse an LV without
// them, so nodevold never changes an LV it did not make.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/lvm/lvm_probe.h"
#include "backend/lvm/report.h"
#include "base/status.h"
#include "process/run.h"

namespace nodevol {


// lvm's words for "does not fit" become RESOURCE_EXHAUSTED.
Status MapLvmNoSpace(Status st);

class Lvm {
 public:
  // How commands run; tests replace it at this seam only.
  using Runner = std::function<Status(const std::vector<std::string>& argv, const RunOptions&, RunResult*)>;

  // `binary` is the lvm multi-call tool. Without a running udevd
  // (udev = false) lvm must not wait for udev: DM_DISABLE_UDEV=1. Tests
  // replace the runner and the probe.
  Lvm(std::string binary, bool udev, Runner runner = {}, std::shared_ptr<LvmProbe> probe = MakeLvmProbe());

  // The cached report, whatever its age (`fresh`: one as good as a new
  // one, below).
  Status Report(LvmReport* out, bool fresh = false);
  // A report that reflects every change since it was taken: the cached
  // one when the VG metadata on disk is unchanged since (or, where that
  // cannot be read, when it is younger than max_age), else a new one.
  Status Report(LvmReport* out, std::chrono::milliseconds max_age);
  // The kept report itself, shared rather than copied (a new one only when
  // none is kept): what exists, for the many lookups of a start with
  // thousands of LVs. Thin pool usage in it may be old.
  Status Kept(std::shared_ptr<const LvmReport>* out);
  // A new report, whatever the cache says.
  Status NewReport(LvmReport* out);
  // The stamp misses a change someone else makes while a command of ours
  // runs (it is taken again when ours ends): a cached report this old is
  // read again anyway.
  static constexpr std::chrono::minutes kStampedReportAge{10};
  // A report of a VG missing a disk has no stamp (the missing PV cannot be
  // read) and the repair the operator makes (the disk back, vgreduce
  // --removemissing) would wait for max_age, the capacity poll's 30 s:
  // it serves this long at most instead, one lvm process per interval
  // while a disk is missing. Tests shorten it.
  void set_degraded_report_age(std::chrono::milliseconds age) { degraded_age_ = age; }

  // Whether `lv`'s device-mapper table is a plain mapping (linear or
  // striped): no snapshot origin, cache or anything else stacked on it
  // since the report. False when inactive or unknown.
  bool PlainMapping(const LvmLv& lv);

  // LVs of volume `volume`, sized in bytes (a multiple of the extent size).
  Status CreateThick(const std::string& vg, const std::string& lv, const std::string& volume, uint64_t bytes,
                     const std::vector<std::string>& extra_args);
  Status CreateThin(const std::string& vg, const std::string& pool, const std::string& lv,
                    const std::string& volume, uint64_t bytes, const std::vector<std::string>& extra_args);
  // A thin snapshot `lv` of thin LV `origin` with these tags (besides
  // kManagedTag). `activatable` false keeps lvm's activation skip flag:
  // snapshots are never mounted, only made into volumes. When lvcreate
  // fails or is killed, an origin (or its thin pool) it left suspended is
  // resumed at once.
  Status CreateSnapshot(const std::string& vg, const std::string& origin, const std::string& lv,
                        const std::vector<std::string>& tags, bool activatable);
  // Grows `lv` to `bytes`; with `onto` (PV:first-last ranges, as
  // PeRanges gives them) only onto those extents.
  Status Extend(const std::string& vg, const std::string& lv, uint64_t bytes,
                const std::vector<std::string>& onto = {});
  // A thick LV that is no volume (tags kManagedTag and `tags`), neither
  // wiped nor zeroed by lvcreate: for a caller that zeroes it whole and
  // then hands its extents to another LV (Extend onto its PeRanges).
  Status CreateScratch(const std::string& vg, const std::string& lv, uint64_t bytes,
                       const std::vector<std::string>& tags, const std::vector<std::string>& extra_args);
  // The physical extents under `lv` in lvextend's form (PV:first-last),
  // one per stripe of each segment. FAILED_PRECONDITION when any lies on
  // something other than a PV (a raid or mirror image, a thin pool).
  Status PeRanges(const std::string& vg, const std::string& lv, std::vector<std::string>* ranges);
  // Removes the LV with this UUID, checked against a fresh report: ours
  // (kManagedTag) and nothing depending on it (snapshots, an attached
  // cache), else FAILED_PRECONDITION naming what is in the way. lvremove
  // selects by UUID, so an LV made meanwhile under that name is not hit.
  // "Fresh" as Report's: the cached one while the metadata is unchanged,
  // else at most kRemoveReportAge old with no lvm command of ours since.
  Status Remove(const std::string& vg, const std::string& lv, const std::string& uuid);
  static constexpr std::chrono::seconds kRemoveReportAge{2};
  // Activates an LV of ours (after a reboot with activation skipped).
  Status Activate(const std::string& vg, const std::string& lv);
  // Reloads an LV's device-mapper table from the committed metadata and
  // resumes it (lvchange --refresh): an LV left suspended by a killed lvm
  // command. Ours only (kManagedTag), or the pool's thin pool.
  Status Refresh(const std::string& vg, const std::string& lv);
  // Refreshes `origin` and its thin pool when a fresh report says either
  // is suspended (the failure path of CreateSnapshot and Extend, the two
  // commands that suspend a volume's LV).
  void ResumeIfSuspended(const std::string& vg, const std::string& origin);

  // Volume group and thin pool setup (pvcreate is implied by vgcreate).
  // lvm answers "no" to its questions for `devices` (-qq): a signature
  // found on one of them (written after nodevold probed it) fails the call
  // rather than being wiped. Only `forced` devices (the operator's force=)
  // get -y, in a vgextend of their own.
  Status CreateVg(const std::string& vg, const std::vector<std::string>& devices,
                  const std::vector<std::string>& forced = {});
  Status ExtendVg(const std::string& vg, const std::vector<std::string>& devices,
                  const std::vector<std::string>& forced = {});
  Status CreateThinPool(const std::string& vg, const std::string& pool, uint64_t bytes);

  // Keeps the PVs of the last report in <dir>/pvs (made if missing), and
  // reads them now: the first report after a restart is stamped too, so a
  // start with several pools reads one report, not one unstamped and one
  // more to stamp.
  void RememberPvsIn(const std::string& dir);
  // How long one lvm command may run (default 2 minutes); set before use.
  void set_timeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }

  // The lock of volume group `vg`'s allocations, shared by every pool on
  // it (LvmBackend: capacity check, lvcreate, lvextend).
  std::mutex& AllocationLock(const std::string& vg);

  // Number of lvm processes started so far (for the benchmark).
  uint64_t commands_run() const;

 private:
  // How the cache follows a command of ours that succeeded; false when it
  // cannot (the cache is dropped then, as after any other command).
  using Edit = std::function<bool(LvmReport*)>;
  struct Flight;  // a report being taken

  Status TakeReport(LvmReport* out, std::chrono::milliseconds max_age, bool force);

  Status Command(std::vector<std::string> args, RunResult* result = nullptr, Edit edit = {});
  Status CheckOwned(const std::string& vg, const std::string& lv);
  // With mu_ held: whether the cache may answer a caller asking for max_age.
  bool CacheServes(std::chrono::milliseconds max_age);
  // The metadata stamp of the report's PVs; "" when it cannot be read
  // (then `why`, if given, says why, when there was a read to fail).
  std::string StampOf(const LvmReport& report, Status* why = nullptr);
  void DropCache();
  void OverlayThinUsage(LvmReport* report);
  // Adds the active LV just made at /dev/vg/lv (its UUID and device from
  // device-mapper) to the cache: the rest of what lvm would report is
  // what the lvcreate asked for.
  Edit AddLv(const std::string& vg, const std::string& lv, uint64_t bytes, const std::string& attr,
             std::vector<std::string> tags, std::string pool_lv, std::string origin, bool takes_vg_space);

  std::string binary_;
  RunOptions options_;
  Runner runner_;
  std::shared_ptr<LvmProbe> probe_;
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable flight_done_;
  std::shared_ptr<const LvmReport> cache_;  // replaced, never changed: Kept shares it
  std::chrono::steady_clock::time_point cache_time_;
  std::string cache_stamp_;  // "" when unknown: then only age makes it fresh
  std::chrono::milliseconds degraded_age_ = std::chrono::seconds(4);
  std::vector<std::string> known_pvs_;  // of the last report, to stamp the next
  std::string pvs_dir_;                 // where known_pvs_ are kept, or ""
  std::shared_ptr<Flight> flight_;
  int changing_ = 0;      // changing commands running now
  uint64_t changes_ = 0;  // changing commands started or finished
  uint64_t commands_ = 0;
  std::map<std::string, std::unique_ptr<std::mutex>> allocation_locks_;
};

}  // namespace nodevol
