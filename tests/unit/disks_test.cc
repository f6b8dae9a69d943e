// Disk rules and disk selection for LVM pools (backend/lvm/disks.h), on
// fake disk lists and a fake signature probe; ProbeSignature on crafted
// image files. The RealDisks tests run only inside the VM harness
// (tests/vm/lvm_disks_test.sh sets NODEVOL_REAL_DISKS=1): real scratch
// disks, real lvm, a real hot-plug.
#include "backend/lvm/disks.h"
#include "backend/lvm/foreign.h"

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
                       {"force", "/dev/disk/by-id/virtio-b:ext4 /dev/disk/by-id/usb-X_Y-0:0:gpt"}});
  EXPECT_EQ(r.devices, (std::vector<std::string>{"/dev/vdb", "/dev/disk/by-id/nvme-*"}));
  EXPECT_EQ(r.model, "Samsung SSD*");
  EXPECT_EQ(r.serial, "S4EV*");
  EXPECT_EQ(r.min_size, 10'000'000'000ULL);
  EXPECT_EQ(r.max_size, 2ULL << 40);
  ASSERT_TRUE(r.rotational.has_value());
  EXPECT_TRUE(*r.rotational);
  ASSERT_EQ(r.force.size(), 2u);
  EXPECT_EQ(r.force[0].path, "/dev/disk/by-id/virtio-b");
  EXPECT_EQ(r.force[0].signature, "ext4");
  EXPECT_EQ(r.force[1].path, "/dev/disk/by-id/usb-X_Y-0:0") << "the signature follows the last colon";
  EXPECT_EQ(r.force[1].signature, "gpt");
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
    EXPECT_THAT(rel.message(), HasSubstr(std::string(key) == "devices" ? "\"vdc\" is not an absolute"
                                                                        : "/dev/disk/by-id/NAME:SIGNATURE"))
        << key;
  }
  EXPECT_EQ(ParseError({{"match-serial", ""}}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ParseError({{"match-model", ""}}).code(), Status::Code::kInvalidArgument);
}

TEST(ParseDiskRules, ForceAloneSelectsNothingAndIsRefused) {
  Status st = ParseError({{"force", "/dev/disk/by-id/virtio-b:ext4"}});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("devices="));
  EXPECT_TRUE(ParseError({{"force", "/dev/disk/by-id/virtio-b:ext4"}, {"devices", "/dev/vdb"}}).ok());
}

// issue 27 item 4: a kernel name in force= wiped whatever disk had that
// name after a renumbering; force= now names a stable link and the one
// signature it overrides.
TEST(ParseDiskRules, ForceNamesAByIdPathAndASignature) {
  for (const char* bad : {"/dev/vdb", "/dev/vdb:ext4", "/dev/disk/by-id/virtio-b", "/dev/disk/by-id/virtio-*:ext4",
                          "/dev/disk/by-id/:ext4", "/dev/disk/by-id/virtio-b:"}) {
    Status st = ParseError({{"devices", "/dev/vdb"}, {"force", bad}});
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("/dev/disk/by-id/NAME:SIGNATURE")) << bad;
  }
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
  r.force = {{"/dev/disk/by-id/virtio-b", "ext4"}};
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

constexpr const char* kForceExt4 = "/dev/disk/by-id/virtio-pool-ext4:ext4";

TEST(SelectDisks, ForcedDespiteSignature) {
  Fixture f;
  f.disks[1].links = {"/dev/disk/by-id/virtio-pool-ext4"};
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", kForceExt4}}));
  EXPECT_TRUE(d["/dev/vdc"].take);
  EXPECT_THAT(d["/dev/vdc"].reason, HasSubstr("force="));
  EXPECT_THAT(d["/dev/vdc"].reason, HasSubstr("ext4 filesystem"));
}

