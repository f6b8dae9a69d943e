#include "calls.h"

#include <gtest/gtest.h>

namespace nodevol::flex {
namespace {

// Found by tests/fuzz/flex_argv: a target that is not UTF-8 went into a
// protobuf string, and nodevold refused the whole request as "not a
// DoorRequest". It is refused here, naming the argument, without calling.
TEST(Calls, AnArgumentThatIsNotUtf8IsRefusedBeforeAnyCall) {
  ::setenv("NODEVOL_FLEX_SOCKET", "/nonexistent/nodevold.sock", 1);
  Reply r = RunCall({"unmount", std::string("/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/d\xff")});
  EXPECT_EQ(r.kind, Reply::Kind::kFailure);
  EXPECT_EQ(r.message, "argument 1 is not valid UTF-8; kubelet passes UTF-8 paths and JSON");
  r = RunCall({"mount", "/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/d\xc3\x28", "{}"});
  EXPECT_NE(r.message.find("argument 1 is not valid UTF-8"), std::string::npos) << r.message;
  ::unsetenv("NODEVOL_FLEX_SOCKET");
}

}  // namespace
}  // namespace nodevol::flex
