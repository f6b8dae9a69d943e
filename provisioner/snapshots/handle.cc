#include "snapshots/handle.h"

#include "base/names.h"

namespace nodevol::provisioner {
namespace {

bool DnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return alnum(s.front()) && alnum(s.back());
}

}  // namespace

std::string FormatSnapshotHandle(const SnapshotHandle& h) { return h.node + "/" + h.name; }

Status ParseSnapshotHandle(std::string_view text, SnapshotHandle* out) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos)
    return Status::InvalidArgument("snapshot handle \"" + std::string(text) +
                                   "\" is not <node>/<snapshot name> (nodevol snapshots live on one node)");
  std::string_view node = text.substr(0, slash), name = text.substr(slash + 1);
  if (!DnsSubdomain(node))
    return Status::InvalidArgument("snapshot handle \"" + std::string(text) + "\": \"" + std::string(node) +
                                   "\" is not a node name (a DNS subdomain)");
  Status st = ValidateSnapshotName(name);
  if (!st.ok()) return Status::InvalidArgument("snapshot handle \"" + std::string(text) + "\": " + st.message());
  out->node = std::string(node);
  out->name = std::string(name);
  return Status::Ok();
}

std::string SnapshotNameFor(const std::string& volume_snapshot_uid) { return "snapshot-" + volume_snapshot_uid; }

}  // namespace nodevol::provisioner
