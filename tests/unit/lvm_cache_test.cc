// Lvm's report cache: it follows nodevold's own commands, serves as fresh
// while the VG metadata stamp is unchanged, and runs one report at a time.
// At the Runner and LvmProbe seams; the real stamp, device-mapper reads
// and commands run in the VM tests (vm_lvm_probe, vm_lvm).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <stdlib.h>
#include <unistd.h>
#include <fstream>

#include "backend/lvm/lvm.h"

namespace nodevol {
namespace {

const char kReport[] = R"({"report":[{"vg":[{"vg_name":"vg0","vg_uuid":"VGUUID","vg_size":"1073741824",
  "vg_free":"536870912","vg_extent_size":"4194304"}],
  "pv":[{"pv_name":"/dev/vdb","vg_name":"vg0","pv_size":"1073741824","pv_free":"536870912"}],
  "lv":[{"lv_name":"tp","lv_uuid":"TPUUID","vg_name":"vg0","lv_size":"268435456","lv_attr":"twi-aotz--",
         "data_percent":"10.00","metadata_percent":"5.00","lv_tags":"nodevol.io/managed"},
        {"lv_name":"mine","lv_uuid":"U-mine","vg_name":"vg0","lv_size":"8388608","lv_attr":"-wi-a-----",
         "lv_tags":"nodevol.io/managed,nodevol.io/volume=mine"}]}]})";

struct FakeProbe : LvmProbe {
  std::mutex mu;
  std::string stamp = "S0";
  bool readable = true;
  Status unreadable = Status::Internal("open /dev/vdb: No such file or directory");
  double data = 10, meta = 5;
  std::string pool_status;  // non-empty: the pool's device-mapper status says it failed
  int stamps_read = 0;

  Status MetadataStamp(const std::vector<std::string>& pvs, std::string* out) override {
    std::lock_guard<std::mutex> l(mu);
    ++stamps_read;
    if (!readable) return unreadable;
    if (pvs != std::vector<std::string>{"/dev/vdb"}) return Status::Internal("unreadable");
    *out = stamp;
    return Status::Ok();
  }
  Status ActiveLv(const std::string& device, std::string* vg_uuid, std::string* lv_uuid, int* major,
                  int* minor) override {
    *vg_uuid = "VGUUID";
    *lv_uuid = "UUID-of-" + device;
    *major = 254;
    *minor = 7;
    return Status::Ok();
  }
  Status TargetTypes(int, int, std::vector<std::string>* types) override {
    *types = {"linear"};
    return Status::Ok();
  }
  Status ThinPoolUsage(const std::string& vg, const std::string& pool, double* d, double* m) override {
    if (vg != "VGUUID" || pool != "TPUUID") return Status::NotFound("no such pool");
    if (!pool_status.empty()) return ParseThinPoolStatus(pool_status, d, m);
    *d = data;
    *m = meta;
    return Status::Ok();
  }
  void Change() {
    std::lock_guard<std::mutex> l(mu);
    stamp += "+";
  }
};

// lvm itself: a report is kReport; any other command writes new metadata
// (a new stamp), as lvm does.
struct Fixture {
  std::shared_ptr<FakeProbe> probe = std::make_shared<FakeProbe>();
  std::mutex mu;
  std::vector<std::string> commands;
  std::string report = kReport;  // what fullreport prints
  std::chrono::milliseconds report_takes{0};
  bool fail = false;
  Lvm lvm{"/sbin/lvm", true,
          [this](const std::vector<std::string>& argv, const RunOptions&, RunResult* r) {
            {
              std::lock_guard<std::mutex> l(mu);
              commands.push_back(argv[1]);
            }
            *r = RunResult{};
            if (argv[1] == "fullreport") {
              std::this_thread::sleep_for(report_takes);
              std::lock_guard<std::mutex> l(mu);
              r->out = report;
              return Status::Ok();
            }
            if (fail) return Status::Internal("lvm exit 5");
            probe->Change();
            return Status::Ok();
          },
          probe};

