#include "backend/nfs/path_pattern.h"

#include <map>

namespace nodevol {
namespace {

constexpr size_t kMaxSegment = 255;
constexpr size_t kMaxPath = 1024;

const std::map<std::string, std::string>& Aliases() {
  static const std::map<std::string, std::string> kAliases = {
      {"namespace", "nodevol.io/pvc-namespace"}, {".PVC.namespace", "nodevol.io/pvc-namespace"},
      {"pvc.metadata.namespace", "nodevol.io/pvc-namespace"},
      {"pvcName", "nodevol.io/pvc-name"},        {".PVC.name", "nodevol.io/pvc-name"},
      {"pvc.metadata.name", "nodevol.io/pvc-name"},
      {"pvName", "nodevol.io/pv-name"},          {".PV.name", "nodevol.io/pv-name"},
      {"pv.metadata.name", "nodevol.io/pv-name"},
  };
  return kAliases;
}

std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

Status Lookup(const std::string& var, const Params& params, const std::string& volume, std::string* out) {
  std::string param;
  if (auto it = Aliases().find(var); it != Aliases().end()) {
    param = it->second;
  } else if (var.rfind(".PVC.annotations.", 0) == 0 && var.size() > 17) {
    param = "nodevol.io/pvc-annotation." + var.substr(17);
  } else if (var.rfind(".PVC.labels.", 0) == 0 && var.size() > 12) {
    param = "nodevol.io/pvc-label." + var.substr(12);
  } else {
    return Status::InvalidArgument("pathPattern: unknown variable ${" + Printable(var) +
                                   "}; known: ${namespace}, ${pvcName}, ${pvName}, ${.PVC.namespace}, "
                                   "${.PVC.name}, ${.PVC.annotations.KEY}, ${.PVC.labels.KEY}, "
                                   "${pvc.metadata.name}, ${pvc.metadata.namespace}, ${pv.metadata.name}");
  }
  auto it = params.find(param);
  if (it != params.end()) {
    *out = it->second;
    return Status::Ok();
  }
  if (param == "nodevol.io/pv-name") {
    *out = volume;
    return Status::Ok();
  }
  return Status::InvalidArgument("pathPattern: ${" + var + "} needs the volume parameter " + param +
                                 " (the provisioner passes the claim's namespace, name, annotations and labels "
                                 "this way), and it is missing");
}

}  // namespace

Status RenderPathPattern(const std::string& pattern, const Params& params, const std::string& volume,
                         std::string* out) {
  std::string r;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '$' && i + 1 < pattern.size() && pattern[i + 1] == '{') {
      size_t end = pattern.find('}', i + 2);
      if (end == std::string::npos)
        return Status::InvalidArgument("pathPattern \"" + Printable(pattern) + "\": \"${\" at byte " +
                                       std::to_string(i) + " is not closed by '}'");
      std::string value;
      NODEVOL_RETURN_IF_ERROR(Lookup(pattern.substr(i + 2, end - i - 2), params, volume, &value));
      r += value;
      i = end + 1;
    } else {
      r += pattern[i++];
    }
  }
  NODEVOL_RETURN_IF_ERROR(CheckSubdirPath(r).WithContext("pathPattern \"" + Printable(pattern) + "\""));
  *out = std::move(r);
  return Status::Ok();
}

Status CheckSubdirPath(const std::string& path) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("renders to \"" + Printable(path) + "\", " + why +
                                   "; a volume's directory must be a relative path below the export");
  };
  if (path.empty()) return bad("which is empty");
  if (path.size() > kMaxPath) return bad("longer than " + std::to_string(kMaxPath) + " bytes");
  if (path[0] == '/') return bad("an absolute path");
  if (path.back() == '/') return bad("which ends in '/'");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string seg = path.substr(start, end - start);
    if (seg.empty()) return bad("which has an empty segment");
    if (seg == "." || seg == "..") return bad("which has a \"" + seg + "\" segment");
    if (seg.find("..") != std::string::npos) return bad("whose segment \"" + Printable(seg) + "\" contains \"..\"");
    for (unsigned char c : seg)
      if (c < 0x20 || c == 0x7f) return bad("which contains a NUL or control character");
    if (seg.size() > kMaxSegment) return bad("whose segment is longer than 255 bytes");
    if (seg.rfind(".nodevol", 0) == 0) return bad("whose segment \"" + seg + "\" starts with .nodevol (reserved)");
    start = end + 1;
  }
  return Status::Ok();
}

}  // namespace nodevol
