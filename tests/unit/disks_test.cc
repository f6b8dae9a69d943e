// Disk rules and disk selection for LVM pools (backend/lvm/disks.h), on
// fake disk lists and a fake signature probe; ProbeSignature on crafted
// image files. The RealDisks tests run only inside the VM harness
// (tests/vm/lvm_disks_test.sh sets NODEVOL_REAL_DISKS=1): real scratch
// disks, real lvm, a real hot-plug.
#include "backend/lvm/disks.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>

namespace nodevol {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1ULL << 20;

DiskRules Parse(const Params& options) {
  DiskRules r;
  Status st = ParseDiskRules(options, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

Status ParseError(const Params& options) {
  DiskRules r;
  return ParseDiskRules(options, &r);
}

// ---- ParseDiskRules ----

TEST(ParseDiskRules, EveryKey) {
  DiskRules r = Parse({{"devices", "/dev/vdb  /dev/disk/by-id/nvme-*"},
                       {"match-model", "Samsung SSD*"},
                       {"match-serial", "S4EV*"},
                       {"match-size", "10G-2Ti"},
                       {"match-rotational", "1"},
                       {"force", "/dev/vdb"}});
  EXPECT_EQ(r.devices, (std::vector<std::string>{"/dev/vdb", "/dev/disk/by-id/nvme-*"}));
  EXPECT_EQ(r.model, "Samsung SSD*");
  EXPECT_EQ(r.serial, "S4EV*");
  EXPECT_EQ(r.min_size, 10'000'000'000ULL);
  EXPECT_EQ(r.max_size, 2ULL << 40);
  ASSERT_TRUE(r.rotational.has_value());
  EXPECT_TRUE(*r.rotational);
  EXPECT_EQ(r.force, std::vector<std::string>{"/dev/vdb"});
  EXPECT_FALSE(r.empty());
}

TEST(ParseDiskRules, OpenSizeRangesAndRotationalZero) {
  DiskRules lo = Parse({{"match-size", "100G-"}, {"match-rotational", "0"}});
  EXPECT_EQ(lo.min_size, 100'000'000'000ULL);
  EXPECT_EQ(lo.max_size, 0u);
  ASSERT_TRUE(lo.rotational.has_value());
  EXPECT_FALSE(*lo.rotational);
  DiskRules hi = Parse({{"match-size", "-500Mi"}});
  EXPECT_EQ(hi.min_size, 0u);
  EXPECT_EQ(hi.max_size, 500 * kMiB);
  DiskRules same = Parse({{"match-size", "1Gi-1Gi"}});
  EXPECT_EQ(same.min_size, same.max_size);
}

TEST(ParseDiskRules, UnknownKeysAreIgnored) {
  DiskRules r = Parse({{"name", "fast"}, {"backend", "lvm"}, {"vg", "nv"}, {"type", "thick"}, {"match-serial", "a*"}});
  EXPECT_TRUE(r.devices.empty());
  EXPECT_EQ(r.serial, "a*");
  EXPECT_TRUE(Parse({{"vg", "nv"}, {"match-colour", "blue"}}).empty());
}

TEST(ParseDiskRules, BadSizesNameTheOptionAndTheForms) {
  for (const char* bad : {"10G", "-", "", "abc-", "10X-", "-5Q", "0-5G", "1G-2G-3G", "-1G-", "10 G-", "1.5G-"}) {
    Status st = ParseError({{"match-size", bad}});
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << "match-size=" << bad;
    EXPECT_THAT(st.message(), HasSubstr("match-size")) << bad;
  }
  EXPECT_THAT(ParseError({{"match-size", "10X-"}}).message(), HasSubstr("minimum \"10X\" is not a size"));
  EXPECT_THAT(ParseError({{"match-size", "-5Q"}}).message(), HasSubstr("maximum \"5Q\" is not a size"));
  EXPECT_THAT(ParseError({{"match-size", "10G"}}).message(), HasSubstr("MIN-MAX"));
}

TEST(ParseDiskRules, MinimumAboveMaximum) {
  Status st = ParseError({{"match-size", "2T-10G"}});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("above the maximum"));
  EXPECT_THAT(st.message(), HasSubstr("2T"));
}

TEST(ParseDiskRules, BadRotational) {
  for (const char* bad : {"yes", "true", "2", "", " 1", "01"}) {
    Status st = ParseError({{"match-rotational", bad}});
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("match-rotational")) << bad;
  }
}

TEST(ParseDiskRules, EmptyOrRelativeEntries) {
  for (const char* key : {"devices", "force"}) {
    EXPECT_EQ(ParseError({{"match-serial", "x"}, {key, "  "}}).code(), Status::Code::kInvalidArgument) << key;
    Status rel = ParseError({{"match-serial", "x"}, {key, "/dev/vdb vdc"}});
    EXPECT_EQ(rel.code(), Status::Code::kInvalidArgument) << key;
    EXPECT_THAT(rel.message(), HasSubstr("\"vdc\" is not an absolute")) << key;
  }
  EXPECT_EQ(ParseError({{"match-serial", ""}}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ParseError({{"match-model", ""}}).code(), Status::Code::kInvalidArgument);
}

TEST(ParseDiskRules, ForceAloneSelectsNothingAndIsRefused) {
  Status st = ParseError({{"force", "/dev/vdb"}});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("devices="));
  EXPECT_TRUE(ParseError({{"force", "/dev/vdb"}, {"devices", "/dev/vdb"}}).ok());
}

TEST(ParseDiskRules, ReplacesEarlierRules) {
  DiskRules r;
  r.devices = {"/dev/old"};
  r.model = "old";
  ASSERT_TRUE(ParseDiskRules({{"match-serial", "new*"}}, &r).ok());
  EXPECT_TRUE(r.devices.empty());
  EXPECT_TRUE(r.model.empty());
  EXPECT_EQ(r.serial, "new*");
  // And a failed parse leaves the rules alone.
  EXPECT_FALSE(ParseDiskRules({{"match-size", "bad"}}, &r).ok());
  EXPECT_EQ(r.serial, "new*");
}

TEST(DiskRules, Empty) {
  EXPECT_TRUE(DiskRules{}.empty());
  DiskRules r;
  r.force = {"/dev/vdb"};
  EXPECT_TRUE(r.empty()) << "force= selects nothing";
  auto with = [](auto set) {
    DiskRules x;
    set(x);
    return x.empty();
  };
  EXPECT_FALSE(with([](DiskRules& x) { x.devices = {"/dev/vdb"}; }));
  EXPECT_FALSE(with([](DiskRules& x) { x.model = "m*"; }));
  EXPECT_FALSE(with([](DiskRules& x) { x.serial = "s*"; }));
  EXPECT_FALSE(with([](DiskRules& x) { x.min_size = 1; }));
  EXPECT_FALSE(with([](DiskRules& x) { x.max_size = 1; }));
  EXPECT_FALSE(with([](DiskRules& x) { x.rotational = false; }));
}

// ---- SelectDisks on fakes ----

DiskInfo Disk(std::string devnode, std::string serial, uint64_t size = 256 * kMiB) {
  DiskInfo d;
  d.devnode = std::move(devnode);
  d.serial = std::move(serial);
  d.size = size;
  return d;
}

// Signatures by devnode; records which devices were probed.
struct FakeProbe {
  std::map<std::string, std::string> signatures;
  std::map<std::string, Status> errors;
  std::vector<std::string> probed;
  SignatureProbe fn() {
    return [this](const std::string& dev, std::string* what) {
      probed.push_back(dev);
      if (auto e = errors.find(dev); e != errors.end()) return e->second;
      auto it = signatures.find(dev);
      *what = it == signatures.end() ? "" : it->second;
      return Status::Ok();
    };
  }
  bool Probed(const std::string& dev) const { return std::count(probed.begin(), probed.end(), dev) > 0; }
};

struct Fixture {
  std::vector<DiskInfo> disks = {Disk("/dev/vdb", "pool1"), Disk("/dev/vdc", "pool-ext4"), Disk("/dev/vdd", "other"),
                                 Disk("/dev/vde", "pool2", 2ULL << 30)};
  FakeProbe probe;
  LvmReport report;
  Fixture() { probe.signatures["/dev/vdc"] = "ext4 filesystem"; }

  std::map<std::string, DiskDecision> Select(const DiskRules& rules, const std::string& vg = "nv") {
    auto decisions = SelectDisks(rules, vg, report, disks, probe.fn());
    EXPECT_EQ(decisions.size(), disks.size()) << "one decision per disk";
    std::map<std::string, DiskDecision> by;
    for (size_t i = 0; i < decisions.size() && i < disks.size(); ++i) {
      EXPECT_EQ(decisions[i].disk.devnode, disks[i].devnode) << "decisions in the disks' order";
      EXPECT_FALSE(decisions[i].reason.empty()) << decisions[i].disk.devnode;
      by[decisions[i].disk.devnode] = decisions[i];
    }
    return by;
  }
};

TEST(SelectDisks, MatchRuleTakesBlankMatchesAndNeverProbesOthers) {
  Fixture f;
  DiskRules rules = Parse({{"match-serial", "pool*"}});
  auto d = f.Select(rules);
  EXPECT_TRUE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("blank"));
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("match-serial=pool*"));
  EXPECT_TRUE(d["/dev/vde"].take);
  EXPECT_FALSE(d["/dev/vdd"].take);
  EXPECT_THAT(d["/dev/vdd"].reason, HasSubstr("serial \"other\" does not match match-serial=pool*"));
  EXPECT_FALSE(f.probe.Probed("/dev/vdd")) << "a disk no rule selects must not even be opened";
}

TEST(SelectDisks, SignatureRefusedWithAReasonAnOperatorCanActOn) {
  Fixture f;
  auto d = f.Select(Parse({{"match-serial", "pool*"}}));
  const DiskDecision& ext4 = d["/dev/vdc"];
  EXPECT_FALSE(ext4.take);
  EXPECT_TRUE(f.probe.Probed("/dev/vdc"));
  for (const char* part : {"/dev/vdc", "serial pool-ext4", "256.0MiB", "ext4 filesystem", "not added to VG nv",
                           "force="})
    EXPECT_THAT(ext4.reason, HasSubstr(part));
}

TEST(SelectDisks, ForcedDespiteSignature) {
  Fixture f;
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/vdc"}}));
  EXPECT_TRUE(d["/dev/vdc"].take);
  EXPECT_THAT(d["/dev/vdc"].reason, HasSubstr("force="));
  EXPECT_THAT(d["/dev/vdc"].reason, HasSubstr("ext4 filesystem"));
}

TEST(SelectDisks, ForceOfAnotherDeviceDoesNotApply) {
  Fixture f;
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/vdb /dev/vdc1 /dev/vd"}}));
  EXPECT_FALSE(d["/dev/vdc"].take) << d["/dev/vdc"].reason;
}

TEST(SelectDisks, ForceDoesNotSelect) {
  Fixture f;
  f.probe.signatures["/dev/vdd"] = "xfs filesystem";
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/vdd"}}));
  EXPECT_FALSE(d["/dev/vdd"].take);
  EXPECT_FALSE(f.probe.Probed("/dev/vdd"));
}

TEST(SelectDisks, NamedExplicitlyWhateverTheMatchRules) {
  Fixture f;
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"devices", "/dev/vdd"}}));
  EXPECT_TRUE(d["/dev/vdd"].take);
  EXPECT_THAT(d["/dev/vdd"].reason, HasSubstr("named in devices= (/dev/vdd)"));
  EXPECT_TRUE(d["/dev/vdb"].take);
  // devices= alone: only what it names.
  Fixture g;
  auto only = g.Select(Parse({{"devices", "/dev/vdd"}}));
  EXPECT_TRUE(only["/dev/vdd"].take);
  EXPECT_FALSE(only["/dev/vdb"].take);
  EXPECT_FALSE(g.probe.Probed("/dev/vdb"));
}

