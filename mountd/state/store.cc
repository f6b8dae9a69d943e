#include "state/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <map>

#include "base/atomic_file.h"
#include "state/records_json.h"

namespace nodevol {
namespace {

constexpr char kVolumes[] = "volumes";
constexpr char kPublications[] = "publications";
constexpr char kSnapshots[] = "snapshots";

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

// Teardown intent recorded by renaming "<file>" to "<file><suffix>" when the
// state filesystem has no room for a new file (store.h).
constexpr std::string_view kDeletingSuffix = ".deleting";
constexpr std::string_view kUnpublishingSuffix = ".unpublishing";
// A publication record written before mounting (store.h).
constexpr std::string_view kPublishingSuffix = ".publishing";

// The file name of a publication record in a state, and the names in the
// order a crash may leave them, the later state last (it wins at Load).
std::string PublicationFile(const std::string& target, PublicationState s) {
  std::string name = TargetFileName(target);
  if (s == PublicationState::kPublishing) return name + std::string(kPublishingSuffix);
  if (s == PublicationState::kUnpublishing) return name + std::string(kUnpublishingSuffix);
  return name;
}
constexpr PublicationState kPublicationOrder[] = {PublicationState::kPublishing, PublicationState::kPublished,
                                                  PublicationState::kUnpublishing};

// Lists the record files of a directory (*.json and their tombstones), sorted.
Status ListRecords(const std::string& dir, std::vector<std::string>* names) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Status::FromErrno("opendir " + dir, errno);
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n[0] != '.' && (EndsWith(n, ".json") || EndsWith(n, std::string(".json") + std::string(kDeletingSuffix)) ||
                        EndsWith(n, std::string(".json") + std::string(kUnpublishingSuffix)) ||
                        EndsWith(n, std::string(".json") + std::string(kPublishingSuffix))))
      names->push_back(n);
  }
  ::closedir(d);
  std::sort(names->begin(), names->end());
  return Status::Ok();
}

// Reads every record of a directory. Changes nothing unless all of them
// were read: a file that cannot be read (EIO, EMFILE) or was written in a
// newer format fails the load and is left where it is; only a file that
// fails to parse in a format this nodevold writes is moved aside.
// Where a crash left a record under two names, the one of higher rank wins:
// a tombstone over the plain file over a ".publishing" file (store.h).
int SuffixRank(std::string_view suffix) {
  if (suffix.empty()) return 1;
  return suffix == kPublishingSuffix ? 0 : 2;
}

template <typename Record, typename Parse, typename Mark>
Status LoadDir(const std::string& dir, Parse parse, Mark mark, std::vector<Record>* out,
               std::vector<std::string>* problems) {
  std::vector<std::string> names;
  NODEVOL_RETURN_IF_ERROR(ListRecords(dir, &names));
  std::map<std::string, std::pair<int, Record>> by_file;  // by base name: rank, record
  std::vector<std::pair<std::string, std::string>> corrupt;  // path, why
  for (const std::string& n : names) {
    std::string path = dir + "/" + n;
    std::string text;
    Record r;
    Status st = ReadWholeFile(path, &text);
    if (!st.ok())
      return Status::Internal("cannot read record " + path + " (" + st.message() +
                              "); nothing was changed: fix the state filesystem and start again");
    st = parse(text, &r);
    if (st.code() == Status::Code::kUnimplemented)
      return Status::FailedPrecondition("record " + path + " was written by a newer nodevold: " + st.message() +
                                        "; run that version again (or one that reads it), nothing was changed");
    if (!st.ok()) {
      // What a power loss leaves of a record written without fsync (a
      // publication's: vm_power_loss_ops sees it), said as such.
      corrupt.emplace_back(path, text.empty() ? "the file is empty, as a power loss leaves a record that was not "
                                                "fsync'ed: publication records are not, the mounts they describe "
                                                "do not survive one either"
                                              : st.message());
      continue;
    }
    std::string base = n.substr(0, n.rfind(".json") + 5);
    std::string_view suffix = std::string_view(n).substr(base.size());
    if (!suffix.empty()) mark(suffix, &r);
    int rank = SuffixRank(suffix);
    auto it = by_file.find(base);
    if (it == by_file.end() || it->second.first < rank) by_file[base] = {rank, std::move(r)};
  }
  for (auto& [_, r] : by_file) out->push_back(std::move(r.second));
  for (const auto& [path, why] : corrupt) {
    std::string aside = path + ".corrupt";
    std::rename(path.c_str(), aside.c_str());
    problems->push_back("record " + path + " is unreadable (" + why + "); moved to " + aside);
  }
  return Status::Ok();
}

