// The body of an apiserver watch (provisioner/kube/watch_decoder.h), cut
// into chunks anywhere, as a network delivers it. Property: the events
// and the verdict do not depend on where the chunks end.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>

#include "kube/watch_decoder.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

struct Outcome {
  std::vector<std::string> events;  // type + object, as JSON
  bool ok = true;
  bool finished = true;
};

Outcome Decode(const std::string& body, const std::vector<size_t>& cuts) {
  nodevol::kube::WatchDecoder d;
  Outcome o;
  std::vector<nodevol::kube::WatchEvent> events;
  size_t at = 0;
  auto feed = [&](size_t end) {
    if (!o.ok) return;
    nodevol::Status st = d.Feed(std::string_view(body).substr(at, end - at), &events);
    FUZZ_CHECK(st.ok() || !st.message().empty(), "a refused watch body without a reason");
    o.ok = st.ok();
    at = end;
  };
  for (size_t c : cuts) feed(c);
  feed(body.size());
  for (const auto& e : events)
    o.events.push_back(std::string(nodevol::kube::WatchEventTypeName(e.type)) + " " + e.object.dump() + " " +
                       e.ResourceVersion());
  o.finished = o.ok && d.Finish().ok();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  size_t ncuts = in.ConsumeIntegralInRange<size_t>(0, 16);
  std::vector<size_t> raw;
  for (size_t i = 0; i < ncuts; ++i) raw.push_back(in.ConsumeIntegral<uint16_t>());
  std::string body = in.ConsumeRemainingBytesAsString();
  std::vector<size_t> cuts;
  for (size_t c : raw) cuts.push_back(body.empty() ? 0 : c % (body.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  Outcome whole = Decode(body, {});
  Outcome chunked = Decode(body, cuts);
  if (whole.ok && chunked.ok) {
    FUZZ_CHECK(whole.events == chunked.events, "events depend on where the chunks end");
    FUZZ_CHECK(whole.finished == chunked.finished, "the end-of-stream verdict depends on the chunks");
  } else {
    // A broken stream is broken however it arrives; events completed before
    // the fault may differ only in how many were handed out before it.
    FUZZ_CHECK(whole.ok == chunked.ok, "a body refused whole but accepted in chunks, or the reverse");
  }
  return 0;
}