TEST(SelectDisks, NamedButRefusedSaysWhy) {
  Fixture f;
  f.disks[2].read_only = true;
  auto d = f.Select(Parse({{"devices", "/dev/vdc /dev/vdd"}}));
  EXPECT_FALSE(d["/dev/vdd"].take);
  EXPECT_THAT(d["/dev/vdd"].reason, HasSubstr("read-only"));
  EXPECT_THAT(d["/dev/vdd"].reason, HasSubstr("named in devices="));
  EXPECT_FALSE(d["/dev/vdc"].take);
  EXPECT_THAT(d["/dev/vdc"].reason, HasSubstr("ext4"));
}

TEST(SelectDisks, ReadOnlyRefusedEvenWhenForced) {
  Fixture f;
  f.disks[0].read_only = true;
  auto d = f.Select(Parse({{"devices", "/dev/vdb"}, {"force", "/dev/vdb"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("read-only"));
}

TEST(SelectDisks, GlobsMatchDevnodesAndByIdLinks) {
  Fixture f;
  f.disks[0].links = {"/dev/disk/by-id/nvme-A_1", "/dev/disk/by-id/nvme-eui.1"};
  f.disks[2].links = {"/dev/disk/by-id/nvme-B_2"};
  f.disks[3].links = {"/dev/disk/by-id/ata-C_3"};
  auto d = f.Select(Parse({{"devices", "/dev/disk/by-id/nvme-*_?"}}));
  EXPECT_TRUE(d["/dev/vdb"].take);
  EXPECT_TRUE(d["/dev/vdd"].take);
  EXPECT_FALSE(d["/dev/vde"].take);
  auto byname = f.Select(Parse({{"devices", "/dev/vd[bc]"}}));
  EXPECT_TRUE(byname["/dev/vdb"].take);
  EXPECT_FALSE(byname["/dev/vdc"].take) << "named, but ext4";
  EXPECT_THAT(byname["/dev/vdc"].reason, HasSubstr("named in devices= (/dev/vd[bc])"));
  EXPECT_FALSE(byname["/dev/vdd"].take);
  // "*" never crosses a "/": /dev/* names no by-id link.
  auto star = f.Select(Parse({{"devices", "/dev/disk/*"}}));
  EXPECT_FALSE(star["/dev/vdb"].take);
}

// A temporary directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "disks_test.XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(SelectDisks, EntriesResolvedThroughSymlinksAndGlobsOnTheFilesystem) {
  TempDir t;
  fs::create_directories(t.path / "dev");
  fs::create_directories(t.path / "by-id");
  std::ofstream(t.path / "dev" / "sdx").put('x');
  std::ofstream(t.path / "dev" / "sdy").put('y');
  fs::create_symlink(t.path / "dev" / "sdx", t.path / "by-id" / "wwn-0x1");
  fs::create_symlink("../dev/sdy", t.path / "by-id" / "wwn-0x2");
  Fixture f;
  f.disks = {Disk((t.path / "dev" / "sdx").string(), "x"), Disk((t.path / "dev" / "sdy").string(), "y"),
             Disk((t.path / "dev" / "sdz").string(), "z")};
  auto one = f.Select(Parse({{"devices", (t.path / "by-id" / "wwn-0x1").string()}}));
  EXPECT_TRUE(one[f.disks[0].devnode].take) << one[f.disks[0].devnode].reason;
  EXPECT_FALSE(one[f.disks[1].devnode].take);
  auto glob = f.Select(Parse({{"devices", (t.path / "by-id" / "wwn-*").string()}}));
  EXPECT_TRUE(glob[f.disks[0].devnode].take);
  EXPECT_TRUE(glob[f.disks[1].devnode].take) << "relative symlink resolved";
  EXPECT_FALSE(glob[f.disks[2].devnode].take);
}

TEST(SelectDisks, EntriesComparedByDeviceNumber) {
  TempDir t;
  const dev_t num = makedev(7, 251);
  if (mknod((t.path / "node").c_str(), S_IFBLK | 0600, num) != 0) GTEST_SKIP() << "mknod needs CAP_MKNOD here";
  fs::create_symlink(t.path / "node", t.path / "link");
  Fixture f;
  f.disks[1].devnum = num;  // /dev/vdc, ext4: known under another name
  f.disks[0].devnum = makedev(7, 252);
  auto d = f.Select(Parse({{"devices", (t.path / "link").string()}, {"force", (t.path / "node").string()}}));
  EXPECT_TRUE(d["/dev/vdc"].take) << d["/dev/vdc"].reason;
  EXPECT_THAT(d["/dev/vdc"].reason, HasSubstr("force="));
  EXPECT_FALSE(d["/dev/vdb"].take);
}

TEST(SelectDisks, AlreadyInThisVgIsNotTakenAgainNorProbed) {
  Fixture f;
  f.report.pvs = {{"/dev/vdb", "nv", 0, 0}};
  auto d = f.Select(Parse({{"match-serial", "pool*"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("already a physical volume of VG nv"));
  EXPECT_FALSE(f.probe.Probed("/dev/vdb"));
  EXPECT_TRUE(d["/dev/vde"].take);
}

TEST(SelectDisks, PvOfAnotherVgIsNeverTakenEvenWhenForced) {
  Fixture f;
  f.report.pvs = {{"/dev/vdb", "data", 0, 0}};
  f.probe.signatures["/dev/vdb"] = "LVM2_member (LVM physical volume)";
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/vdb"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("physical volume of VG data"));
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("force= or not"));
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("vgreduce data /dev/vdb"));
}

TEST(SelectDisks, PvFoundByLink) {
  Fixture f;
  f.disks[0].links = {"/dev/disk/by-id/virtio-pool1"};
  f.report.pvs = {{"/dev/disk/by-id/virtio-pool1", "nv", 0, 0}};
  auto d = f.Select(Parse({{"match-serial", "pool*"}}));
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("already a physical volume of VG nv"));
}

TEST(SelectDisks, OrphanPvNeedsForce) {
  Fixture f;
  f.report.pvs = {{"/dev/vdb", "", 0, 0}};
  f.probe.signatures["/dev/vdb"] = "LVM2_member (LVM physical volume)";
  auto refused = f.Select(Parse({{"match-serial", "pool*"}}));
  EXPECT_FALSE(refused["/dev/vdb"].take);
  EXPECT_THAT(refused["/dev/vdb"].reason, HasSubstr("in no volume group"));
  auto forced = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/vdb"}}));
  EXPECT_TRUE(forced["/dev/vdb"].take) << forced["/dev/vdb"].reason;
}

TEST(SelectDisks, LvmLabelLvmDoesNotReportIsNeverTaken) {
  Fixture f;
  f.probe.signatures["/dev/vdb"] = "LVM2_member (LVM physical volume)";
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/vdb"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("LVM label lvm does not report"));
}

TEST(SelectDisks, DiskWithPartitionsRefusedItsBlankPartitionTaken) {
  Fixture f;
  DiskInfo part = Disk("/dev/vdb1", "pool1", 128 * kMiB);
  part.partition = true;
  f.disks.insert(f.disks.begin() + 1, part);
  f.probe.signatures["/dev/vdb"] = "gpt partition table, partitions vdb1";
  auto d = f.Select(Parse({{"match-serial", "pool1"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("partitions vdb1"));
  EXPECT_TRUE(d["/dev/vdb1"].take);
  EXPECT_THAT(d["/dev/vdb1"].reason, HasSubstr("partition"));
}

TEST(SelectDisks, ProbeFailureRefuses) {
  Fixture f;
  f.probe.errors["/dev/vdb"] = Status::Internal("cannot open /dev/vdb: Device or resource busy");
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/vdb"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("busy"));
}

TEST(SelectDisks, SizeBoundsAreInclusive) {
  Fixture f;
  f.disks = {Disk("/dev/a", "s", 1ULL << 30), Disk("/dev/b", "s", (1ULL << 30) - 512), Disk("/dev/c", "s", 4ULL << 30),
             Disk("/dev/d", "s", (4ULL << 30) + 512)};
  auto d = f.Select(Parse({{"match-size", "1Gi-4Gi"}}));
  EXPECT_TRUE(d["/dev/a"].take);
  EXPECT_FALSE(d["/dev/b"].take);
  EXPECT_THAT(d["/dev/b"].reason, HasSubstr("below the match-size minimum 1Gi"));
  EXPECT_TRUE(d["/dev/c"].take);
  EXPECT_FALSE(d["/dev/d"].take);
  EXPECT_THAT(d["/dev/d"].reason, HasSubstr("above the match-size maximum 4Gi"));
}

TEST(SelectDisks, RotationalAndModelRulesAllMustPass) {
  Fixture f;
  f.disks = {Disk("/dev/sda", "1"), Disk("/dev/sdb", "2"), Disk("/dev/sdc", "3"), Disk("/dev/sdd", "4")};
  f.disks[0].model = "QEMU HARDDISK";  // sysfs spelling
  f.disks[1].model = "QEMU_HARDDISK";  // udev's ID_MODEL
  f.disks[2].model = "QEMU HARDDISK";
  f.disks[2].rotational = true;
  f.disks[3].model = "Samsung SSD 980";
  auto d = f.Select(Parse({{"match-model", "QEMU HARD*"}, {"match-rotational", "0"}}));
  EXPECT_TRUE(d["/dev/sda"].take);
  EXPECT_TRUE(d["/dev/sdb"].take) << d["/dev/sdb"].reason;
  EXPECT_FALSE(d["/dev/sdc"].take);
  EXPECT_THAT(d["/dev/sdc"].reason, HasSubstr("rotational"));
  EXPECT_FALSE(d["/dev/sdd"].take);
  EXPECT_THAT(d["/dev/sdd"].reason, HasSubstr("model \"Samsung SSD 980\" does not match"));
  auto spinning = f.Select(Parse({{"match-rotational", "1"}}));
  EXPECT_TRUE(spinning["/dev/sdc"].take);
  EXPECT_FALSE(spinning["/dev/sda"].take);
}

TEST(SelectDisks, NoSerialKnown) {
  Fixture f;
  f.disks[0].serial = "";
  auto d = f.Select(Parse({{"match-serial", "*"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("no serial known"));
  EXPECT_TRUE(d["/dev/vdd"].take);
}

TEST(SelectDisks, EmptyRulesSelectNothing) {
  Fixture f;
  auto d = f.Select(DiskRules{});
  for (auto& [dev, dec] : d) EXPECT_FALSE(dec.take) << dev;
  EXPECT_TRUE(f.probe.probed.empty());
}

// ---- EnsureVolumeGroup's checks that need no disk (fake lvm) ----

struct FakeLvm {
  std::vector<std::vector<std::string>> calls;
  std::string report = R"({"report":[{"vg":[{"vg_name":"nv","vg_size":"1073741824","vg_free":"1073741824",
    "vg_extent_size":"4194304"}],"pv":[{"pv_name":"/dev/vdb","vg_name":"nv","pv_size":"1073741824",
    "pv_free":"1073741824"}]}]})";
  Lvm::Runner runner() {
    return [this](const std::vector<std::string>& argv, const RunOptions&, RunResult* r) {
      calls.push_back(argv);
      *r = RunResult{};
      r->exit_code = 0;
      if (argv.size() > 1 && argv[1] == "fullreport") r->out = report;
      return Status::Ok();
    };
  }
  std::vector<std::string> Commands() const {
    std::vector<std::string> out;
    for (const auto& c : calls) out.push_back(c.size() > 1 ? c[1] : "");
    return out;
  }
};

TEST(EnsureVolumeGroup, EmptyRulesOnlyCheckTheVg) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", false, fake.runner());
  FakeProbe probe;
  EXPECT_TRUE(EnsureVolumeGroup(&lvm, "nv", DiskRules{}, probe.fn()).ok());
  Status missing = EnsureVolumeGroup(&lvm, "other", DiskRules{}, probe.fn());
  EXPECT_EQ(missing.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(missing.message(), HasSubstr("vgcreate other"));
  EXPECT_THAT(missing.message(), HasSubstr("match-*"));
  EXPECT_EQ(fake.Commands(), (std::vector<std::string>{"fullreport", "fullreport"}));
  EXPECT_TRUE(probe.probed.empty());
}

TEST(EnsureVolumeGroup, NothingSelectedForAMissingVg) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", false, fake.runner());
  FakeProbe probe;
  DiskRules rules = Parse({{"match-serial", "no-disk-is-called-this-*"}});
  Status st = EnsureVolumeGroup(&lvm, "fresh", rules, probe.fn());
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("volume group fresh does not exist and no disk qualifies"));
  EXPECT_THAT(st.message(), HasSubstr("match-serial=no-disk-is-called-this-*"));
  // An existing VG with nothing new to add is fine.
  EXPECT_TRUE(EnsureVolumeGroup(&lvm, "nv", rules, probe.fn()).ok());
  for (const auto& c : fake.Commands()) EXPECT_EQ(c, "fullreport");
}

