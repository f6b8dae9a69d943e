// A StorageClass's pathPattern rendered with a claim's names, annotations
// and labels (mountd/backend/nfs/path_pattern.h): both come from users.
// Property: whatever renders is a plain relative path that cannot leave
// the export, checked here independently of the renderer's own check.
#include <fuzzer/FuzzedDataProvider.h>

#include "backend/nfs/path_pattern.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void CheckStaysBelow(const std::string& path) {
  FUZZ_CHECK(!path.empty() && path.front() != '/' && path.back() != '/', "a rendered path is empty or absolute");
  size_t start = 0;
  for (;;) {
    size_t end = path.find('/', start);
    std::string seg = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    FUZZ_CHECK(!seg.empty() && seg != "." && seg != ".." && seg.find("..") == std::string::npos,
               "a rendered path with an empty, '.' or '..' segment");
    FUZZ_CHECK(seg.size() <= 255, "a rendered segment over 255 bytes");
    for (unsigned char c : seg) FUZZ_CHECK(c >= 0x20 && c != 0x7f, "a control character in a rendered path");
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string pattern = in.ConsumeRandomLengthString(256);
  nodevol::Params params;
  for (const char* key : {"nodevol.io/pvc-namespace", "nodevol.io/pvc-name", "nodevol.io/pv-name",
                          "nodevol.io/pvc-annotation.a", "nodevol.io/pvc-label.l"})
    if (in.ConsumeBool()) params[key] = in.ConsumeRandomLengthString(300);
  std::string volume = in.ConsumeRemainingBytesAsString();
  std::string out;
  nodevol::Status st = nodevol::RenderPathPattern(pattern, params, volume, &out);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "a refused pattern without a reason");
  if (st.ok()) {
    CheckStaysBelow(out);
    FUZZ_CHECK(out.size() <= 1024, "a rendered path over 1024 bytes");
  }
  if (nodevol::CheckSubdirPath(pattern).ok()) CheckStaysBelow(pattern);
  return 0;
}
