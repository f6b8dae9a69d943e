#include "backend/nfs/nfs_client.h"

#include <dirent.h>
#include <limits.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <thread>

#include "backend/nfs/mountinfo.h"
#include "base/bounded_call.h"
#include "process/run.h"

namespace nodevol {
namespace {

using Clock = std::chrono::steady_clock;

std::string Seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", d.count() / 1000.0);
  return buf;
}

std::string FirstExisting(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return p;
  return "";
}

bool StillNfsMounted(const std::string& dir) {
  std::vector<MountInfo> mounts;
  if (!LoadMountInfo(&mounts).ok()) return true;  // unknown: assume the worst
  const MountInfo* m = FindMount(mounts, dir);
  return m && IsNfsType(m->fstype);
}

bool Below(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

}  // namespace

std::string NfsSpec(const std::string& server, const std::string& share) {
  bool v6 = server.find(':') != std::string::npos && server.front() != '[';
  return (v6 ? "[" + server + "]" : server) + ":" + share;
}

struct NfsServer::Task {
  std::string what;
  std::function<Status()> fn;
  bool started = false, done = false;
  Status status;
};

std::shared_ptr<NfsServer> NfsServer::For(const std::string& server) {
  static std::mutex mu;
  // Never destroyed: a worker may be stuck in the kernel when the process exits.
  static auto* servers = new std::map<std::string, std::shared_ptr<NfsServer>>();
  std::lock_guard<std::mutex> l(mu);
  auto& s = (*servers)[server];
  if (!s) {
    s.reset(new NfsServer(server));
    std::thread([self = s] { self->Loop(); }).detach();
  }
  return s;
}

NfsServer::NfsServer(std::string name) : name_(std::move(name)) {}

void NfsServer::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return !queue_.empty(); });
    std::shared_ptr<Task> t = queue_.front();
    queue_.pop_front();
    t->started = true;
    running_ = t;
    running_since_ = Clock::now();
    l.unlock();
    Status st = t->fn();
    l.lock();
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - running_since_);
    if (took > std::chrono::seconds(5))
      spdlog::warn("NFS server {}: {} took {} (the server was slow or not answering)", name_, t->what, Seconds(took));
    if (st.ok()) {
      unreachable_until_ = {};
      unreachable_why_.clear();
    }
    t->status = std::move(st);
    t->done = true;
    t->fn = nullptr;  // drop captures now
    running_.reset();
    cv_.notify_all();
  }
}

Status NfsServer::CheckAnswering(std::chrono::milliseconds timeout) const {
  std::lock_guard<std::mutex> l(mu_);
  if (!running_) return Status::Ok();
  auto stuck = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - running_since_);
  if (stuck <= timeout) return Status::Ok();
  return Status::Unavailable("NFS server " + name_ + " has not answered for " + Seconds(stuck) + " (" +
                             running_->what + " is still waiting for it); try again when it is back");
}

Status NfsServer::CheckMountable() const {
  std::lock_guard<std::mutex> l(mu_);
  auto now = Clock::now();
  if (now >= unreachable_until_) return Status::Ok();
  auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(now - unreachable_at_);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(unreachable_until_ - now);
  return Status::Unavailable("NFS server " + name_ + " was not reachable " + Seconds(ago) + " ago (" +
                             unreachable_why_ + "); not mounting from it for another " + Seconds(left));
}

void NfsServer::NoteUnreachable(const Status& why, std::chrono::milliseconds for_how_long) {
  std::lock_guard<std::mutex> l(mu_);
  unreachable_at_ = Clock::now();
  unreachable_until_ = unreachable_at_ + for_how_long;
  unreachable_why_ = why.message();
}

void NfsServer::NoteAnswered() {
  std::lock_guard<std::mutex> l(mu_);
  unreachable_until_ = {};
  unreachable_why_.clear();
}

Status NfsServer::Call(const std::string& what, std::chrono::milliseconds timeout, std::function<Status()> fn) {
  NODEVOL_RETURN_IF_ERROR(CheckAnswering(timeout));
  auto t = std::make_shared<Task>();
  t->what = what;
  t->fn = std::move(fn);
  std::unique_lock<std::mutex> l(mu_);
  queue_.push_back(t);
  cv_.notify_all();
  if (cv_.wait_until(l, Clock::now() + timeout, [&] { return t->done; })) return t->status;
  if (!t->started) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (*it == t) {
        queue_.erase(it);
        break;
      }
    std::string busy = running_ ? running_->what : "earlier calls";
    return Status::DeadlineExceeded("NFS server " + name_ + ": " + what + " did not start within " + Seconds(timeout) +
                                    " (waiting behind " + busy + ")");
  }
  return Status::DeadlineExceeded("NFS server " + name_ + " did not answer " + what + " within " + Seconds(timeout));
}

