#include "backend/lvm/report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace nodevol {
namespace {

// Captured from lvm 2.03.16 in the VM harness (tests/vm): a VG with a thick
// LV, a thin pool and a thin LV, reported with FullReportArgs()'s columns.
std::string Sample() {
  std::ifstream in(std::string(NODEVOL_TESTDATA) + "/lvm_fullreport.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LvmReport, ParsesARealFullReport) {
  LvmReport r;
  Status st = ParseFullReport(Sample(), &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(r.vgs.size(), 1u);
  const LvmVg* vg = r.FindVg("vg0");
  ASSERT_NE(vg, nullptr);
  EXPECT_EQ(vg->size, 1069547520u);
  EXPECT_EQ(vg->free, 725614592u);
  EXPECT_EQ(vg->extent_size, 4u << 20);
  ASSERT_EQ(r.pvs.size(), 1u);
  EXPECT_EQ(r.pvs[0].name, "/dev/vda");
  EXPECT_EQ(r.pvs[0].vg, "vg0");

  const LvmLv* thick = r.FindLv("vg0", "thick1");
  ASSERT_NE(thick, nullptr);
  EXPECT_EQ(thick->size, 64u << 20);
  EXPECT_FALSE(thick->thin_pool());
  EXPECT_FALSE(thick->thin_volume());
  EXPECT_TRUE(thick->active());
  EXPECT_EQ(thick->path, "/dev/vg0/thick1");
  EXPECT_TRUE(thick->HasTag("nodevol.io/managed"));
  EXPECT_TRUE(thick->HasTag("nodevol.io/volume=thick1"));
  EXPECT_FALSE(thick->HasTag("nodevol.io"));
  EXPECT_EQ(thick->kernel_major, 253);

  const LvmLv* pool = r.FindLv("vg0", "tp");
  ASSERT_NE(pool, nullptr);
  EXPECT_TRUE(pool->thin_pool());
  EXPECT_EQ(pool->size, 256u << 20);
  EXPECT_EQ(pool->metadata_size, 4u << 20);
  EXPECT_DOUBLE_EQ(pool->metadata_percent, 10.94);

  const LvmLv* thin = r.FindLv("vg0", "thin1");
  ASSERT_NE(thin, nullptr);
  EXPECT_TRUE(thin->thin_volume());
  EXPECT_EQ(thin->pool_lv, "tp");
  EXPECT_EQ(thin->size, 1u << 30);
  EXPECT_EQ(r.FindLv("vg1", "thin1"), nullptr);
}

// The columns the safety checks read: VG tags (issue 27 item 7), origin
// (item 6), lv_time in seconds (item 5).
TEST(LvmReport, TagsOriginAndTime) {
  LvmReport r;
  Status st = ParseFullReport(R"({"report":[{"vg":[{"vg_name":"nv","vg_size":"8","vg_free":"0","vg_extent_size":"4",
      "vg_tags":"nodevol.io/managed"}],"lv":[
      {"lv_name":"o","vg_name":"nv","lv_size":"4","lv_metadata_size":"","lv_time":"1795000000","origin":""},
      {"lv_name":"s","vg_name":"nv","lv_size":"4","lv_metadata_size":"","lv_time":"1795000001","origin":"o"}]}]})",
                              &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(r.FindVg("nv")->HasTag("nodevol.io/managed"));
  EXPECT_EQ(r.FindLv("nv", "o")->created_unix, 1795000000);
  EXPECT_EQ(r.DependentsOf(*r.FindLv("nv", "o")), std::vector<std::string>{"snapshot nv/s"});
  EXPECT_TRUE(r.DependentsOf(*r.FindLv("nv", "s")).empty());
  EXPECT_FALSE(ParseFullReport(R"({"report":[{"lv":[{"lv_name":"a","vg_name":"v","lv_size":"1",
      "lv_time":"2026-11-24 10:00:00 +0000"}]}]})", &r).ok()) << "a date lvm was not asked for";
}

