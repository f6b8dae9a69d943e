#include "backend/nfs/pool_options.h"

#include <cctype>

#include "backend/nfs/path_pattern.h"
#include "base/parse.h"

namespace nodevol {

Status CheckNfsServer(const std::string& what, const std::string& server) {
  if (server.empty()) return Status::InvalidArgument(what + ": the NFS server is empty");
  if (server.size() > 253) return Status::InvalidArgument(what + ": server name longer than 253 bytes");
  std::string s = server;
  if (s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' && c != '%' && c != '_')
      return Status::InvalidArgument(what + ": \"" + server +
                                     "\" is not a host name or address (letters, digits, '.', '-', ':')");
  if (s.front() == '-') return Status::InvalidArgument(what + ": \"" + server + "\" starts with '-'");
  return Status::Ok();
}

Status CheckNfsShare(const std::string& what, const std::string& share) {
  if (share.empty() || share[0] != '/')
    return Status::InvalidArgument(what + ": the export \"" + share + "\" must be an absolute path, e.g. /export");
  if (share == "/") return Status::Ok();
  return CheckSubdirPath(share.substr(1)).WithContext(what + " \"" + share + "\"");
}

Status CheckOnDelete(const std::string& what, const std::string& value) {
  if (value == "delete" || value == "retain" || value == "archive") return Status::Ok();
  return Status::InvalidArgument(what + ": must be delete, retain or archive, not \"" + value + "\"");
}

Status ParseNfsPoolOptions(const std::string& pool, const Params& options, NfsPoolOptions* out) {
  std::string ctx = "pool " + pool + ": nfs option ";
  for (const auto& [k, v] : options) {
    if (k == "server") {
      NODEVOL_RETURN_IF_ERROR(CheckNfsServer(ctx + k, v));
      out->server = v;
    } else if (k == "share") {
      NODEVOL_RETURN_IF_ERROR(CheckNfsShare(ctx + k, v));
      out->share = v;
    } else if (k == "mount-options") {
      NODEVOL_RETURN_IF_ERROR(out->mount_options.Add(v).WithContext(ctx + k));
    } else if (k == "path-pattern") {
      // Rendered with every variable present, to find errors of the pattern itself now.
      Params probe = {{"nodevol.io/pvc-namespace", "ns"}, {"nodevol.io/pvc-name", "pvc"}};
      std::string rendered;
      Status st = RenderPathPattern(v, probe, "pv", &rendered);
      // A missing annotation or label only shows with a real claim; anything
      // else wrong is wrong for every claim.
      if (!st.ok() && st.message().find("needs the volume parameter") == std::string::npos)
        return st.WithContext(ctx + k);
      out->path_pattern = v;
    } else if (k == "on-delete") {
      NODEVOL_RETURN_IF_ERROR(CheckOnDelete(ctx + k, v));
      out->on_delete = v;
    } else if (k == "timeout") {
      uint64_t n = 0;
      NODEVOL_RETURN_IF_ERROR(ParseUint(ctx + k, v, 3600, &n));
      if (n == 0) return Status::InvalidArgument(ctx + "timeout: must be at least 1 second");
      out->timeout = std::chrono::seconds(n);
    } else {
      return Status::InvalidArgument("pool " + pool + ": unknown nfs option \"" + k +
                                     "\"; known: server, share, mount-options, path-pattern, on-delete, timeout");
    }
  }
  if (out->server.empty() || out->share.empty())
    return Status::InvalidArgument("pool " + pool + ": nfs pools need server=<host> and share=</exported/path>");
  if (out->path_pattern.empty()) out->path_pattern = kDefaultPathPattern;
  return Status::Ok();
}

}  // namespace nodevol
