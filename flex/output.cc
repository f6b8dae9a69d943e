#include "output.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace nodevol::flex {
namespace {

int g_out = STDOUT_FILENO;
std::atomic<bool> g_answered{false};
static_assert(std::atomic<bool>::is_always_lock_free, "used from signal handlers");

// Pre-rendered in normal context; the handlers only write them.
std::string g_crash_json;
std::string g_timeout_json;

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void Answer(const std::string& json, int code) {
  if (g_answered.exchange(true)) return;
  WriteAll(g_out, json.data(), json.size());
  if (code >= 0) ::_exit(code);
}

void OnCrash(int) { Answer(g_crash_json, 1); ::_exit(1); }
void OnTimeout(int) { Answer(g_timeout_json, 1); ::_exit(1); }

}  // namespace

void TakeStdout() {
  g_crash_json = Reply::Failure("nodevol-flex crashed; see `journalctl -t nodevol-flex`").ToJson();
  int saved = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (saved >= 0 && null >= 0) {
    g_out = saved;
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  if (null > STDERR_FILENO) ::close(null);
  struct sigaction sa {};
  sa.sa_handler = OnCrash;
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a vanished reader must not kill us mid-cleanup
}

void ArmWatchdog(std::chrono::milliseconds limit, const std::string& why) {
  g_timeout_json = Reply::Failure(why).ToJson();
  struct sigaction sa {};
  sa.sa_handler = OnTimeout;
  ::sigaction(SIGALRM, &sa, nullptr);
  struct itimerval it {};
  it.it_value.tv_sec = limit.count() / 1000;
  it.it_value.tv_usec = (limit.count() % 1000) * 1000;
  ::setitimer(ITIMER_REAL, &it, nullptr);
}

void WriteReply(const Reply& reply) { Answer(reply.ToJson(), -1); }

}  // namespace nodevol::flex
