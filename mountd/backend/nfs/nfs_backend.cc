#include "backend/nfs/nfs_backend.h"

#include <dirent.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "backend/claim_params.h"
#include "backend/nfs/export_dirs.h"
#include "backend/nfs/mount_options.h"
#include "backend/nfs/mountinfo.h"
#include "backend/nfs/nfs_client.h"
#include "backend/nfs/path_pattern.h"
#include "backend/nfs/shared_records.h"
#include "base/atomic_file.h"
#include "state/records_json.h"

namespace nodevol {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kVolumeKind[] = "an nfs subdirectory volume";
// How long a capacity figure is reused when no staging mount of the pool's
// export exists (asking then means mounting the export for it).
constexpr auto kUnmountedCapacityAge = std::chrono::seconds(60);

std::string Hash16(const std::string& text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 8; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

// ".nodevol-deleting-<volume>": where a volume's directory goes when its
// delete starts (export_dirs.h). Within 255 bytes: a long name is cut
// and made unique again by its hash.
std::string Tombstone(const std::string& volume) {
  const std::string prefix = ".nodevol-deleting-";
  if (prefix.size() + volume.size() <= 255) return prefix + volume;
  return prefix + volume.substr(0, 255 - prefix.size() - 17) + "-" + Hash16(volume);
}

std::string Parent(const std::string& path) { return path.substr(0, path.rfind('/')); }

bool IsStale(const Status& st) { return st.message().find("stale file handle") != std::string::npos; }

std::string Secs(std::chrono::milliseconds d) { return std::to_string(d.count() / 1000) + " s"; }

}  // namespace

// Per staging dir, shared by every NFS pool of the process.
struct NfsBackend::Staging {
  std::timed_mutex mu;
  int holds = 0;  // nodevold's own operations in flight on the mount

