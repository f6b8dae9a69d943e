#include "backend/nfs/mount_options.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include "base/parse.h"

namespace nodevol {
namespace {

enum class Kind { kFlag, kNumber, kWord, kAddress, kOptionalWord };

struct Known {
  const char* name;
  const char* group;
  Kind kind;
  uint64_t min = 0, max = 0;         // kNumber
  std::vector<std::string> words{};  // kWord: allowed values
};

// nfs(5). Numbers in the units nfs(5) gives (timeo: tenths of a second;
// ac*: seconds; retry: minutes).
const std::vector<Known>& Table() {
  static const std::vector<Known> kTable = {
      {"vers", "vers", Kind::kWord, 0, 0, {"3", "4", "4.0", "4.1", "4.2"}},
      {"nfsvers", "vers", Kind::kWord, 0, 0, {"3", "4", "4.0", "4.1", "4.2"}},
      {"minorversion", "minorversion", Kind::kNumber, 0, 2},
      {"hard", "hard", Kind::kFlag},
      {"soft", "hard", Kind::kFlag},
      {"softerr", "hard", Kind::kFlag},
      {"timeo", "timeo", Kind::kNumber, 1, 36000},
      {"retrans", "retrans", Kind::kNumber, 0, 100},
      {"retry", "retry", Kind::kNumber, 0, 10000},
      {"rsize", "rsize", Kind::kNumber, 1024, 1048576},
      {"wsize", "wsize", Kind::kNumber, 1024, 1048576},
      {"nconnect", "nconnect", Kind::kNumber, 1, 16},
      {"port", "port", Kind::kNumber, 0, 65535},
      {"mountport", "mountport", Kind::kNumber, 0, 65535},
      {"mountvers", "mountvers", Kind::kNumber, 1, 3},
      {"proto", "proto", Kind::kWord, 0, 0, {"tcp", "udp", "rdma", "tcp6", "udp6", "rdma6"}},
      {"mountproto", "mountproto", Kind::kWord, 0, 0, {"tcp", "udp", "tcp6", "udp6"}},
      {"sec", "sec", Kind::kWord, 0, 0, {"sys", "krb5", "krb5i", "krb5p", "none"}},
      {"lookupcache", "lookupcache", Kind::kWord, 0, 0, {"all", "none", "pos", "positive"}},
      {"local_lock", "local_lock", Kind::kWord, 0, 0, {"none", "all", "flock", "posix"}},
      {"actimeo", "actimeo", Kind::kNumber, 0, 86400},
      {"acregmin", "acregmin", Kind::kNumber, 0, 86400},
      {"acregmax", "acregmax", Kind::kNumber, 0, 86400},
      {"acdirmin", "acdirmin", Kind::kNumber, 0, 86400},
      {"acdirmax", "acdirmax", Kind::kNumber, 0, 86400},
      {"ac", "ac", Kind::kFlag},
      {"noac", "ac", Kind::kFlag},
      {"cto", "cto", Kind::kFlag},
      {"nocto", "cto", Kind::kFlag},
      {"lock", "lock", Kind::kFlag},
      {"nolock", "lock", Kind::kFlag},
      {"acl", "acl", Kind::kFlag},
      {"noacl", "acl", Kind::kFlag},
      {"rdirplus", "rdirplus", Kind::kFlag},
      {"nordirplus", "rdirplus", Kind::kFlag},
      {"resvport", "resvport", Kind::kFlag},
      {"noresvport", "resvport", Kind::kFlag},
      {"sharecache", "sharecache", Kind::kFlag},
      {"nosharecache", "sharecache", Kind::kFlag},
      {"fsc", "fsc", Kind::kOptionalWord},
      {"nofsc", "fsc", Kind::kFlag},
      {"atime", "atime", Kind::kFlag},
      {"noatime", "atime", Kind::kFlag},
      {"relatime", "atime", Kind::kFlag},
      {"strictatime", "atime", Kind::kFlag},
      {"diratime", "diratime", Kind::kFlag},
      {"nodiratime", "diratime", Kind::kFlag},
      {"nosuid", "suid", Kind::kFlag},
      {"nodev", "dev", Kind::kFlag},
      {"exec", "exec", Kind::kFlag},
      {"noexec", "exec", Kind::kFlag},
      {"rw", "rw", Kind::kFlag},
      {"clientaddr", "clientaddr", Kind::kAddress},
      {"mounthost", "mounthost", Kind::kAddress},
  };
  return kTable;
}

// Why an option nodevold knows is refused.
const std::map<std::string, std::string>& Refused() {
  static const std::map<std::string, std::string> kRefused = {
      {"ro", "staging mounts are read-write; publish a volume read-only per pod instead"},
      {"suid", "every staging mount is nosuid,nodev: what a volume holds is never a setuid program or a device "
               "node on the node"},
      {"dev", "every staging mount is nosuid,nodev: what a volume holds is never a setuid program or a device "
              "node on the node"},
      {"bg", "mount.nfs would return before the mount exists; nodevold bounds every mount by the pool's timeout"},
      {"fg", "nodevold always mounts in the foreground; leave it out"},
      {"addr", "nodevold passes the server itself (pool option server, volume parameter server)"},
      {"intr", "ignored by Linux since 2.6.25; leave it out"},
      {"nointr", "ignored by Linux since 2.6.25; leave it out"},
      {"remount", "nodevold decides when to mount"},
      {"bind", "nodevold decides when to bind"},
  };
  return kRefused;
}

std::string KnownNames() {
  std::string out;
  for (const Known& k : Table()) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

bool AddressChars(const std::string& v) {
  if (v.empty() || v.size() > 253) return false;
  for (char c : v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != ':' && c != '-' && c != '[' && c != ']')
      return false;
  return true;
}

Status CheckOne(const std::string& opt, std::string* group) {
  std::string name = opt.substr(0, opt.find('='));
  bool has_value = opt.find('=') != std::string::npos;
  std::string value = has_value ? opt.substr(opt.find('=') + 1) : "";
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("NFS mount option \"" + opt + "\": " + why);
  };
  if (auto r = Refused().find(name); r != Refused().end()) return bad("not allowed: " + r->second);
  for (const Known& k : Table()) {
    if (name != k.name) continue;
    *group = k.group;
    switch (k.kind) {
      case Kind::kFlag:
        if (has_value) return bad("takes no value");
        return Status::Ok();
      case Kind::kNumber: {
        if (!has_value) return bad("needs a value (" + name + "=N)");
        uint64_t n = 0;
        if (!ParseUint(name, value, k.max, &n).ok() || n < k.min)
          return bad("must be a number from " + std::to_string(k.min) + " to " + std::to_string(k.max));
        return Status::Ok();
      }
      case Kind::kWord: {
        std::string allowed;
        for (const std::string& w : k.words) {
          if (has_value && value == w) return Status::Ok();
          allowed += (allowed.empty() ? "" : ", ") + w;
        }
        return bad("must be one of " + allowed);
      }
      case Kind::kOptionalWord:
        if (!has_value) return Status::Ok();
        for (char c : value)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return bad("bad value");
        if (value.empty()) return bad("empty value");
        return Status::Ok();
      case Kind::kAddress:
        if (!has_value || !AddressChars(value)) return bad("needs a host name or address");
        return Status::Ok();
    }
  }
  return bad("not an NFS option nodevold knows; known: " + KnownNames());
}

}  // namespace

Status NfsMountOptions::Add(const std::string& text) {
  std::string cur;
  std::vector<std::string> opts;
  for (char c : text) {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) opts.push_back(cur);
      cur.clear();
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Status::InvalidArgument("NFS mount options contain a control character");
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) opts.push_back(cur);
  std::map<std::string, std::string> next = by_group_;
  for (const std::string& o : opts) {
    std::string group;
    NODEVOL_RETURN_IF_ERROR(CheckOne(o, &group));
    if (o == "rw") continue;  // the default; keeps "rw" out of the staging key
    next[group] = group == "vers" ? "vers=" + o.substr(o.find('=') + 1) : o;  // nfsvers= is vers=
  }
  by_group_ = std::move(next);
  return Status::Ok();
}

