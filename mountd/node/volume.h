// Volume and publication records: the domain's data, free of any transport.
//
// These are what nodevold persists in its state dir (see state/store.h) and
// what the gRPC layer translates to and from nodevol.v1 messages.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nodevol {

using Params = std::map<std::string, std::string>;

// What a caller asks for when creating a volume.
struct VolumeSpec {
  std::string name;
  std::string pool;
  uint64_t size_bytes = 0;
  std::string fs_type;
  Params parameters;
  // A raw block volume: the device itself is published, no filesystem is
  // made (lvm pools only; Backend::block_capable).
  bool block = false;
  // What the new volume starts as, at most one of them: a snapshot's
  // content (a restore) or another volume's (a clone), both of the same
  // pool. Empty: a new, empty filesystem.
  std::string from_snapshot = {}, from_volume = {};
};

// Whether pods may ask a pool for inline ephemeral volumes, and how big
// (pool options inline=on|off, inline-max-size). Off by default: any pod
// author can write an inline volume, and no Kubernetes ResourceQuota
// counts it (docs/security.md).
struct InlinePolicy {
  bool allowed = false;
  uint64_t max_bytes = uint64_t{1} << 30;  // 1Gi
};

enum class VolumeState { kCreating, kReady, kDeleting };

struct VolumeRecord {
  VolumeSpec spec;
  std::string backend;        // kind of the pool's backend at creation
  VolumeState state = VolumeState::kCreating;
  bool ephemeral = false;     // inline volume, deleted with its only publication
  int64_t created_unix = 0;
  Params attributes;          // backend-owned facts: path, project id, device
  // A copy of the record another node keeps in storage it shares with
  // this one (Backend::FindShared: an NFS volume made elsewhere), kept
  // only while the volume is published here (node/shared.cc).
  bool shared_copy = false;
};

enum class PublicationState { kPublishing, kPublished, kUnpublishing };

struct PodIdentity {
  std::string uid, name, ns, service_account;
};

// One bind of a volume into a pod volume directory.
struct PublicationRecord {
  std::string target;         // resolved pod volume directory
  std::string volume;         // volume name
  std::string source;         // host directory bound onto target (from Backend::Stage)
  PublicationState state = PublicationState::kPublishing;
  bool read_only = false;
  std::vector<std::string> mount_options;
  std::optional<uint32_t> fs_group;
  PodIdentity pod;
  bool adopted = false;       // the mount was there before Publish (never ours to undo)
};

// How an existing volume's spec differs from one asked for, in words for
// an ALREADY_EXISTS ("" = the same). Every "is this the volume asked for
// again" check is this one: CSI's CreateVolume, which takes any size in
// its range, leaves the size out.
std::string SpecDifference(const VolumeSpec& have, const VolumeSpec& want, bool compare_size = true);

const char* ToString(VolumeState s);
const char* ToString(PublicationState s);

}  // namespace nodevol
