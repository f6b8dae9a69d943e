// Lvm's command lines and caching, at the Runner seam. The commands
// themselves run for real in the VM tests (tests/vm).
#include "backend/lvm/lvm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace nodevol {
namespace {

struct FakeLvm {
  std::vector<std::vector<std::string>> calls;
  std::vector<std::string> env;
  std::string segments;  // what `lvs --segments` prints
  std::string report = R"({"report":[{"vg":[{"vg_name":"vg0","vg_size":"1073741824","vg_free":"536870912",
    "vg_extent_size":"4194304"}],"lv":[
    {"lv_name":"mine","lv_uuid":"U-mine","vg_name":"vg0","lv_size":"8388608","lv_attr":"-wi-a-----",
     "lv_tags":"nodevol.io/managed,nodevol.io/volume=mine"},
    {"lv_name":"root","vg_name":"vg0","lv_size":"8388608","lv_attr":"-wi-ao----","lv_tags":""}]}]})";

  Lvm::Runner runner() {
    return [this](const std::vector<std::string>& argv, const RunOptions& o, RunResult* r) {
      calls.push_back(argv);
      env = o.env;
      *r = RunResult{};
      r->exit_code = 0;
      if (argv.size() > 1 && argv[1] == "fullreport") r->out = report;
      if (argv.size() > 1 && argv[1] == "lvs") r->out = segments;
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

TEST(Lvm, ReportFollowsOurOwnChanges) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  LvmReport r;
  ASSERT_TRUE(lvm.Report(&r).ok());
  ASSERT_TRUE(lvm.Report(&r).ok());
  EXPECT_EQ(fake.Count("fullreport"), 1u);
  EXPECT_EQ(r.FindVg("vg0")->free, 512u << 20);
  ASSERT_TRUE(lvm.Extend("vg0", "mine", 16 << 20).ok());  // reads the cache, then changes state
  ASSERT_TRUE(lvm.Report(&r).ok());
  EXPECT_EQ(fake.Count("fullreport"), 1u) << "the cache follows the lvextend";
  EXPECT_EQ(r.FindLv("vg0", "mine")->size, 16u << 20);
  EXPECT_EQ(r.FindVg("vg0")->free, 504u << 20) << "a thick LV's growth comes out of the VG";
  ASSERT_TRUE(lvm.Report(&r, /*fresh=*/true).ok());
  EXPECT_EQ(fake.Count("fullreport"), 2u) << "no metadata stamp here: fresh means new";
  EXPECT_EQ(lvm.commands_run(), 3u);
}

// issue 58 item 1: a block volume grows onto extents zeroed through a
// scratch LV, and lvextend takes exactly those.
TEST(Lvm, ScratchExtentsAreWhatTheGrowTakes) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  ASSERT_TRUE(lvm.CreateScratch("vg0", "nvg-b", 8 << 20, {"nodevol.io/grow-of=b"}, {"--stripes", "2"}).ok());
  EXPECT_EQ(fake.calls.back(),
            (std::vector<std::string>{"/sbin/lvm", "lvcreate", "-y", "-Wy", "-Zn", "-n", "nvg-b", "-L", "8388608b",
                                      "--addtag", "nodevol.io/managed", "--addtag", "nodevol.io/grow-of=b",
                                      "--stripes", "2", "vg0"}));
  fake.segments = "  /dev/vdb:16-17 /dev/vdc:16-17\n  /dev/vdb:40-40,/dev/vdc:40-40\n";
  std::vector<std::string> ranges;
  ASSERT_TRUE(lvm.PeRanges("vg0", "nvg-b", &ranges).ok());
  EXPECT_EQ(ranges, (std::vector<std::string>{"/dev/vdb:16-17", "/dev/vdc:16-17", "/dev/vdb:40-40", "/dev/vdc:40-40"}));
  ASSERT_TRUE(lvm.Extend("vg0", "mine", 16 << 20, ranges).ok());
  EXPECT_EQ(fake.calls.back(), (std::vector<std::string>{"/sbin/lvm", "lvextend", "-L", "16777216b", "vg0/mine",
                                                         "/dev/vdb:16-17", "/dev/vdc:16-17", "/dev/vdb:40-40",
                                                         "/dev/vdc:40-40"}));
  // A raid LV's segments lie on its images, not on PVs: no range to
  // hand on, so no grow that could miss an extent.
  fake.segments = "  nvg-b_rimage_0:0-1 nvg-b_rimage_1:0-1\n";
  Status st = lvm.PeRanges("vg0", "nvg-b", &ranges);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("not on a physical volume"), std::string::npos) << st.message();
  fake.segments = "\n";
  EXPECT_FALSE(lvm.PeRanges("vg0", "nvg-b", &ranges).ok());
}