std::string NfsMountOptions::ToString() const {
  std::string out;
  for (const auto& [_, o] : by_group_) out += (out.empty() ? "" : ",") + o;
  return out;
}

std::string NfsMountOptions::Get(const std::string& group) const {
  auto it = by_group_.find(group);
  return it == by_group_.end() ? "" : it->second;
}

void NfsMountOptions::Set(const std::string& group, const std::string& option) {
  if (option.empty())
    by_group_.erase(group);
  else
    by_group_[group] = option;
}

Status OptionsFromRecord(const NfsMountOptions& pool, const std::string& record, NfsMountOptions* out) {
  static const std::set<std::string> kPoolDecides = {
      "sec",       "vers",      "minorversion", "hard",      "proto", "port",
      "lock",      "local_lock", "mounthost",   "mountport", "mountproto", "mountvers", "exec"};
  NfsMountOptions rec;
  NODEVOL_RETURN_IF_ERROR(rec.Add(record));
  std::set<std::string> decides = kPoolDecides;
  // On a soft pool timeo and retrans decide when I/O fails with EIO.
  if (pool.Get("hard") != "hard") decides.insert({"timeo", "retrans"});
  for (const std::string& g : decides) {
    std::string mine = pool.Get(g), theirs = rec.Get(g);
    if (mine != theirs)
      return Status::FailedPrecondition(
          "its mount options say " + (theirs.empty() ? "nothing of " + g : "\"" + theirs + "\"") + " where this pool's say " +
          (mine.empty() ? "nothing" : "\"" + mine + "\"") + ": " + g +
          " is the pool's to decide on every node (--pool mount-options), never a record's");
  }
  // clientaddr names this node, fsc this node's local cache (cachefilesd,
  // its disk, and which cache a superblock shares through fsc=ID): the
  // pool's, set or unset, never a record's.
  NfsMountOptions merged = pool;
  for (const auto& [g, o] : rec.groups())
    if (g != "clientaddr" && g != "fsc") merged.Set(g, o);
  *out = std::move(merged);
  return Status::Ok();
}

std::vector<std::string> OptionsNotApplied(const std::string& requested, const std::string& super) {
  auto split = [](const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      if (comma > start) out.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
    return out;
  };
  std::vector<std::string> shown = split(super);
  auto has = [&](const std::string& o) { return std::find(shown.begin(), shown.end(), o) != shown.end(); };
  auto key = [](const std::string& o) { return o.substr(0, o.find('=')); };
  std::vector<std::string> out;
  for (const std::string& o : split(requested)) {
    const std::string k = key(o);
    bool missing = false;
    if (k == "timeo" || k == "retrans") {
      missing = !has(o);
    } else if (k == "nconnect") {
      // The kernel shows nconnect only above 1.
      missing = o != "nconnect=1" ? !has(o) : std::any_of(shown.begin(), shown.end(), [&](const std::string& s) {
        return key(s) == "nconnect";
      });
    } else if (o == "fsc" || o == "noresvport") {
      missing = !has(o);
    } else if (o == "nofsc" || o == "resvport") {
      missing = has(o == "nofsc" ? "fsc" : "noresvport");
    }
    if (missing) out.push_back(o);
  }
  return out;
}

}  // namespace nodevol
