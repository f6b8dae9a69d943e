#include "options.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "base/size.h"

namespace nodevol::flex {
namespace {

using StringMap = std::map<std::string, std::string>;

// Keys kubelet sets (flexvolume-contract.md section 4).
constexpr std::string_view kReadWrite = "kubernetes.io/readwrite";
constexpr std::string_view kFsType = "kubernetes.io/fsType";
constexpr std::string_view kPodUid = "kubernetes.io/pod.uid";
constexpr std::string_view kPodName = "kubernetes.io/pod.name";
constexpr std::string_view kPodNamespace = "kubernetes.io/pod.namespace";
constexpr std::string_view kServiceAccount = "kubernetes.io/serviceAccount.name";
constexpr std::string_view kFsGroup = "kubernetes.io/mounterArgs.FsGroup";

// The driver's own user keys; every other user key of an inline volume is a
// backend parameter.
constexpr std::string_view kVolume = "volume";
constexpr std::string_view kPool = "pool";
constexpr std::string_view kSize = "size";
constexpr std::string_view kUserFsType = "fsType";
constexpr std::string_view kMountOptions = "mountOptions";

// Keys in the API's reserved namespaces: kubelet's, now or in the future.
bool Reserved(std::string_view key) {
  return key.starts_with("kubernetes.io/") || key.starts_with("k8s.io/");
}

bool ParseJson(std::string_view json, StringMap* out, std::string* error) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() quotes the input around the error, which may hold a secret:
    // say only where it went wrong.
    *error = "the options are not valid JSON (error at byte " + std::to_string(e.byte) + ")";
    return false;
  } catch (const nlohmann::json::exception&) {
    // A number too large for a double is out_of_range, not parse_error
    // (found by tests/fuzz: it ended the driver with no answer at all).
    *error = "the options are not valid JSON (a number out of range)";
    return false;
  }
  if (!j.is_object()) {
    *error = "the options must be a JSON object of strings";
    return false;
  }
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) {
      *error = "option \"" + key + "\" must be a string";
      return false;
    }
    (*out)[key] = value.get<std::string>();
  }
  return true;
}

std::string Get(const StringMap& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? std::string() : it->second;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    // Tolerate spaces around items ("nosuid, nodev").
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

bool ParseInline(const StringMap& m, InlineSpec* spec, std::string* error) {
  spec->pool = Get(m, kPool);
  std::string size = Get(m, kSize);
  if (size.empty()) {
    *error = "option size is required for an inline volume (pool \"" + spec->pool + "\"), e.g. \"1Gi\"";
    return false;
  }
  auto bytes = ParseSize(size);
  if (!bytes) {
    *error = "invalid option size \"" + size + "\": " + std::string(kSizeForms);
    return false;
  }
  spec->size_bytes = *bytes;
  spec->fs_type = m.count(std::string(kUserFsType)) ? Get(m, kUserFsType) : Get(m, kFsType);
  for (const auto& [key, value] : m) {
    if (Reserved(key) || key == kPool || key == kSize || key == kUserFsType || key == kMountOptions) continue;
    spec->parameters[key] = value;
  }
  return true;
}

}  // namespace

bool ParseMountOptions(std::string_view json, Options* out, std::string* error) {
  StringMap m;
  if (!ParseJson(json, &m, error)) return false;

  std::string rw = Get(m, kReadWrite);
  if (rw == "ro") {
    out->read_only = true;
  } else if (rw != "rw" && !rw.empty()) {
    *error = "option " + std::string(kReadWrite) + " is \"" + rw + "\"; expected \"ro\" or \"rw\"";
    return false;
  }

  if (m.count(std::string(kFsGroup))) {
    std::string text = Get(m, kFsGroup);
    uint32_t gid = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), gid);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      *error = "option " + std::string(kFsGroup) + " is \"" + text + "\"; expected a group id";
      return false;
    }
    out->fs_group = gid;
  }

  out->pod = {Get(m, kPodUid), Get(m, kPodName), Get(m, kPodNamespace), Get(m, kServiceAccount)};
  // nodevold lets a pod use only volumes of its own namespace; kubelet sends
  // the namespace on every mount and a pod author cannot write it (the API
  // reserves kubernetes.io/ keys). Without it there is nothing to check.
  if (out->pod.namespace_.empty()) {
    *error = "option " + std::string(kPodNamespace) +
             " is missing: kubelet passes it on every mount, and nodevold needs it to check which namespace may "
             "use the volume";
    return false;
  }
  out->mount_options = SplitCommas(Get(m, kMountOptions));

  out->volume = Get(m, kVolume);
  if (!out->volume.empty()) {
    out->pool = Get(m, kPool);
    return true;
  }
  if (m.count(std::string(kPool))) {
    out->inline_spec.emplace();
    return ParseInline(m, &*out->inline_spec, error);
  }
  *error =
      "option volume is required (the name of a nodevol volume, e.g. from the provisioner or "
      "`nodevolctl volume create`), or pool and size for an inline ephemeral volume";
  return false;
}

bool ParseVolumeName(std::string_view json, std::string* volume, std::string* error) {
  StringMap m;
  if (!ParseJson(json, &m, error)) return false;
  *volume = Get(m, kVolume);
  if (volume->empty()) {
    *error = "option volume is required: only named nodevol volumes can be expanded";
    return false;
  }
  return true;
}

}  // namespace nodevol::flex
