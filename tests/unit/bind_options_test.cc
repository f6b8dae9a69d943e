#include <gtest/gtest.h>
#include <sys/mount.h>

#include "mount/bind.h"

namespace nodevol {
namespace {

TEST(BindOptions, KnownFlags) {
  unsigned long f = 0;
  ASSERT_TRUE(ParseBindOptions({"nosuid", "nodev", "noexec", "ro"}, &f).ok());
  EXPECT_EQ(f, static_cast<unsigned long>(MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY));
  ASSERT_TRUE(ParseBindOptions({}, &f).ok());
  EXPECT_EQ(f, 0u);
}

TEST(BindOptions, AnythingElseIsRefusedByName) {
  unsigned long f = 0;
  for (const char* bad : {"suid", "dev", "remount", "uid=0", "context=x", "rbind", ""}) {
    Status st = ParseBindOptions({bad}, &f);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find(std::string("\"") + bad + "\""), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace nodevol
