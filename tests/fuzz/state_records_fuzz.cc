// State records as nodevold loads them at start (mountd/state/
// records_json.h): truncated, corrupted or hostile files are refused with
// a reason; an accepted record writes back to the same JSON it reads as.
#include "state/records_json.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

template <typename Record, typename From, typename To>
void RoundTrip(const std::string& text, From from, To to, const char* what) {
  Record r;
  nodevol::Status st = from(text, &r);
  FUZZ_CHECK(st.ok() || !st.message().empty(), std::string("a refused ") + what + " without a reason");
  if (!st.ok()) return;
  std::string once = to(r);
  Record again;
  FUZZ_CHECK(from(once, &again).ok(), std::string("a ") + what + " written does not read back");
  FUZZ_CHECK(to(again) == once, std::string("a ") + what + " changes when written again");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  RoundTrip<nodevol::VolumeRecord>(text, nodevol::VolumeFromJson, nodevol::VolumeToJson, "volume record");
  RoundTrip<nodevol::PublicationRecord>(text, nodevol::PublicationFromJson, nodevol::PublicationToJson,
                                        "publication record");
  RoundTrip<nodevol::SnapshotRecord>(text, nodevol::SnapshotFromJson, nodevol::SnapshotToJson, "snapshot record");
  return 0;
}