// Writes a record; a teardown state (`suffix` non-empty) that cannot be
// written as a new file is recorded by renaming the existing one, which
// needs no free blocks, so a full disk never blocks freeing space.
Status PutRecord(const std::string& dir, const std::string& name, const std::string& json, bool durable,
                 std::string_view suffix) {
  Status st = WriteFileAtomic(dir, name, json, durable);
  if (st.ok() || suffix.empty()) return st;
  std::string from = dir + "/" + name, to = from + std::string(suffix);
  if (::rename(from.c_str(), to.c_str()) != 0) return st;
  if (durable && !FsyncDir(dir).ok()) return st;
  return Status::Ok();
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
  NODEVOL_RETURN_IF_ERROR(EnsureDir(dir_ + "/" + kSnapshots, 0700));
  std::string lock = dir_ + "/lock";
  // Read-only: flock needs no write access, and a descriptor open for
  // writing would pin the state filesystem writable (a remount read-only
  // fails with EBUSY while one is open).
  lock_fd_ = ::open(lock.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0) return Status::FromErrno("open " + lock, errno);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return Status::FailedPrecondition("state dir " + dir_ +
                                        " is in use by another nodevold (lock " + lock + " is held)");
    return Status::FromErrno("flock " + lock, errno);
  }
  NODEVOL_RETURN_IF_ERROR(RemoveTempFiles(dir_ + "/" + kVolumes));
  NODEVOL_RETURN_IF_ERROR(RemoveTempFiles(dir_ + "/" + kSnapshots));
  return RemoveTempFiles(dir_ + "/" + kPublications);
}

Status Store::Load(std::vector<VolumeRecord>* volumes, std::vector<PublicationRecord>* publications,
                   std::vector<std::string>* problems) {
  // Parse both directories before moving anything aside.
  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> vol_problems, pub_problems;
  auto mark_volume = [](std::string_view, VolumeRecord* v) { v->state = VolumeState::kDeleting; };
  auto mark_publication = [](std::string_view suffix, PublicationRecord* p) {
    p->state = suffix == kPublishingSuffix ? PublicationState::kPublishing : PublicationState::kUnpublishing;
  };
  NODEVOL_RETURN_IF_ERROR(LoadDir<VolumeRecord>(dir_ + "/" + kVolumes, VolumeFromJson, mark_volume, &vols,
                                                &vol_problems));
  NODEVOL_RETURN_IF_ERROR(LoadDir<PublicationRecord>(dir_ + "/" + kPublications, PublicationFromJson,
                                                     mark_publication, &pubs, &pub_problems));
  for (auto& v : vols) volumes->push_back(std::move(v));
  for (auto& p : pubs) publications->push_back(std::move(p));
  for (auto& p : vol_problems) problems->push_back(std::move(p));
  for (auto& p : pub_problems) problems->push_back(std::move(p));
  return Status::Ok();
}

Status Store::LoadSnapshots(std::vector<SnapshotRecord>* snapshots, std::vector<std::string>* problems) {
  auto mark = [](std::string_view, SnapshotRecord* s) { s->state = VolumeState::kDeleting; };
  return LoadDir<SnapshotRecord>(dir_ + "/" + kSnapshots, SnapshotFromJson, mark, snapshots, problems);
}