TEST(Lvm, NeverChangesAnLvItDidNotCreate) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  Status st = lvm.Remove("vg0", "root", "");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("did not create it"), std::string::npos);
  EXPECT_EQ(lvm.Extend("vg0", "root", 1 << 30).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(lvm.Remove("vg0", "absent", "U").code(), Status::Code::kNotFound);
  EXPECT_EQ(fake.Count("lvremove") + fake.Count("lvextend"), 0u);
  ASSERT_TRUE(lvm.Remove("vg0", "mine", "U-mine").ok());
  // By UUID, not by a name that could mean another LV by now.
  EXPECT_EQ(fake.calls.back(),
            (std::vector<std::string>{"/sbin/lvm", "lvremove", "-y", "--select", "lv_uuid=U-mine", "vg0"}));
}

// issue 27 item 8: the name was checked against a cached report and then
// removed, whatever LV carried it by then.
TEST(Lvm, RemoveChecksAFreshReportForTheSameLv) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  LvmReport r;
  ASSERT_TRUE(lvm.Report(&r).ok());
  // Older than what Remove accepts (the cache may be 30 s old otherwise).
  std::this_thread::sleep_for(Lvm::kRemoveReportAge + std::chrono::milliseconds(100));
  Status st = lvm.Remove("vg0", "mine", "U-old");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("not the one nodevold looked at"), std::string::npos) << st.message();
  EXPECT_EQ(fake.Count("fullreport"), 2u) << "a fresh report, not the cached one";
  EXPECT_EQ(fake.Count("lvremove"), 0u);
}

// A delete reads a fresh report before zeroing; Remove right after uses it
// instead of paying a second fullreport.
TEST(Lvm, RemoveUsesAReportJustTaken) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  LvmReport r;
  ASSERT_TRUE(lvm.Report(&r, /*fresh=*/true).ok());
  EXPECT_EQ(lvm.Remove("vg0", "mine", "U-old").code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(fake.Count("fullreport"), 1u) << "the report just taken serves";
}

// issue 27 item 6: lvremove -y of an origin took the operator's snapshots
// (and an attached cache) with it.
TEST(Lvm, RemoveRefusedWhileSnapshotsOrACacheDependOnIt) {
  FakeLvm fake;
  fake.report = R"({"report":[{"vg":[{"vg_name":"vg0","vg_size":"1073741824","vg_free":"536870912",
    "vg_extent_size":"4194304"}],"lv":[
    {"lv_name":"mine","lv_uuid":"U-mine","vg_name":"vg0","lv_size":"8388608","lv_attr":"owi-a-s---",
     "lv_tags":"nodevol.io/managed,nodevol.io/volume=mine"},
    {"lv_name":"backup","lv_uuid":"U-b","vg_name":"vg0","lv_size":"8388608","lv_attr":"swi-a-s---",
     "origin":"mine","lv_tags":""},
    {"lv_name":"cached","lv_uuid":"U-c","vg_name":"vg0","lv_size":"8388608","lv_attr":"Cwi-a-C---",
     "pool_lv":"fastcache","lv_tags":"nodevol.io/managed,nodevol.io/volume=cached"}]}]})";
  Lvm lvm("/sbin/lvm", true, fake.runner());
  Status st = lvm.Remove("vg0", "mine", "U-mine");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("snapshot vg0/backup"), std::string::npos) << st.message();
  st = lvm.Remove("vg0", "cached", "U-c");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("cache vg0/fastcache"), std::string::npos) << st.message();
  EXPECT_EQ(fake.Count("lvremove"), 0u);
}

// A thin snapshot: no size, activation skipped unless asked, our tags.
TEST(Lvm, CreateSnapshotArgv) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  ASSERT_TRUE(lvm.CreateSnapshot("nv", "nv-v", "nvs-s", {"nodevol.io/snapshot=s"}, false).ok());
  ASSERT_TRUE(lvm.CreateSnapshot("nv", "nvs-s", "nv-r", {"nodevol.io/volume=r"}, true).ok());
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(fake.calls[0], (std::vector<std::string>{"/sbin/lvm", "lvcreate", "-y", "-s", "-n", "nvs-s", "-k", "y",
                                                     "--addtag", "nodevol.io/managed", "--addtag",
                                                     "nodevol.io/snapshot=s", "nv/nv-v"}));
  EXPECT_EQ(fake.calls[1][7], "n");
  EXPECT_EQ(fake.calls[1].back(), "nv/nvs-s");
}

