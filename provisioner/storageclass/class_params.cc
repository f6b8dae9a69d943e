#include "storageclass/class_params.h"

#include "base/parse.h"

namespace nodevol::provisioner {
namespace {

Status Bad(const std::string& key, const std::string& why) {
  return Status::InvalidArgument("StorageClass parameter " + key + ": " + why);
}

bool OneOf(const std::string& v, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (v == a) return true;
  return false;
}

// Mount options travel comma-joined to nodevold, which validates each one
// against its own list; here only what would break the joining.
Status CheckMountOption(const std::string& o) {
  if (o.empty()) return Bad("mountOptions", "an empty option");
  for (char c : o)
    if (c == ',' || c == ' ' || static_cast<unsigned char>(c) < 0x20)
      return Status::InvalidArgument("StorageClass mountOptions: \"" + o +
                                     "\" holds a comma, space or control character; give one option per list item");
  return Status::Ok();
}

}  // namespace

Status ParseClassParams(const std::map<std::string, std::string>& parameters,
                        const std::vector<std::string>& mount_options, ClassParams* out) {
  ClassParams p;
  bool nfs_only_seen = false;
  std::string nfs_key;
  for (const auto& [k, v] : parameters) {
    if (k == "backend") {
      if (!OneOf(v, {"lvm", "nfs", "dir"})) return Bad(k, "\"" + v + "\" is not one of lvm, nfs, dir");
      p.backend = v;
    } else if (k == "pool") {
      if (v.empty()) return Bad(k, "must not be empty");
      p.pool = v;
    } else if (k == "fsType" || k == "fstype") {
      if (!v.empty() && !OneOf(v, {"ext4", "xfs"})) return Bad(k, "\"" + v + "\" is not ext4 or xfs");
      p.fs_type = v;
    } else if (k == "mode") {
      uint64_t n;
      NODEVOL_RETURN_IF_ERROR(ParseUint("StorageClass parameter mode", v, 07777, &n, 8));
      p.volume_params[k] = v;
    } else if (k == "uid" || k == "gid") {
      uint64_t n;
      NODEVOL_RETURN_IF_ERROR(ParseUint("StorageClass parameter " + k, v, 0xfffffffe, &n));
      p.volume_params[k] = v;
    } else if (k == "server" || k == "share" || k == "pathPattern" || k == "subDir") {
      if (v.empty()) return Bad(k, "must not be empty");
      p.volume_params[k] = v;
      nfs_only_seen = true, nfs_key = k;
    } else if (k == "onDelete") {
      if (!OneOf(v, {"delete", "retain", "archive"})) return Bad(k, "\"" + v + "\" is not delete, retain or archive");
      p.volume_params[k] = v;
      nfs_only_seen = true, nfs_key = k;
    } else if (k == "archiveOnDelete") {
      if (!OneOf(v, {"true", "false"})) return Bad(k, "\"" + v + "\" is not true or false");
      p.volume_params[k] = v;
      nfs_only_seen = true, nfs_key = k;
    } else if (k == "volumeSource") {
      if (!OneOf(v, {"csi", "flexVolume"})) return Bad(k, "\"" + v + "\" is not csi or flexVolume");
      p.volume_source = v;
      p.volume_source_given = true;
    } else {
      return Bad(k, "unknown; known: backend, pool, fsType, mode, uid, gid, server, share, pathPattern, subDir, "
                    "onDelete, archiveOnDelete, volumeSource");
    }
  }
  if (p.pool.empty()) return Bad("pool", "missing: name the nodes' pool to create volumes in");
  if (nfs_only_seen && !p.backend.empty() && p.backend != "nfs")
    return Bad(nfs_key, "only for backend nfs, this class says backend " + p.backend);
  if (nfs_only_seen && p.backend.empty()) p.backend = "nfs";
  if (!p.fs_type.empty() && p.backend != "lvm" && !p.backend.empty())
    return Bad("fsType", "only lvm volumes have a filesystem of their own; backend " + p.backend + " has none");
  if (parameters.count("onDelete") && parameters.count("archiveOnDelete"))
    return Bad("archiveOnDelete", "give onDelete or archiveOnDelete, not both");
  if (parameters.count("share") && (parameters.count("pathPattern") || parameters.count("subDir")))
    return Bad("share", "a whole-export volume (share) has no pathPattern or subDir");
  for (const auto& o : mount_options) NODEVOL_RETURN_IF_ERROR(CheckMountOption(o));
  p.mount_options = mount_options;
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace nodevol::provisioner
