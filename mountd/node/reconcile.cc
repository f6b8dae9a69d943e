// Node: start-up — load the records and reconcile them with the kernel.
//
// What a crash can leave, and what Start() does about it:
//   volume creating      left as is; CreateVolume finishes it, DeleteVolume drops it
//   volume deleting      deletion finished (it was asked for and is idempotent)
//   volume ready, data missing            reported as drift, record kept
//   publication publishing, mounted       rolled back: unmounted (the call never
//                                         returned OK, the caller may have gone)
//   publication publishing, adopted       completed (the mount was not ours to undo)
//   publication publishing, not mounted   rolled back (the caller saw an error)
//   publication published, bind missing   bind re-created when the target dir exists
//                                         (NFS: after the start, in the background)
//   publication published, flags lost     remounted as recorded; the record stays
//                                         until that works
//   publication unpublishing              unmount finished, record removed (an
//                                         inline volume deleted with it)
//   volume ready, staged, no publication  unstaged (an unpublish killed between
//                                         its record's removal and the unstage)
//   volume creating, staged               unstaged (a create killed after it
//                                         mounted the new filesystem)
//   copy of another node's record, no publication
//                                         dropped after that (node/shared.cc)
//   ephemeral volume without publication  kept and reported: an absent or lost
//                                         record (power loss, pods filesystem not
//                                         mounted yet) is no leave to delete data;
//                                         only a durable "deleting" or
//                                         "unpublishing" record is
//   mount from one of our volumes under the pods root without a record
//                                         reported as drift, left alone
//   storage a backend finds without a record (lvcreate done, record lost)
//                                         adopted as a ready volume, reported
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include <ctime>
#include <set>

#include "mount/bind.h"
#include "mount/mount_table.h"
#include "node/node.h"

namespace nodevol {
Status Node::Start() {
  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  std::vector<SnapshotRecord> snaps;
  NODEVOL_RETURN_IF_ERROR(store_->Load(&vols, &pubs, &problems));
  NODEVOL_RETURN_IF_ERROR(store_->LoadSnapshots(&snaps, &problems));
  for (std::string& p : problems) AddDrift(std::move(p));
  for (const auto& [pool, b] : pools_) {
    std::vector<std::string> notes;
    Status st = b->Recover(&notes);
    for (std::string& n : notes) AddDrift("pool " + pool + ": " + n);
    if (!st.ok()) AddDrift("pool " + pool + ": " + st.message());
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const VolumeRecord& v : vols) PutVolumeLocked(v);
    for (const PublicationRecord& p : pubs) publications_.Put(p);
    for (const SnapshotRecord& s : snaps) PutSnapshotLocked(s);
  }
  Reconcile();
  ReconcileSnapshots(std::move(snaps));
  if (!restage_.empty()) restager_ = std::thread([this] { RestageLoop(); });
  return Status::Ok();
}