TEST(SelectDisks, ForceOfAnotherSignatureDoesNotApply) {
  Fixture f;
  f.disks[1].links = {"/dev/disk/by-id/virtio-pool-ext4"};
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/disk/by-id/virtio-pool-ext4:xfs"}}));
  EXPECT_FALSE(d["/dev/vdc"].take);
  EXPECT_THAT(d["/dev/vdc"].reason, HasSubstr("for signature xfs, not ext4"));
  // Forced for ext4, but it carries more than ext4.
  f.probe.signatures["/dev/vdc"] = "ext4 filesystem, in use by dm-0";
  auto busy = f.Select(Parse({{"match-serial", "pool*"}, {"force", kForceExt4}}));
  EXPECT_FALSE(busy["/dev/vdc"].take) << busy["/dev/vdc"].reason;
}

TEST(SelectDisks, ForceOfAnotherDeviceDoesNotApply) {
  Fixture f;
  f.disks[1].links = {"/dev/disk/by-id/virtio-pool-ext4"};
  auto d = f.Select(Parse({{"match-serial", "pool*"},
                           {"force", "/dev/disk/by-id/virtio-pool1:ext4 /dev/disk/by-id/virtio-pool-ext:ext4"}}));
  EXPECT_FALSE(d["/dev/vdc"].take) << d["/dev/vdc"].reason;
}

TEST(SelectDisks, ForceDoesNotSelect) {
  Fixture f;
  f.probe.signatures["/dev/vdd"] = "xfs filesystem";
  f.disks[2].links = {"/dev/disk/by-id/virtio-other"};
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/disk/by-id/virtio-other:xfs"}}));
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
  f.disks[0].links = {"/dev/disk/by-id/virtio-pool1"};
  auto d = f.Select(Parse({{"devices", "/dev/vdb"}, {"force", "/dev/disk/by-id/virtio-pool1:ext4"}}));
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
  f.probe.signatures.clear();
  auto d = f.Select(Parse({{"devices", (t.path / "link").string()}}));
  EXPECT_TRUE(d["/dev/vdc"].take) << d["/dev/vdc"].reason;
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
  f.disks[0].links = {"/dev/disk/by-id/virtio-pool1"};
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/disk/by-id/virtio-pool1:LVM2_member"}}));
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
  f.disks[0].links = {"/dev/disk/by-id/virtio-pool1"};
  auto forced = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/disk/by-id/virtio-pool1:LVM2_member"}}));
  EXPECT_TRUE(forced["/dev/vdb"].take) << forced["/dev/vdb"].reason;
}

TEST(SelectDisks, LvmLabelLvmDoesNotReportIsNeverTaken) {
  Fixture f;
  f.probe.signatures["/dev/vdb"] = "LVM2_member (LVM physical volume)";
  f.disks[0].links = {"/dev/disk/by-id/virtio-pool1"};
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/disk/by-id/virtio-pool1:LVM2_member"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("LVM label lvm does not report"));
}

// issue 27 item 2: this test asserted that a blank partition of a disk
// refused for its partition table was taken (raw journal partitions, a
// ZFS vdev's partition 9, plain dm-crypt...). A partition inherits its
// disk's serial and model, and by-id globs match its -partN link: only an
// exact devices= entry selects it.
TEST(SelectDisks, PartitionsOfARefusedDiskAreNotTakenByRulesOrGlobs) {
  Fixture f;
  DiskInfo part = Disk("/dev/vdb1", "pool1", 128 * kMiB);
  part.partition = true;
  part.links = {"/dev/disk/by-id/virtio-pool1-part1"};
  f.disks[0].links = {"/dev/disk/by-id/virtio-pool1"};
  f.disks.insert(f.disks.begin() + 1, part);
  f.probe.signatures["/dev/vdb"] = "gpt partition table, partitions vdb1";
  auto d = f.Select(Parse({{"match-serial", "pool1"}}));
  EXPECT_FALSE(d["/dev/vdb"].take);
  EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("partitions vdb1"));
  EXPECT_FALSE(d["/dev/vdb1"].take) << d["/dev/vdb1"].reason;
  EXPECT_THAT(d["/dev/vdb1"].reason, HasSubstr("only when devices= names it exactly"));
  EXPECT_FALSE(f.probe.Probed("/dev/vdb1"));
  for (const char* glob : {"/dev/disk/by-id/virtio-pool1*", "/dev/vdb*"}) {
    auto g = f.Select(Parse({{"devices", glob}}));
    EXPECT_FALSE(g["/dev/vdb1"].take) << glob << ": " << g["/dev/vdb1"].reason;
  }
  // Named exactly (kernel name or link): considered, and taken when blank.
  for (const char* exact : {"/dev/vdb1", "/dev/disk/by-id/virtio-pool1-part1"}) {
    auto e = f.Select(Parse({{"devices", exact}}));
    EXPECT_TRUE(e["/dev/vdb1"].take) << exact << ": " << e["/dev/vdb1"].reason;
  }
  // ... but not when its partition type says it belongs to something.
  f.probe.signatures["/dev/vdb1"] = "partition type 6a898cc3-1dd2-11b2-99a6-080020736631 (gpt; ...)";
  auto zfs = f.Select(Parse({{"devices", "/dev/vdb1"}}));
  EXPECT_FALSE(zfs["/dev/vdb1"].take);
  EXPECT_THAT(zfs["/dev/vdb1"].reason, HasSubstr("partition type"));
}

