#include "flex_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <cerrno>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

extern char** environ;

namespace nodevol::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string StringField(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

// In the forked child (syscalls only): see RunExe's dev_log.
bool PrivateDev(const char* dev_log) {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=0755") != 0)
    return false;
  struct {
    const char* path;
    unsigned minor;
  } devs[] = {{"/dev/null", 3}, {"/dev/zero", 5}, {"/dev/random", 8}, {"/dev/urandom", 9}};
  for (const auto& d : devs)
    if (mknod(d.path, S_IFCHR | 0666, makedev(1, d.minor)) != 0) return false;
  int fd = open("/dev/log", O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  close(fd);
  return mount(dev_log, "/dev/log", nullptr, MS_BIND, nullptr) == 0;
}

}  // namespace

std::string FlexResult::status() const { return StringField(json, "status"); }
std::string FlexResult::message() const { return StringField(json, "message"); }

FlexResult RunExe(const std::string& exe, const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env, Capture capture, std::chrono::seconds limit,
                  const std::string& dev_log) {
  FlexResult r;
  // Everything the child needs is built before fork: a child of a threaded
  // process may only make async-signal-safe calls.
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::map<std::string, std::string> env_map;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    // The driver's own overrides come from env only, never from whoever
    // runs the tests.
    if (eq != std::string::npos && kv.rfind("NODEVOL_FLEX_", 0) != 0) env_map[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) env_map[k] = v;
  std::vector<std::string> env_s;
  for (const auto& [k, v] : env_map) env_s.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  // O_CLOEXEC so that drivers run by other test threads never inherit our
  // pipe ends (which would delay our EOF, like a leak would).
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  bool separate = capture == Capture::kSeparate;
  if (pipe2(out, O_CLOEXEC) != 0 || (separate && pipe2(err, O_CLOEXEC) != 0)) {
    r.parse_error = "pipe failed";
    return r;
  }
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(separate ? err[1] : out[1], 2);
    close_range(3, ~0U, 0);  // like Go's os/exec: only 0, 1, 2 are passed on
    if (!dev_log.empty() && !PrivateDev(dev_log.c_str())) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  if (separate) close(err[1]);
  if (pid < 0) {
    close(out[0]);
    if (separate) close(err[0]);
    r.parse_error = "fork failed";
    return r;
  }

  int fds[2] = {out[0], separate ? err[0] : -1};
  std::string* bufs[2] = {&r.output, &r.err};
  bool exited = false;
  int status = 0;
  Clock::time_point exit_time;
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    poll(p, 2, 10);
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(fds[i], buf, sizeof buf);
      if (n > 0) {
        bufs[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
    auto now = Clock::now();
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      exit_time = now;
    }
    if (exited && now - exit_time > std::chrono::seconds(2)) {
      r.pipe_held = true;  // kubelet would hang here
      break;
    }
    if (!exited && now - start > limit) {
      kill(pid, SIGKILL);
      r.timed_out = true;
      break;
    }
  }
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  for (int fd : fds)
    if (fd >= 0) close(fd);
  if (!exited) waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  // kubelet: json.Unmarshal of the whole output; anything but one JSON
  // value (whitespace aside) is an error. The contract's value is an object.
  try {
    nlohmann::json j = nlohmann::json::parse(r.output);
    if (j.is_object()) r.json = std::move(j);
    else r.parse_error = "output is JSON but not an object";
  } catch (const nlohmann::json::exception& e) {
    r.parse_error = e.what();
  }
  return r;
}

std::string KubeletJson(const std::map<std::string, std::string>& options) {
  std::string s = nlohmann::json(options).dump();
  std::string out;
  for (char c : s) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

std::string Describe(const FlexResult& r) {
  std::ostringstream os;
  os << "exit=" << r.exit_code << " elapsed=" << r.elapsed.count() << "ms"
     << (r.pipe_held ? " PIPE-HELD" : "") << (r.timed_out ? " TIMED-OUT" : "") << "\n  output: [" << r.output
     << "]";
  if (!r.err.empty()) os << "\n  stderr: [" << r.err << "]";
  if (!r.parse_error.empty()) os << "\n  parse error: " << r.parse_error;
  return os.str();
}

}  // namespace nodevol::testing
