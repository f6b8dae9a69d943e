#include "install.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace nodevol::flex {
namespace {

namespace fs = std::filesystem;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool FsyncPath(const std::string& path, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    *error = Errno("fsync " + path);
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

// Copies the running executable to `path` (which must not be visible to
// kubelet yet), mode 0755, durable.
bool WriteExecutable(int out, const std::string& path, std::string* error) {
  int in = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    *error = Errno("open /proc/self/exe");
    return false;
  }
  char buf[1 << 16];
  bool ok = true;
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      *error = Errno("read /proc/self/exe");
      break;
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out, buf + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        *error = Errno("write " + path);
        ok = false;
        break;
      }
      done += w;
    }
    if (!ok) break;
  }
  ::close(in);
  if (ok && (::fchmod(out, 0755) != 0 || ::fsync(out) != 0)) {
    *error = Errno("finish " + path);
    ok = false;
  }
  return ok;
}

// Removes dot entries an interrupted install or uninstall left in dir.
void RemoveLeftovers(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.starts_with(prefix)) fs::remove_all(e.path(), ec);
  }
}

bool ResolvePluginDir(const std::string& plugin_dir, std::string* resolved, std::string* error) {
  char buf[PATH_MAX];
  struct stat st;
  if (!::realpath(plugin_dir.c_str(), buf) || ::stat(buf, &st) != 0) {
    *error = Errno("plugin directory " + plugin_dir) +
             " (create it, or pass the directory kubelet's --volume-plugin-dir names)";
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = "plugin directory " + plugin_dir + " is not a directory";
    return false;
  }
  *resolved = buf;
  return true;
}

// Upgrade: a new executable renamed over the old one.
bool Replace(const std::string& driver_dir, std::string* error) {
  std::string tmp = driver_dir + "/." + kDriverFile + ".XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    *error = Errno("create " + tmp);
    return false;
  }
  bool ok = WriteExecutable(fd, tmp, error);
  ::close(fd);
  std::string final_path = driver_dir + "/" + kDriverFile;
  if (ok && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    *error = Errno("rename to " + final_path);
    ok = false;
  }
  if (!ok) ::unlink(tmp.c_str());
  return ok && FsyncPath(driver_dir, error);
}

}  // namespace

bool InstallDriver(const std::string& plugin_dir, std::string* message) {
  std::string dir;
  if (!ResolvePluginDir(plugin_dir, &dir, message)) return false;
  std::string driver_dir = dir + "/" + kDriverDir;
  RemoveLeftovers(dir, std::string(".") + kDriverDir + ".");

  struct stat st;
  if (::lstat(driver_dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      *message = driver_dir + " exists and is not a directory; remove it first";
      return false;
    }
    RemoveLeftovers(driver_dir, std::string(".") + kDriverFile + ".");
    if (!Replace(driver_dir, message)) return false;
    *message = "upgraded " + driver_dir + "/" + kDriverFile;
    return true;
  }

  // First install: the whole directory appears at once.
  std::string tmp = dir + "/." + kDriverDir + ".XXXXXX";
  if (!::mkdtemp(tmp.data())) {
    *message = Errno("create " + tmp);
    return false;
  }
  std::string file = tmp + "/" + kDriverFile;
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  bool ok = fd >= 0 && ::chmod(tmp.c_str(), 0755) == 0;
  if (!ok) *message = Errno("create " + file);
  if (ok) ok = WriteExecutable(fd, file, message);
  if (fd >= 0) ::close(fd);
  if (ok) ok = FsyncPath(tmp, message);
  if (ok && ::rename(tmp.c_str(), driver_dir.c_str()) != 0) {
    int err = errno;
    std::error_code ec;
    fs::remove_all(tmp, ec);
    // Someone installed at the same time: upgrade over theirs.
    if (err == EEXIST || err == ENOTEMPTY) return InstallDriver(plugin_dir, message);
    errno = err;
    *message = Errno("rename to " + driver_dir);
    return false;
  }
  if (!ok) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return false;
  }
  if (!FsyncPath(dir, message)) return false;
  *message = "installed " + driver_dir + "/" + kDriverFile;
  return true;
}

bool UninstallDriver(const std::string& plugin_dir, std::string* message) {
  std::string dir;
  if (!ResolvePluginDir(plugin_dir, &dir, message)) return false;
  std::string driver_dir = dir + "/" + kDriverDir;
  RemoveLeftovers(dir, std::string(".") + kDriverDir + ".");
  struct stat st;
  if (::lstat(driver_dir.c_str(), &st) != 0) {
    *message = "not installed in " + dir;
    return true;
  }
  // Gone from kubelet's view in one step; then deleted at leisure.
  std::string gone = dir + "/." + kDriverDir + ".removed-" + std::to_string(::getpid());
  if (::rename(driver_dir.c_str(), gone.c_str()) != 0) {
    *message = Errno("rename " + driver_dir);
    return false;
  }
  std::error_code ec;
  fs::remove_all(gone, ec);
  if (ec) {
    *message = "removed the driver from kubelet's view but could not delete " + gone + ": " + ec.message();
    return false;
  }
  std::string ignored;  // the driver is gone either way
  FsyncPath(dir, &ignored);
  *message = "removed " + driver_dir;
  return true;
}

}  // namespace nodevol::flex