// issue 27 item 1: rbd, nbd, md, zvols, iSCSI/FC/NVMe-oF LUNs, multipath
// paths were candidates for any rule that matched them.
TEST(SelectDisks, OtherDriversDevicesOnlyByExactByIdPath) {
  Fixture f;
  f.disks[0].foreign = "a virtual block device (Ceph RBD)";
  f.disks[0].links = {"/dev/disk/by-id/wwn-0x1"};
  for (const Params& rules : std::vector<Params>{{{"match-serial", "pool1"}},
                                                 {{"match-size", "1M-"}},
                                                 {{"devices", "/dev/vdb"}},
                                                 {{"devices", "/dev/disk/by-id/wwn-*"}}}) {
    auto d = f.Select(Parse(rules));
    EXPECT_FALSE(d["/dev/vdb"].take) << rules.begin()->second;
    EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("Ceph RBD")) << rules.begin()->second;
    EXPECT_THAT(d["/dev/vdb"].reason, HasSubstr("exact /dev/disk/by-id path"));
  }
  EXPECT_FALSE(f.probe.Probed("/dev/vdb"));
  auto named = f.Select(Parse({{"devices", "/dev/disk/by-id/wwn-0x1"}}));
  EXPECT_TRUE(named["/dev/vdb"].take) << named["/dev/vdb"].reason;
}

TEST(ForeignReason, VirtualNetworkAndMultipath) {
  auto reason = [](DeviceFacts f) { return ForeignReason(f); };
  DeviceFacts local{"vdb", "/sys/devices/pci0000:00/0000:00:04.0/virtio2/block/vdb", "", "pci-0000:00:04.0", false};
  EXPECT_EQ(reason(local), "");
  DeviceFacts nvme{"nvme0n1", "/sys/devices/pci0000:00/0000:00:05.0/nvme/nvme0/nvme0n1", "pcie", "", false};
  EXPECT_EQ(reason(nvme), "");
  for (const char* name : {"rbd0", "nbd3", "drbd1", "md127", "zd16", "bcache0"}) {
    DeviceFacts v{name, std::string("/sys/devices/virtual/block/") + name, "", "", false};
    EXPECT_THAT(reason(v), HasSubstr("virtual block device")) << name;
    v.syspath = "/sys/devices/elsewhere";
    EXPECT_THAT(reason(v), HasSubstr("virtual block device")) << name << " by name alone";
  }
  DeviceFacts iscsi{"sdc", "/sys/devices/platform/host3/session1/target3:0:0/3:0:0:1/block/sdc", "", "", false};
  EXPECT_EQ(reason(iscsi), "an iSCSI LUN");
  DeviceFacts iscsi_path{"sdc", "/sys/devices/x/sdc", "", "ip-10.0.0.1:3260-iscsi-iqn.2001-04.com.example-lun-1", false};
  EXPECT_EQ(reason(iscsi_path), "an iSCSI LUN");
  DeviceFacts fc{"sdd", "/sys/devices/pci0000:00/0000:00:03.0/host5/rport-5:0-2/target5:0:1/5:0:1:0/block/sdd", "", "",
                 false};
  EXPECT_EQ(reason(fc), "a Fibre Channel LUN");
  DeviceFacts tcp{"nvme1n1", "/sys/devices/virtual/nvme-fabrics/ctl/nvme1/nvme1n1", "tcp", "", false};
  EXPECT_THAT(reason(tcp), HasSubstr("virtual"));
  tcp.syspath = "/sys/devices/nvme-subsys/nvme1n1";
  EXPECT_EQ(reason(tcp), "an NVMe namespace over tcp (NVMe-oF)");
  DeviceFacts path = local;
  path.multipath_path = true;
  EXPECT_EQ(reason(path), "a path of a multipath device");
}

