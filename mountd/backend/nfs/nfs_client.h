// NfsServer: where nodevold does anything that may wait for one NFS
// server, so that a dead or slow server can never hold a serving thread.
//
// - Filesystem calls on a server's mounts (statfs, stat, mkdir, rename,
//   removal, the open behind a bind) run on that server's own worker
//   thread, one call at a time, through Call(). The caller waits at most
//   the pool's timeout: then it gets DEADLINE_EXCEEDED naming the server
//   and the call, while the call goes on (or stays stuck in the kernel) on
//   the worker. While a call has been stuck longer than the timeout, every
//   new call fails at once with UNAVAILABLE ("server X has not answered
//   for N s") instead of queueing behind it; when the server answers again
//   the stuck call returns and the worker serves the queue again. One
//   thread per server at most is ever stuck, never a serving thread.
// - mount.nfs and umount run as child processes through Run() with the
//   timeout (process/run.h): a child stuck on the server is killed (NFS
//   waits are killable) or left to a reaper thread.
//
// A call that has to be given up must not touch the caller's memory: pass
// everything by value (Call takes a std::function that owns its captures)
// and get results through CallFor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

class NfsServer {
 public:
  // The one NfsServer of this process for `server` (host name or address),
  // created at first use and never destroyed: its worker may be stuck in
  // the kernel at exit.
  static std::shared_ptr<NfsServer> For(const std::string& server);

  const std::string& name() const { return name_; }

  // Runs fn on the worker; `what` names the call in errors ("statfs of
  // 10.0.0.5:/export"). DEADLINE_EXCEEDED after `timeout`, UNAVAILABLE at
  // once while an earlier call is stuck longer than `timeout`.
  Status Call(const std::string& what, std::chrono::milliseconds timeout, std::function<Status()> fn);

  // Call, with a result of type T copied to *out when the call finishes in time.
  template <class T>
  Status CallFor(const std::string& what, std::chrono::milliseconds timeout, std::function<Status(T*)> fn, T* out) {
    auto result = std::make_shared<T>();
    Status st = Call(what, timeout, [fn = std::move(fn), result] { return fn(result.get()); });
    if (st.ok()) *out = *result;
    return st;
  }

  // UNAVAILABLE when a call has been stuck on the worker longer than
  // `timeout`, else OK. Cheap; used before starting a mount.nfs.
  Status CheckAnswering(std::chrono::milliseconds timeout) const;

 private:
  struct Task;
  explicit NfsServer(std::string name);
  void Loop();

  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  std::shared_ptr<Task> running_;
  std::chrono::steady_clock::time_point running_since_;
};

// "server:/share", with an IPv6 address in brackets: what mount.nfs takes
// and the mount table shows as the source.
std::string NfsSpec(const std::string& server, const std::string& share);

// mount.nfs SERVER:SHARE DIR -o OPTIONS as a child process bounded by
// `timeout`: DEADLINE_EXCEEDED or UNAVAILABLE naming the server when it
// does not answer or refuses the connection, FAILED_PRECONDITION when it
// answers no (no such export, access denied), quoting mount.nfs.
Status MountNfs(const std::string& server, const std::string& share, const std::string& dir,
                const std::string& options, std::chrono::milliseconds timeout);

// Processes holding anything below one of `dirs` open (cwd, root, open
// files, memory maps), as "PID (comm)" lines; read from /proc links, which
// never asks the NFS server. nodevold itself only with include_self (its
// worker may hold a directory of a volume it is removing).
std::vector<std::string> ProcessesUsing(const std::vector<std::string>& dirs, bool include_self = true);

// Unmounts the NFS mount at `dir` without ever blocking longer than about
// 3 x `timeout`: umount -i -c (no umount.nfs, no stat of the path) as a
// child; if that hangs, or fails while the server's worker is stuck (the
// stuck call alone keeps the mount busy), umount -f (aborts the server's
// pending requests); if it is still mounted and no process but nodevold
// uses anything below `dir`, umount -l (detach now, freed when the last
// reference goes). When a process does use it: UNAVAILABLE naming the
// processes, left mounted. A quick failure on a live server (busy) is
// FAILED_PRECONDITION.
// `server` is for messages. Not mounted is success.
Status UnmountNfs(const std::string& dir, const std::string& server, std::chrono::milliseconds timeout);

}  // namespace nodevol
