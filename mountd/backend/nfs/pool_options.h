// NfsPoolOptions: what an NFS pool is, from its options in the daemon
// config (--pool=name=shared,backend=nfs,server=10.0.0.5,share=/export,...):
//   server=HOST                 NFS server: name, IPv4 or IPv6 address (required)
//   share=/PATH                 exported directory (required)
//   mount-options=OPT ...       default mount options, space-separated (the
//                               pool spec itself is comma-separated);
//                               validated (mount_options.h)
//   path-pattern=PATTERN        directory of a subdirectory volume
//                               (path_pattern.h; default
//                               ${namespace}-${pvcName}-${pvName})
//   on-delete=delete|retain|archive   default delete
//   timeout=SECONDS             deadline of every operation on the server
//                               (mount, statfs, directory work, unmount);
//                               1 to 3600, default 30
#pragma once

#include <chrono>
#include <string>

#include "backend/nfs/mount_options.h"
#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

struct NfsPoolOptions {
  std::string server;
  std::string share;
  NfsMountOptions mount_options;
  std::string path_pattern;
  std::string on_delete = "delete";
  std::chrono::milliseconds timeout{30000};
};

// INVALID_ARGUMENT naming the pool, the option and the rule.
Status ParseNfsPoolOptions(const std::string& pool, const Params& options, NfsPoolOptions* out);

// Checks a server name or address and an export path (absolute, no "..",
// no empty or "." segment, no control characters); `what` names the
// source in errors ("pool fast: option server", "parameter share").
Status CheckNfsServer(const std::string& what, const std::string& server);
Status CheckNfsShare(const std::string& what, const std::string& share);
// Whether `value` is one of delete, retain, archive.
Status CheckOnDelete(const std::string& what, const std::string& value);

}  // namespace nodevol
