// Node: what a publication holds (bytes and inodes), for kubelet's
// volume stats, without ever hanging on an NFS server that does not answer.
#include <sys/statvfs.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "mount/mount_table.h"
#include "mount/target.h"
#include "node/node.h"

namespace nodevol {

namespace {

// statvfs(2) of a publication target. On an NFS mount that asks the
// server, which may not answer (a hard mount then waits forever): there it
// runs on a thread of its own, the caller waits at most kNfsStatsTimeout,
// and while an earlier statvfs of the same export has been stuck longer
// than that, the next fails at once instead of starting another thread.
// Other filesystems: a plain statvfs, as before.
constexpr auto kNfsStatsTimeout = std::chrono::seconds(10);

Status StatvfsTarget(const std::string& target, struct statvfs* out) {
  MountTable table;
  const MountEntry* e = table.Load().ok() ? table.FindTarget(target) : nullptr;
  if (!e || (e->fstype != "nfs" && e->fstype != "nfs4")) {
    if (::statvfs(target.c_str(), out) != 0) return Status::FromErrno("statvfs " + target, errno);
    return Status::Ok();
  }
  using Clock = std::chrono::steady_clock;
  static std::mutex mu;
  static auto* stuck_since = new std::map<std::string, Clock::time_point>();  // by NFS source, while running
  const std::string server = e->source.substr(0, e->source.rfind(':'));
  struct Call {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int err = 0;
    struct statvfs vfs;
  };
  auto call = std::make_shared<Call>();
  {
    std::lock_guard<std::mutex> l(mu);
    auto it = stuck_since->find(server);
    if (it != stuck_since->end()) {
      auto waited = Clock::now() - it->second;
      if (waited > kNfsStatsTimeout)
        return Status::Unavailable("NFS server " + server + " has not answered statfs for " +
                                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) +
                                   " s; try again when it is back");
    } else {
      (*stuck_since)[server] = Clock::now();
    }
  }
  std::thread([call, target, server] {
    struct statvfs vfs;
    int err = ::statvfs(target.c_str(), &vfs) == 0 ? 0 : errno;
    {
      std::lock_guard<std::mutex> l(mu);
      stuck_since->erase(server);
    }
    std::lock_guard<std::mutex> l(call->mu);
    call->vfs = vfs;
    call->err = err;
    call->done = true;
    call->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> l(call->mu);
  if (!call->cv.wait_for(l, kNfsStatsTimeout, [&] { return call->done; }))
    return Status::DeadlineExceeded("NFS server " + server + " did not answer statfs of " + target + " within " +
                                    std::to_string(kNfsStatsTimeout.count()) + " s");
  if (call->err) return Status::FromErrno("statvfs " + target, call->err);
  *out = call->vfs;
  return Status::Ok();
}

}  // namespace

Status Node::GetVolumeStats(const std::string& path, VolumeStats* out) {
  Target target;
  NODEVOL_RETURN_IF_ERROR(ResolveTarget(pods_root_, path, &target));
  PublicationRecord pub;
  if (!LookupPublication(target.path, &pub) || pub.state != PublicationState::kPublished)
    return Status::NotFound("nothing is published at " + target.path);
  struct statvfs vfs;
  NODEVOL_RETURN_IF_ERROR(StatvfsTarget(target.path, &vfs));
  out->volume = pub.volume;
  out->total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  out->available_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  out->used_bytes = static_cast<uint64_t>(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
  out->total_inodes = vfs.f_files;
  out->free_inodes = vfs.f_ffree;
  out->used_inodes = vfs.f_files - vfs.f_ffree;
  return Status::Ok();
}

}  // namespace nodevol