void Node::Reconcile() {
  std::vector<PublicationRecord> pubs;
  std::vector<VolumeRecord> vols;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [_, p] : publications_) pubs.push_back(p);
    for (const auto& [_, v] : volumes_) vols.push_back(v);
  }
  {
    // One read of the mount table for all of them: it lists every mount on
    // the node, and the kernel's making of it is what a read costs.
    MountTable table;
    bool loaded = table.Load().ok();
    for (PublicationRecord& p : pubs) ReconcilePublication(std::move(p), loaded ? &table : nullptr);
  }
  AdoptUnrecorded(&vols);

  for (const VolumeRecord& v : vols) {
    const std::string& name = v.spec.name;
    Backend* b = FindPool(v.spec.pool);
    if (!b) {
      AddDrift("volume " + name + " is in pool " + v.spec.pool + ", which is not configured; record kept");
      continue;
    }
    bool existed = false;
    if (v.state == VolumeState::kDeleting) {
      Status st = DeleteLocked(name, &existed);
      AddDrift(st.ok() ? "finished deleting " + std::string(v.ephemeral ? "inline " : "") + "volume " + name
                       : "could not finish deleting volume " + name + ": " + st.message());
    } else if (v.ephemeral && PublishedAt(name).empty()) {
      AddDrift("inline volume " + name + " has no publication; kept (a publish of its target reuses it, "
               "DeleteVolume removes it)");
    } else if (v.state == VolumeState::kCreating) {
      AddDrift("volume " + name + " was being created when nodevold stopped; CreateVolume finishes it");
    } else if (Status st = b->Check(v); !st.ok()) {
      AddDrift("volume " + name + ": " + st.message());
    }
  }

  MountTable table;
  if (Status st = table.Load(); !st.ok()) {
    AddDrift("cannot read the mount table: " + st.message());
    return;
  }
  // Staging that no publication holds: an Unpublish killed after its
  // record went (records go first, so no publication outlives its mount)
  // and before the unstage that follows.
  // Then a copy of another node's record (node/shared.cc) that no
  // publication needs any more is dropped.
  // A volume still being created has no publication either; its create
  // may have mounted it (lvm: to set the root's owner and mode) when the
  // kill came. Unmounted, the retried CreateVolume makes its filesystem
  // again: nothing can be on it before it is ready.
  for (const VolumeRecord& v : vols) {
    bool creating = v.state == VolumeState::kCreating;
    if ((v.state != VolumeState::kReady && !creating) || !PublishedAt(v.spec.name).empty()) continue;
    Backend* b = FindPool(v.spec.pool);
    std::string at = b ? b->StagedMount(v) : "";
    bool staged = !at.empty() && table.FindTarget(at);
    Status st = staged ? b->Unstage(v) : Status::Ok();
    if (staged)
      AddDrift("volume " + v.spec.name + " was staged at " + at +
               (creating ? " by its unfinished create" : " with no publication (an unpublish cut short)") + "; " +
               (st.ok() ? "unstaged" : "unstaging failed: " + st.message()));
    if (v.shared_copy && st.ok()) {
      DropSharedCopy(v.spec.name);
      AddDrift("volume " + v.spec.name + ": this node's copy of another node's record had no publication; dropped");
    }
  }

  // Mounts of our volumes under the pods root that no record explains.
  std::set<std::pair<dev_t, ino_t>> sources;
  std::set<std::string> recorded;
  {
    std::lock_guard<std::mutex> l(mu_);
    // Cached attributes only (mount/bind.h): a dead NFS server must not
    // hang the start.
    auto id = [](const struct statx& st) { return std::pair<dev_t, ino_t>{makedev(st.stx_dev_major, st.stx_dev_minor), st.stx_ino}; };
    for (const auto& [target, p] : publications_) {
      recorded.insert(target);
      struct statx st;
      if (StatCached(p.source, true, &st).ok()) sources.insert(id(st));
    }
    for (const auto& [_, v] : volumes_) {
      auto it = v.attributes.find("path");
      struct statx st;
      if (it != v.attributes.end() && StatCached(it->second, true, &st).ok()) sources.insert(id(st));
    }
  }
  for (const MountEntry* e : table.Below(pods_root_)) {
    if (recorded.count(e->target)) continue;
    struct statx st;
    if (StatCached(e->target, true, &st).ok() &&
        sources.count({makedev(st.stx_dev_major, st.stx_dev_minor), st.stx_ino}))
      AddDrift("mount at " + e->target + " shows a nodevol volume but has no publication record; left alone");
  }
}