Status MountNfs(const std::string& server, const std::string& share, const std::string& dir,
                const std::string& options, std::chrono::milliseconds timeout) {
  std::string tool = FirstExisting({"/sbin/mount.nfs", "/usr/sbin/mount.nfs"});
  if (tool.empty())
    return Status::FailedPrecondition("mount.nfs is not installed (Debian/Ubuntu: nfs-common; RHEL: nfs-utils)");
  std::shared_ptr<NfsServer> srv = NfsServer::For(server);
  NODEVOL_RETURN_IF_ERROR(srv->CheckMountable());
  // nosuid,nodev always (suid and dev are refused options): root on the
  // node never runs a setuid program or opens a device node that the
  // server, or a pod writing to the export, put there (issue 69).
  std::vector<std::string> argv = {tool, NfsSpec(server, share), dir, "-o",
                                   options.empty() ? "nosuid,nodev" : options + ",nosuid,nodev"};
  RunOptions ro;
  ro.timeout = timeout;
  RunResult r;
  NODEVOL_RETURN_IF_ERROR(Run(argv, ro, &r));
  if (r.success()) {
    srv->NoteAnswered();
    return Status::Ok();
  }
  std::string what = "mount " + NfsSpec(server, share) + (options.empty() ? "" : " -o " + options) + " on " + dir;
  if (r.timed_out) {
    Status st = Status::DeadlineExceeded("NFS server " + server + " did not answer within " + Seconds(timeout) +
                                         " (" + what + ")");
    srv->NoteUnreachable(st, timeout);
    return st;
  }
  std::string err = r.Describe();
  for (const char* down : {"Connection refused", "timed out", "No route to host", "Network is unreachable",
                           "Failed to resolve", "not responding", "Name or service not known"})
    if (err.find(down) != std::string::npos) {
      Status st = Status::Unavailable("NFS server " + server + " is not reachable: " + what + ": mount.nfs " + err);
      srv->NoteUnreachable(st, timeout);
      return st;
    }
  srv->NoteAnswered();  // it answered no
  return Status::FailedPrecondition("NFS server " + server + " refused " + what + ": mount.nfs " + err);
}

std::vector<std::string> ProcessesUsing(const std::vector<std::string>& dirs, bool include_self) {
  std::vector<std::string> out;
  auto hit = [&](const std::string& p) {
    for (const std::string& d : dirs)
      if (Below(p, d)) return true;
    return false;
  };
  auto link = [](const std::string& p) {
    char buf[PATH_MAX];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  };
  const std::string self = include_self ? "" : std::to_string(::getpid());
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (struct dirent* e = ::readdir(proc)) {
    std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (pid == self) continue;
    std::string base = "/proc/" + pid;
    bool uses = hit(link(base + "/cwd")) || hit(link(base + "/root"));
    if (!uses) {
      if (DIR* fds = ::opendir((base + "/fd").c_str())) {
        while (struct dirent* f = ::readdir(fds))
          if (f->d_name[0] != '.' && hit(link(base + "/fd/" + f->d_name))) {
            uses = true;
            break;
          }
        ::closedir(fds);
      }
    }
    if (!uses) {
      std::ifstream maps(base + "/maps");
      for (std::string line; !uses && std::getline(maps, line);) {
        size_t slash = line.find('/');
        if (slash != std::string::npos && hit(line.substr(slash))) uses = true;
      }
    }
    if (uses) {
      std::string comm;
      std::ifstream(base + "/comm") >> comm;
      out.push_back(pid + " (" + comm + ")");
    }
  }
  ::closedir(proc);
  return out;
}

std::vector<std::string> ProcessesUsingWithin(
    const std::vector<std::string>& dirs, std::chrono::milliseconds timeout,
    std::function<std::vector<std::string>(const std::vector<std::string>&)> scan) {
  if (!scan) scan = [](const std::vector<std::string>& d) { return ProcessesUsing(d, false); };
  auto users = std::make_shared<std::vector<std::string>>();
  Status st = CallWithin(timeout, "the scan of /proc", [users, dirs, scan = std::move(scan)] {
    *users = scan(dirs);
    return Status::Ok();
  });
  if (st.ok()) return *users;
  return {"(unknown: the scan of /proc did not finish within " + Seconds(timeout) +
          "; a process may be stuck in a fault on the server)"};
}

Status UnmountNfs(const std::string& dir, const std::string& server, std::chrono::milliseconds timeout) {
  if (!StillNfsMounted(dir)) return Status::Ok();
  std::string tool = FirstExisting({"/bin/umount", "/usr/bin/umount", "/sbin/umount"});
  if (tool.empty()) return Status::FailedPrecondition("umount is not installed (util-linux)");
  RunOptions ro;
  ro.timeout = timeout;
  RunResult r;
  // -i: not umount.nfs, which asks the server; -c: no path canonicalization,
  // which would stat the mount point.
  NODEVOL_RETURN_IF_ERROR(Run({tool, "-i", "-c", dir}, ro, &r));
  if (!StillNfsMounted(dir)) return Status::Ok();
  // Busy, or stuck flushing to a server that does not answer. Never -f: a
  // forced unmount fails every pending WRITE and COMMIT with EIO and drops
  // the pages, writes a pod that already left believes are safe; a hard
  // mount delivers them when the server is back. When no process uses
  // anything below dir (nodevold's own worker stuck in a call there is
  // no user), detach it: the kernel keeps the superblock, flushes it when
  // the server answers and frees it then.
  std::vector<std::string> users = ProcessesUsingWithin({dir}, timeout);
  if (!users.empty()) {
    std::string list;
    for (const std::string& u : users) list += (list.empty() ? "" : ", ") + u;
    Status answering = NfsServer::For(server)->CheckAnswering(timeout);
    if (!r.timed_out && answering.ok())
      return Status::FailedPrecondition("unmount " + dir + " (NFS " + server + "): busy: " + list + " use files below " +
                                        dir + "; left mounted");
    return Status::Unavailable("NFS server " + server + " is not answering and " + list + " use files below " + dir +
                               "; left mounted (nodevold detaches a mount only when nothing uses it)");
  }
  spdlog::warn("NFS server {}: unmounting {}: umount {}; no process uses it: detaching it (the kernel writes what is "
               "pending when the server answers, then frees it)",
               server, dir, r.Describe());
  NODEVOL_RETURN_IF_ERROR(Run({tool, "-i", "-c", "-l", dir}, ro, &r));
  if (!StillNfsMounted(dir)) {
    spdlog::warn("NFS server {}: {} detached lazily", server, dir);
    return Status::Ok();
  }
  return Status::Unavailable("NFS server " + server + ": " + dir + " could not be unmounted, even lazily: umount " +
                             r.Describe());
}

}  // namespace nodevol