// Issue 69 item 8: lvcreate -s killed at its timeout between suspending
// the origin (a pod's live volume) and resuming it left the origin
// suspended until nodevold restarted. A failed snapshot now resumes it (and
// only what a fresh report says is suspended).
TEST(Lvm, AFailedSnapshotResumesTheOriginItLeftSuspended) {
  for (bool suspended : {true, false}) {
    FakeLvm fake;
    fake.report = std::string(R"({"report":[{"vg":[{"vg_name":"nv","vg_size":"1073741824","vg_free":"0",
      "vg_extent_size":"4194304"}],"lv":[
      {"lv_name":"nv-v","lv_uuid":"U-v","vg_name":"nv","lv_size":"8388608","lv_attr":")") +
                  (suspended ? "Vwi-s-tz--" : "Vwi-aotz--") + R"(","pool_lv":"pool",
       "lv_tags":"nodevol.io/managed,nodevol.io/volume=v"},
      {"lv_name":"pool","vg_name":"nv","lv_size":"67108864","lv_attr":"twi-aotz--","lv_tags":""}]}]})";
    Lvm::Runner inner = fake.runner();
    Lvm lvm("/sbin/lvm", true, [&](const std::vector<std::string>& argv, const RunOptions& o, RunResult* r) {
      Status st = inner(argv, o, r);
      if (argv.size() > 1 && argv[1] == "lvcreate") return Status::DeadlineExceeded("lvcreate killed at 60 s");
      return st;
    });
    Status st = lvm.CreateSnapshot("nv", "nv-v", "nvs-s", {"nodevol.io/snapshot=s"}, false);
    EXPECT_FALSE(st.ok());
    ASSERT_EQ(fake.Count("lvchange"), suspended ? 1u : 0u) << "suspended " << suspended;
    // lvextend suspends the LV it grows: the same rescue.
    Lvm grow("/sbin/lvm", true, [&](const std::vector<std::string>& argv, const RunOptions& o, RunResult* r) {
      Status s2 = inner(argv, o, r);
      if (argv.size() > 1 && argv[1] == "lvextend") return Status::DeadlineExceeded("lvextend killed at 60 s");
      return s2;
    });
    EXPECT_FALSE(grow.Extend("nv", "nv-v", 16777216, {}).ok());
    EXPECT_EQ(fake.Count("lvchange"), suspended ? 2u : 0u) << "after lvextend, suspended " << suspended;
    if (suspended) {
      auto refresh = std::find_if(fake.calls.begin(), fake.calls.end(),
                                  [](const auto& c) { return c.size() > 1 && c[1] == "lvchange"; });
      EXPECT_EQ(*refresh, (std::vector<std::string>{"/sbin/lvm", "lvchange", "--refresh", "nv/nv-v"}));
    }
  }
}

// issue 27 item 3: vgcreate -y / vgextend -y wiped a signature written
// after the probe. Only force= devices get -y; the rest -qq ("no").
TEST(Lvm, VgCreateAndExtendAnswerNoExceptForForcedDevices) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", true, fake.runner());
  ASSERT_TRUE(lvm.CreateVg("nv", {"/dev/disk/by-id/a"}, {"/dev/disk/by-id/f"}).ok());
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(fake.calls[0], (std::vector<std::string>{"/sbin/lvm", "vgcreate", "-qq", "--addtag", "nodevol.io/managed",
                                                     "nv", "/dev/disk/by-id/a"}));
  EXPECT_EQ(fake.calls[1], (std::vector<std::string>{"/sbin/lvm", "vgextend", "-y", "nv", "/dev/disk/by-id/f"}));
  fake.calls.clear();
  ASSERT_TRUE(lvm.ExtendVg("nv", {"/dev/disk/by-id/b"}).ok());
  EXPECT_EQ(fake.calls, (std::vector<std::vector<std::string>>{{"/sbin/lvm", "vgextend", "-qq", "nv", "/dev/disk/by-id/b"}}));
  fake.calls.clear();
  ASSERT_TRUE(lvm.CreateVg("nv", {}, {"/dev/disk/by-id/f"}).ok());
  EXPECT_EQ(fake.calls, (std::vector<std::vector<std::string>>{
                            {"/sbin/lvm", "vgcreate", "-y", "--addtag", "nodevol.io/managed", "nv", "/dev/disk/by-id/f"}}));
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