// ---- ProbeSignature on image files (libblkid probes regular files too) ----

std::string Image(const fs::path& p, const std::vector<std::pair<off_t, std::string>>& writes) {
  {
    std::ofstream f(p, std::ios::binary);
    f.seekp(kMiB - 1);
    f.put('\0');
  }
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  for (const auto& [off, bytes] : writes) {
    f.seekp(off);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return p.string();
}

std::string Le32(uint32_t v) { return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)}; }

TEST(ProbeSignature, BlankSwapAndPartitionTable) {
  TempDir t;
  std::string what = "stale";
  ASSERT_TRUE(ProbeSignature(Image(t.path / "blank", {}), &what).ok());
  EXPECT_EQ(what, "");

  // Swap v1: version 1 and last page after the 1 KiB boot block, magic at
  // the end of the first 4 KiB page.
  std::string swap = Image(t.path / "swap", {{1024, Le32(1) + Le32(255) + Le32(0)}, {4096 - 10, "SWAPSPACE2"}});
  ASSERT_TRUE(ProbeSignature(swap, &what).ok());
  EXPECT_EQ(what, "swap area");

  // MBR with one Linux partition (start 2048, 4096 sectors).
  std::string entry = std::string{'\0', '\0', '\0', '\0', char(0x83), '\0', '\0', '\0'} + Le32(2048) + Le32(4096);
  std::string mbr = Image(t.path / "mbr", {{446, entry}, {510, "\x55\xaa"}});
  ASSERT_TRUE(ProbeSignature(mbr, &what).ok());
  EXPECT_EQ(what, "dos partition table");
}