  static Staging* For(const std::string& dir) {
    static std::mutex mu;
    static auto* all = new std::map<std::string, std::unique_ptr<Staging>>();
    std::lock_guard<std::mutex> l(mu);
    auto& s = (*all)[dir];
    if (!s) s = std::make_unique<Staging>();
    return s.get();
  }
};

Status NfsBackend::Make(const std::string& pool, const Params& options, const std::string& state_dir,
                        std::unique_ptr<Backend>* out) {
  NfsPoolOptions o;
  NODEVOL_RETURN_IF_ERROR(ParseNfsPoolOptions(pool, options, &o));
  if (::access("/sbin/mount.nfs", X_OK) != 0 && ::access("/usr/sbin/mount.nfs", X_OK) != 0)
    return Status::FailedPrecondition("pool " + pool +
                                      ": mount.nfs is not installed (Debian/Ubuntu: nfs-common; RHEL: nfs-utils)");
  // Canonical, as the mount table shows it: a state dir given with a
  // trailing slash or through a symlink would otherwise never match a
  // staging mount or bind there, and they would never be unmounted.
  char* real = ::realpath(state_dir.c_str(), nullptr);
  if (!real) return Status::FromErrno("pool " + pool + ": state dir " + state_dir, errno);
  std::string root = std::string(real) + (std::string(real) == "/" ? "nfs" : "/nfs");
  std::free(real);
  NODEVOL_RETURN_IF_ERROR(MakePrivateDir(root));
  NODEVOL_RETURN_IF_ERROR(MakePrivateDir(root + "/volumes"));
  // A per-volume bind dir that is no mount point (after a reboot) must not
  // be there for anyone to bind: it is an empty directory of the node's
  // disk, not the volume. rmdir leaves mount points (EBUSY) alone.
  if (DIR* d = ::opendir((root + "/volumes").c_str())) {
    while (struct dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ::rmdir((root + "/volumes/" + e->d_name).c_str());
    ::closedir(d);
  }
  out->reset(new NfsBackend(pool, std::move(o), root));
  return Status::Ok();
}

NfsBackend::NfsBackend(std::string pool, NfsPoolOptions options, std::string root)
    : pool_(std::move(pool)), options_(std::move(options)), root_(std::move(root)),
      server_(NfsServer::For(options_.server)) {}

Params NfsBackend::attributes() const {
  return {{"server", options_.server},
          {"share", options_.share},
          {"mount_options", options_.mount_options.ToString()},
          {"path_pattern", options_.path_pattern},
          {"on_delete", options_.on_delete},
          {"timeout_seconds", std::to_string(options_.timeout.count() / 1000)}};
}

Status NfsBackend::Resolve(const VolumeSpec& spec, Volume* out) const {
  if (!spec.fs_type.empty())
    return Status::InvalidArgument("fs_type \"" + spec.fs_type + "\": nfs volumes have no filesystem type of their own; "
                                   "leave it empty");
  Volume v;
  v.server = options_.server;
  v.share = options_.share;
  v.on_delete = options_.on_delete;
  NfsMountOptions mo = options_.mount_options;
  std::string pattern = options_.path_pattern;
  Params root_params;
  std::vector<std::string> subdir_only;  // parameters that make no sense for an export volume
  bool has_share = false, has_server = false, has_on_delete = false;
  std::string archive;
  for (const auto& [k, val] : spec.parameters) {
    if (k == "share") {
      NODEVOL_RETURN_IF_ERROR(CheckNfsShare("parameter share", val));
      v.share = val;
      has_share = true;
    } else if (k == "server") {
      NODEVOL_RETURN_IF_ERROR(CheckNfsServer("parameter server", val));
      v.server = val;
      has_server = true;
    } else if (k == "mountOptions") {
      NODEVOL_RETURN_IF_ERROR(mo.Add(val).WithContext("parameter mountOptions"));
    } else if (k == "pathPattern" || k == "subDir") {
      if (spec.parameters.count("pathPattern") && spec.parameters.count("subDir"))
        return Status::InvalidArgument("give pathPattern or subDir (its csi-driver-nfs name), not both");
      pattern = val;
      subdir_only.push_back(k);
    } else if (k == "onDelete") {
      NODEVOL_RETURN_IF_ERROR(CheckOnDelete("parameter onDelete", val));
      v.on_delete = val;
      has_on_delete = true;
      subdir_only.push_back(k);
    } else if (k == "archiveOnDelete") {
      if (val != "true" && val != "false")
        return Status::InvalidArgument("parameter archiveOnDelete: must be \"true\" or \"false\", not \"" + val + "\"");
      archive = val;
      subdir_only.push_back(k);
    } else if (k == "mode" || k == "uid" || k == "gid") {
      root_params[k] = val;
      subdir_only.push_back(k);
    } else if (!IsClaimParam(k)) {
      return Status::InvalidArgument("unknown parameter \"" + k +
                                     "\" for an nfs volume; known: pathPattern, subDir, onDelete, archiveOnDelete, "
                                     "mode, uid, gid, mountOptions, share, server, " + std::string(ClaimParamList()));
    } else {
      NODEVOL_RETURN_IF_ERROR(CheckClaimParam(k, val));
    }
  }
  if (has_server && !has_share)
    return Status::InvalidArgument("parameter server needs share too: an nfs volume on another server is a whole "
                                   "export (share=/exported/path)");
  v.options = mo.ToString();
  if (has_share) {
    if (!subdir_only.empty())
      return Status::InvalidArgument("parameter " + subdir_only.front() +
                                     " applies to subdirectory volumes; an export volume (share) is used as it is");
    v.whole_export = true;
    v.on_delete = "retain";
    *out = v;
    return Status::Ok();
  }
  if (!has_on_delete && !archive.empty()) v.on_delete = archive == "false" ? "delete" : "archive";
  NODEVOL_RETURN_IF_ERROR(RenderPathPattern(pattern, spec.parameters, spec.name, &v.subdir));
  NODEVOL_RETURN_IF_ERROR(ParseVolumeRoot(kVolumeKind, root_params, &v.root));
  v.chown = root_params.count("uid") || root_params.count("gid");
  *out = v;
  return Status::Ok();
}

Status NfsBackend::FromRecord(const VolumeRecord& record, Volume* out) const {
  const Params& a = record.attributes;
  auto get = [&](const char* k) {
    auto it = a.find(k);
    return it == a.end() ? std::string() : it->second;
  };
  Volume v;
  v.whole_export = get("kind") == "export";
  v.server = get("server");
  v.share = get("share");
  v.options = get("mount_options");
  v.subdir = get("subdir");
  v.on_delete = get("on_delete");
  if (v.server.empty() || v.share.empty() || (!v.whole_export && v.subdir.empty()))
    return Status::Internal("the record of nfs volume " + record.spec.name +
                            " lacks its server, share or subdir attributes");
  NODEVOL_RETURN_IF_ERROR(CheckSubdirPath(v.whole_export ? "x" : v.subdir).WithContext("recorded subdir"));
  *out = v;
  return Status::Ok();
}

std::string NfsBackend::StagingDir(const Volume& v) const {
  return root_ + "/" + Hash16(v.server + "\n" + v.share + "\n" + v.options);
}

Status NfsBackend::Validate(const VolumeSpec& spec) const {
  Volume v;
  return Resolve(spec, &v);
}

Status NfsBackend::Acquire(const Volume& v, std::string* dir) {
  *dir = StagingDir(v);
  Staging* s = Staging::For(*dir);
  std::unique_lock<std::timed_mutex> l(s->mu, std::defer_lock);
  if (!l.try_lock_for(timeout()))
    return Status::Unavailable("NFS server " + v.server + ": the staging mount of " + NfsSpec(v.server, v.share) +
                               " has been busy for " + Secs(timeout()) + " (a mount or unmount waits for the server)");
  std::vector<MountInfo> mounts;
  NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
  const MountInfo* m = FindMount(mounts, *dir);
  // Never stat the staging dir while the export is mounted there: that
  // asks the server.
  if (!m) NODEVOL_RETURN_IF_ERROR(MakePrivateDir(*dir));
  if (m && !(IsNfsType(m->fstype) && m->source == NfsSpec(v.server, v.share)))
    return Status::FailedPrecondition("staging dir " + *dir + " shows " + m->source + " (" + m->fstype +
                                      "), not " + NfsSpec(v.server, v.share) + "; unmount it");
  if (!m) {
    std::shared_ptr<NfsServer> server = NfsServer::For(v.server);
    NODEVOL_RETURN_IF_ERROR(server->CheckAnswering(timeout()));
    NODEVOL_RETURN_IF_ERROR(MountNfs(v.server, v.share, *dir, v.options, timeout()));
    NODEVOL_RETURN_IF_ERROR(CheckApplied(v, *dir));
    spdlog::info("pool {}: mounted {} ({}) at {}", pool_, NfsSpec(v.server, v.share),
                 v.options.empty() ? "default options" : v.options, *dir);
  }
  ++s->holds;
  return Status::Ok();
}

Status NfsBackend::CheckApplied(const Volume& v, const std::string& dir) {
  // With sharecache, a mount whose options differ from another mount of
  // the export only in ones the kernel does not compare gets that mount's
  // superblock, and its own options are silently dropped: refuse it.
  std::vector<MountInfo> mounts;
  NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
  const MountInfo* m = FindMount(mounts, dir);
  if (!m) return Status::Ok();
  std::vector<std::string> lost = OptionsNotApplied(v.options, m->options);
  if (lost.empty()) return Status::Ok();
  std::string list;
  for (const std::string& o : lost) list += (list.empty() ? "" : ",") + o;
  Status un = UnmountNfs(dir, v.server, timeout());
  if (!un.ok()) spdlog::warn("pool {}: unmounting {} again: {}", pool_, dir, un.message());
  return Status::FailedPrecondition("mount options " + list + " of " + NfsSpec(v.server, v.share) +
                                    " did not take effect: the kernel gave this mount the superblock of another "
                                    "mount of the export (sharecache), whose options differ only in ones it does "
                                    "not compare; add nosharecache to the volume's mountOptions, or give every "
                                    "mount of the export the same options (the pool's mount-options)");
}

Status NfsBackend::Release(const Volume& v) {
  Staging* s = Staging::For(StagingDir(v));
  std::unique_lock<std::timed_mutex> l(s->mu, std::defer_lock);
  if (!l.try_lock_for(timeout())) {
    std::unique_lock<std::timed_mutex> wait(s->mu);  // the hold must go; the unmount can wait for another time
    --s->holds;
    return Status::Ok();
  }
  --s->holds;
  return ReleaseLocked(v, s);
}

Status NfsBackend::ReleaseLocked(const Volume& v, Staging* s) {
  if (s->holds > 0) return Status::Ok();
  const std::string dir = StagingDir(v);
  std::vector<MountInfo> mounts;
  NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
  const MountInfo* m = FindMount(mounts, dir);
  if (!m || !IsNfsType(m->fstype)) return Status::Ok();
  for (const MountInfo& o : mounts) {
    if (o.dev != m->dev || o.target == dir) continue;
    // Another staging mount sharing the superblock (sharecache) is no user.
    if (Parent(o.target) == root_ && o.target != root_ + "/volumes") continue;
    return Status::Ok();
  }
  NODEVOL_RETURN_IF_ERROR(UnmountNfs(dir, v.server, timeout()));
  spdlog::info("pool {}: unmounted {} from {} (no volume uses it)", pool_, NfsSpec(v.server, v.share), dir);
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT && errno != EBUSY)
    spdlog::warn("pool {}: rmdir {}: {}", pool_, dir, std::strerror(errno));
  return Status::Ok();
}

Status NfsBackend::Replace(const Volume& v) {
  const std::string dir = StagingDir(v);
  Staging* s = Staging::For(dir);
  std::unique_lock<std::timed_mutex> l(s->mu, std::defer_lock);
  if (!l.try_lock_for(timeout()))
    return Status::Unavailable("NFS server " + v.server + ": the staging mount of " + NfsSpec(v.server, v.share) +
                               " is busy; try again");
  // Another Stage may have replaced it while this one waited for the lock:
  // unmounting that fresh mount would pull it from under its bind.
  Status fresh = NfsServer::For(v.server)->Call("stat of " + NfsSpec(v.server, v.share), timeout(),
                                                [dir] { return StatFresh(dir); });
  if (!IsStale(fresh)) return fresh;
  spdlog::warn("pool {}: {} at {} answers ESTALE (the export was re-created on the server); mounting it again", pool_,
               NfsSpec(v.server, v.share), dir);
  // Binds happen under this lock (Stage), so none lands between the two;
  // other holders' calls on the stale mount fail ESTALE anyway, and their
  // open descriptors only make the unmount a lazy one.
  NODEVOL_RETURN_IF_ERROR(UnmountNfs(dir, v.server, timeout()));
  NODEVOL_RETURN_IF_ERROR(MountNfs(v.server, v.share, dir, v.options, timeout()));
  return CheckApplied(v, dir);
}

Status NfsBackend::UnbindVolume(const Volume& v, const std::string& volume) {
  const std::string vdir = VolumeDir(volume), sdir = StagingDir(v);
  std::vector<MountInfo> mounts;
  NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
  const MountInfo* vm = FindMount(mounts, vdir);
  if (vm) {
    const MountInfo* sm = FindMount(mounts, sdir);
    if (sm && sm->dev == vm->dev) {
      // The staging mount holds the superblock: this unmount cannot wait
      // for the server.
      if (::umount2(vdir.c_str(), UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT) {
        if (errno == EBUSY)
          return Status::FailedPrecondition(vdir + " is busy: a process still uses it (see `fuser -vm " + vdir + "`)");
        return Status::FromErrno("unmount " + vdir, errno);
      }
    } else {
      NODEVOL_RETURN_IF_ERROR(UnmountNfs(vdir, v.server, timeout()));
    }
  }
  if (::rmdir(vdir.c_str()) != 0 && errno != ENOENT)
    return Status::FromErrno("rmdir " + vdir + " (after unmounting it)", errno);
  return Status::Ok();
}

Status NfsBackend::Create(VolumeRecord* record) {
  Volume v;
  NODEVOL_RETURN_IF_ERROR(Resolve(record->spec, &v));
  const std::string& name = record->spec.name;
  if (!v.whole_export && !record->ephemeral) NODEVOL_RETURN_IF_ERROR(CheckNotAnothersVolume(*record, v));
  std::string sdir;
  NODEVOL_RETURN_IF_ERROR(Acquire(v, &sdir));
  std::shared_ptr<NfsServer> server = NfsServer::For(v.server);
  Status st;
  if (v.whole_export) {
    st = server->Call("stat of " + NfsSpec(v.server, v.share), timeout(), [sdir] { return StatFresh(sdir); });
  } else {
    st = server->Call("mkdir " + v.subdir + " in " + NfsSpec(v.server, v.share), timeout(),
                      [sdir, v] { return MakeVolumeDir(sdir, v.subdir, v.root, v.chown); });
  }
  Status rel = Release(v);
  NODEVOL_RETURN_IF_ERROR(st);
  if (!rel.ok()) spdlog::warn("pool {}: after creating {}: {}", pool_, name, rel.message());
  VolumeRecord made = *record;
  made.attributes = {{"kind", v.whole_export ? "export" : "subdir"},
                     {"server", v.server},
                     {"share", v.share},
                     {"mount_options", v.options},
                     {"on_delete", v.on_delete},
                     {"path", VolumeDir(name)}};
  if (!v.whole_export) made.attributes["subdir"] = v.subdir;
  // Last: another node may act on the volume as soon as its record is on
  // the export. Until *record has attributes, a Delete removes nothing
  // on the server (a record written just before a crash names the
  // directory, which stays too, and a retried create rewrites it).
  if (Shared(made)) NODEVOL_RETURN_IF_ERROR(PutShared(made));
  record->attributes = made.attributes;
  spdlog::info("pool {}: volume {} is {} on {}", pool_, name,
               v.whole_export ? std::string("the whole export") : "directory " + v.subdir,
               NfsSpec(v.server, v.share));
  return Status::Ok();
}

Status NfsBackend::CheckNotAnothersVolume(const VolumeRecord& record, const Volume& v) {
  const std::string& name = record.spec.name;
  VolumeRecord theirs;
  Status st = FindShared(name, &theirs);
  if (st.code() == Status::Code::kNotFound) return Status::Ok();
  const std::string where = NfsSpec(options_.server, options_.share);
  // A server that does not answer is that, not a bad record: the create
  // fails as any call on it does, and a retry goes on.
  if (st.code() != Status::Code::kFailedPrecondition && !st.ok()) return st;
  if (!st.ok())
    return Status::FailedPrecondition("a record of volume " + name + " that cannot be used is on " + where + " (" +
                                      st.message() + "); nothing changed: remove it there, or choose another name");
  // The same volume (a retry here, or the provisioner's retry of one PV
  // on another node): its claim and directory are the same.
  auto claim_of = [](const VolumeRecord& r) {
    std::string out;
    for (const auto& [k, val] : r.spec.parameters)
      if (IsClaimParam(k)) out += k + "=" + val + "\n";
    return out;
  };
  auto subdir = theirs.attributes.find("subdir");
  if (claim_of(theirs) == claim_of(record) && subdir != theirs.attributes.end() && subdir->second == v.subdir)
    return Status::Ok();
  // Two nodes each owning one volume: a delete through either removed the
  // other's data (issue 69 item 9).
  auto ns = theirs.spec.parameters.find("nodevol.io/pvc-namespace");
  auto claim = theirs.spec.parameters.find("nodevol.io/pvc-name");
  return Status::AlreadyExists(
      "volume " + name + " already exists on " + where + ", made for " +
      (ns != theirs.spec.parameters.end() && claim != theirs.spec.parameters.end() ? "claim " + ns->second + "/" + claim->second
                                                                                    : std::string("another claim")) +
      " (perhaps by another node serving pool " + pool_ + "); nothing changed");
}

Status NfsBackend::Delete(const VolumeRecord& record) {
  const std::string& name = record.spec.name;
  if (record.attributes.empty()) {
    // Create never finished: what it may have made on the server is not
    // known for sure, and a backend deletes only what it knows is the volume's.
    spdlog::info("pool {}: volume {} was never created completely; nothing removed on the server", pool_, name);
    return Status::Ok();
  }
  Volume v;
  NODEVOL_RETURN_IF_ERROR(FromRecord(record, &v));
  NODEVOL_RETURN_IF_ERROR(UnbindVolume(v, name));
  if (v.whole_export || v.on_delete == "retain") {
    if (Shared(record)) NODEVOL_RETURN_IF_ERROR(RemoveShared(name));
    if (!v.whole_export)
      spdlog::info("pool {}: volume {} deleted; its directory {} on {} is retained", pool_, name, v.subdir,
                   NfsSpec(v.server, v.share));
    return Release0(v);
  }
  std::string sdir;
  NODEVOL_RETURN_IF_ERROR(Acquire(v, &sdir));
  std::shared_ptr<NfsServer> server = NfsServer::For(v.server);
  const std::string where = v.subdir + " in " + NfsSpec(v.server, v.share);
  Status st;
  if (v.on_delete == "archive") {
    std::string as;
    st = server->CallFor<std::string>("archive " + where, timeout(),
                                      [sdir, v](std::string* out) { return ArchiveVolumeDir(sdir, v.subdir, out); }, &as);
    if (st.ok() && !as.empty()) spdlog::info("pool {}: volume {}: {} archived as {}", pool_, name, where, as);
  } else {
    // Renamed to its tombstone first, then removed in slices of at most a
    // second, so other calls on the server get their turn on its worker
    // between them; the cursor keeps each slice's place.
    auto deadline = Clock::now() + timeout();
    bool done = false;
    auto cursor = std::make_shared<RemoveCursor>();
    const std::string tomb = Tombstone(name);
    while (st.ok() && !done) {
      if (Clock::now() >= deadline) {
        st = Status::DeadlineExceeded("removing " + where + " takes longer than " + Secs(timeout()) +
                                      "; DeleteVolume again goes on where this one stopped");
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      st = server->CallFor<bool>("remove " + where, left,
                                 [sdir, v, tomb, cursor](bool* out) {
                                   return RemoveVolumeDir(sdir, v.subdir, tomb, Clock::now() + std::chrono::seconds(1),
                                                          cursor.get(), out);
                                 },
                                 &done);
    }
    if (st.ok()) spdlog::info("pool {}: volume {}: removed {}", pool_, name, where);
  }
  Status rel = Release(v);
  NODEVOL_RETURN_IF_ERROR(st);
  if (!rel.ok()) spdlog::warn("pool {}: after deleting {}: {}", pool_, name, rel.message());
  // After the data: until then any node serving the pool can finish the
  // delete from this record.
  if (Shared(record)) NODEVOL_RETURN_IF_ERROR(RemoveShared(name));
  return Status::Ok();
}

Status NfsBackend::Expand(VolumeRecord* record, uint64_t new_size) {
  if (!Shared(*record)) return Status::Ok();
  VolumeRecord grown = *record;
  grown.spec.size_bytes = new_size;
  grown.shared_copy = false;
  return PutShared(grown);
}

bool NfsBackend::Shared(const VolumeRecord& record) {
  auto kind = record.attributes.find("kind");
  return !record.ephemeral && kind != record.attributes.end() && kind->second == "subdir";
}

NfsBackend::Volume NfsBackend::PoolExport() const {
  Volume v;
  v.server = options_.server;
  v.share = options_.share;
  v.options = options_.mount_options.ToString();
  return v;
}

Status NfsBackend::OnPoolExport(const std::string& what, std::function<Status(const std::string& dir)> fn) {
  Volume p = PoolExport();
  std::string sdir;
  NODEVOL_RETURN_IF_ERROR(Acquire(p, &sdir));
  Status st = server_->Call(what + " on " + NfsSpec(p.server, p.share), timeout(),
                            [fn = std::move(fn), sdir] { return fn(sdir); });
  Status rel = Release(p);
  if (!rel.ok()) spdlog::warn("pool {}: after the {}: {}", pool_, what, rel.message());
  return st;
}

Status NfsBackend::PutShared(const VolumeRecord& record) {
  VolumeRecord shared = record;
  shared.state = VolumeState::kReady;
  shared.shared_copy = false;
  const std::string name = record.spec.name, text = VolumeToJson(shared);
  return OnPoolExport("write of volume " + name + "'s record",
                      [name, text](const std::string& dir) { return PutSharedRecord(dir, name, text); });
}

Status NfsBackend::RemoveShared(const std::string& volume) {
  return OnPoolExport("removal of volume " + volume + "'s record",
                      [volume](const std::string& dir) { return RemoveSharedRecord(dir, volume); });
}

Status NfsBackend::FindShared(const std::string& volume, VolumeRecord* out) {
  auto text = std::make_shared<std::string>();
  NODEVOL_RETURN_IF_ERROR(OnPoolExport("read of volume " + volume + "'s record", [volume, text](const std::string& dir) {
    return ReadSharedRecord(dir, volume, text.get());
  }));
  // What the server sent is checked like any outside input.
  const std::string where = "the record of volume " + volume + " on " + NfsSpec(options_.server, options_.share);
  auto bad = [&](const std::string& why) { return Status::FailedPrecondition(where + " " + why); };
  VolumeRecord rec;
  if (Status st = VolumeFromJson(*text, &rec); !st.ok()) return bad("cannot be used: " + st.message());
  if (rec.spec.name != volume) return bad("names another volume");
  if (rec.spec.pool != pool_)
    return bad("belongs to another pool: an NFS pool must have the same name on every node serving it");
  if (rec.backend != "nfs" || rec.ephemeral) return bad("is not of an nfs volume");
  for (const auto& [k, val] : rec.spec.parameters)
    if (IsClaimParam(k) && !CheckClaimParam(k, val).ok()) return bad("has an invalid parameter");
  Volume v;
  if (Status st = FromRecord(rec, &v); !st.ok()) return bad("cannot be used: " + st.message());
  // Only a directory of this very export: a record naming another export
  // would have this node mount, as root, whatever a writer of the export
  // chose.
  if (v.whole_export || v.server != options_.server || v.share != options_.share)
    return bad("is not of a directory of this export");
  if (!CheckOnDelete("on_delete", v.on_delete).ok()) return bad("has an invalid on_delete");
  // The pool's options decide whom the mount trusts and how it fails, not
  // the record's (issue 69 item 4: sec=krb5p became sys, hard soft, and
  // mounthost= sent the MOUNT call elsewhere; a creator's clientaddr=
  // spread to every node).
  NfsMountOptions mo;
  if (Status st = OptionsFromRecord(options_.mount_options, v.options, &mo); !st.ok())
    return bad(st.code() == Status::Code::kInvalidArgument ? "has mount options nodevold refuses: " + st.message()
                                                           : st.message());
  rec.attributes["mount_options"] = mo.ToString();
  rec.attributes["path"] = VolumeDir(volume);
  rec.state = VolumeState::kReady;
  rec.shared_copy = true;
  *out = std::move(rec);
  return Status::Ok();
}

Status NfsBackend::Release0(const Volume& v) {
  // No hold taken: only unmount the staging mount if it is left unused.
  Staging* s = Staging::For(StagingDir(v));
  std::unique_lock<std::timed_mutex> l(s->mu, std::defer_lock);
  if (!l.try_lock_for(timeout())) return Status::Ok();
  return ReleaseLocked(v, s);
}

Status NfsBackend::Stage(const VolumeRecord& record, std::string* path) {
  Volume v;
  NODEVOL_RETURN_IF_ERROR(FromRecord(record, &v));
  const std::string& name = record.spec.name;
  const std::string vdir = VolumeDir(name);
  std::string sdir;
  NODEVOL_RETURN_IF_ERROR(Acquire(v, &sdir));
  std::shared_ptr<NfsServer> server = NfsServer::For(v.server);
  const std::string spec = NfsSpec(v.server, v.share);
  auto stage = [&]() -> Status {
    std::vector<MountInfo> mounts;
    NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
    const MountInfo* sm = FindMount(mounts, sdir);
    const MountInfo* vm = FindMount(mounts, vdir);
    if (vm && sm && vm->dev == sm->dev) {
      Status st = server->Call("stat of volume " + name + " on " + spec, timeout(), [vdir] { return StatFresh(vdir); });
      if (st.ok() || !IsStale(st)) return st;
      spdlog::warn("pool {}: volume {}: {}; binding it again", pool_, name, st.message());
    }
    if (vm) NODEVOL_RETURN_IF_ERROR(UnbindVolume(v, name));
    Status st = server->Call("stat of " + spec, timeout(), [sdir] { return StatFresh(sdir); });
    if (IsStale(st)) st = Replace(v);
    NODEVOL_RETURN_IF_ERROR(st);
    NODEVOL_RETURN_IF_ERROR(MakePrivateDir(vdir));
    std::string subdir = v.whole_export ? "" : v.subdir;
    // Under the staging mount's lock, which Replace takes to unmount and
    // mount again: a bind never lands in between. BindBelow refuses a
    // directory that is not on NFS all the same.
    Staging* s = Staging::For(sdir);
    std::unique_lock<std::timed_mutex> l(s->mu, std::defer_lock);
    if (!l.try_lock_for(timeout()))
      return Status::Unavailable("NFS server " + v.server + ": the staging mount of " + spec + " has been busy for " +
                                 Secs(timeout()) + "; try again");
    st = server->Call("bind of " + (subdir.empty() ? spec : subdir + " in " + spec), timeout(),
                      [sdir, subdir, vdir] { return BindBelow(sdir, subdir, vdir); });
    if (st.code() == Status::Code::kNotFound)
      return Status::NotFound("directory " + v.subdir + " of volume " + name + " is missing on " + spec +
                              " (removed on the server?)");
    return st;
  };
  Status st = stage();
  Status rel = Release(v);
  NODEVOL_RETURN_IF_ERROR(st);
  if (!rel.ok()) spdlog::warn("pool {}: after staging {}: {}", pool_, name, rel.message());
  if (Shared(record) && !record.shared_copy) EnsureShared(record);
  *path = vdir;
  return Status::Ok();
}

void NfsBackend::EnsureShared(const VolumeRecord& record) {
  const std::string name = record.spec.name;
  {
    std::lock_guard<std::mutex> l(shared_mu_);
    if (!shared_checked_.insert(name).second) return;
  }
  auto text = std::make_shared<std::string>();
  Status st = OnPoolExport("read of volume " + name + "'s record", [name, text](const std::string& dir) {
    return ReadSharedRecord(dir, name, text.get());
  });
  if (st.code() == Status::Code::kNotFound) {
    st = PutShared(record);
    if (st.ok()) spdlog::info("pool {}: volume {}: its record is on the export now, for the other nodes", pool_, name);
  }
  if (st.ok()) return;
  spdlog::warn("pool {}: volume {}: other nodes cannot publish it until its record is on the export: {}", pool_, name,
               st.message());
  std::lock_guard<std::mutex> l(shared_mu_);
  shared_checked_.erase(name);
}

Status NfsBackend::Unstage(const VolumeRecord& record) {
  Volume v;
  NODEVOL_RETURN_IF_ERROR(FromRecord(record, &v));
  NODEVOL_RETURN_IF_ERROR(UnbindVolume(v, record.spec.name));
  // The volume is unstaged now. The shared staging mount is this backend's
  // business: when it cannot go yet (a process uses it on a dead server,
  // or it is busy), the pod's unpublish is still complete; the mount goes
  // at the next unpublish on that export, or a restart reports it.
  if (Status st = Release0(v); !st.ok())
    spdlog::warn("pool {}: volume {} is unstaged, but the staging mount of {} stays: {}", pool_, record.spec.name,
                 NfsSpec(v.server, v.share), st.message());
  return Status::Ok();
}

Status NfsBackend::Check(const VolumeRecord& record) {
  Volume v;
  NODEVOL_RETURN_IF_ERROR(FromRecord(record, &v));
  if (v.whole_export) return Status::Ok();
  // Only through a staging mount that exists: start-up never waits for a
  // mount, and at most a few seconds for a server that does not answer.
  const std::string sdir = StagingDir(v);
  std::vector<MountInfo> mounts;
  NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
  const MountInfo* m = FindMount(mounts, sdir);
  if (!m || !IsNfsType(m->fstype)) return Status::Ok();
  std::string subdir = v.subdir;
  Status st = NfsServer::For(v.server)->Call("check of " + subdir, std::min<std::chrono::milliseconds>(timeout(), std::chrono::seconds(5)),
                                             [sdir, subdir] {
                                               UniqueFd fd;
                                               return OpenBelow(sdir, subdir, &fd);
                                             });
  if (st.code() == Status::Code::kNotFound)
    return Status::NotFound("directory " + subdir + " is missing on " + NfsSpec(v.server, v.share));
  return st;
}

Status NfsBackend::GetCapacity(Capacity* out) {
  std::unique_lock<std::timed_mutex> refresh(refresh_mu_, std::try_to_lock);
  if (!refresh.owns_lock()) {
    {
      std::lock_guard<std::mutex> l(capacity_mu_);
      if (capacity_known_) {
        *out = capacity_;
        return Status::Ok();
      }
    }
    // The first read is under way (start-up's poll, or another call): its
    // answer is this call's answer too. Waiting for it is bounded by the
    // server's timeout, the same wait as reading here; a CreateVolume
    // right after start then succeeds instead of being told to come back.
    if (!refresh.try_lock_for(timeout() + std::chrono::seconds(1)))
      return Status::Unavailable("capacity of " + NfsSpec(options_.server, options_.share) +
                                 " is still being read for the first time; try again");
    std::lock_guard<std::mutex> l(capacity_mu_);
    if (capacity_known_) {
      *out = capacity_;
      return Status::Ok();
    }
    if (!capacity_error_.empty())
      return Status::Unavailable("capacity of " + NfsSpec(options_.server, options_.share) +
                                 " cannot be read: " + capacity_error_);
    // The other read ended without figures or an error (it found nothing
    // to read yet): read here.
  }
  const std::string spec = NfsSpec(options_.server, options_.share);
  std::vector<MountInfo> mounts;
  NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
  Volume v = PoolExport();
  // The pool's own staging mount, under a hold: a statfs racing its
  // unmount would read the node's own disk as the export.
  const MountInfo* m = FindMount(mounts, StagingDir(v));
  bool mounted = m && IsNfsType(m->fstype);
  {
    std::lock_guard<std::mutex> l(capacity_mu_);
    bool fresh_enough = capacity_known_ && Clock::now() - capacity_time_ < kUnmountedCapacityAge;
    if (!mounted && fresh_enough) {
      *out = capacity_;
      return Status::Ok();
    }
  }
  std::string dir;
  Status st = Acquire(v, &dir);
  bool held = st.ok();
  Capacity cap;
  if (st.ok()) {
    st = server_->CallFor<Capacity>("statfs of " + spec, timeout(),
                                    [dir](Capacity* c) {
                                      struct statfs vfs;
                                      if (::statfs(dir.c_str(), &vfs) != 0) return Status::FromErrno("statfs " + dir, errno);
                                      if (vfs.f_type != NFS_SUPER_MAGIC)
                                        return Status::Unavailable("statfs " + dir + ": the export is not mounted there");
                                      c->total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
                                      c->free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
                                      return Status::Ok();
                                    },
                                    &cap);
  }
  if (held) Release(v);
  std::lock_guard<std::mutex> l(capacity_mu_);
  if (!st.ok() && !capacity_known_) {
    // No figures at all: "0 bytes free" would make CreateVolume say
    // RESOURCE_EXHAUSTED (look elsewhere) where the truth is the server's
    // error, which the next call retries.
    if (capacity_error_.empty())
      spdlog::warn("pool {}: capacity cannot be read yet: {}", pool_, st.message());
    capacity_error_ = st.message();
    return st;
  }
  capacity_time_ = Clock::now();
  if (!st.ok()) {
    // The last figures stand while the server does not answer: a CreateVolume then fails with the server's own error
    // (UNAVAILABLE naming it) rather than a made-up "0 bytes free". Said
    // once per outage, not at every poll.
    if (capacity_error_.empty())
      spdlog::warn("pool {}: capacity cannot be read; reporting the last figures until it can: {}", pool_, st.message());
    capacity_error_ = st.message();
  } else {
    if (!capacity_error_.empty()) spdlog::info("pool {}: capacity of {} known again", pool_, spec);
    capacity_error_.clear();
    capacity_ = cap;
    capacity_known_ = true;
  }
  *out = capacity_;
  return Status::Ok();
}

Status NfsBackend::Survey(const std::set<std::string>& known, std::vector<VolumeRecord>* unrecorded,
                          std::vector<std::string>* drift) {
  const std::string spec = NfsSpec(options_.server, options_.share);
  std::vector<MountInfo> mounts;
  NODEVOL_RETURN_IF_ERROR(LoadMountInfo(&mounts));
  for (const MountInfo& m : mounts) {
    if (!IsNfsType(m.fstype)) continue;
    if (Parent(m.target) == root_ + "/volumes") {
      std::string name = m.target.substr(m.target.rfind('/') + 1);
      if (!known.count(name) && m.source.rfind(spec, 0) == 0)
        drift->push_back("NFS bind " + m.target + " (" + m.source + ") belongs to no volume record; left mounted");
      continue;
    }
    if (Parent(m.target) != root_ || m.source != spec) continue;
    bool used = false;
    for (const MountInfo& o : mounts)
      if (o.dev == m.dev && o.target != m.target && !(Parent(o.target) == root_)) used = true;
    if (!used)
      drift->push_back("staging mount " + m.target + " of " + m.source + " is used by no volume; left mounted "
                       "(unmount it by hand if nothing needs it)");
    else
      spdlog::info("pool {}: reusing staging mount {} of {}", pool_, m.target, m.source);
  }
  return Status::Ok();
}

}  // namespace nodevol