Status Store::PutSnapshot(const SnapshotRecord& s) {
  WriteWatch::Scope w(&writes_, "snapshot " + s.name);
  return PutRecord(dir_ + "/" + kSnapshots, s.name + ".json", SnapshotToJson(s), /*durable=*/true,
                   s.state == VolumeState::kDeleting ? kDeletingSuffix : "");
}

Status Store::RemoveSnapshot(const std::string& name) {
  WriteWatch::Scope w(&writes_, "snapshot " + name);
  std::string dir = dir_ + "/" + kSnapshots;
  NODEVOL_RETURN_IF_ERROR(RemoveFile(dir, name + ".json"));
  return RemoveFile(dir, name + ".json" + std::string(kDeletingSuffix));
}

Status Store::PutVolume(const VolumeRecord& v) {
  WriteWatch::Scope w(&writes_, "volume " + v.spec.name);
  return PutRecord(dir_ + "/" + kVolumes, v.spec.name + ".json", VolumeToJson(v), /*durable=*/true,
                   v.state == VolumeState::kDeleting ? kDeletingSuffix : "");
}

Status Store::RemoveVolume(const std::string& name) {
  WriteWatch::Scope w(&writes_, "volume " + name);
  std::string dir = dir_ + "/" + kVolumes;
  // The plain file first: a crash in between leaves the tombstone, which
  // says "deleting", never an older state.
  NODEVOL_RETURN_IF_ERROR(RemoveFile(dir, name + ".json"));
  return RemoveFile(dir, name + ".json" + std::string(kDeletingSuffix));
}

Status Store::PutPublication(const PublicationRecord& p, bool durable) {
  WriteWatch::Scope w(&writes_, "the publication at " + p.target);
  std::string dir = dir_ + "/" + kPublications;
  PublicationRecord as_published = p;
  as_published.state = PublicationState::kPublished;  // the name says the state
  std::string json = PublicationToJson(as_published);
  std::string name = PublicationFile(p.target, p.state);
  Status st = WriteFileAtomic(dir, name, json, durable);
  if (!st.ok() && p.state == PublicationState::kUnpublishing) {
    // No room for a new file: a rename says it as well.
    for (PublicationState from : {PublicationState::kPublished, PublicationState::kPublishing}) {
      std::string a = dir + "/" + PublicationFile(p.target, from);
      if (::rename(a.c_str(), (dir + "/" + name).c_str()) == 0) return durable ? FsyncDir(dir) : Status::Ok();
    }
  }
  NODEVOL_RETURN_IF_ERROR(st);
  for (PublicationState other : kPublicationOrder)
    if (other != p.state) NODEVOL_RETURN_IF_ERROR(RemoveFile(dir, PublicationFile(p.target, other), durable));
  return Status::Ok();
}

Status Store::MovePublication(const PublicationRecord& p, PublicationState from, bool durable) {
  WriteWatch::Scope w(&writes_, "the publication at " + p.target);
  if (from == p.state) return Status::Ok();
  std::string dir = dir_ + "/" + kPublications;
  std::string a = dir + "/" + PublicationFile(p.target, from), b = dir + "/" + PublicationFile(p.target, p.state);
  if (::rename(a.c_str(), b.c_str()) != 0) {
    if (errno == ENOENT) return PutPublication(p, durable);
    return FileChangeError("rename " + a + " to " + b, errno);
  }
  return durable ? FsyncDir(dir) : Status::Ok();
}

Status Store::RemovePublication(const std::string& target) {
  WriteWatch::Scope w(&writes_, "the publication at " + target);
  std::string dir = dir_ + "/" + kPublications;
  // The earlier states first: a crash in between leaves the latest.
  for (PublicationState s : kPublicationOrder)
    NODEVOL_RETURN_IF_ERROR(RemoveFile(dir, PublicationFile(target, s), /*durable=*/false));
  return Status::Ok();
}

}  // namespace nodevol