void Node::AdoptUnrecorded(std::vector<VolumeRecord>* vols) {
  std::set<std::string> known;
  for (const VolumeRecord& v : *vols) known.insert(v.spec.name);
  for (const auto& [pool, b] : pools_) {
    std::vector<VolumeRecord> found;
    std::vector<std::string> notes;
    if (Status st = b->Survey(known, &found, &notes); !st.ok()) {
      AddDrift("pool " + pool + ": cannot survey its storage: " + st.message());
      continue;
    }
    for (std::string& n : notes) AddDrift("pool " + pool + ": " + n);
    for (VolumeRecord& v : found) {
      v.created_unix = static_cast<int64_t>(std::time(nullptr));
      if (Status st = store_->PutVolume(v); !st.ok()) {
        AddDrift("pool " + pool + ": volume " + v.spec.name + " has storage but no record, and recording it failed: " +
                 st.message());
        continue;
      }
      SaveVolumeInMemory(v);
      known.insert(v.spec.name);
      vols->push_back(v);
      AddDrift("pool " + pool + ": adopted volume " + v.spec.name + " (" + std::to_string(v.spec.size_bytes) +
               " bytes), whose storage had no record");
    }
  }
}

// Drops the record of a publication with nothing mounted at its target and
// unstages its volume after its last publication. An inline volume stays:
// only an Unpublish ("unpublishing") deletes it.
void Node::RollBack(const PublicationRecord& pub, const std::string& why) {
  if (Status st = store_->RemovePublication(pub.target); !st.ok()) {
    AddDrift("publication of " + pub.volume + " at " + pub.target + ": " + why + ", but removing its record failed: " +
             st.message());
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    publications_.Erase(pub.target);
  }
  AddDrift("publication of " + pub.volume + " at " + pub.target + ": " + why);
  VolumeRecord rec;
  Backend* b = LookupVolume(pub.volume, &rec) && PublishedAt(pub.volume).empty() ? FindPool(rec.spec.pool) : nullptr;
  if (b)
    if (Status st = b->Unstage(rec); !st.ok())
      AddDrift("volume " + pub.volume + ": unstaging after a rolled back publication failed: " + st.message());
}

