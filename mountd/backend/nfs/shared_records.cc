#include "backend/nfs/shared_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

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

// One temp name per volume, so a writer killed mid-write leaves at most one
// temp, which the next Put or Remove of that record clears.
std::string TempOf(const std::string& volume) { return "." + FileOf(volume) + ".tmp"; }

// A temp younger than this may be another node's write in progress.
constexpr time_t kTempStaleSeconds = 60;

Status PutSharedRecord(const std::string& root, const std::string& volume, const std::string& text, bool creating) {
  UniqueFd dir;
  NODEVOL_RETURN_IF_ERROR(OpenRecordsDir(root, true, &dir));
  const std::string final_name = FileOf(volume), tmp = TempOf(volume);
  const std::string what = root + "/" + kDir + "/" + tmp;
  UniqueFd f;
  for (int attempt = 0; attempt < 2 && f.get() < 0; ++attempt) {
    f.reset(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (f.get() >= 0) break;
    if (errno != EEXIST) return Status::FromErrno("create " + what, errno);
    struct stat st;
    if (!creating && ::fstatat(dir.get(), tmp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        ::time(nullptr) - st.st_mtime < kTempStaleSeconds)
      return Status::Unavailable(what + " is being written (another node writing the record of " + volume +
                                 "?); try again");
    if (::unlinkat(dir.get(), tmp.c_str(), 0) != 0 && errno != ENOENT)
      return Status::FromErrno("remove the stale " + what, errno);
  }
  if (f.get() < 0) return Status::Unavailable(what + " keeps reappearing; try again");
  Status st = WriteAll(f.get(), text, what);
  // On NFS, close-to-open: fsync makes the server commit the bytes before
  // the rename makes them the record.
  if (st.ok() && ::fsync(f.get()) != 0) st = Status::FromErrno("fsync " + what, errno);
  f.reset();
  if (st.ok() && ::renameat(dir.get(), tmp.c_str(), dir.get(), final_name.c_str()) != 0)
    st = Status::FromErrno("rename " + what + " to " + final_name, errno);
  if (!st.ok()) ::unlinkat(dir.get(), tmp.c_str(), 0);
  return st;
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
  for (const std::string& name : {FileOf(volume), TempOf(volume)})
    if (::unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT)
      return Status::FromErrno("remove " + root + "/" + kDir + "/" + name, errno);
  return Status::Ok();
}

}  // namespace nodevol
