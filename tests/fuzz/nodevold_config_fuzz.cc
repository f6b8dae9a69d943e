// nodevold's config file and --pool specs (mountd/config/config.h), as an
// operator may mistype them: parsed or refused with a reason, never a
// crash; an accepted pool spec has a name and a backend.
#include <fuzzer/FuzzedDataProvider.h>

#include "config/config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string spec = in.ConsumeRandomLengthString(512);
  nodevol::PoolConfig pool;
  nodevol::Status st = nodevol::ParsePoolSpec(spec, &pool);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "a refused pool spec without a reason");
  if (st.ok()) FUZZ_CHECK(!pool.name.empty() && !pool.backend.empty(), "an accepted pool spec without name or backend");

  std::string rest = in.ConsumeRemainingBytesAsString();
  nodevol::fuzz::MemFile file(reinterpret_cast<const uint8_t*>(rest.data()), rest.size());
  std::string arg = "--config=" + file.path();
  const char* argv[] = {"nodevold", arg.c_str(), nullptr};
  nodevol::Config c;
  nodevol::ParseOutcome outcome;
  std::string text;
  st = nodevol::ParseConfig(2, argv, &c, &outcome, &text);
  FUZZ_CHECK(st.ok() || !st.message().empty(), "a refused config file without a reason");
  return 0;
}
