#include "mount/target.h"

#include <limits.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace nodevol {
namespace {

constexpr char kCsiPluginDir[] = "kubernetes.io~csi";
// kubelet's directory of FlexVolume driver nodevol.io/volume (the only
// one nodevold serves: docs/flexvolume.md); a secret's, an emptyDir's or
// another driver's directory is no target.
constexpr char kFlexPluginDir[] = "nodevol.io~volume";
constexpr char kCsiDriverName[] = "nodevol.io";

// The CSI driver kubelet recorded for a PV's directory (vol_data.json,
// which kubelet writes before NodePublishVolume): "" when there is none
// (csi-sanity makes none). A file that is not a small regular JSON file
// with a driverName is a refusal, not "none".
Status CsiDriverOf(const std::string& dir, std::string* driver) {
  driver->clear();
  const std::string path = dir + "/vol_data.json";
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return Status::Ok();
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { ::close(*f); });
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 64 * 1024)
    return Status::InvalidArgument(path + " is not kubelet's volume data file");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  if (::read(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return Status::FromErrno("read " + path, errno);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("driverName") || !j["driverName"].is_string())
    return Status::InvalidArgument(path + " names no driverName");
  *driver = j["driverName"].get<std::string>();
  return Status::Ok();
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 1;  // skip the leading '/'
  while (start <= s.size()) {
    size_t end = s.find('/', start);
    if (end == std::string::npos) end = s.size();
    parts.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool AllOf(const std::string& s, bool (*ok)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!ok(c)) return false;
  return true;
}

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

bool RealPath(const std::string& path, std::string* out, int* err) {
  std::unique_ptr<char, decltype(&free)> r(::realpath(path.c_str(), nullptr), &free);
  if (!r) {
    *err = errno;
    return false;
  }
  *out = r.get();
  return true;
}

Status Invalid(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("target \"" + path + "\" " + why +
                                 "; expected <pods root>/<podUID>/volumes/<vendor~driver>/<name> or "
                                 "<pods root>/<podUID>/volumes/kubernetes.io~csi/<name>/mount");
}

}  // namespace

Status ResolveExistingPart(const std::string& path, std::string* out) {
  std::string head = path, tail;
  for (;;) {
    int err = 0;
    std::string resolved;
    if (RealPath(head.empty() ? "/" : head, &resolved, &err)) {
      *out = (resolved == "/" ? "" : resolved) + tail;
      if (out->empty()) *out = "/";
      return Status::Ok();
    }
    if (err != ENOENT) return Status::FromErrno("resolve " + head, err);
    size_t slash = head.rfind('/');
    if (slash == std::string::npos) return Status::InvalidArgument("\"" + path + "\" is not an absolute path");
    tail = head.substr(slash) + tail;
    head = head.substr(0, slash);
  }
}

Status ResolveTarget(const std::string& pods_root, const std::string& path, Target* out,
                     bool allow_missing_parent) {
  if (path.empty()) return Status::InvalidArgument("target is empty");
  if (path.find('\0') != std::string::npos) return Status::InvalidArgument("target contains a NUL byte");
  if (path.size() >= PATH_MAX) return Status::InvalidArgument("target is longer than PATH_MAX");
  if (path[0] != '/') return Invalid(path, "is not an absolute path");
  std::string p = path;
  if (p.size() > 1 && p.back() == '/') p.pop_back();
  for (const std::string& c : Split(p)) {
    if (c.empty()) return Invalid(path, "has an empty component");
    if (c == "." || c == "..") return Invalid(path, "has a \"" + c + "\" component");
  }

  // Resolve every symlink: the target itself when it exists, else its parent.
  std::string resolved;
  int err = 0;
  out->exists = false;
  if (RealPath(p, &resolved, &err)) {
    out->exists = true;
  } else if (err == ENOENT) {
    struct stat lst;
    if (::lstat(p.c_str(), &lst) == 0) return Invalid(path, "is a dangling symlink");
    size_t slash = p.rfind('/');
    std::string parent = p.substr(0, slash == 0 ? 1 : slash);
    std::string rparent;
    if (!RealPath(parent, &rparent, &err)) {
      if (err == ENOENT && allow_missing_parent) {
        // Kubelet may have removed the directories already; its root may
        // still be a symlink.
        NODEVOL_RETURN_IF_ERROR(ResolveExistingPart(parent, &rparent));
      } else if (err == ENOENT) {
        return Invalid(path, "has no parent directory");
      } else {
        return Status::FromErrno("resolve " + parent, err);
      }
    }
    resolved = rparent + "/" + p.substr(slash + 1);
  } else {
    return Status::FromErrno("resolve " + path, err);
  }

  std::string prefix = pods_root + "/";
  if (resolved.compare(0, prefix.size(), prefix) != 0)
    return Invalid(path, "resolves to \"" + resolved + "\", outside the pods root \"" + pods_root + "\"");
  std::vector<std::string> rest = Split("/" + resolved.substr(prefix.size()));
  bool csi = rest.size() == 5 && rest[2] == kCsiPluginDir;
  // kubelet's CSI volume directory holds vol_data.json; the mount goes
  // one level deeper.
  if ((rest.size() != 4 && !csi) || rest[1] != "volumes" || (!csi && rest[2] == kCsiPluginDir))
    return Invalid(path, "resolves to \"" + resolved + "\"");
  if (csi && !AllOf(rest[4], NameChar)) return Invalid(path, "has an invalid directory name \"" + rest[4] + "\"");
  if (!AllOf(rest[0], NameChar)) return Invalid(path, "has an invalid pod UID \"" + rest[0] + "\"");
  size_t tilde = rest[2].find('~');
  if (tilde == std::string::npos || tilde == 0 || tilde + 1 == rest[2].size() ||
      !AllOf(rest[2].substr(0, tilde), NameChar) || !AllOf(rest[2].substr(tilde + 1), NameChar))
    return Invalid(path, "has an invalid plugin directory \"" + rest[2] + "\"");
  if (!AllOf(rest[3], NameChar)) return Invalid(path, "has an invalid volume name \"" + rest[3] + "\"");
  if (!csi && rest[2] != kFlexPluginDir)
    return Invalid(path, "is in \"" + rest[2] + "\", not nodevol's FlexVolume directory " + kFlexPluginDir);
  if (csi) {
    std::string driver;
    NODEVOL_RETURN_IF_ERROR(CsiDriverOf(prefix + rest[0] + "/volumes/" + rest[2] + "/" + rest[3], &driver));
    if (!driver.empty() && driver != kCsiDriverName)
      return Invalid(path, "is a volume of CSI driver \"" + driver + "\", not " + kCsiDriverName);
  }
  if (out->exists) {
    // Type only, from the cache: a target can be a bind of an NFS export
    // whose server is gone, where stat(2) would hang (mount/bind.h).
    struct statx st;
    if (::statx(AT_FDCWD, resolved.c_str(), AT_STATX_DONT_SYNC, STATX_TYPE, &st) != 0)
      return Status::FromErrno("stat " + resolved, errno);
    if (!S_ISDIR(st.stx_mode)) return Invalid(path, "is not a directory");
  }
  out->path = resolved;
  out->pod_uid = rest[0];
  out->plugin = rest[2];
  out->name = rest[3];
  out->leaf = csi ? rest[4] : "";
  return Status::Ok();
}

