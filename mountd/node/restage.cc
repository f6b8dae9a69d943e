// Node: re-creating, after the start, the binds whose staging waits for a
// server (NFS). At start every bind of a pool whose Stage may wait is left
// here: one dead server would otherwise hold the whole node's start (and
// every local pool with it) past systemd's start timeout, restarting it in
// a loop. The thread retries each target until its bind is back, its
// publication is gone (an Unpublish came first), or nodevold stops; each
// try runs under the target's and the volume's locks, as a Publish does.
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "mount/bind.h"
#include "mount/mount_table.h"
#include "node/node.h"

namespace nodevol {

namespace {
// While the server stays down a try costs little: the backend fails fast
// for a while after a mount timed out (backend/nfs/nfs_client.h).
constexpr auto kRetryEvery = std::chrono::seconds(10);
}  // namespace

Node::~Node() {
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (restager_.joinable()) restager_.join();
}

void Node::RestageLoop() {
  std::vector<std::string> pending = std::move(restage_);
  while (!pending.empty()) {
    std::vector<std::string> again;
    for (const std::string& target : pending) {
      {
        std::lock_guard<std::mutex> l(stop_mu_);
        if (stopping_) return;
      }
      // No caller waits here (no CallScope): these waits end when the key
      // is free.
      LockTable::Guard tg(&locks_, TargetKey(target));
      PublicationRecord pub;
      if (!tg.status().ok()) {
        again.push_back(target);
        continue;
      }
      if (!LookupPublication(target, &pub)) continue;  // unpublished meanwhile
      LockTable::Guard vg(&locks_, VolumeKey(pub.volume));
      if (!vg.status().ok()) {
        again.push_back(target);
        continue;
      }
      // The pod went while its bind waited: nothing is mounted there, and
      // a record left "published" would refuse the volume's delete until
      // the next start. It goes, as a start's reconcile drops it.
      auto gone = [&] {
        struct statx st;
        if (::statx(AT_FDCWD, target.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &st) != 0)
          return errno == ENOENT;
        return !IsTargetType(st.stx_mode);
      };
      if (gone()) {
        RollBack(pub, "target directory is gone; record removed");
        spdlog::warn("publication of {} at {}: the target directory is gone; its record is removed", pub.volume,
                     target);
        continue;
      }
      MountTable table;
      if (table.Load().ok() && table.FindTarget(target)) continue;  // a Publish re-created it
      unsigned long flags = 0;
      ParseBindOptions(pub.mount_options, &flags);  // validated when recorded
      Status s = Rebind(&pub, flags & ~MS_RDONLY);
      if (!s.ok() && gone()) {
        RollBack(pub, "target directory went while its bind was re-created; record removed");
        spdlog::warn("publication of {} at {}: the target directory went while its bind was re-created; its record "
                     "is removed", pub.volume, target);
        continue;
      }
      if (!s.ok()) {
        spdlog::warn("publication of {} at {}: bind mount is missing and {}; trying again in {} s", pub.volume,
                     target, s.message(), kRetryEvery.count());
        again.push_back(target);
        continue;
      }
      spdlog::info("publication of {} at {}: bind mount re-created", pub.volume, target);
      AddDrift("publication of " + pub.volume + " at " + target + ": bind mount was missing; re-created after the start");
    }
    pending = std::move(again);
    std::unique_lock<std::mutex> l(stop_mu_);
    if (!pending.empty() && stop_cv_.wait_for(l, kRetryEvery, [this] { return stopping_; })) return;
  }
}

}  // namespace nodevol