TEST(ProbeSignature, MissingDeviceIsAnError) {
  std::string what;
  Status st = ProbeSignature("/dev/nodevol-no-such-disk", &what);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("/dev/nodevol-no-such-disk"));
}

TEST(ListDisks, OnlyUsableBlockDevices) {
  std::vector<DiskInfo> disks;
  Status st = ListDisks(&disks);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (const auto& d : disks) {
    EXPECT_EQ(d.devnode.rfind("/dev/", 0), 0u) << d.devnode;
    EXPECT_GT(d.size, 0u) << d.devnode;
    for (const char* never : {"/dev/loop", "/dev/dm-", "/dev/ram", "/dev/zram", "/dev/sr"})
      EXPECT_NE(d.devnode.rfind(never, 0), 0u) << d.devnode;
    for (const auto& l : d.links) EXPECT_EQ(l.rfind("/dev/disk/by-id/", 0), 0u) << l;
  }
}

// ---- RealDisks: only in the VM (tests/vm/lvm_disks_test.sh) ----
// Disks: pool1, pool2 (256 MiB, blank), pool-ext4 (256 MiB, ext4 made by
// the script). VG name in NODEVOL_REAL_VG (default nvdisks).

bool RealDisks() { return std::getenv("NODEVOL_REAL_DISKS") && std::string(std::getenv("NODEVOL_REAL_DISKS")) == "1"; }
#define REQUIRE_REAL_DISKS() \
  if (!RealDisks()) GTEST_SKIP() << "needs NODEVOL_REAL_DISKS=1 (the VM test tests/vm/lvm_disks_test.sh)"

