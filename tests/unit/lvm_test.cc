// Lvm's command lines and caching, at the Runner seam. The commands
// themselves run for real in the VM tests (tests/vm).
#include "backend/lvm/lvm.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace nodevol {
namespace {

struct FakeLvm {
  std::vector<std::vector<std::string>> calls;
  std::vector<std::string> env;
  std::string report = R"({"report":[{"vg":[{"vg_name":"vg0","vg_size":"1073741824","vg_free":"536870912",
    "vg_extent_size":"4194304"}],"lv":[
    {"lv_name":"mine","vg_name":"vg0","lv_size":"8388608","lv_attr":"-wi-a-----",
     "lv_tags":"nodevol.io/managed,nodevol.io/volume=mine"},
    {"lv_name":"root","vg_name":"vg0","lv_size":"8388608","lv_attr":"-wi-ao----","lv_tags":""}]}]})";

  Lvm::Runner runner() {
    return [this](const std::vector<std::string>& argv, const RunOptions& o, RunResult* r) {
      calls.push_back(argv);
      env = o.env;
      *r = RunResult{};
      r->exit_code = 0;
      if (argv.size() > 1 && argv[1] == "fullreport") r->out = report;
      return Status::Ok();
    };
  }
  size_t Count(const std::string& cmd) const {
    return std::count_if(calls.begin(), calls.end(), [&](const auto& c) { return c.size() > 1 && c[1] == cmd; });
  }
};

TEST(Lvm, CreateThickTagsTheVolumeAndWipes) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", /*udev=*/true, fake.runner());
  ASSERT_TRUE(lvm.CreateThick("vg0", "pvc-1", "pvc-1", 64 << 20, {"--stripes", "2"}).ok());
  std::vector<std::string> want = {"/sbin/lvm", "lvcreate", "-y", "-Wy", "-Zy", "-n", "pvc-1", "-L", "67108864b",
                                   "--addtag", "nodevol.io/managed", "--addtag", "nodevol.io/volume=pvc-1",
                                   "--stripes", "2", "vg0"};
  EXPECT_EQ(fake.calls.back(), want);
  EXPECT_TRUE(fake.env.empty());
}

TEST(Lvm, CreateThinNamesThePool) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", /*udev=*/false, fake.runner());
  ASSERT_TRUE(lvm.CreateThin("vg0", "tp", "v", "v", 1 << 30, {}).ok());
  std::vector<std::string> want = {"/sbin/lvm", "lvcreate", "-y", "-n", "v", "-V", "1073741824b", "--thinpool",
                                   "vg0/tp", "--addtag", "nodevol.io/managed", "--addtag", "nodevol.io/volume=v"};
  EXPECT_EQ(fake.calls.back(), want);
  EXPECT_EQ(fake.env, std::vector<std::string>{"DM_DISABLE_UDEV=1"});
}

TEST(Lvm, ReportIsCachedUntilAChange) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  LvmReport r;
  ASSERT_TRUE(lvm.Report(&r).ok());
  ASSERT_TRUE(lvm.Report(&r).ok());
  EXPECT_EQ(fake.Count("fullreport"), 1u);
  EXPECT_EQ(r.FindVg("vg0")->free, 512u << 20);
  ASSERT_TRUE(lvm.Extend("vg0", "mine", 16 << 20).ok());  // reads the cache, then changes state
  ASSERT_TRUE(lvm.Report(&r).ok());
  EXPECT_EQ(fake.Count("fullreport"), 2u);
  ASSERT_TRUE(lvm.Report(&r, /*fresh=*/true).ok());
  EXPECT_EQ(fake.Count("fullreport"), 3u);
  EXPECT_EQ(lvm.commands_run(), 4u);
}

TEST(Lvm, NeverChangesAnLvItDidNotCreate) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  Status st = lvm.Remove("vg0", "root");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("did not create it"), std::string::npos);
  EXPECT_EQ(lvm.Extend("vg0", "root", 1 << 30).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(lvm.Remove("vg0", "absent").code(), Status::Code::kNotFound);
  EXPECT_EQ(fake.Count("lvremove") + fake.Count("lvextend"), 0u);
  ASSERT_TRUE(lvm.Remove("vg0", "mine").ok());
  EXPECT_EQ(fake.calls.back(), (std::vector<std::string>{"/sbin/lvm", "lvremove", "-y", "vg0/mine"}));
}

TEST(Lvm, FailuresNameTheCommand) {
  Lvm lvm("/sbin/lvm", true, [](const std::vector<std::string>&, const RunOptions&, RunResult*) {
    return Status::Internal("lvm exit 5: Volume group \"vg0\" has insufficient free space");
  });
  Status st = lvm.CreateThick("vg0", "a", "a", 1 << 30, {});
  EXPECT_EQ(st.message(), "lvcreate: lvm exit 5: Volume group \"vg0\" has insufficient free space");
}

}  // namespace
}  // namespace nodevol