// A VG one of whose disks lvm cannot find: its metadata, on the other
// disks, still names the PV (vg_missing_pv_count).
TEST(LvmReport, MissingPvCount) {
  LvmReport r;
  ASSERT_TRUE(ParseFullReport(R"({"report":[{"vg":[{"vg_name":"nv","vg_size":"8","vg_free":"0","vg_extent_size":"4",
      "vg_missing_pv_count":"1"}]}]})", &r).ok());
  EXPECT_EQ(r.FindVg("nv")->missing_pvs, 1u);
  ASSERT_TRUE(ParseFullReport(R"({"report":[{"vg":[{"vg_name":"nv","vg_size":"8","vg_free":"0","vg_extent_size":"4",
      "vg_missing_pv_count":"0"}]}]})", &r).ok());
  EXPECT_EQ(r.FindVg("nv")->missing_pvs, 0u);
  EXPECT_FALSE(ParseFullReport(R"({"report":[{"vg":[{"vg_name":"nv","vg_size":"8","vg_free":"0","vg_extent_size":"4",
      "vg_missing_pv_count":"some"}]}]})", &r).ok());
}

// Thin snapshots nodevold made do not hold their origin: in a thin pool
// lvremove of the origin leaves them whole (docs/snapshots.md). An
// operator's thin snapshot, and any thick one, still do.
TEST(LvmReport, OwnThinSnapshotsAreNotDependents) {
  LvmReport r;
  Status st = ParseFullReport(R"({"report":[{"vg":[{"vg_name":"nv","vg_size":"8","vg_free":"0","vg_extent_size":"4"}],
      "lv":[
      {"lv_name":"nv-v","vg_name":"nv","lv_size":"4","lv_attr":"Vwi-a-tz--","pool_lv":"tp","origin":""},
      {"lv_name":"nvs-s","vg_name":"nv","lv_size":"4","lv_attr":"Vwi---tz-k","pool_lv":"tp","origin":"nv-v",
       "lv_tags":"nodevol.io/managed,nodevol.io/snapshot=s"},
      {"lv_name":"nv-r","vg_name":"nv","lv_size":"4","lv_attr":"Vwi-a-tz--","pool_lv":"tp","origin":"nvs-s",
       "lv_tags":"nodevol.io/managed,nodevol.io/volume=r"},
      {"lv_name":"nv-w","vg_name":"nv","lv_size":"4","lv_attr":"Vwi-a-tz--","pool_lv":"tp","origin":""},
      {"lv_name":"mine","vg_name":"nv","lv_size":"4","lv_attr":"Vwi---tz-k","pool_lv":"tp","origin":"nv-w"}]}]})",
                              &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(r.DependentsOf(*r.FindLv("nv", "nv-v")).empty());
  EXPECT_TRUE(r.DependentsOf(*r.FindLv("nv", "nvs-s")).empty());
  EXPECT_EQ(r.DependentsOf(*r.FindLv("nv", "nv-w")), std::vector<std::string>{"snapshot nv/mine"});
}

TEST(LvmReport, EmptyAndMalformed) {
  LvmReport r;
  EXPECT_TRUE(ParseFullReport(R"({"report":[]})", &r).ok());
  EXPECT_TRUE(r.vgs.empty());
  EXPECT_FALSE(ParseFullReport("  No volume groups found", &r).ok());
  EXPECT_FALSE(ParseFullReport(R"({"log":[]})", &r).ok());
  EXPECT_FALSE(ParseFullReport(R"({"report":[{"vg":[{"vg_name":"a","vg_size":"12x"}]}]})", &r).ok());
  EXPECT_FALSE(ParseFullReport(R"({"report":[{"lv":[{"lv_name":"","vg_name":"a"}]}]})", &r).ok());
}

}  // namespace
}  // namespace nodevol

namespace nodevol {
namespace {

// What a killed lvextend can leave: nodevold refreshes such LVs at start
// (LvmBackend::Recover) before anything mounts them.
TEST(LvmReport, SuspendedOrTablelessDevicesNeedARefresh) {
  LvmLv lv;
  for (const char* attr : {"Vwi-s-tz--", "-wi-s-----", "swi-S-s---", "twi-C-tz--", "Vwi-i-tz--", "-wi-d-----"}) {
    lv.attr = attr;
    EXPECT_TRUE(lv.needs_refresh()) << attr;
  }
  for (const char* attr : {"Vwi-a-tz--", "-wi-a-----", "Vwi---tz-k", "twi-aotz--", ""}) {
    lv.attr = attr;
    EXPECT_FALSE(lv.needs_refresh()) << attr;
  }
}

}  // namespace
}  // namespace nodevol
