#include "state/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>

#include "state/atomic_file.h"
#include "state/records_json.h"

namespace nodevol {
namespace {

constexpr char kVolumes[] = "volumes";
constexpr char kPublications[] = "publications";

// Targets are long paths; their file name is a digest so it always fits.
std::string TargetFileName(const std::string& target) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(target.data(), target.size(), md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out + ".json";
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Lists the *.json files of a directory, sorted.
Status ListJson(const std::string& dir, std::vector<std::string>* names) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Status::FromErrno("opendir " + dir, errno);
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n[0] != '.' && EndsWith(n, ".json")) names->push_back(n);
  }
  ::closedir(d);
  std::sort(names->begin(), names->end());
  return Status::Ok();
}

template <typename Record, typename Parse>
void LoadDir(const std::string& dir, Parse parse, std::vector<Record>* out,
             std::vector<std::string>* problems) {
  std::vector<std::string> names;
  Status st = ListJson(dir, &names);
  if (!st.ok()) {
    problems->push_back(st.message());
    return;
  }
  for (const std::string& n : names) {
    std::string path = dir + "/" + n;
    std::string text;
    Record r;
    st = ReadWholeFile(path, &text);
    if (st.ok()) st = parse(text, &r);
    if (st.ok()) {
      out->push_back(std::move(r));
      continue;
    }
    std::string aside = path + ".corrupt";
    std::rename(path.c_str(), aside.c_str());
    problems->push_back("record " + path + " is unreadable (" + st.message() + "); moved to " + aside);
  }
}

}  // namespace

Store::Store(std::string dir) : dir_(std::move(dir)) {}

Store::~Store() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Status Store::Open() {
  NODEVOL_RETURN_IF_ERROR(EnsureDir(dir_, 0700));
  NODEVOL_RETURN_IF_ERROR(EnsureDir(dir_ + "/" + kVolumes, 0700));
  NODEVOL_RETURN_IF_ERROR(EnsureDir(dir_ + "/" + kPublications, 0700));
  std::string lock = dir_ + "/lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0) return Status::FromErrno("open " + lock, errno);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return Status::FailedPrecondition("state dir " + dir_ +
                                        " is in use by another nodevold (lock " + lock + " is held)");
    return Status::FromErrno("flock " + lock, errno);
  }
  NODEVOL_RETURN_IF_ERROR(RemoveTempFiles(dir_ + "/" + kVolumes));
  return RemoveTempFiles(dir_ + "/" + kPublications);
}

Status Store::Load(std::vector<VolumeRecord>* volumes, std::vector<PublicationRecord>* publications,
                   std::vector<std::string>* problems) {
  LoadDir<VolumeRecord>(dir_ + "/" + kVolumes, VolumeFromJson, volumes, problems);
  LoadDir<PublicationRecord>(dir_ + "/" + kPublications, PublicationFromJson, publications, problems);
  return Status::Ok();
}

Status Store::PutVolume(const VolumeRecord& v) {
  return WriteFileAtomic(dir_ + "/" + kVolumes, v.spec.name + ".json", VolumeToJson(v));
}

Status Store::RemoveVolume(const std::string& name) {
  return RemoveFile(dir_ + "/" + kVolumes, name + ".json");
}

Status Store::PutPublication(const PublicationRecord& p) {
  return WriteFileAtomic(dir_ + "/" + kPublications, TargetFileName(p.target), PublicationToJson(p),
                         /*durable=*/false);
}

Status Store::RemovePublication(const std::string& target) {
  return RemoveFile(dir_ + "/" + kPublications, TargetFileName(target), /*durable=*/false);
}

}  // namespace nodevol
