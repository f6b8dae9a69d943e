// The pure parts of LvmProbe: a PV label's metadata stamp (real PVs in
// the VM test vm_lvm_probe), a thin-pool status line, lvm's UUID form.
#include "backend/lvm/lvm_probe.h"

#include <endian.h>
#include <fcntl.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "backend/lvm/filesystem.h"
#include "backend/lvm/lvm.h"
#include "process/run.h"

namespace nodevol {
namespace {

void Put64(std::string* b, size_t at, uint64_t v) {
  v = htole64(v);
  std::memcpy(&(*b)[at], &v, 8);
}
void Put32(std::string* b, size_t at, uint32_t v) {
  v = htole32(v);
  std::memcpy(&(*b)[at], &v, 4);
}

// A PV as pvcreate writes it: label in sector 1, one data area at 1 MiB,
// one metadata area at 4 KiB whose committed text is at `text_offset`.
struct Pv {
  std::string label = std::string(4096, '\0');
  std::map<uint64_t, std::string> mdas;

  Pv(uint64_t text_offset, uint64_t text_size, uint32_t text_checksum) {
    const size_t l = 512;
    std::memcpy(&label[l], "LABELONE", 8);
    Put64(&label, l + 8, 1);
    Put32(&label, l + 20, 32);
    std::memcpy(&label[l + 24], "LVM2 001", 8);
    size_t at = l + 32 + 32 + 8;
    Put64(&label, at, 1 << 20);  // data area
    at += 32;                    // and its terminator
    Put64(&label, at, 4096);     // metadata area
    Put64(&label, at + 8, (1 << 20) - 4096);
    std::string h(512, '\0');
    std::memcpy(&h[4], " LVM2 x[5A%r0N*>", 16);
    Put64(&h, 40, text_offset);
    Put64(&h, 48, text_size);
    Put32(&h, 56, text_checksum);
    mdas[4096] = h;
  }
  Status Stamp(std::string* stamp) const {
    return StampFromLabel(label,
                          [&](uint64_t offset, std::string* sector) {
                            auto it = mdas.find(offset);
                            if (it == mdas.end()) return Status::Internal("read past the device");
                            *sector = it->second;
                            return Status::Ok();
                          },
                          stamp);
  }
};

TEST(MetadataStamp, ChangesWithTheCommittedText) {
  std::string a, b, c;
  ASSERT_TRUE(Pv(4608, 1200, 0xabc).Stamp(&a).ok());
  ASSERT_TRUE(Pv(4608, 1200, 0xabc).Stamp(&b).ok());
  EXPECT_EQ(a, b);
  ASSERT_TRUE(Pv(5120, 1250, 0xdef).Stamp(&c).ok());  // lvm wrote the next seqno
  EXPECT_NE(a, c);
  std::string d;
  ASSERT_TRUE(Pv(4608, 1200, 0xabd).Stamp(&d).ok());  // same place, other text
  EXPECT_NE(a, d);
}

TEST(MetadataStamp, RefusesWhatIsNoPvLabel) {
  std::string stamp;
  Pv blank(4608, 1200, 1);
  blank.label = std::string(4096, '\0');
  EXPECT_EQ(blank.Stamp(&stamp).code(), Status::Code::kInternal);

  Pv wrong_sector(4608, 1200, 1);  // a label that says it is elsewhere
  Put64(&wrong_sector.label, 512 + 8, 3);
  EXPECT_FALSE(wrong_sector.Stamp(&stamp).ok());

  Pv hostile(4608, 1200, 1);  // the PV header pointed past its sector
  Put32(&hostile.label, 512 + 20, 4000);
  EXPECT_FALSE(hostile.Stamp(&stamp).ok());

  Pv endless(4608, 1200, 1);  // an area list with no terminator
  for (size_t at = 512 + 72; at + 16 <= 1024; at += 16) Put64(&endless.label, at, 1 << 20);
  EXPECT_FALSE(endless.Stamp(&stamp).ok());

  Pv no_magic(4608, 1200, 1);
  no_magic.mdas[4096][5] = 'X';
  EXPECT_FALSE(no_magic.Stamp(&stamp).ok());

  Pv unreadable(4608, 1200, 1);
  unreadable.mdas.clear();
  EXPECT_FALSE(unreadable.Stamp(&stamp).ok());
}

TEST(ThinPoolStatus, PercentagesAsLvmReportsThem) {
  double data = 0, meta = 0;
  ASSERT_TRUE(ParseThinPoolStatus("0 1066/4161600 256/4096 - rw discard_passdown queue_if_no_space - 1024", &data,
                                  &meta)
                  .ok());
  EXPECT_DOUBLE_EQ(data, 6.25);
  EXPECT_NEAR(meta, 0.0256, 0.0001);
  // Pools that take no new volume say why (vm_lvm_faults: a pool's disk
  // failing every I/O leaves "Error").
  EXPECT_EQ(ParseThinPoolStatus("Fail", &data, &meta).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(ParseThinPoolStatus("Error", &data, &meta).code(), Status::Code::kFailedPrecondition);
  Status ro = ParseThinPoolStatus("0 1066/4161600 256/4096 - ro discard_passdown queue_if_no_space needs_check 1024",
                                  &data, &meta);
  EXPECT_EQ(ro.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(ro.message().find("read-only"), std::string::npos) << ro.message();
  // A full pool is healthy: its figures say it is full.
  ASSERT_TRUE(ParseThinPoolStatus("2 118/1024 1024/1024 - out_of_data_space discard_passdown error_if_no_space - 256",
                                  &data, &meta)
                  .ok());
  EXPECT_DOUBLE_EQ(data, 100.0);
  EXPECT_FALSE(ParseThinPoolStatus("0 10/0 1/2 - rw", &data, &meta).ok());
  EXPECT_FALSE(ParseThinPoolStatus("0 10/20 5/2 - rw", &data, &meta).ok());
  EXPECT_FALSE(ParseThinPoolStatus("", &data, &meta).ok());
}

TEST(LvmUuid, DashedAsLvmPrintsIt) {
  EXPECT_EQ(DashedLvmUuid("abcdef0123456789ABCDEFghijklmnop"), "abcdef-0123-4567-89AB-CDEF-ghij-klmnop");
  EXPECT_EQ(DashedLvmUuid("short"), "");
}

// ---- RealLvmProbe: only in the VM (tests/vm/lvm_volume_test.sh thin) ----
// NODEVOL_REAL_LVM_VG names a VG with a thin pool NODEVOL_REAL_LVM_THINPOOL;
// the tests make and remove LVs named probe-* in it.

const char* RealVg() { return std::getenv("NODEVOL_REAL_LVM_VG"); }

std::string LvmBinary() {
  std::string binary;
  return FindTool("lvm", &binary).ok() ? binary : "lvm";
}

std::string Lvs(const std::string& what, const std::string& field) {
  RunResult r;
  RunOptions o;
  o.env = {"DM_DISABLE_UDEV=1"};
  Status st = RunChecked({LvmBinary(), "lvs", "--noheadings", "-o", field, what}, o, &r);
  std::string out = st.ok() ? r.out : "";
  out.erase(0, out.find_first_not_of(" "));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

Status LvmCmd(std::vector<std::string> args) {
  args.insert(args.begin(), LvmBinary());
  RunResult r;
  RunOptions o;
  o.env = {"DM_DISABLE_UDEV=1"};
  Status st = RunChecked(args, o, &r);
  if (!st.ok()) ADD_FAILURE() << st.message();
  return st;
}

#define REAL_LVM_OR_SKIP()                                                           \
  if (!RealVg()) GTEST_SKIP() << "only in the VM (NODEVOL_REAL_LVM_VG unset)"; \
  const std::string vg = RealVg();                                                    \
  const std::string tp = std::getenv("NODEVOL_REAL_LVM_THINPOOL") ? std::getenv("NODEVOL_REAL_LVM_THINPOOL") : "tp"

TEST(RealLvmProbe, StampFollowsEveryMetadataChangeAndNothingElse) {
  REAL_LVM_OR_SKIP();
  Lvm lvm(LvmBinary(), false);
  LvmReport report;
  ASSERT_TRUE(lvm.NewReport(&report).ok());
  std::vector<std::string> pvs;
  for (const LvmPv& pv : report.pvs) pvs.push_back(pv.name);
  ASSERT_FALSE(pvs.empty());
  auto probe = MakeLvmProbe();
  std::string s0, s1, s2, s3;
  ASSERT_TRUE(probe->MetadataStamp(pvs, &s0).ok());
  ASSERT_TRUE(LvmCmd({"lvs", vg}).ok());  // reading changes nothing
  ASSERT_TRUE(lvm.NewReport(&report).ok());
  ASSERT_TRUE(probe->MetadataStamp(pvs, &s1).ok());
  EXPECT_EQ(s0, s1);
  ASSERT_TRUE(LvmCmd({"lvcreate", "-qq", "-y", "-n", "probe-a", "-V", "8m", "--thinpool", vg + "/" + tp}).ok());
  ASSERT_TRUE(probe->MetadataStamp(pvs, &s2).ok());
  EXPECT_NE(s1, s2) << "lvcreate";
  ASSERT_TRUE(LvmCmd({"lvchange", "--addtag", "x", vg + "/probe-a"}).ok());
  ASSERT_TRUE(probe->MetadataStamp(pvs, &s3).ok());
  EXPECT_NE(s2, s3) << "a tag";
  ASSERT_TRUE(LvmCmd({"lvremove", "-qq", "-y", vg + "/probe-a"}).ok());
}

TEST(RealLvmProbe, ActiveLvAndTargetsAsLvmSeesThem) {
  REAL_LVM_OR_SKIP();
  ASSERT_TRUE(LvmCmd({"lvcreate", "-qq", "-y", "-n", "probe-b", "-L", "8m", vg}).ok());
  auto probe = MakeLvmProbe();
  std::string vg_uuid, lv_uuid;
  int major = -1, minor = -1;
  ASSERT_TRUE(probe->ActiveLv("/dev/" + vg + "/probe-b", &vg_uuid, &lv_uuid, &major, &minor).ok());
  EXPECT_EQ(lv_uuid, Lvs(vg + "/probe-b", "lv_uuid"));
  EXPECT_EQ(vg_uuid, Lvs(vg + "/probe-b", "vg_uuid"));
  EXPECT_EQ(std::to_string(minor), Lvs(vg + "/probe-b", "lv_kernel_minor"));
  std::vector<std::string> types;
  ASSERT_TRUE(probe->TargetTypes(major, minor, &types).ok());
  EXPECT_EQ(types, std::vector<std::string>{"linear"});
  // An operator's thick snapshot stacks on it.
  ASSERT_TRUE(LvmCmd({"lvcreate", "-qq", "-y", "-s", "-n", "probe-b-snap", "-L", "4m", vg + "/probe-b"}).ok());
  ASSERT_TRUE(probe->TargetTypes(major, minor, &types).ok());
  EXPECT_EQ(types, std::vector<std::string>{"snapshot-origin"});
  EXPECT_FALSE(probe->ActiveLv("/dev/null", &vg_uuid, &lv_uuid, &major, &minor).ok());
  ASSERT_TRUE(LvmCmd({"lvremove", "-qq", "-y", vg + "/probe-b-snap"}).ok());
  ASSERT_TRUE(LvmCmd({"lvremove", "-qq", "-y", vg + "/probe-b"}).ok());
}

TEST(RealLvmProbe, ThinPoolUsageIsLvmsDataPercent) {
  REAL_LVM_OR_SKIP();
  ASSERT_TRUE(LvmCmd({"lvcreate", "-qq", "-y", "-n", "probe-c", "-V", "64m", "--thinpool", vg + "/" + tp}).ok());
  {
    // Written through and synced: the pool provisions the blocks.
    int fd = ::open(("/dev/" + vg + "/probe-c").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string block(1 << 20, 'x');
    for (int i = 0; i < 24; ++i) ASSERT_EQ(::write(fd, block.data(), block.size()), ssize_t(block.size()));
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  auto probe = MakeLvmProbe();
  double data = -1, meta = -1;
  ASSERT_TRUE(probe->ThinPoolUsage(Lvs(vg + "/" + tp, "vg_uuid"), Lvs(vg + "/" + tp, "lv_uuid"), &data, &meta).ok());
  const double lvm_data = std::stod(Lvs(vg + "/" + tp, "data_percent"));
  const double lvm_meta = std::stod(Lvs(vg + "/" + tp, "metadata_percent"));
  EXPECT_NEAR(data, lvm_data, 0.01);
  EXPECT_NEAR(meta, lvm_meta, 0.01);
  EXPECT_GT(data, 0.0);
  ASSERT_TRUE(LvmCmd({"lvremove", "-qq", "-y", vg + "/probe-c"}).ok());
}

}  // namespace
}  // namespace nodevol
