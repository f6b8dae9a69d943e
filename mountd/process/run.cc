#include "process/run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/unique_fd.h"

namespace nodevol {
namespace {

using Clock = std::chrono::steady_clock;

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Milliseconds left until `deadline`, for poll(2); 0 when past.
int Remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

void Append(std::string* buf, const char* data, size_t n, size_t max) {
  if (buf->size() >= max) return;
  buf->append(data, std::min(n, max - buf->size()));
  if (buf->size() >= max) buf->append("\n[output truncated]");
}

// The line of a tool's output that says what went wrong: the last one,
// leaving out a usage text after it (mkfs.xfs) and lvm's "Run `lvcreate
// --help'" hint, trimmed.
std::string ErrorLine(const std::string& s) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < s.size()) {
    size_t nl = s.find('\n', at);
    if (nl == std::string::npos) nl = s.size();
    std::string line = s.substr(at, nl - at);
    at = nl + 1;
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") + 1 - b);
    if (line.rfind("Usage:", 0) == 0 || line.rfind("usage:", 0) == 0) break;
    if (line.rfind("Run `", 0) == 0) continue;
    lines.push_back(line);
  }
  return lines.empty() ? "" : lines.back();
}

std::string Program(const std::vector<std::string>& argv) {
  std::string p = argv[0];
  return p.substr(p.rfind('/') + 1);
}

}  // namespace

std::string RunResult::Describe() const {
  if (timed_out) return "timed out after " + std::to_string(elapsed.count()) + " ms";
  std::string text = term_signal ? "killed by signal " + std::to_string(term_signal) : "exit " + std::to_string(exit_code);
  std::string line = ErrorLine(err.empty() ? out : err);
  if (!line.empty()) text += ": " + line;
  return text;
}

Status Run(const std::vector<std::string>& argv, const RunOptions& options, RunResult* result) {
  *result = RunResult{};
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/')
    return Status::Internal("Run: program must be an absolute path");
  auto start = Clock::now();
  auto deadline = start + options.timeout;

  int in_pipe[2] = {-1, -1}, out_pipe[2], err_pipe[2];
  if (!options.input.empty() && ::pipe2(in_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  UniqueFd in_r(in_pipe[0]), in_w(in_pipe[1]);
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_r.get() >= 0) posix_spawn_file_actions_adddup2(&fa, in_r.get(), 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, err_w.get(), 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // whatever the daemon has open stays there

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // nodevold blocks SIGTERM in every thread
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  env.insert(env.end(), options.env.begin(), options.env.end());
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid;
  int rc = ::posix_spawn(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::FromErrno("start " + argv[0], rc);
  in_r.reset();
  out_w.reset();
  err_w.reset();
  UniqueFd pidfd(PidfdOpen(pid));

  // Feed stdin, drain stdout/stderr, until both close and the child exits
  // or the deadline passes.
  size_t written = 0;
  if (in_w.get() >= 0) ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);
  bool exited = false;
  while (!result->timed_out) {
    struct pollfd p[4];
    int n = 0;
    int in_idx = -1, out_idx = -1, err_idx = -1, pid_idx = -1;
    if (in_w.get() >= 0) p[in_idx = n++] = {in_w.get(), POLLOUT, 0};
    if (out_r.get() >= 0) p[out_idx = n++] = {out_r.get(), POLLIN, 0};
    if (err_r.get() >= 0) p[err_idx = n++] = {err_r.get(), POLLIN, 0};
    if (!exited && pidfd.get() >= 0) p[pid_idx = n++] = {pidfd.get(), POLLIN, 0};
    if (out_idx < 0 && err_idx < 0 && (exited || pidfd.get() < 0)) break;
    // After the child exits, only a process it left behind can hold the
    // pipes open: take what is already there, not wait for it.
    int wait_ms = exited ? std::min(Remaining(deadline), 200) : Remaining(deadline);
    int r = ::poll(p, n, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (!exited) result->timed_out = true;
      break;
    }
    char buf[16384];
    for (auto [idx, fd, dst] : {std::tuple{out_idx, &out_r, &result->out}, std::tuple{err_idx, &err_r, &result->err}}) {
      if (idx < 0 || !(p[idx].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::read(fd->get(), buf, sizeof buf);
      if (got > 0) Append(dst, buf, got, options.max_output);
      else if (got == 0 || errno != EINTR) fd->reset();
    }
    if (in_idx >= 0 && (p[in_idx].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(in_w.get(), options.input.data() + written, options.input.size() - written);
      if (w > 0) written += w;
      if (w < 0 && errno != EAGAIN && errno != EINTR) in_w.reset();
      if (written == options.input.size()) in_w.reset();
    }
    if (pid_idx >= 0 && (p[pid_idx].revents & POLLIN)) exited = true;
  }

  int status = 0;
  if (result->timed_out) {
    ::kill(-pid, SIGKILL);
    // A process in uninterruptible sleep dies only when the kernel lets it:
    // give it a moment, then let a thread reap it whenever that is.
    struct pollfd p = {pidfd.get(), POLLIN, 0};
    if (pidfd.get() >= 0 && ::poll(&p, 1, 1000) == 1) {
      ::waitpid(pid, &status, 0);
    } else {
      std::thread([pid] { ::waitpid(pid, nullptr, 0); }).detach();
    }
  } else {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) result->exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result->term_signal = WTERMSIG(status);
  }
  result->elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return Status::Ok();
}

Status RunChecked(const std::vector<std::string>& argv, const RunOptions& options, RunResult* result) {
  NODEVOL_RETURN_IF_ERROR(Run(argv, options, result));
  if (result->success()) return Status::Ok();
  std::string text = Program(argv) + " " + result->Describe();
  if (result->timed_out) return Status::DeadlineExceeded(text);
  return Status::Internal(text);
}

}  // namespace nodevol
