// SpecDifference, the one "is this the volume asked for again" check the
// Node API's CreateVolume and CSI's share, and kubelet's inline volume ids.
#include <gtest/gtest.h>

#include "csi/find_volume.h"
#include "node/volume.h"

namespace nodevol {
namespace {

VolumeSpec Fs() {
  VolumeSpec s;
  s.name = "pv-1";
  s.pool = "fast";
  s.size_bytes = 64 << 20;
  s.fs_type = "ext4";
  s.parameters = {{"mode", "0770"}};
  return s;
}

TEST(SpecDifference, SameSpecIsNoDifference) { EXPECT_EQ(SpecDifference(Fs(), Fs()), ""); }

// issue 58 item 6: CSI's CreateVolume, asked for raw block under the name
// of a filesystem volume, answered OK with the filesystem volume.
TEST(SpecDifference, RawBlockIsNotAFilesystemWhateverTheSize) {
  VolumeSpec block = Fs();
  block.block = true;
  EXPECT_EQ(SpecDifference(Fs(), block, /*compare_size=*/false), "a filesystem (asked: raw block)");
  EXPECT_EQ(SpecDifference(block, Fs()), "raw block access (asked: a filesystem)");
}

TEST(SpecDifference, SizeCountsUnlessLeftOut) {
  VolumeSpec bigger = Fs();
  bigger.size_bytes *= 2;
  EXPECT_NE(SpecDifference(Fs(), bigger).find("size"), std::string::npos);
  EXPECT_EQ(SpecDifference(Fs(), bigger, /*compare_size=*/false), "");
}

TEST(SpecDifference, EveryOtherFieldCounts) {
  std::vector<VolumeSpec> others(5, Fs());
  others[0].pool = "slow";
  others[1].fs_type = "xfs";
  others[2].parameters["mode"] = "0700";
  others[3].from_snapshot = "snap-1";
  others[4].from_volume = "pv-0";
  for (const VolumeSpec& o : others) EXPECT_NE(SpecDifference(Fs(), o, /*compare_size=*/false), "");
}

TEST(InlineVolumeId, OnlyKubeletsForm) {
  const std::string hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  EXPECT_TRUE(csi::IsInlineVolumeId("csi-" + hex));
  // A PV may well be named csi-something: it is a claim's volume.
  EXPECT_FALSE(csi::IsInlineVolumeId("csi-0123abcd"));
  EXPECT_FALSE(csi::IsInlineVolumeId("csi-" + hex.substr(1) + "G"));
  EXPECT_FALSE(csi::IsInlineVolumeId("pvc-" + hex));
  EXPECT_FALSE(csi::IsInlineVolumeId("csi-" + hex + "0"));
}

}  // namespace
}  // namespace nodevol