std::string RealVg() { return std::getenv("NODEVOL_REAL_VG") ? std::getenv("NODEVOL_REAL_VG") : "nvdisks"; }

const DiskInfo* BySerial(const std::vector<DiskInfo>& disks, const std::string& serial) {
  for (const auto& d : disks)
    if (d.serial == serial && !d.partition) return &d;
  return nullptr;
}

std::vector<DiskInfo> MustList() {
  std::vector<DiskInfo> disks;
  Status st = ListDisks(&disks);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return disks;
}

// A real Lvm whose commands are recorded.
struct RealLvm {
  std::vector<std::vector<std::string>> calls;
  Lvm lvm{"/sbin/lvm", access("/run/udev/control", F_OK) == 0,
          [this](const std::vector<std::string>& argv, const RunOptions& o, RunResult* r) {
            calls.push_back(argv);
            return RunChecked(argv, o, r);
          }};
  std::set<std::string> PvsOf(const std::string& vg) {
    LvmReport r;
    Status st = lvm.Report(&r, true);
    EXPECT_TRUE(st.ok()) << st.ToString();
    std::set<std::string> out;
    for (const auto& pv : r.pvs)
      if (pv.vg == vg) out.insert(pv.name);
    return out;
  }
  bool Ran(const std::string& cmd) const {
    return std::any_of(calls.begin(), calls.end(), [&](const auto& c) { return c.size() > 1 && c[1] == cmd; });
  }
};

