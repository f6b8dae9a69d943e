// NfsMountOptions: the mount options of an NFS staging mount, from a pool's
// mount-options (per-pool defaults) and a volume's mountOptions parameter,
// validated against the options nodevold knows.
//
// Every option belongs to a group (vers and nfsvers are one group; hard,
// soft and softerr are one; ac and noac; ...): a later option replaces an
// earlier one of its group, so a volume's options override the pool's. The
// canonical text (groups sorted, one option each, comma-separated) is what
// mount.nfs gets and what the staging mount's key is made of, so the same
// options in another order or spelling share one staging mount.
//
// Refused, with the reason: ro (volumes are published read-only per pod
// instead), suid and dev (every staging mount is nosuid,nodev: MountNfs), bg (mount.nfs would return before the mount exists), addr=
// (nodevold names the server itself), and anything not known, naming the
// option. nosharecache is accepted: each staging mount then gets its own
// superblock, which makes counting its users by device exact rather than
// conservative (staging.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

class NfsMountOptions {
 public:
  // Adds the options in `text` (separated by commas and/or white space),
  // each replacing an earlier one of its group. INVALID_ARGUMENT names the
  // option and what is allowed.
  Status Add(const std::string& text);

  // Canonical form, e.g. "hard,timeo=600,vers=4.2"; "" when none.
  std::string ToString() const;
  bool empty() const { return by_group_.empty(); }
  // The option of a group ("vers", "hard", ...) or "".
  std::string Get(const std::string& group) const;
  // Sets a group's option as given, or removes the group when `option` is "".
  void Set(const std::string& group, const std::string& option);
  const std::map<std::string, std::string>& groups() const { return by_group_; }

 private:
  std::map<std::string, std::string> by_group_;  // group -> option as given ("timeo=600", "soft")
};

// The options to mount with for a volume whose record someone else wrote
// (a record on a shared export: another node, the NFS server or root on
// any of its clients may have written it). The groups that decide whom
// the mount trusts and how it fails (sec, vers, minorversion, hard, proto,
// port, lock, local_lock, mounthost, mountport, mountproto, mountvers,
// exec; on a pool that is not hard, timeo and retrans too, which decide
// when I/O fails) must be the pool's own, set or unset alike:
// FAILED_PRECONDITION names the first that is not. clientaddr and fsc
// are this node's (the pool's), never the record's: a record's are dropped. The rest, tuning a creator
// may have chosen per volume (timeo, rsize, ac, ...), comes from the
// record over the pool's. INVALID_ARGUMENT when `record` does not parse.
Status OptionsFromRecord(const NfsMountOptions& pool, const std::string& record, NfsMountOptions* out);

// Of the options in `requested` (canonical, as ToString) that the kernel
// does not compare when it looks for a superblock to share (timeo,
// retrans, nconnect, fsc/nofsc, resvport/noresvport), those that the
// superblock options of the mount made with them (`super`, as mountinfo
// shows them) do not show: what a shared superblock silently did not
// apply. Empty when all took effect.
std::vector<std::string> OptionsNotApplied(const std::string& requested, const std::string& super);

}  // namespace nodevol
