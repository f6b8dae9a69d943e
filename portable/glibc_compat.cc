// Symbols Debian 12's static archives ask of glibc that RHEL 9's glibc
// 2.34 does not have (portable/README.md). Linked only into the programs
// the packages ship; a definition here takes the place of glibc's, so the
// binary carries no version newer than GLIBC_2.34.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

// libstdc++.a's std::random_device (random.o) calls arc4random, new in
// glibc 2.36. getrandom(2) is in glibc since 2.25 and Linux since 3.17; it
// blocks only until the kernel's pool is first seeded, at boot.
extern "C" uint32_t arc4random(void) {
  uint32_t v;
  for (;;) {
    ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == static_cast<ssize_t>(sizeof v)) return v;
    if (n < 0 && errno != EINTR) abort();  // ENOSYS: a kernel older than 3.17
  }
}
