// The pure parts of LVM pools: LV names, pool options and capacity. The
// backend itself runs against real lvm in the VM tests (tests/vm/lvm_*).
#include <gtest/gtest.h>

#include "backend/lvm/capacity.h"
#include "backend/lvm/lv_name.h"
#include "backend/lvm/pool_options.h"
#include "base/names.h"

namespace nodevol {
namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;

TEST(LvName, ReadableWhenShort) {
  EXPECT_EQ(LvNameFor("pvc-0b1c2d3e-aaaa-bbbb-cccc-0123456789ab"), "nv-pvc-0b1c2d3e-aaaa-bbbb-cccc-0123456789ab");
  EXPECT_EQ(LvNameFor("data.1"), "nv-data.1");
}

TEST(LvName, HashedWhenLongOrReserved) {
  std::string long_name(200, 'a');
  ASSERT_TRUE(ValidateVolumeName(long_name).ok());
  std::string lv = LvNameFor(long_name);
  EXPECT_TRUE(ValidateLvmName("lv", lv).ok()) << lv;
  EXPECT_LE(lv.size(), 67u);
  // Different long names that share a prefix get different LVs.
  EXPECT_NE(lv, LvNameFor(long_name.substr(0, 199) + "b"));
  // A name lvm would refuse (reserved suffix) still yields a valid LV name.
  std::string reserved = LvNameFor("x_tdata");
  EXPECT_TRUE(ValidateLvmName("lv", reserved).ok()) << reserved;
  EXPECT_NE(reserved, LvNameFor("x.tdata"));
  // Same input, same output (the LV is found again after a restart).
  EXPECT_EQ(LvNameFor(long_name), lv);
}

TEST(LvName, Validation) {
  EXPECT_TRUE(ValidateLvmName("vg", "nodevol").ok());
  EXPECT_TRUE(ValidateLvmName("vg", "a+b_c.d-e").ok());
  for (const char* bad : {"", "-x", ".", "..", "a/b", "a b", "pool_tmeta", "snapshot1", "pvmove0", "é"})
    EXPECT_EQ(ValidateLvmName("vg", bad).code(), Status::Code::kInvalidArgument) << bad;
  EXPECT_EQ(ValidateLvmName("vg", std::string(128, 'a')).code(), Status::Code::kInvalidArgument);
}

Status Parse(const Params& p, LvmPoolOptions* o) { return ParseLvmPoolOptions("fast", p, o); }

TEST(LvmPoolOptions, Defaults) {
  LvmPoolOptions o;
  ASSERT_TRUE(Parse({{"vg", "nv"}}, &o).ok());
  EXPECT_EQ(o.vg, "nv");
  EXPECT_FALSE(o.thin);
  EXPECT_EQ(o.fs, "ext4");
  EXPECT_EQ(o.spare, 0u);
  EXPECT_TRUE(o.disks.empty());
}

TEST(LvmPoolOptions, Thin) {
  LvmPoolOptions o;
  ASSERT_TRUE(Parse({{"vg", "nv"}, {"type", "thin"}, {"thinpool", "tp"}, {"thinpool-size", "90%"},
                     {"overprovision", "2.5"}, {"fs", "xfs"}, {"spare", "1Gi"},
                     {"lvcreate-options", "--stripes 2  --stripesize 64k"}},
                    &o)
                  .ok());
  EXPECT_TRUE(o.thin);
  EXPECT_EQ(o.thinpool, "tp");
  EXPECT_EQ(o.thinpool_percent, 90u);
  EXPECT_DOUBLE_EQ(o.overprovision, 2.5);
  EXPECT_EQ(o.fs, "xfs");
  EXPECT_EQ(o.spare, GiB);
  EXPECT_EQ(o.lvcreate_options, (std::vector<std::string>{"--stripes", "2", "--stripesize", "64k"}));
  ASSERT_TRUE(Parse({{"vg", "nv"}, {"type", "thin"}, {"thinpool-size", "10Gi"}}, &o).ok());
  EXPECT_EQ(o.thinpool_bytes, 10 * GiB);
}

TEST(LvmPoolOptions, EveryBadValueNamesItsOption) {
  struct Case {
    Params p;
    const char* option;
  } cases[] = {
      {{}, "vg="},
      {{{"vg", "bad/name"}}, "vg"},
      {{{"vg", "nv"}, {"type", "raid"}}, "type"},
      {{{"vg", "nv"}, {"type", "thin"}, {"thinpool", "-x"}}, "thinpool"},
      {{{"vg", "nv"}, {"type", "thin"}, {"thinpool-size", "101%"}}, "thinpool-size"},
      {{{"vg", "nv"}, {"type", "thin"}, {"thinpool-size", "lots"}}, "thinpool-size"},
      {{{"vg", "nv"}, {"type", "thin"}, {"overprovision", "0.5"}}, "overprovision"},
      {{{"vg", "nv"}, {"type", "thin"}, {"overprovision", "2x"}}, "overprovision"},
      {{{"vg", "nv"}, {"fs", "btrfs"}}, "fs"},
      {{{"vg", "nv"}, {"spare", "-1"}}, "spare"},
      {{{"vg", "nv"}, {"lvcreate-options", "--size 1G"}}, "--size"},
      {{{"vg", "nv"}, {"lvcreate-options", "--addtag=x"}}, "--addtag"},
      {{{"vg", "nv"}, {"overprovision", "2"}}, "type=thin"},
      {{{"vg", "nv"}, {"colour", "red"}}, "colour"},
  };
  for (const Case& c : cases) {
    LvmPoolOptions o;
    Status st = Parse(c.p, &o);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << c.option;
    EXPECT_NE(st.message().find(c.option), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("pool fast"), std::string::npos) << st.message();
  }
}

LvmReport Report(uint64_t vg_size, uint64_t vg_free) {
  LvmReport r;
  r.vgs.push_back({"nv", "uuid", vg_size, vg_free, 4 * MiB, {}});
  return r;
}

LvmLv ThinPool(uint64_t size, double data, double meta) {
  LvmLv tp;
  tp.name = "tp";
  tp.vg = "nv";
  tp.attr = "twi-aotz--";
  tp.size = size;
  tp.data_percent = data;
  tp.metadata_percent = meta;
  return tp;
}

LvmLv ThinLv(const std::string& name, uint64_t size) {
  LvmLv lv;
  lv.name = name;
  lv.vg = "nv";
  lv.attr = "Vwi-a-tz--";
  lv.pool_lv = "tp";
  lv.size = size;
  return lv;
}

TEST(LvmCapacity, ThickIsVgFreeMinusSpare) {
  LvmPoolOptions o;
  o.vg = "nv";
  o.spare = 100 * MiB;
  Capacity c;
  ASSERT_TRUE(ComputeLvmCapacity(o, Report(GiB, 300 * MiB), &c).ok());
  EXPECT_EQ(c.total_bytes, GiB - 100 * MiB);
  EXPECT_EQ(c.free_bytes, 200 * MiB);
  EXPECT_FALSE(c.data_percent.has_value());
  ASSERT_TRUE(ComputeLvmCapacity(o, Report(GiB, 50 * MiB), &c).ok());
  EXPECT_EQ(c.free_bytes, 0u) << "spare larger than free must not wrap around";
  o.vg = "other";
  EXPECT_EQ(ComputeLvmCapacity(o, Report(GiB, GiB), &c).code(), Status::Code::kFailedPrecondition);
}

// One of the VG's disks gone: lvm would refuse every lvcreate there, and
// the free space it reports counts that disk. Thick and thin alike.
TEST(LvmCapacity, AVgMissingADiskHasNoRoom) {
  LvmPoolOptions o;
  o.vg = "nv";
  LvmReport r = Report(GiB, 300 * MiB);
  r.vgs[0].missing_pvs = 1;
  Capacity c;
  Status st = ComputeLvmCapacity(o, r, &c);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("volume group nv is missing 1 of its disks"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("vgreduce --removemissing"), std::string::npos) << st.message();
  o.thin = true;
  o.thinpool = "tp";
  EXPECT_EQ(ComputeLvmCapacity(o, r, &c).code(), Status::Code::kFailedPrecondition);
}

TEST(LvmCapacity, ThinIsBoundedByPromisesAndByRealUse) {
  LvmPoolOptions o;
  o.vg = "nv";
  o.thin = true;
  o.thinpool = "tp";
  o.overprovision = 3;
  LvmReport r = Report(2 * GiB, GiB);
  r.lvs = {ThinPool(GiB, 0, 5), ThinLv("a", GiB), ThinLv("b", 512 * MiB)};
  Capacity c;
  ASSERT_TRUE(ComputeLvmCapacity(o, r, &c).ok());
  EXPECT_EQ(c.total_bytes, 3 * GiB);
  EXPECT_EQ(c.free_bytes, 3 * GiB - GiB - 512 * MiB) << "promised sizes count, whatever is written";
  EXPECT_EQ(c.data_percent.value_or(-1), 0);

  // The pool is 80% full of real data: 200 MiB left x 3 = 600 MiB, less
  // than the 1.5 GiB the ratio would still promise.
  r.lvs[0].data_percent = 80;
  ASSERT_TRUE(ComputeLvmCapacity(o, r, &c).ok());
  EXPECT_NEAR(static_cast<double>(c.free_bytes), 3.0 * 0.2 * GiB, MiB);

  // Metadata nearly full: no new volumes at all.
  r.lvs[0].data_percent = 0;
  r.lvs[0].metadata_percent = kMetadataFullPercent;
  ASSERT_TRUE(ComputeLvmCapacity(o, r, &c).ok());
  EXPECT_EQ(c.free_bytes, 0u);
  EXPECT_EQ(c.metadata_percent.value_or(-1), kMetadataFullPercent);

  // Thin LVs of another pool in the same VG do not count.
  r.lvs[0].metadata_percent = 1;
  LvmLv other = ThinLv("c", 10 * GiB);
  other.pool_lv = "tp2";
  r.lvs.push_back(other);
  ASSERT_TRUE(ComputeLvmCapacity(o, r, &c).ok());
  EXPECT_EQ(c.free_bytes, 3 * GiB - GiB - 512 * MiB);

  // A pool device-mapper reports failed takes nothing, and says why.
  r.lvs[0].fault = "has failed (device-mapper status \"Fail\")";
  Status failed = ComputeLvmCapacity(o, r, &c);
  EXPECT_EQ(failed.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(failed.message().find("thin pool nv/tp has failed"), std::string::npos) << failed.message();
  r.lvs[0].fault.clear();

  o.thinpool = "missing";
  EXPECT_EQ(ComputeLvmCapacity(o, r, &c).code(), Status::Code::kFailedPrecondition);
}

// issue 27 item 8: an inactive thin pool reports no usage and read as
// 0 % used, so an overprovisioned pool promised space already written.
TEST(LvmCapacity, InactiveThinPoolHasNoKnownRoom) {
  LvmPoolOptions o;
  o.vg = "nv";
  o.thin = true;
  o.thinpool = "tp";
  o.overprovision = 4;
  LvmReport r = Report(2 * GiB, GiB);
  r.lvs = {ThinPool(GiB, 0, 0)};
  r.lvs[0].attr = "twi---tz--";
  Capacity c;
  Status st = ComputeLvmCapacity(o, r, &c);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("lvchange -ay nv/tp"), std::string::npos) << st.message();
}

TEST(LvmCapacity, RoundToExtents) {
  EXPECT_EQ(RoundToExtents(1, 4 * MiB), 4 * MiB);
  EXPECT_EQ(RoundToExtents(4 * MiB, 4 * MiB), 4 * MiB);
  EXPECT_EQ(RoundToExtents(4 * MiB + 1, 4 * MiB), 8 * MiB);
  EXPECT_EQ(RoundToExtents(123, 0), 123u);
}

}  // namespace
}  // namespace nodevol
