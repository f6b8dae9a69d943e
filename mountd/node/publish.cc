// Node: publication of volumes into pod volume directories.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "base/names.h"
#include "mount/bind.h"
#include "mount/mount_table.h"
#include "mount/target.h"
#include "backend/disk_gate.h"
#include "node/fs_group.h"
#include "node/node.h"

namespace nodevol {

bool Node::LookupPublication(const std::string& target, PublicationRecord* out) const {
  std::lock_guard<std::mutex> l(mu_);
  const PublicationRecord* p = publications_.Find(target);
  if (p) *out = *p;
  return p != nullptr;
}

void Node::SetKubeletRoot(const std::string& kubelet_root) {
  block_root_ = kubelet_root + "/plugins/kubernetes.io/csi/volumeDevices/publish";
}

namespace {

// One inline volume per pod volume directory, named after it.
std::string InlineVolumeName(const Target& target) { return "ephemeral-" + target.pod_uid + "-" + target.name; }

// The flags every publication from pool b gets whatever the caller asked:
// nosuid, and nodev but for a device (useless on a nodev mount), unless
// the pool allows them.
unsigned long PolicyFlags(const Backend* b, bool block) {
  if (b && b->allow_suid_dev()) return 0;
  return MS_NOSUID | (block ? 0 : MS_NODEV);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& o : v) s += (s.empty() ? "" : ",") + o;
  return s.empty() ? "(none)" : s;
}

// The options a publication from pool b is recorded and mounted with:
// the caller's, and the pool's nosuid,nodev.
std::vector<std::string> WithPolicy(std::vector<std::string> options, unsigned long policy) {
  for (auto [o, f] : {std::pair{"nosuid", MS_NOSUID}, std::pair{"nodev", MS_NODEV}})
    if ((policy & f) && std::find(options.begin(), options.end(), o) == options.end()) options.push_back(o);
  return options;
}

// A repeat publish must ask for what the recorded publication is. Read-only
// and the group cannot change under a running pod (they come from the pod
// and the claim): a difference is the CSI spec's ALREADY_EXISTS
// ("published ... but is incompatible with the specified volume_capability
// or readonly flag"), not an OK that ignores it. Bind flags can (a PV's
// mountOptions are editable, and kubelet publishes again what it finds
// after a restart): *other_flags says the caller asks for others.
// nosuid,nodev the pool adds are the pool's, not compared; asked for
// explicitly, the record must have them.
Status SameAsRecorded(const PublicationRecord& pub, const PublishArgs& args, bool read_only, unsigned long asked,
                      bool* other_flags) {
  const std::string what = "volume " + pub.volume + " is already published at " + pub.target;
  const std::string fix = "; unpublish it first to publish it otherwise";
  if (pub.read_only != read_only)
    return Status::AlreadyExists(what + " " + (pub.read_only ? "read-only" : "read-write") + ", not " +
                                 (read_only ? "read-only" : "read-write") + fix);
  if (pub.fs_group != args.fs_group) {
    auto group = [](const std::optional<uint32_t>& g) { return g ? "group " + std::to_string(*g) : "no group"; };
    return Status::AlreadyExists(what + " with " + group(pub.fs_group) + ", not " + group(args.fs_group) + fix);
  }
  unsigned long recorded = 0;
  ParseBindOptions(pub.mount_options, &recorded);  // validated when recorded
  constexpr unsigned long kPolicy = MS_NOSUID | MS_NODEV;
  recorded &= ~MS_RDONLY;
  asked &= ~MS_RDONLY;
  *other_flags = (recorded & ~kPolicy) != (asked & ~kPolicy) || (asked & kPolicy & ~recorded) != 0;
  return Status::Ok();
}

}  // namespace

Status Node::Resolve(const std::string& path, bool block, Target* out, bool allow_missing_parent) const {
  auto below = [this](const std::string& p) {
    return !block_root_.empty() && p.compare(0, block_root_.size() + 1, block_root_ + "/") == 0;
  };
  // kubelet names targets under its root as configured, which may be a
  // symlink to the resolved block_root_: what the path resolves to counts
  // (an unpublish does not say which kind of target it names).
  // The leaf is never followed (ResolveBlockTarget refuses a symlink).
  bool below_block_root = below(path);
  size_t slash = path.rfind('/');
  std::string parent;
  if (!below_block_root && !block_root_.empty() && slash != std::string::npos && slash > 0 &&
      path.compare(0, pods_root_.size() + 1, pods_root_ + "/") != 0 &&
      ResolveExistingPart(path.substr(0, slash), &parent).ok())
    below_block_root = below(parent + path.substr(slash));
  if (!block && !below_block_root) return ResolveTarget(pods_root_, path, out, allow_missing_parent);
  if (block_root_.empty())
    return Status::FailedPrecondition("raw block volumes are published through nodevold's CSI front door, which "
                                      "is off here (--csi=off)");
  return ResolveBlockTarget(block_root_, path, out, allow_missing_parent);
}

