#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/lvm/lvm_probe.h"

namespace nodevol {
namespace {

// One MetadataStamp read on its own thread.
struct StampRead {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::string stamp;
};

class BoundedProbe : public LvmProbe {
 public:
  BoundedProbe(std::shared_ptr<LvmProbe> inner, std::chrono::milliseconds limit)
      : inner_(std::move(inner)), limit_(limit) {}

  Status MetadataStamp(const std::vector<std::string>& pv_devices, std::string* stamp) override {
    std::shared_ptr<StampRead> read;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stuck_) {
        bool done;
        {
          std::lock_guard<std::mutex> rl(stuck_->mu);
          done = stuck_->done;
        }
        // Dropped only after its mutex is released: this may be the last
        // reference (found by ThreadSanitizer, BoundedProbe test).
        if (!done) return Unanswered(pv_devices);
        stuck_.reset();
      }
      read = std::make_shared<StampRead>();
    }
    // Detached: a read the kernel never finishes keeps its thread, not ours.
    std::thread([inner = inner_, pv_devices, read] {
      std::string s;
      Status st = inner->MetadataStamp(pv_devices, &s);
      std::lock_guard<std::mutex> l(read->mu);
      read->status = st;
      read->stamp = std::move(s);
      read->done = true;
      read->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> rl(read->mu);
    if (!read->cv.wait_for(rl, limit_, [&] { return read->done; })) {
      rl.unlock();
      std::lock_guard<std::mutex> l(mu_);
      stuck_ = read;
      return Unanswered(pv_devices);
    }
    if (read->status.ok()) *stamp = read->stamp;
    return read->status;
  }
  Status ActiveLv(const std::string& device, std::string* vg_uuid, std::string* lv_uuid, int* major,
                  int* minor) override {
    return inner_->ActiveLv(device, vg_uuid, lv_uuid, major, minor);
  }
  Status TargetTypes(int major, int minor, std::vector<std::string>* types) override {
    return inner_->TargetTypes(major, minor, types);
  }
  Status ThinPoolUsage(const std::string& vg_uuid, const std::string& pool_uuid, double* data_percent,
                       double* metadata_percent) override {
    return inner_->ThinPoolUsage(vg_uuid, pool_uuid, data_percent, metadata_percent);
  }

 private:
  Status Unanswered(const std::vector<std::string>& pvs) const {
    std::string list;
    for (const auto& pv : pvs) list += (list.empty() ? "" : ", ") + pv;
    return Status::Unavailable("a read of the LVM labels of " + list + " has not finished within " +
                               std::to_string(limit_.count()) + " ms: a disk is not answering (see the kernel log)");
  }

  const std::shared_ptr<LvmProbe> inner_;
  const std::chrono::milliseconds limit_;
  std::mutex mu_;
  std::shared_ptr<StampRead> stuck_;  // a read still blocked in the kernel
};

}  // namespace

std::shared_ptr<LvmProbe> MakeBoundedLvmProbe(std::shared_ptr<LvmProbe> inner, std::chrono::milliseconds limit) {
  return std::make_shared<BoundedProbe>(std::move(inner), limit);
}

}  // namespace nodevol