// issue 27 items 1 and 7: an existing VG grows only with disks a rule pins
// (serial, exact by-id path), and only when nodevold made it.
TEST(SelectDisks, ExistingVgGrowsOnlyWithPinnedDisksAndOnlyIfOurs) {
  Fixture f;
  f.report.vgs = {{"nv", "uuid", 0, 0, 4 * kMiB, {"nodevol.io/managed"}}};
  f.disks[2].links = {"/dev/disk/by-id/virtio-other"};
  auto size = f.Select(Parse({{"match-size", "1M-"}}));
  EXPECT_FALSE(size["/dev/vdb"].take);
  EXPECT_THAT(size["/dev/vdb"].reason, HasSubstr("only disks pinned by match-serial="));
  auto kernel_name = f.Select(Parse({{"devices", "/dev/vdd"}}));
  EXPECT_FALSE(kernel_name["/dev/vdd"].take) << kernel_name["/dev/vdd"].reason;
  auto serial = f.Select(Parse({{"match-serial", "pool*"}}));
  EXPECT_TRUE(serial["/dev/vdb"].take) << serial["/dev/vdb"].reason;
  auto by_id = f.Select(Parse({{"devices", "/dev/disk/by-id/virtio-other"}}));
  EXPECT_TRUE(by_id["/dev/vdd"].take) << by_id["/dev/vdd"].reason;
  // A VG of that name the operator made: never extended.
  f.report.vgs[0].tags.clear();
  auto theirs = f.Select(Parse({{"match-serial", "pool*"}}));
  EXPECT_FALSE(theirs["/dev/vdb"].take);
  EXPECT_THAT(theirs["/dev/vdb"].reason, HasSubstr("not made by nodevold"));
}

TEST(SelectDisks, ProbeFailureRefuses) {
  Fixture f;
  f.probe.errors["/dev/vdb"] = Status::Internal("cannot open /dev/vdb: Device or resource busy");
  f.disks[0].links = {"/dev/disk/by-id/virtio-pool1"};
  auto d = f.Select(Parse({{"match-serial", "pool*"}, {"force", "/dev/disk/by-id/virtio-pool1:ext4"}}));
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

// issue 27 item 8: a VG not visible yet at start (a slow disk) was created
// again under its name from other disks.
TEST(EnsureVolumeGroup, AVgSeenBeforeIsNotCreatedAgain) {
  FakeLvm fake;
  Lvm lvm("/sbin/lvm", false, fake.runner());
  FakeProbe probe;
  Status st = EnsureVolumeGroup(&lvm, "late", Parse({{"match-size", "1-"}}), probe.fn(), "UUID-late");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("UUID-late"));
  EXPECT_THAT(st.message(), HasSubstr("will not create another VG"));
  EXPECT_TRUE(probe.probed.empty());
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

uint32_t Crc32(const std::string& data) {
  uint32_t crc = 0xffffffff;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320 & (0 - (crc & 1)));
  }
  return ~crc;
}

std::string Le64(uint64_t v) { return Le32(uint32_t(v)) + Le32(uint32_t(v >> 32)); }

