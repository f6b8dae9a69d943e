// kubelet's options JSON for a FlexVolume mount (flex/options.h), as a pod
// author or a PV shapes it. Properties: a refusal always says why, and no
// error message repeats a secret kubelet passed (kubernetes.io/secret/*).
#include <nlohmann/json.hpp>

#include "flex/options.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  nodevol::flex::Options o;
  std::string error;
  bool ok = nodevol::flex::ParseMountOptions(json, &o, &error);
  FUZZ_CHECK(ok || !error.empty(), "a refused mount options JSON without a reason");
  if (!ok) {
    // A secret's value may also be a piece of the message's own words
    // ("ce may use the volume", found by run-long): only a value that
    // leaves the message when it is replaced came from the secret.
    auto doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (doc.is_object())
      for (const auto& [k, v] : doc.items()) {
        if (k.rfind("kubernetes.io/secret/", 0) != 0 || !v.is_string() || v.get<std::string>().size() < 6) continue;
        const std::string secret = v.get<std::string>();
        if (error.find(secret) == std::string::npos) continue;
        nlohmann::json other = doc;
        other[k] = "\x01replaced\x01";
        nodevol::flex::Options o2;
        std::string error2;
        nodevol::flex::ParseMountOptions(other.dump(), &o2, &error2);
        FUZZ_CHECK(error2.find(secret) != std::string::npos, "a secret's value in an error message");
      }
  }
  std::string volume;
  error.clear();
  ok = nodevol::flex::ParseVolumeName(json, &volume, &error);
  FUZZ_CHECK(ok || !error.empty(), "a refused expandfs options JSON without a reason");
  return 0;
}