TEST(RealDisks, ListDisksFindsTheScratchDisksBySerial) {
  REQUIRE_REAL_DISKS();
  auto disks = MustList();
  std::string seen;
  for (const auto& d : disks) seen += " " + d.devnode + "=" + d.serial;
  for (const char* serial : {"pool1", "pool2", "pool-ext4"}) {
    const DiskInfo* d = BySerial(disks, serial);
    ASSERT_NE(d, nullptr) << "no disk with serial " << serial << "; seen:" << seen;
    EXPECT_EQ(d->size, 256 * kMiB) << serial;
    EXPECT_FALSE(d->read_only) << serial;
    EXPECT_NE(d->devnum, 0u) << serial;
    struct stat st {};
    ASSERT_EQ(stat(d->devnode.c_str(), &st), 0) << d->devnode;
    EXPECT_EQ(st.st_rdev, d->devnum) << d->devnode;
  }
}

TEST(RealDisks, ProbeSignatureBlankAndExt4) {
  REQUIRE_REAL_DISKS();
  auto disks = MustList();
  const DiskInfo* blank = BySerial(disks, "pool2");
  const DiskInfo* ext4 = BySerial(disks, "pool-ext4");
  ASSERT_TRUE(blank && ext4);
  std::string what = "stale";
  ASSERT_TRUE(ProbeSignature(blank->devnode, &what).ok());
  EXPECT_EQ(what, "");
  ASSERT_TRUE(ProbeSignature(ext4->devnode, &what).ok());
  EXPECT_EQ(what, "ext4 filesystem");
}