  size_t Reports() {
    std::lock_guard<std::mutex> l(mu);
    return std::count(commands.begin(), commands.end(), "fullreport");
  }
};

TEST(LvmCache, CreateAndRemoveRunOnlyTheirCommand) {
  Fixture f;
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());  // the first, unstamped (no PVs known yet)
  ASSERT_TRUE(f.lvm.Report(&r, /*fresh=*/true).ok());
  ASSERT_EQ(f.Reports(), 2u);

  ASSERT_TRUE(f.lvm.CreateThick("vg0", "nv-a", "a", 64 << 20, {"--addtag", "nodevol.io/pool=p"}).ok());
  ASSERT_TRUE(f.lvm.Report(&r, /*fresh=*/true).ok());
  EXPECT_EQ(f.Reports(), 2u) << "the lvcreate's metadata is the cache's: no report";
  const LvmLv* made = r.FindLv("vg0", "nv-a");
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(made->uuid, "UUID-of-/dev/vg0/nv-a");
  EXPECT_EQ(made->size, 64u << 20);
  EXPECT_TRUE(made->HasTag("nodevol.io/pool=p"));
  EXPECT_TRUE(made->HasTag("nodevol.io/volume=a"));
  EXPECT_EQ(made->kernel_minor, 7);
  EXPECT_EQ(r.FindVg("vg0")->free, (512u - 64) << 20);

  ASSERT_TRUE(f.lvm.Remove("vg0", "nv-a", made->uuid).ok());
  ASSERT_TRUE(f.lvm.Report(&r, /*fresh=*/true).ok());
  EXPECT_EQ(f.Reports(), 2u);
  EXPECT_EQ(r.FindLv("vg0", "nv-a"), nullptr);
  EXPECT_EQ(r.FindVg("vg0")->free, 512u << 20);

  ASSERT_TRUE(f.lvm.CreateThin("vg0", "tp", "nv-t", "t", 1 << 30, {}).ok());
  ASSERT_TRUE(f.lvm.Report(&r, /*fresh=*/true).ok());
  EXPECT_EQ(f.Reports(), 2u);
  ASSERT_NE(r.FindLv("vg0", "nv-t"), nullptr);
  EXPECT_TRUE(r.FindLv("vg0", "nv-t")->thin_volume());
  EXPECT_EQ(r.FindLv("vg0", "nv-t")->pool_lv, "tp");
  EXPECT_EQ(r.FindVg("vg0")->free, 512u << 20) << "a thin LV takes nothing from the VG";
}

TEST(LvmCache, SomeoneElsesChangeMakesANewReport) {
  Fixture f;
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  ASSERT_TRUE(f.lvm.Report(&r, true).ok());
  ASSERT_TRUE(f.lvm.Report(&r, true).ok());
  EXPECT_EQ(f.Reports(), 2u);
  f.probe->Change();  // an operator's lvcreate
  ASSERT_TRUE(f.lvm.Report(&r, true).ok());
  EXPECT_EQ(f.Reports(), 3u);
  // Not even a capacity poll, whose report may be 30 s old, keeps it.
  f.probe->Change();
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 4u);
  // The cached report, whatever its age, is still what Report(out) gives.
  f.probe->Change();
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  EXPECT_EQ(f.Reports(), 4u);
}