Status ResolveBlockTarget(const std::string& block_root, const std::string& path, Target* out,
                          bool allow_missing_parent) {
  auto invalid = [&](const std::string& why) {
    return Status::InvalidArgument("raw block target \"" + path + "\" " + why + "; expected " + block_root +
                                   "/<pv>/<podUID>");
  };
  if (path.empty()) return Status::InvalidArgument("target is empty");
  if (path.find('\0') != std::string::npos) return Status::InvalidArgument("target contains a NUL byte");
  if (path.size() >= PATH_MAX) return Status::InvalidArgument("target is longer than PATH_MAX");
  if (path[0] != '/' || path.back() == '/') return invalid("is not an absolute file path");
  for (const std::string& c : Split(path)) {
    if (c.empty()) return invalid("has an empty component");
    if (c == "." || c == "..") return invalid("has a \"" + c + "\" component");
  }
  // The file itself is never followed: a symlink there is refused below.
  size_t slash = path.rfind('/');
  std::string parent = path.substr(0, slash), leaf = path.substr(slash + 1), rparent;
  int err = 0;
  if (!RealPath(parent, &rparent, &err)) {
    if (err != ENOENT) return Status::FromErrno("resolve " + parent, err);
    if (!allow_missing_parent) return invalid("has no parent directory");
    NODEVOL_RETURN_IF_ERROR(ResolveExistingPart(parent, &rparent));
  }
  std::string prefix = block_root + "/";
  if (rparent.compare(0, prefix.size(), prefix) != 0)
    return invalid("resolves to \"" + rparent + "/" + leaf + "\", outside " + block_root);
  std::vector<std::string> rest = Split("/" + rparent.substr(prefix.size()));
  if (rest.size() != 1 || !AllOf(rest[0], NameChar)) return invalid("has an invalid volume directory");
  if (!AllOf(leaf, NameChar)) return invalid("has an invalid pod UID \"" + leaf + "\"");
  std::string resolved = rparent + "/" + leaf;
  struct statx st;
  out->exists = false;
  if (::statx(AT_FDCWD, resolved.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &st) == 0) {
    // A bind of the device onto the file shows the device node.
    if (!S_ISREG(st.stx_mode) && !S_ISBLK(st.stx_mode)) return invalid("is not a regular file");
    out->exists = true;
  } else if (errno != ENOENT) {
    return Status::FromErrno("stat " + resolved, errno);
  }
  out->path = resolved;
  out->pod_uid = leaf;
  out->plugin = "kubernetes.io~csi";
  out->name = rest[0];
  out->leaf = "";
  out->block = true;
  return Status::Ok();
}

Status ResolveConfiguredDir(const std::string& what, const std::string& path, std::string* out) {
  int err = 0;
  if (!RealPath(path, out, &err))
    return Status::InvalidArgument(what + " \"" + path + "\" cannot be resolved: " + std::strerror(err));
  struct stat st;
  if (::stat(out->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::InvalidArgument(what + " \"" + path + "\" is not a directory");
  return Status::Ok();
}

}  // namespace nodevol