TEST(RealDisks, EnsureVolumeGroupTakesBlankMatchesOnly) {
  REQUIRE_REAL_DISKS();
  auto disks = MustList();
  const DiskInfo* pool1 = BySerial(disks, "pool1");
  const DiskInfo* pool2 = BySerial(disks, "pool2");
  const DiskInfo* ext4 = BySerial(disks, "pool-ext4");
  ASSERT_TRUE(pool1 && pool2 && ext4);
  DiskRules rules = Parse({{"match-serial", "pool*"}});
  const std::string vg = RealVg();

  // What will be decided, with the real probe.
  LvmReport none;
  for (const auto& d : SelectDisks(rules, vg, none, disks, ProbeSignature)) {
    std::cout << (d.take ? "take:   " : "refuse: ") << d.reason << "\n";
    if (d.disk.devnode == ext4->devnode) {
      EXPECT_FALSE(d.take);
      EXPECT_THAT(d.reason, HasSubstr("ext4 filesystem"));
    }
    if (d.disk.devnode == pool1->devnode) {
      EXPECT_TRUE(d.take) << d.reason;
    }
  }

  RealLvm real;
  Status st = EnsureVolumeGroup(&real.lvm, vg, rules, ProbeSignature);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(real.Ran("vgcreate"));
  EXPECT_EQ(real.PvsOf(vg), (std::set<std::string>{pool1->devnode, pool2->devnode}));
  std::string what;
  ASSERT_TRUE(ProbeSignature(ext4->devnode, &what).ok());
  EXPECT_EQ(what, "ext4 filesystem") << "the refused disk was touched";

  // Idempotent: nothing new, nothing run but the report.
  real.calls.clear();
  st = EnsureVolumeGroup(&real.lvm, vg, rules, ProbeSignature);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (const auto& c : real.calls) EXPECT_EQ(c.at(1), "fullreport");
}