// issue 27 item 2: a GPT disk whose protective MBR was zeroed probed blank.
TEST(ProbeSignature, GptWithoutProtectiveMbrIsNotBlank) {
  TempDir t;
  // One Linux-data partition entry, LBAs 40-1000 of a 2048-sector image.
  std::string entry = std::string("\xaf\x3d\xc6\x0f\x83\x84\x72\x47\x8e\x79\x3d\x69\xd8\x47\x7d\xe4", 16) +
                      std::string(16, '\x11') + Le64(40) + Le64(1000) + Le64(0) + std::string(72, '\0');
  std::string entries = entry + std::string(127 * 128, '\0');
  std::string header = std::string("EFI PART") + Le32(0x00010000) + Le32(92) + Le32(0) + Le32(0) + Le64(1) +
                       Le64(2047) + Le64(34) + Le64(2014) + std::string(16, '\x22') + Le64(2) + Le32(128) +
                       Le32(128) + Le32(Crc32(entries));
  header.replace(16, 4, Le32(Crc32(header)));
  std::string gpt = Image(t.path / "gpt", {{512, header}, {1024, entries}});  // LBA 0, the MBR, all zeros
  std::string what;
  ASSERT_TRUE(ProbeSignature(gpt, &what).ok());
  EXPECT_EQ(what, "gpt partition table");
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

// issue 27 item 3: a signature written after the probe (here: a probe that
// says blank while the disk carries ext4) was wiped by vgcreate -y.
TEST(RealDisks, SignatureWrittenAfterTheProbeIsNotWiped) {
  REQUIRE_REAL_DISKS();
  auto disks = MustList();
  const DiskInfo* ext4 = BySerial(disks, "pool-ext4");
  ASSERT_NE(ext4, nullptr);
  SignatureProbe stale = [](const std::string&, std::string* what) {
    what->clear();
    return Status::Ok();
  };
  RealLvm real;
  Status st = EnsureVolumeGroup(&real.lvm, "nvlate", Parse({{"match-serial", "pool-ext4"}}), stale);
  std::cout << "EnsureVolumeGroup: " << st.ToString() << "\n";
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(real.Ran("vgcreate")) << "lvm itself must have been asked";
  std::string what;
  ASSERT_TRUE(ProbeSignature(ext4->devnode, &what).ok());
  EXPECT_EQ(what, "ext4 filesystem") << "lvm wiped the signature";
}

// issue 27 item 2, on a real partition table: the script gave pool-part an
// MBR with partition 1 of type 0xbf (Solaris/ZFS) and 2 of type 0x8e (LVM),
// both blank inside.
TEST(RealDisks, PartitionsOnlyWhenNamedAndOfALinuxType) {
  REQUIRE_REAL_DISKS();
  auto disks = MustList();
  const DiskInfo* disk = BySerial(disks, "pool-part");
  ASSERT_NE(disk, nullptr);
  const std::string p1 = disk->devnode + "1", p2 = disk->devnode + "2";
  LvmReport none;
  auto decide = [&](const Params& rules) {
    std::map<std::string, DiskDecision> by;
    for (const auto& d : SelectDisks(Parse(rules), "nvpart", none, disks, ProbeSignature)) by[d.disk.devnode] = d;
    return by;
  };
  auto rule = decide({{"match-serial", "pool-part"}});
  ASSERT_TRUE(rule.count(p1) && rule.count(p2)) << "the kernel does not show the partitions";
  for (const auto& dev : {disk->devnode, p1, p2}) {
    std::cout << "match-serial: " << rule[dev].reason << "\n";
    EXPECT_FALSE(rule[dev].take) << rule[dev].reason;
  }
  auto glob = decide({{"devices", disk->devnode + "*"}});
  EXPECT_FALSE(glob[p1].take || glob[p2].take) << glob[p2].reason;
  auto lvm_part = decide({{"devices", p2}});
  EXPECT_TRUE(lvm_part[p2].take) << lvm_part[p2].reason;
  auto zfs_part = decide({{"devices", p1}});
  std::cout << "devices=" << p1 << ": " << zfs_part[p1].reason << "\n";
  EXPECT_FALSE(zfs_part[p1].take);
  EXPECT_THAT(zfs_part[p1].reason, HasSubstr("partition type 0xbf"));
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
  // -qq: lvm answers "no" to wiping a signature (issue 27 item 3).
  EXPECT_EQ(extend, (std::vector<std::string>{"/sbin/lvm", "vgextend", "-qq", vg, hot->devnode}));
  auto after = real.PvsOf(vg);
  before.insert(hot->devnode);
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace nodevol
