// Lvm: the lvm command-line tools as nodevold uses them.
//
// Every command runs through Run (argv only, LC_ALL=C, a timeout); state is
// read with one `lvm fullreport` and cached until the next change rather
// than asked one command per question. Each LV nodevold creates carries the
// tag kManagedTag and "nodevol.io/volume=<volume name>"; Extend and Remove
// refuse an LV without them, so nodevold never changes an LV it did not make.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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
  // (udev = false) lvm must not wait for udev: DM_DISABLE_UDEV=1.
  Lvm(std::string binary, bool udev, Runner runner = {});

  // The cached report; refreshed first when a change happened since (or
  // when `fresh`).
  Status Report(LvmReport* out, bool fresh = false);
  // The cached report if it is younger than max_age (what lvm does not
  // change itself, like thin pool usage, drifts while cached).
  Status Report(LvmReport* out, std::chrono::milliseconds max_age);

  // LVs of volume `volume`, sized in bytes (a multiple of the extent size).
  Status CreateThick(const std::string& vg, const std::string& lv, const std::string& volume, uint64_t bytes,
                     const std::vector<std::string>& extra_args);
  Status CreateThin(const std::string& vg, const std::string& pool, const std::string& lv,
                    const std::string& volume, uint64_t bytes, const std::vector<std::string>& extra_args);
  // A thin snapshot `lv` of thin LV `origin` with these tags (besides
  // kManagedTag). `activatable` false keeps lvm's activation skip flag:
  // snapshots are never mounted, only made into volumes.
  Status CreateSnapshot(const std::string& vg, const std::string& origin, const std::string& lv,
                        const std::vector<std::string>& tags, bool activatable);
  Status Extend(const std::string& vg, const std::string& lv, uint64_t bytes);
  // Removes the LV with this UUID, checked against a fresh report: ours
  // (kManagedTag) and nothing depending on it (snapshots, an attached
  // cache), else FAILED_PRECONDITION naming what is in the way. lvremove
  // selects by UUID, so an LV made meanwhile under that name is not hit.
  // "Fresh" is a report at most kRemoveReportAge old with no lvm command
  // of ours since: the one a delete took just before zeroing serves.
  Status Remove(const std::string& vg, const std::string& lv, const std::string& uuid);
  static constexpr std::chrono::seconds kRemoveReportAge{2};
  // Activates an LV of ours (after a reboot with activation skipped).
  Status Activate(const std::string& vg, const std::string& lv);
  // Reloads an LV's device-mapper table from the committed metadata and
  // resumes it (lvchange --refresh): an LV left suspended by a killed lvm
  // command. Ours only (kManagedTag), or the pool's thin pool.
  Status Refresh(const std::string& vg, const std::string& lv);

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

  // Number of lvm processes started so far (for the benchmark).
  uint64_t commands_run() const;

 private:
  Status Command(std::vector<std::string> args, RunResult* result = nullptr);
  Status CheckOwned(const std::string& vg, const std::string& lv);

  std::string binary_;
  RunOptions options_;
  Runner runner_;
  mutable std::mutex mu_;  // guards the cache and the counter
  std::optional<LvmReport> cache_;
  std::chrono::steady_clock::time_point cache_time_;
  uint64_t changes_ = 0;  // changing commands started or finished
  uint64_t commands_ = 0;
};

}  // namespace nodevol