Status Node::Publish(const PublishArgs& args, std::string* volume, std::string* target_out) {
  Target target;
  NODEVOL_RETURN_IF_ERROR(Resolve(args.target, args.block, &target));
  if (args.block && args.read_only)
    return Status::InvalidArgument("read-only raw block volumes are not supported: a device bound read-only can "
                                   "still be opened for writing; publish it read-write");
  if (!args.pod.uid.empty() && args.pod.uid != target.pod_uid)
    return Status::InvalidArgument("pod uid " + args.pod.uid + " does not match the pod uid " + target.pod_uid +
                                   " in target " + target.path);
  unsigned long flags = 0;
  NODEVOL_RETURN_IF_ERROR(ParseBindOptions(args.mount_options, &flags));
  bool read_only = args.read_only || (flags & MS_RDONLY);

  std::string name = args.volume;
  VolumeSpec inline_spec;
  if (args.inline_spec) {
    if (!name.empty()) return Status::InvalidArgument("give either a volume name or an inline volume, not both");
    // One inline volume per pod volume directory, named after it; only
    // size, fsType and mode come from the pod author (node/access.cc).
    name = InlineVolumeName(target);
    NODEVOL_RETURN_IF_ERROR(InlineVolumeSpec(*args.inline_spec, name, &inline_spec).WithContext("inline volume"));
  } else {
    NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(name));
  }

  LockTable::Guard tg(&locks_, TargetKey(target.path));
  NODEVOL_RETURN_IF_ERROR(tg.status());
  LockTable::Guard vg(&locks_, VolumeKey(name));
  NODEVOL_RETURN_IF_ERROR(vg.status());
  // What is at the target is decided again under its lock: a call this one
  // waited for may have made or removed it (a timed-out publish undoes the
  // target it made), and a stale answer here was an INTERNAL statx error.
  {
    Target now;
    NODEVOL_RETURN_IF_ERROR(Resolve(args.target, args.block, &now));
    if (now.path != target.path)
      return Status::FailedPrecondition("target " + args.target + " resolved to " + target.path + " and now to " +
                                        now.path + ": it changed while this call waited; call again");
    target = now;
  }
  // kubelet makes a FlexVolume's pod volume directory before it calls
  // mount; one that is missing belongs to a pod that is gone. A CSI
  // target is the driver's to make (below), in a directory kubelet made.
  if (!target.exists && target.leaf.empty() && !target.block)
    return Status::FailedPrecondition("target " + target.path + " does not exist; kubelet creates it before "
                                      "publishing, so its pod is gone or the path is wrong");
  *volume = name;
  *target_out = target.path;

  PublicationRecord pub;
  if (LookupPublication(target.path, &pub)) {
    if (pub.volume != name)
      return Status::FailedPrecondition("target " + target.path + " already has volume " + pub.volume +
                                        " published; unpublish it first");
    VolumeRecord published;
    Backend* pool = LookupVolume(name, &published) ? FindPool(published.spec.pool) : nullptr;
    if (pool && published.spec.block != args.block)
      return Status::AlreadyExists("volume " + name + " is already published at " + target.path + " as " +
                                   (published.spec.block ? "a raw block device" : "a filesystem") +
                                   "; it is not published as a " + (args.block ? "raw block device" : "filesystem"));
    bool other_flags = false;
    NODEVOL_RETURN_IF_ERROR(SameAsRecorded(pub, args, read_only, flags, &other_flags));
    MountState ms;
    bool ro = false;
    NODEVOL_RETURN_IF_ERROR(InspectMount(pub.source, target.path, &ms, &ro));
    if (other_flags && pub.state == PublicationState::kPublished && ms != MountState::kMountedOther &&
        (ms == MountState::kNotMounted || ro == read_only)) {
      // Other bind flags asked for (a PV's mountOptions edited): the
      // publication takes them, recorded first, so a crash in between is
      // finished by reconcile or the next retry. Containers already
      // running keep the flags they were started with (their copy of the
      // bind), until they restart.
      const unsigned long policy = PolicyFlags(pool, args.block);
      const std::vector<std::string> was = pub.mount_options;
      pub.mount_options = WithPolicy(args.mount_options, policy);
      NODEVOL_RETURN_IF_ERROR(store_->PutPublication(pub));
      {
        std::lock_guard<std::mutex> l(mu_);
        publications_.Put(pub);
      }
      if (ms == MountState::kMountedSource)
        NODEVOL_RETURN_IF_ERROR(Remount(pub.source, target.path, read_only,
                                        ((flags | policy) & ~MS_RDONLY) |
                                            InheritedBindFlags(pub.source, pool && pool->StageMayWait()))
                                    .WithContext("publication of " + name + " at " + target.path));
      spdlog::warn("publication of {} at {}: mount options {} now, were {}", name, target.path,
                   Join(pub.mount_options), Join(was));
      if (ms == MountState::kMountedSource) return Status::Ok();
    }
    if (pub.state == PublicationState::kPublished && ms == MountState::kMountedSource && ro == read_only)
      return Status::Ok();
    if (pub.state == PublicationState::kPublished && ms == MountState::kNotMounted) {
      // The bind is gone (an umount by hand; a start at which the pool's
      // storage was late): kubelet only ever retries the publish, so the
      // publish makes it again, as recorded.
      unsigned long recorded = 0;
      ParseBindOptions(pub.mount_options, &recorded);  // validated when recorded
      NODEVOL_RETURN_IF_ERROR(
          Rebind(&pub, recorded & ~MS_RDONLY).WithContext("publication of " + name + " at " + target.path));
      spdlog::warn("publication of {} at {}: its bind mount was missing; re-created", name, target.path);
      return Status::Ok();
    }
    if (ms == MountState::kMountedSource && ro != read_only)
      return Status::FailedPrecondition("publication of " + name + " at " + target.path + " is mounted " +
                                        (ro ? "read-only" : "read-write") + ", not as recorded; unpublish it and "
                                        "publish again");
    return Status::FailedPrecondition("publication of " + name + " at " + target.path + " is " +
                                      ToString(pub.state) + " and the target is " +
                                      (ms == MountState::kNotMounted ? "not mounted" : "mounted") +
                                      "; unpublish it and publish again");
  }

  // An inline volume exists only for its publication, and a copy of
  // another node's record only for the publications here: if this call
  // fails, either goes again (unless a publication already uses it).
  bool succeeded = false;
  bool made_target = false;
  // An inline volume found ready before this call (kept by a start's
  // reconcile when its pod directory was missing, or left by a power loss
  // with its publication record) holds a pod's data: a failed publish of
  // it leaves it for the next one, or for DeleteVolume.
  VolumeRecord before;
  const bool inline_kept =
      args.inline_spec && LookupVolume(name, &before) && before.state == VolumeState::kReady;
  struct Cleanup {
    std::function<void()> fn;
    ~Cleanup() { fn(); }
  } cleanup{[&] {
    if (!succeeded && made_target) target.block ? ::unlink(target.path.c_str()) : ::rmdir(target.path.c_str());
    if (succeeded || !PublishedAt(name).empty()) return;
    if (args.inline_spec) {
      bool existed = false;
      if (!inline_kept) DeleteLocked(name, &existed);
    } else {
      DropSharedCopy(name);
    }
  }};

  VolumeRecord rec;
  if (args.inline_spec) {
    VolumeView created;
    NODEVOL_RETURN_IF_ERROR(CreateLocked(inline_spec, true, &created));
    rec = created.record;
  } else if (LookupVolume(name, &rec)) {
    NODEVOL_RETURN_IF_ERROR(CheckPodMayUse(rec, args.pod, args.pod_required));
  } else {
    // Another node's NFS volume (node/shared.cc): the pod is checked
    // against the record its creator wrote before a copy is kept here.
    NODEVOL_RETURN_IF_ERROR(FindShared(name, args.pool, &rec));
    NODEVOL_RETURN_IF_ERROR(CheckPodMayUse(rec, args.pod, args.pod_required));
    NODEVOL_RETURN_IF_ERROR(store_->PutVolume(rec));
    SaveVolumeInMemory(rec);
  }
  if (rec.state != VolumeState::kReady)
    return Status::FailedPrecondition("volume " + name + " is " + ToString(rec.state) + ", not ready");
  if (rec.spec.block != args.block)
    return Status::FailedPrecondition(rec.spec.block ? "volume " + name + " is a raw block volume: publish it with "
                                                       "volumeMode Block"
                                                     : "volume " + name + " has a filesystem: publish it with "
                                                       "volumeMode Filesystem");
  Backend* b = FindPool(rec.spec.pool);
  if (!b) return Status::FailedPrecondition("pool " + rec.spec.pool + " of volume " + name + " is not configured");
  // fsGroup on NFS would walk a remote tree on this serving thread, holding
  // the target's and the volume's locks for as long as the server takes
  // (docs/nfs.md); root_squash refuses it anyway.
  if (args.fs_group && !read_only && b->kind() == "nfs")
    return Status::FailedPrecondition(
        "volume " + name + " is on NFS pool " + rec.spec.pool + ", where nodevold does not apply an fsGroup (" +
        std::to_string(*args.fs_group) + "): unset the pod's securityContext.fsGroup, or give the volume gid= and "
        "mode= when it is created (docs/nfs.md)");
  // Every publication is nosuid,nodev unless the pool allows otherwise:
  // recorded with the publication, so reconcile restores them too.
  std::vector<std::string> mount_options = args.mount_options;
  // A device node is useless on a nodev mount: raw block binds are nosuid only.
  const unsigned long policy = PolicyFlags(b, args.block);
  mount_options = WithPolicy(std::move(mount_options), policy);
  flags |= policy;


  std::string source;
  NODEVOL_RETURN_IF_ERROR(b->Stage(rec, &source).WithContext("stage volume " + name));
  // Only what this call made goes again if it fails.
  if (!target.exists && target.block) {
    int fd = ::open(target.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return Status::FromErrno("create target " + target.path, errno);
    if (fd >= 0) ::close(fd);
    made_target = fd >= 0;
  } else if (!target.exists) {
    made_target = ::mkdir(target.path.c_str(), 0750) == 0;
    if (!made_target && errno != EEXIST) return Status::FromErrno("create target " + target.path, errno);
  }
  MountState ms;
  bool mounted_ro = false;
  NODEVOL_RETURN_IF_ERROR(InspectMount(source, target.path, &ms, &mounted_ro));
  if (ms == MountState::kMountedOther)
    return Status::FailedPrecondition("target " + target.path + " is already a mount point of something else");
  // Mounted from this volume without a record (a record lost by hand):
  // adopt it if it matches, but never remount or unmount it.
  bool adopt = ms == MountState::kMountedSource;
  if (adopt && mounted_ro != read_only)
    return Status::FailedPrecondition("target " + target.path + " is already mounted " +
                                      (mounted_ro ? "read-only" : "read-write") + " from volume " + name);

  pub = PublicationRecord{target.path, name, source, PublicationState::kPublishing, read_only,
                          mount_options, args.fs_group, args.pod, adopt};
  // Durable for an inline volume: it ties the volume to its target across
  // a power loss (reconcile never deletes an inline volume for want of it).
  NODEVOL_RETURN_IF_ERROR(store_->PutPublication(pub, /*durable=*/args.inline_spec.has_value()));
  {
    std::lock_guard<std::mutex> l(mu_);
    publications_.Put(pub);
  }
  bool mounted = false;
  auto undo = [&](Status st) {
    if ((!mounted || Unmount(target.path).ok()) && store_->RemovePublication(target.path).ok()) {
      std::lock_guard<std::mutex> l(mu_);
      publications_.Erase(target.path);
    }
    return st;
  };

  Status st;
  if (args.fs_group && !read_only && !args.block) {
    // The walk touches every inode of the volume: on a disk that stopped
    // answering it waits in the kernel. Through the pool's gate it is
    // given up once it makes no progress, and the pool then refuses new
    // work at once instead of piling up a thread per retry.
    gid_t gid = *args.fs_group;
    if (DiskGate* gate = b->disk_gate())
      st = gate->Run("the fsGroup walk of volume " + name,
                     [source, gid](const Step& step) { return ApplyFsGroup(source, gid, step); });
    else
      st = ApplyFsGroup(source, gid);
  }
  if (!st.ok()) return undo(st);
  if (!adopt) {
    if (std::chrono::system_clock::now() >= args.deadline)
      return undo(Status::DeadlineExceeded("publish of " + name + " at " + target.path +
                                           " passed its caller's deadline before mounting; undone"));
    // Set before the call: a BindMount whose remount and cleanup both
    // failed leaves a bind, which undo must find and remove.
    mounted = true;
    st = BindMount(source, target.path, read_only,
                   (flags & ~MS_RDONLY) | InheritedBindFlags(source, b->StageMayWait()));
    if (!st.ok()) return undo(st);
  }
  pub.state = PublicationState::kPublished;
  st = store_->MovePublication(pub, PublicationState::kPublishing);
  if (!st.ok()) return undo(st);
  std::lock_guard<std::mutex> l(mu_);
  publications_.Put(pub);
  succeeded = true;
  return Status::Ok();
}

