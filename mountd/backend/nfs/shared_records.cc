#include "backend/nfs/shared_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string_view>

#include "backend/nfs/export_dirs.h"
#include "base/unique_fd.h"
#include "fs/open_untrusted.h"

namespace nodevol {
namespace {

constexpr char kDir[] = ".nodevol/volumes";

std::string FileOf(const std::string& volume) { return volume + ".json"; }

// Opens (making it when `make`) .nodevol/volumes below root. NOT_FOUND
// when it is missing and not to be made.
Status OpenRecordsDir(const std::string& root, bool make, UniqueFd* out) {
  UniqueFd cur;
  NODEVOL_RETURN_IF_ERROR(OpenBelow(root, "", &cur));
  for (const char* seg : {".nodevol", "volumes"}) {
    if (make && ::mkdirat(cur.get(), seg, 0700) != 0 && errno != EEXIST)
      return Status::FromErrno("mkdir " + root + "/" + seg, errno);
    int fd = OpenAt2(cur.get(), seg, O_PATH | O_DIRECTORY);
    if (fd < 0) {
      if (errno == ENOENT) return Status::NotFound(root + "/" + kDir + " does not exist");
      return OpenError("open " + root + "/" + kDir, errno);
    }
    cur.reset(fd);
  }
  out->reset(cur.release());
  return Status::Ok();
}

Status WriteAll(int fd, const std::string& text, const std::string& what) {
  for (size_t at = 0; at < text.size();) {
    ssize_t n = ::write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write " + what, errno);
    at += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

namespace {

// A temp is "." <volume>.json "." <16 hex digits> ".tmp": each writer its
// own, so two writers (two nodes) never write into or rename the same one,
// and whatever a rename puts at the record's name is one writer's whole
// record. ".<volume>.json.tmp", the one name earlier versions used, is a
// temp of the volume too.
constexpr size_t kTempIdLength = 16;

bool IsTempOf(const std::string& volume, std::string_view name) {
  const std::string prefix = "." + FileOf(volume) + ".";
  if (name.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = name.substr(prefix.size());
  if (rest == "tmp") return true;
  if (rest.size() != kTempIdLength + 4 || rest.substr(kTempIdLength) != ".tmp") return false;
  for (char c : rest.substr(0, kTempIdLength))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string NewTempOf(const std::string& volume) {
  unsigned char bytes[kTempIdLength / 2];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    // No entropy source: still distinct per process and call.
    static unsigned counter = 0;
    uint64_t v = (uint64_t{static_cast<uint32_t>(::getpid())} << 32) ^ ++counter ^ static_cast<uint64_t>(::time(nullptr));
    std::memcpy(bytes, &v, sizeof bytes);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) id += {kHex[b >> 4], kHex[b & 15]};
  return "." + FileOf(volume) + "." + id + ".tmp";
}

// A temp older than this (by the server's clock) is a killed writer's.
constexpr time_t kTempStaleSeconds = 60;

// Removes `volume`'s temps other than `keep`: those last written before
// `stale_before` (a time on the server's clock), or all of them when it
// is 0. One read of the records directory.
Status RemoveTemps(int dir, const std::string& volume, const std::string& keep, time_t stale_before,
                   const std::string& where) {
  int rd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rd < 0) return Status::FromErrno("open " + where, errno);
  DIR* d = ::fdopendir(rd);
  if (!d) {
    ::close(rd);
    return Status::FromErrno("read " + where, errno);
  }
  Status st;
  for (struct dirent* e; (e = ::readdir(d)) != nullptr;) {
    if (!IsTempOf(volume, e->d_name) || keep == e->d_name) continue;
    struct stat sb;
    if (stale_before != 0 &&
        (::fstatat(::dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || sb.st_mtime >= stale_before))
      continue;  // gone already, or another writer's in progress
    if (::unlinkat(::dirfd(d), e->d_name, 0) != 0 && errno != ENOENT && st.ok())
      st = Status::FromErrno("remove " + where + "/" + e->d_name, errno);
  }
  ::closedir(d);
  return st;
}

}  // namespace

Status PutSharedRecord(const std::string& root, const std::string& volume, const std::string& text) {
  UniqueFd dir;
  NODEVOL_RETURN_IF_ERROR(OpenRecordsDir(root, true, &dir));
  const std::string final_name = FileOf(volume), where = root + "/" + kDir;
  std::string tmp;
  UniqueFd f;
  for (int attempt = 0; attempt < 3 && f.get() < 0; ++attempt) {
    tmp = NewTempOf(volume);
    f.reset(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (f.get() < 0 && errno != EEXIST) return Status::FromErrno("create " + where + "/" + tmp, errno);
  }
  if (f.get() < 0) return Status::Unavailable(where + ": no new temp name for the record of " + volume + "; try again");
  const std::string what = where + "/" + tmp;
  Status st = WriteAll(f.get(), text, what);
  // On NFS, close-to-open: fsync makes the server commit the bytes before
  // the rename makes them the record.
  if (st.ok() && ::fsync(f.get()) != 0) st = Status::FromErrno("fsync " + what, errno);
  // The temp's mtime is the server's "now": other temps are judged stale
  // by the server's clock, never this node's (the two may differ by more
  // than a minute).
  struct stat mine;
  time_t server_now = st.ok() && ::fstat(f.get(), &mine) == 0 ? mine.st_mtime : 0;
  f.reset();
  if (st.ok() && ::renameat(dir.get(), tmp.c_str(), dir.get(), final_name.c_str()) != 0)
    st = Status::FromErrno("rename " + what + " to " + final_name, errno);
  if (!st.ok()) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    return st;
  }
  // Temps of killed writers: cleared by the next write of the record (or
  // its removal); a failure here only leaves them for that one.
  if (server_now > kTempStaleSeconds)
    (void)RemoveTemps(dir.get(), volume, tmp, server_now - kTempStaleSeconds, where);
  return Status::Ok();
}

Status ReadSharedRecord(const std::string& root, const std::string& volume, std::string* text) {
  UniqueFd dir;
  NODEVOL_RETURN_IF_ERROR(OpenRecordsDir(root, false, &dir));
  const std::string what = root + "/" + kDir + "/" + FileOf(volume);
  // The export's owner (the server, or root on any of its clients) chooses
  // what is at the name: opened as O_PATH, and for reading only if it is a
  // regular file (fs/open_untrusted.h). A device node there was opened
  // before its type was checked.
  UniqueFd path(OpenAt2(dir.get(), FileOf(volume), O_PATH));
  if (path.get() < 0) {
    if (errno == ENOENT) return Status::NotFound("no record of volume " + volume + " on the export");
    return OpenError("open " + what, errno);
  }
  struct stat st;
  if (::fstat(path.get(), &st) != 0) return Status::FromErrno("stat " + what, errno);
  UniqueFd f;
  NODEVOL_RETURN_IF_ERROR(ReopenAs(path.get(), st, FileType::kRegular, O_RDONLY, what, &f));
  if (static_cast<uint64_t>(st.st_size) > kMaxSharedRecordBytes)
    return Status::FailedPrecondition(what + " is " + std::to_string(st.st_size) + " bytes, more than a record can be");
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(f.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read " + what, errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxSharedRecordBytes)
      return Status::FailedPrecondition(what + " grew past " + std::to_string(kMaxSharedRecordBytes) + " bytes");
  }
  *text = std::move(out);
  return Status::Ok();
}

Status RemoveSharedRecord(const std::string& root, const std::string& volume) {
  UniqueFd dir;
  Status st = OpenRecordsDir(root, false, &dir);
  if (st.code() == Status::Code::kNotFound) return Status::Ok();
  NODEVOL_RETURN_IF_ERROR(st);
  if (::unlinkat(dir.get(), FileOf(volume).c_str(), 0) != 0 && errno != ENOENT)
    return Status::FromErrno("remove " + root + "/" + kDir + "/" + FileOf(volume), errno);
  // The volume is gone: every temp of it, a writer's in progress too.
  return RemoveTemps(dir.get(), volume, "", 0, root + "/" + kDir);
}

}  // namespace nodevol
