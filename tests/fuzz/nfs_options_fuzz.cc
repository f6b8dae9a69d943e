// NFS mount options from pools, StorageClasses and inline volumes
// (mountd/backend/nfs/mount_options.h), and what the kernel shows of a
// mount (OptionsNotApplied). Properties: the canonical text reads back to
// itself, and never carries an option nodevold refuses (ro, bg, addr=).
#include <fuzzer/FuzzedDataProvider.h>

#include "backend/nfs/mount_options.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string pool = in.ConsumeRandomLengthString(256);
  std::string volume = in.ConsumeRandomLengthString(256);
  std::string super = in.ConsumeRemainingBytesAsString();
  nodevol::NfsMountOptions o;
  nodevol::Status st = o.Add(pool);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "refused options without a reason");
  if (!st.ok()) return 0;
  st = o.Add(volume);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "refused options without a reason");
  std::string canon = o.ToString();
  nodevol::NfsMountOptions again;
  FUZZ_CHECK(again.Add(canon).ok(), "the canonical options are refused");
  FUZZ_CHECK(again.ToString() == canon, "the canonical options change when read again");
  std::string padded = "," + canon + ",";
  for (const char* bad : {",ro,", ",bg,", ",addr="})
    FUZZ_CHECK(padded.find(bad) == std::string::npos, "a refused option in the canonical text");
  (void)nodevol::OptionsNotApplied(canon, super);
  return 0;
}
