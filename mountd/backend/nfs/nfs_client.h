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

  // A mount that found the server unreachable (no answer within the
  // timeout, connection refused, no route) is remembered for as long as
  // that timeout: mounts meanwhile fail at once with UNAVAILABLE quoting
  // it instead of each paying the timeout and a mount.nfs child (at start
  // with the server down, N publications to re-stage would cost N
  // timeouts). Any answer from the server (a mount, a call that returns)
  // forgets it. MountNfs does both; CheckMountable is for callers that
  // would wait for something else first.
  Status CheckMountable() const;
  void NoteUnreachable(const Status& why, std::chrono::milliseconds for_how_long);
  void NoteAnswered();

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
  std::chrono::steady_clock::time_point unreachable_at_{}, unreachable_until_{};
  std::string unreachable_why_;
};

// "server:/share", with an IPv6 address in brackets: what mount.nfs takes
// and the mount table shows as the source.
std::string NfsSpec(const std::string& server, const std::string& share);

// mount.nfs SERVER:SHARE DIR -o OPTIONS as a child process bounded by
// `timeout`: DEADLINE_EXCEEDED or UNAVAILABLE naming the server when it
// does not answer or refuses the connection, FAILED_PRECONDITION when it
// answers no (no such export, access denied), quoting mount.nfs.
// UNAVAILABLE at once, without a mount.nfs, while an earlier mount of the
// server found it unreachable less than `timeout` ago (CheckMountable).
Status MountNfs(const std::string& server, const std::string& share, const std::string& dir,
                const std::string& options, std::chrono::milliseconds timeout);

// Processes holding anything below one of `dirs` open (cwd, root, open
// files, memory maps), as "PID (comm)" lines; read from /proc links, which
// never asks the NFS server. nodevold itself only with include_self (its
// worker may hold a directory of a volume it is removing).
std::vector<std::string> ProcessesUsing(const std::vector<std::string>& dirs, bool include_self = true);

// ProcessesUsing(dirs, false) on a thread of its own, waited for at most
// `timeout`: reading a process's /proc/PID/maps waits for its memory map
// lock, which a process stuck in a fault on a dead NFS server holds
// forever. A scan that does not finish in time counts as "in use" (one
// line saying so); the thread is left to finish on its own. `scan` is
// the seam for tests.
std::vector<std::string> ProcessesUsingWithin(
    const std::vector<std::string>& dirs, std::chrono::milliseconds timeout,
    std::function<std::vector<std::string>(const std::vector<std::string>&)> scan = nullptr);

// Unmounts the NFS mount at `dir` without ever blocking longer than about
// 2 x `timeout`: umount -i -c (no umount.nfs, no stat of the path) as a
// child; if that fails (busy) or hangs (flushing to a server that does not
// answer) and no process but nodevold uses anything below `dir`, umount -l
// (detached now; the kernel writes what is pending when the server answers
// and frees it then). Never umount -f: that fails pending writes with EIO
// and drops them. When a process does use it: FAILED_PRECONDITION naming
// the processes (UNAVAILABLE when the server has not answered for longer
// than `timeout`), left mounted.
// `server` is for messages. Not mounted is success.
Status UnmountNfs(const std::string& dir, const std::string& server, std::chrono::milliseconds timeout);

}  // namespace nodevol