// The script hot-plugs a disk (serial NODEVOL_HOTPLUG_SERIAL) once the
// file NODEVOL_READY_FILE exists.
TEST(RealDisks, MonitorSeesAHotPluggedDisk) {
  REQUIRE_REAL_DISKS();
  const char* serial = std::getenv("NODEVOL_HOTPLUG_SERIAL");
  const char* ready = std::getenv("NODEVOL_READY_FILE");
  if (!serial || !ready) GTEST_SKIP() << "needs NODEVOL_HOTPLUG_SERIAL and NODEVOL_READY_FILE";
  std::mutex mu;
  std::condition_variable cv;
  std::vector<DiskInfo> added;
  std::unique_ptr<DiskMonitor> monitor;
  Status st = DiskMonitor::Start(
      [&](const DiskInfo& d) {
        std::lock_guard<std::mutex> l(mu);
        added.push_back(d);
        cv.notify_all();
      },
      &monitor);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::ofstream(ready) << "ready\n";
  auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> l(mu);
  bool seen = cv.wait_for(l, std::chrono::seconds(60), [&] { return BySerial(added, serial) != nullptr; });
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  l.unlock();
  ASSERT_TRUE(seen) << "no add event for serial " << serial << " within 60 s";
  const DiskInfo* d = BySerial(added, serial);
  std::cout << "seen " << d->devnode << " (serial " << d->serial << ", " << d->size << " bytes) " << ms
            << " ms after ready\n";
  EXPECT_EQ(d->size, 128 * kMiB);
  struct stat sb {};
  EXPECT_EQ(stat(d->devnode.c_str(), &sb), 0) << d->devnode;
  EXPECT_EQ(sb.st_rdev, d->devnum);
  monitor->Stop();
  monitor.reset();  // twice is fine
}

TEST(RealDisks, EnsureVolumeGroupExtendsWithTheNewDiskOnly) {
  REQUIRE_REAL_DISKS();
  const char* serial = std::getenv("NODEVOL_HOTPLUG_SERIAL");
  if (!serial) GTEST_SKIP() << "needs NODEVOL_HOTPLUG_SERIAL";
  auto disks = MustList();
  const DiskInfo* hot = BySerial(disks, serial);
  ASSERT_NE(hot, nullptr);
  RealLvm real;
  const std::string vg = RealVg();
  auto before = real.PvsOf(vg);
  ASSERT_EQ(before.size(), 2u) << "run EnsureVolumeGroupTakesBlankMatchesOnly first";
  real.calls.clear();
  Status st = EnsureVolumeGroup(&real.lvm, vg, Parse({{"match-serial", "pool*"}}), ProbeSignature);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string> extend;
  for (const auto& c : real.calls)
    if (c.size() > 1 && c[1] == "vgextend") extend = c;
  EXPECT_EQ(extend, (std::vector<std::string>{"/sbin/lvm", "vgextend", "-y", vg, hot->devnode}));
  auto after = real.PvsOf(vg);
  before.insert(hot->devnode);
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace nodevol