void Node::ReconcilePublication(PublicationRecord pub, const MountTable* table) {
  auto forget = [&](const std::string& why) { RollBack(pub, why); };
  if (pub.state == PublicationState::kUnpublishing) {
    Status st = UnpublishLocked(pub);
    AddDrift(st.ok() ? "finished unpublishing " + pub.volume + " from " + pub.target
                     : "could not finish unpublishing " + pub.volume + " from " + pub.target + ": " + st.message());
    return;
  }
  struct statx st;
  if (!StatCached(pub.target, false, &st).ok() || !IsTargetType(st.stx_mode)) {
    forget("target directory is gone; record removed");
    return;
  }
  MountState ms = MountState::kNotMounted;
  bool ro = false;
  Status s;
  if (StatCached(pub.source, true, &st).ok()) {
    s = InspectMount(pub.source, pub.target, &ms, &ro, table);
  } else {
    // A source that is gone while the target is no mount point (after a
    // reboot: a staging dir removed at start) is made again by staging
    // the volume below; a mount left at the target is not ours to judge.
    MountTable t;
    s = table ? Status::Ok() : t.Load();
    if (s.ok() && (table ? table : &t)->FindTarget(pub.target))
      s = Status::NotFound("source " + pub.source + " is missing");
  }
  if (!s.ok()) {
    AddDrift("publication of " + pub.volume + " at " + pub.target + ": " + s.message() + "; record kept");
    return;
  }
  if (ms == MountState::kMountedOther) {
    AddDrift("publication of " + pub.volume + " at " + pub.target + ": another mount is there; left alone");
    return;
  }
  if (pub.state == PublicationState::kPublishing && ms == MountState::kNotMounted) {
    RollBack(pub, "was interrupted before mounting; rolled back");
    return;
  }
  if (pub.state == PublicationState::kPublishing && !pub.adopted) {
    // The call never returned OK: its caller saw an error or gave up, and
    // kubelet never tears down a mount whose call failed.
    s = Unmount(pub.target);
    if (!s.ok()) {
      AddDrift("publication of " + pub.volume + " at " + pub.target + ": was interrupted after mounting; "
               "unmounting it failed: " + s.message() + "; record kept");
      return;
    }
    RollBack(pub, "was interrupted after mounting; unmounted and rolled back");
    return;
  }
  unsigned long flags = 0;
  ParseBindOptions(pub.mount_options, &flags);  // validated when recorded
  flags &= ~MS_RDONLY;
  if (ms == MountState::kNotMounted) {
    VolumeRecord rec;
    Backend* b = LookupVolume(pub.volume, &rec) ? FindPool(rec.spec.pool) : nullptr;
    if (b && b->StageMayWait()) {
      restage_.push_back(pub.target);
      AddDrift("publication of " + pub.volume + " at " + pub.target +
               ": bind mount is missing; re-creating it in the background (its server may be slow to answer)");
      return;
    }
    s = Rebind(&pub, flags);
    AddDrift("publication of " + pub.volume + " at " + pub.target +
             (s.ok() ? ": bind mount was missing; re-created" : ": bind mount is missing and " + s.message() + "; record kept"));
    if (!s.ok()) return;
  } else if (!pub.adopted) {
    VolumeRecord rec;
    Backend* b = LookupVolume(pub.volume, &rec) ? FindPool(rec.spec.pool) : nullptr;
    flags |= InheritedBindFlags(pub.source, /*remote=*/!b || b->StageMayWait(), table);
    // Flags lost while nodevold was away (a remount by hand): apply the
    // recorded read-only state and flags again (idempotent).
    // Flags from the mount table: statvfs(2) of an NFS bind asks the server.
    auto flags_of = [&](const MountTable* snapshot, std::string* out) {
      MountTable t;
      const MountEntry* e = snapshot ? snapshot->FindTarget(pub.target)
                                     : t.Load().ok() ? t.FindTarget(pub.target) : nullptr;
      if (e) *out = e->options;
      return e != nullptr;
    };
    std::string before, after;
    bool got = flags_of(table, &before);
    s = Remount(pub.source, pub.target, pub.read_only, flags);
    if (!s.ok()) {
      AddDrift("publication of " + pub.volume + " at " + pub.target + ": restoring its mount flags failed: " +
               s.message() + "; record kept as " + ToString(pub.state));
      return;
    }
    // The table is read again (all of it) only where the flags before
    // differ from those just set.
    if (got && !ShowsFlags(before, pub.read_only, flags) && flags_of(nullptr, &after) && after != before)
      AddDrift("publication of " + pub.volume + " at " + pub.target + ": mount flags restored as recorded" +
               (pub.read_only && !ro ? " (made read-only)" : ""));
  }
  if (pub.state == PublicationState::kPublishing) {
    pub.state = PublicationState::kPublished;
    if (store_->MovePublication(pub, PublicationState::kPublishing).ok()) {
      std::lock_guard<std::mutex> l(mu_);
      publications_.Put(pub);
    }
  }
}

// Stages the volume of a publication whose bind is missing and binds it
// again. After a reboot an LV or an NFS export is not mounted, and its
// staging dir is an empty directory of the node's own disk.
Status Node::Rebind(PublicationRecord* pub, unsigned long flags) {
  VolumeRecord rec;
  Backend* b = LookupVolume(pub->volume, &rec) ? FindPool(rec.spec.pool) : nullptr;
  std::string source = pub->source;
  Status s = b ? b->Stage(rec, &source) : Status::NotFound("volume " + pub->volume + " has no record or no pool");
  if (s.ok() && source != pub->source) {
    pub->source = source;
    s = store_->PutPublication(*pub);
    if (s.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      publications_.Put(*pub);
    }
  }
  if (!s.ok()) return Status(s.code(), "staging the volume failed: " + s.message());
  // Only now: after a reboot Stage has just mounted what the bind
  // inherits nosuid,nodev from.
  s = BindMount(pub->source, pub->target, pub->read_only, flags | InheritedBindFlags(pub->source, b->StageMayWait()));
  if (!s.ok()) return Status(s.code(), "re-creating failed: " + s.message());
  return Status::Ok();
}

}  // namespace nodevol