TEST(LvmCache, AChangeBeforeOursOrAFailedCommandDropsTheCache) {
  Fixture f;
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  ASSERT_TRUE(f.lvm.Report(&r, true).ok());
  f.probe->Change();  // someone else, before our lvcreate
  ASSERT_TRUE(f.lvm.CreateThick("vg0", "nv-a", "a", 64 << 20, {}).ok());
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  EXPECT_EQ(f.Reports(), 3u) << "the cache could not follow a VG it no longer knew";

  f.fail = true;
  EXPECT_FALSE(f.lvm.CreateThick("vg0", "nv-b", "b", 64 << 20, {}).ok());
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  EXPECT_EQ(f.Reports(), 4u) << "a failed command may have changed anything";
  f.fail = false;

  // Arguments beyond tags (--type raid1 takes more than the size).
  ASSERT_TRUE(f.lvm.Report(&r, true).ok());
  ASSERT_TRUE(f.lvm.CreateThick("vg0", "nv-c", "c", 64 << 20, {"--type", "raid1", "-m", "1"}).ok());
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  EXPECT_EQ(f.Reports(), 5u);
  ASSERT_TRUE(f.lvm.CreateSnapshot("vg0", "mine", "snap", {"nodevol.io/snapshot=s"}, /*activatable=*/false).ok());
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  EXPECT_EQ(f.Reports(), 6u) << "an inactive snapshot has no device to learn its UUID from";
}

TEST(LvmCache, WithoutAReadableStampOnlyAgeMakesItFresh) {
  Fixture f;
  f.probe->readable = false;
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  ASSERT_TRUE(f.lvm.Report(&r, true).ok());
  ASSERT_TRUE(f.lvm.Report(&r, true).ok());
  EXPECT_EQ(f.Reports(), 3u);
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 3u);
}

// A PV read for the report's stamp that now cannot be opened or read: its
// disk was pulled or fails. A poll must not serve the old figures for the
// 30 s it would allow a report without a stamp; a read that hung (the
// bounded probe gave up) would hang lvm too, so there age still decides.
TEST(LvmCache, AStampedPvThatCannotBeReadMakesANewReport) {
  Fixture f;
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  ASSERT_TRUE(f.lvm.Report(&r, /*fresh=*/true).ok());
  ASSERT_EQ(f.Reports(), 2u) << "the second report is the first stamped one";
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  ASSERT_EQ(f.Reports(), 2u);

  f.probe->readable = false;  // the disk pulled
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 3u);
  // That report has no readable stamp either: age decides from here on,
  // rather than one lvm process per poll.
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 3u);

  Fixture stuck;
  ASSERT_TRUE(stuck.lvm.Report(&r).ok());
  ASSERT_TRUE(stuck.lvm.Report(&r, /*fresh=*/true).ok());
  ASSERT_EQ(stuck.Reports(), 2u);
  stuck.probe->readable = false;
  stuck.probe->unreadable = Status::Unavailable("metadata stamp: a read of the PVs did not return within 2 s");
  ASSERT_TRUE(stuck.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(stuck.Reports(), 2u) << "a stuck read: the report 30 s may be old serves";
  ASSERT_TRUE(stuck.lvm.Report(&r, /*fresh=*/true).ok());
  EXPECT_EQ(stuck.Reports(), 3u);
}

// A VG missing one of its disks: the report cannot be stamped, and the
// operator's repair (the disk back, vgreduce --removemissing) must show
// at the next polls, not after the poll's 30 s (vm_lvm_faults 4b saw 27 s).
TEST(LvmCache, AReportOfAVgMissingADiskServesBriefly) {
  Fixture f;
  f.probe->readable = false;  // what a missing PV does to the stamp
  f.report.replace(f.report.find("\"vg_extent_size\""), 0, "\"vg_missing_pv_count\":\"1\",");
  f.lvm.set_degraded_report_age(std::chrono::milliseconds(50));
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  ASSERT_EQ(r.FindVg("vg0")->missing_pvs, 1u);
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 1u) << "within the short age the cached report serves";
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 2u) << "past it, lvm is asked again although the poll allows 30 s";

  // A whole VG: age decides as before (WithoutAReadableStampOnlyAgeMakesItFresh).
  {
    std::lock_guard<std::mutex> l(f.mu);
    f.report = kReport;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());  // the old degraded one is past its age
  ASSERT_EQ(f.Reports(), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 3u);
}

