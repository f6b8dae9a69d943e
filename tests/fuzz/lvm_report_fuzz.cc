// `lvm fullreport` JSON (mountd/backend/lvm/report.h): whatever the lvm
// tools print, parsed or refused with a reason, and what is parsed can be
// asked about.
#include "backend/lvm/report.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nodevol::LvmReport r;
  nodevol::Status st = nodevol::ParseFullReport(std::string_view(reinterpret_cast<const char*>(data), size), &r);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "a refused report without a reason");
  if (st.ok())
    for (const auto& lv : r.lvs) {
      (void)r.DependentsOf(lv);
      (void)lv.active();
    }
  return 0;
}