namespace {

// A CSI target is the driver's to remove once unmounted (the CSI spec);
// kubelet then removes the directory above it. Only an empty directory
// goes: files written there while nothing was mounted are left for a
// person to look at.
Status RemoveCsiTarget(const Target& target) {
  if (target.block && target.exists) {
    if (::unlink(target.path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
    return Status::FromErrno("remove target " + target.path, errno);
  }
  if (target.leaf.empty() || !target.exists) return Status::Ok();
  if (::rmdir(target.path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
  if (errno == ENOTEMPTY || errno == EEXIST)
    return Status::FailedPrecondition("target " + target.path + " is unmounted but not empty: something wrote "
                                      "into it while no volume was mounted there; look, then remove it by hand");
  return Status::FromErrno("remove target " + target.path, errno);
}

}  // namespace

Status Node::Unpublish(const std::string& path, bool* was_published, const UnpublishOf& of) {
  Target target;
  NODEVOL_RETURN_IF_ERROR(Resolve(path, false, &target, /*allow_missing_parent=*/true));
  LockTable::Guard tg(&locks_, TargetKey(target.path));
  NODEVOL_RETURN_IF_ERROR(tg.status());
  PublicationRecord pub;
  *was_published = LookupPublication(target.path, &pub);
  if (!*was_published) {
    // An inline volume whose delete failed after its publication record
    // went stays "deleting": kubelet's retry is the only caller left, so
    // it finishes the delete (or says why it still cannot).
    const std::string inline_name = InlineVolumeName(target);
    VolumeRecord doomed;
    if ((of.volume.empty() || of.inline_volume) && !target.pod_uid.empty() && LookupVolume(inline_name, &doomed) &&
        doomed.ephemeral &&
        doomed.state == VolumeState::kDeleting && PublishedAt(inline_name).empty()) {
      LockTable::Guard vg(&locks_, VolumeKey(inline_name));
      NODEVOL_RETURN_IF_ERROR(vg.status());
      bool existed = false;
      NODEVOL_RETURN_IF_ERROR(
          DeleteLocked(inline_name, &existed).WithContext("finishing the delete of inline volume " + inline_name));
    }
    if (!target.exists) return Status::Ok();
    struct statx stx;
    if (StatCached(target.path, false, &stx).ok() && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
      // A bind of one of our volumes whose record was lost: kubelet's
      // teardown would otherwise retry forever.
      // Only the volume the caller names, when it names one.
      std::vector<std::string> only;
      if (!of.volume.empty()) only.push_back(of.volume);
      if (of.inline_volume) only.push_back(inline_name);
      if (!ShowsKnownVolume(stx, only))
        return Status::FailedPrecondition("target " + target.path + " is mounted, but " +
                                          (only.empty() ? "not by nodevold" : "does not show volume " + of.volume) +
                                          "; nodevold leaves it alone");
      NODEVOL_RETURN_IF_ERROR(Unmount(target.path));
    }
    return RemoveCsiTarget(target);
  }
  const bool named = !of.volume.empty() || of.inline_volume;
  if (named && pub.volume != of.volume && !(of.inline_volume && pub.volume == InlineVolumeName(target))) {
    VolumeRecord asked;
    const std::string why = "target " + target.path + " has volume " + pub.volume + " published, not " +
                            of.volume + "; nothing was unpublished";
    // The CSI spec's answer for an id that names no volume.
    if (!of.inline_volume && !LookupVolume(of.volume, &asked)) return Status::NotFound(why);
    return Status::FailedPrecondition(why);
  }
  LockTable::Guard vg(&locks_, VolumeKey(pub.volume));
  NODEVOL_RETURN_IF_ERROR(vg.status());
  NODEVOL_RETURN_IF_ERROR(UnpublishLocked(pub));
  return RemoveCsiTarget(target);
}

// Whether st (a mount root) shows a volume's directory: one a dir volume
// records, or the source of a recorded publication; only those of the
// volumes named in `only` when it names any. Cached attributes only.
bool Node::ShowsKnownVolume(const struct statx& st, const std::vector<std::string>& only) const {
  auto wanted = [&](const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  std::vector<std::string> dirs;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [name, v] : volumes_) {
      if (!wanted(name)) continue;
      if (auto it = v.attributes.find("path"); it != v.attributes.end()) dirs.push_back(it->second);
      // A raw block volume shows its device node.
      if (auto it = v.attributes.find("device"); v.spec.block && it != v.attributes.end()) dirs.push_back(it->second);
    }
    for (const auto& [_, p] : publications_)
      if (wanted(p.volume)) dirs.push_back(p.source);
  }
  for (const std::string& d : dirs) {
    struct statx ds;
    if (StatCached(d, true, &ds).ok() && ds.stx_dev_major == st.stx_dev_major &&
        ds.stx_dev_minor == st.stx_dev_minor && ds.stx_ino == st.stx_ino)
      return true;
  }
  return false;
}

// Unmounts, forgets the publication, unstages after the last one, and
// deletes an inline volume with its publication. Each step is durable
// before the next, so a crash anywhere is finished by Reconcile.
Status Node::UnpublishLocked(const PublicationRecord& p) {
  PublicationRecord pub = p;
  if (pub.state != PublicationState::kUnpublishing) {
    pub.state = PublicationState::kUnpublishing;
    NODEVOL_RETURN_IF_ERROR(store_->MovePublication(pub, p.state));
    std::lock_guard<std::mutex> l(mu_);
    publications_.Put(pub);
  }
  // Only cached attributes: on a dead NFS server a full stat of either
  // path would hang this call for as long as the server is away.
  struct statx st;
  if (StatCached(pub.target, false, &st).ok()) {
    MountState ms = MountState::kNotMounted;
    if (StatCached(pub.source, true, &st).ok()) {
      NODEVOL_RETURN_IF_ERROR(InspectMount(pub.source, pub.target, &ms));
    } else {
      // The source is gone (staging lost): a mount left at the target can
      // only be ours if it is the one we recorded; let umount decide.
      ms = MountState::kMountedSource;
    }
    if (ms == MountState::kMountedOther)
      return Status::FailedPrecondition("target " + pub.target +
                                        " now shows another mount on top of volume " + pub.volume +
                                        "; unmount that first");
    if (ms == MountState::kMountedSource) NODEVOL_RETURN_IF_ERROR(Unmount(pub.target));
  }
  // An inline volume's last publication: its durable "deleting" record
  // goes first, so a crash after the publication record is gone still
  // finishes the deletion (reconcile deletes nothing for want of a record).
  VolumeRecord doomed;
  if (LookupVolume(pub.volume, &doomed) && doomed.ephemeral && doomed.state != VolumeState::kDeleting &&
      PublishedAt(pub.volume).size() == 1) {
    doomed.state = VolumeState::kDeleting;
    NODEVOL_RETURN_IF_ERROR(store_->PutVolume(doomed));
    SaveVolumeInMemory(doomed);
  }
  NODEVOL_RETURN_IF_ERROR(store_->RemovePublication(pub.target));
  {
    std::lock_guard<std::mutex> l(mu_);
    publications_.Erase(pub.target);
  }
  VolumeRecord rec;
  if (!LookupVolume(pub.volume, &rec) || !PublishedAt(pub.volume).empty()) return Status::Ok();
  if (Backend* b = FindPool(rec.spec.pool)) NODEVOL_RETURN_IF_ERROR(b->Unstage(rec).WithContext("unstage " + pub.volume));
  if (rec.ephemeral) {
    bool existed = false;
    NODEVOL_RETURN_IF_ERROR(DeleteLocked(pub.volume, &existed));
  }
  if (rec.shared_copy) DropSharedCopy(pub.volume);
  return Status::Ok();
}

}  // namespace nodevol