TEST(LvmCache, ThinPoolUsageComesFromDeviceMapper) {
  Fixture f;
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  EXPECT_DOUBLE_EQ(r.FindLv("vg0", "tp")->data_percent, 10.0);
  f.probe->data = 87.5;  // pods wrote; no lvm command ran
  f.probe->meta = 12.25;
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 1u);
  EXPECT_DOUBLE_EQ(r.FindLv("vg0", "tp")->data_percent, 87.5);
  EXPECT_DOUBLE_EQ(r.FindLv("vg0", "tp")->metadata_percent, 12.25);
}

// The disk under a thin pool fails: device-mapper says so at once, even
// while the cached report serves (vm_lvm_faults, scenario 6), and the pool
// offers no room until it is whole again.
TEST(LvmCache, AThinPoolDeviceMapperReportsFailedIsMarkedSo) {
  Fixture f;
  LvmReport r;
  ASSERT_TRUE(f.lvm.Report(&r).ok());
  EXPECT_TRUE(r.FindLv("vg0", "tp")->fault.empty());
  f.probe->pool_status = "Error";
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_EQ(f.Reports(), 1u) << "served from the cache";
  EXPECT_NE(r.FindLv("vg0", "tp")->fault.find("has failed"), std::string::npos) << r.FindLv("vg0", "tp")->fault;
  f.probe->pool_status.clear();
  ASSERT_TRUE(f.lvm.Report(&r, std::chrono::seconds(30)).ok());
  EXPECT_TRUE(r.FindLv("vg0", "tp")->fault.empty());
}

// A restart knows the PVs from the last run: its first report is stamped,
// so every pool's start-up check after it is served from the cache.
TEST(LvmCache, TheFirstReportAfterARestartIsStamped) {
  char tmpl[] = "/tmp/lvm-cache-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/lvm";
  {
    Fixture before;
    before.lvm.RememberPvsIn(dir);
    LvmReport r;
    ASSERT_TRUE(before.lvm.Report(&r, true).ok());
    ASSERT_TRUE(before.lvm.Report(&r, true).ok());
    EXPECT_EQ(before.Reports(), 2u) << "no list yet: the first report is not stamped";
  }
  Fixture after;
  after.lvm.RememberPvsIn(dir);
  LvmReport r;
  for (int pool = 0; pool < 3; ++pool) ASSERT_TRUE(after.lvm.Report(&r, true).ok());
  EXPECT_EQ(after.Reports(), 1u);
  // A list that names something else is harmless: that stamp is not kept.
  { std::ofstream(dir + "/pvs") << "/dev/other\n../../etc/passwd\n"; }
  Fixture moved;
  moved.lvm.RememberPvsIn(dir);
  ASSERT_TRUE(moved.lvm.Report(&r, true).ok());
  ASSERT_TRUE(moved.lvm.Report(&r, true).ok());
  EXPECT_EQ(moved.Reports(), 2u);
  std::string text;
  std::ifstream in(dir + "/pvs");
  std::getline(in, text);
  EXPECT_EQ(text, "/dev/vdb") << "the list follows the report";
  ::unlink((dir + "/pvs").c_str());
  ::rmdir(dir.c_str());
  ::rmdir(tmpl);
}

TEST(LvmCache, OneReportAtATime) {
  Fixture f;
  f.report_takes = std::chrono::milliseconds(300);
  std::atomic<int> ok{0};
  auto ask = [&] {
    LvmReport r;
    if (f.lvm.Report(&r, true).ok() && r.FindLv("vg0", "mine")) ++ok;
  };
  std::vector<std::thread> threads;
  threads.emplace_back(ask);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the first is running
  for (int i = 0; i < 7; ++i) threads.emplace_back(ask);
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(f.Reports(), 1u) << "callers arriving while a report runs share it";
  // NewReport never shares: it is for a caller that doubts the cache.
  LvmReport r;
  ASSERT_TRUE(f.lvm.NewReport(&r).ok());
  EXPECT_EQ(f.Reports(), 2u);
}

}  // namespace
}  // namespace nodevol
