#include "process/without_capability.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <thread>

#include "base/call_scope.h"

namespace nodevol {
namespace {

// The raw system calls: libcap's job, but two words of bits do not need a
// library, and these act on the calling thread only, which is the point.
struct Caps {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
};

bool Get(Caps* c) { return ::syscall(SYS_capget, &c->header, c->data) == 0; }

Status Drop(int capability) {
  if (capability < 0 || capability >= 32 * _LINUX_CAPABILITY_U32S_3)
    return Status::InvalidArgument("no capability " + std::to_string(capability));
  Caps c;
  if (!Get(&c)) return Status::FromErrno("capget", errno);
  const uint32_t bit = 1u << (capability % 32);
  auto& word = c.data[capability / 32];
  word.effective &= ~bit;
  word.permitted &= ~bit;
  word.inheritable &= ~bit;
  c.header = {_LINUX_CAPABILITY_VERSION_3, 0};
  if (::syscall(SYS_capset, &c.header, c.data) != 0) return Status::FromErrno("capset", errno);
  if (HasEffectiveCapability(capability))
    return Status::Internal("capability " + std::to_string(capability) + " still effective after capset");
  return Status::Ok();
}

}  // namespace

bool HasEffectiveCapability(int capability) {
  if (capability < 0 || capability >= 32 * _LINUX_CAPABILITY_U32S_3) return false;
  Caps c;
  if (!Get(&c)) return false;
  return c.data[capability / 32].effective & (1u << (capability % 32));
}

Status RunWithoutCapability(int capability, const std::function<Status()>& fn) {
  const auto deadline = CallScope::Deadline();
  const std::string what = CallScope::What();
  Status result;
  try {
    std::thread t([&] {
      CallScope scope(deadline, what);
      Status dropped = Drop(capability);
      result = dropped.ok() ? fn()
                            : Status::Internal("cannot drop capability " + std::to_string(capability) +
                                               " for a thread: " + dropped.message());
    });
    t.join();
  } catch (const std::system_error& e) {
    return Status::ResourceExhausted(std::string("cannot start a thread: ") + e.what());
  }
  return result;
}

}  // namespace nodevol
