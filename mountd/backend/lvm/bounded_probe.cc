#include <chrono>
#include <memory>
#include <mutex>

#include "backend/lvm/lvm_probe.h"
#include "base/bounded_call.h"

namespace nodevol {
namespace {

class BoundedProbe : public LvmProbe {
 public:
  BoundedProbe(std::shared_ptr<LvmProbe> inner, std::chrono::milliseconds limit)
      : inner_(std::move(inner)), limit_(limit), stuck_(std::make_shared<Stuck>()) {}

  Status MetadataStamp(const std::vector<std::string>& pv_devices, std::string* stamp) override {
    {
      std::lock_guard<std::mutex> l(stuck_->mu);
      if (stuck_->read) return Unanswered(pv_devices);
    }
    // On a thread of its own (CallWhileAdvancing, no steps: the limit is
    // the whole read): a read the kernel never finishes keeps its thread,
    // not ours, and while it does no second read starts.
    auto out = std::make_shared<std::string>();
    bool overran = false;
    BoundedWork call;
    call.work = [inner = inner_, pv_devices, out](const Step&) { return inner->MetadataStamp(pv_devices, out.get()); };
    call.on_overrun = [&overran, stuck = stuck_] {
      overran = true;
      std::lock_guard<std::mutex> l(stuck->mu);
      stuck->read = true;
    };
    call.on_late_finish = [stuck = stuck_](const Status&) {
      std::lock_guard<std::mutex> l(stuck->mu);
      stuck->read = false;
    };
    Status st = CallWhileAdvancing(limit_, "a read of LVM labels", std::move(call));
    if (overran) return Unanswered(pv_devices);
    if (st.ok()) *stamp = *out;
    return st;
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

  // Shared with the reads' threads, which may outlive the probe.
  struct Stuck {
    std::mutex mu;
    bool read = false;  // a read still blocked in the kernel
  };

  const std::shared_ptr<LvmProbe> inner_;
  const std::chrono::milliseconds limit_;
  const std::shared_ptr<Stuck> stuck_;
};

}  // namespace

std::shared_ptr<LvmProbe> MakeBoundedLvmProbe(std::shared_ptr<LvmProbe> inner, std::chrono::milliseconds limit) {
  return std::make_shared<BoundedProbe>(std::move(inner), limit);
}

}  // namespace nodevol
