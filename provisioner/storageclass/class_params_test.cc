#include "storageclass/class_params.h"

#include <gtest/gtest.h>

namespace nodevol::provisioner {
namespace {

Status Parse(std::map<std::string, std::string> params, ClassParams* out, std::vector<std::string> mo = {}) {
  return ParseClassParams(params, mo, out);
}

TEST(ClassParams, LvmClass) {
  ClassParams p;
  ASSERT_TRUE(Parse({{"backend", "lvm"}, {"pool", "fast"}, {"fsType", "xfs"}, {"mode", "0750"}}, &p).ok());
  EXPECT_EQ(p.backend, "lvm");
  EXPECT_EQ(p.pool, "fast");
  EXPECT_EQ(p.fs_type, "xfs");
  EXPECT_EQ(p.volume_params, (std::map<std::string, std::string>{{"mode", "0750"}}));
}

TEST(ClassParams, VolumeSourceIsCsiUnlessTheClassSaysFlexVolume) {
  ClassParams p;
  ASSERT_TRUE(Parse({{"pool", "fast"}}, &p).ok());
  EXPECT_TRUE(p.IsCsi());
  ASSERT_TRUE(Parse({{"pool", "fast"}, {"volumeSource", "flexVolume"}}, &p).ok());
  EXPECT_FALSE(p.IsCsi());
  EXPECT_TRUE(p.volume_params.empty()) << "volumeSource is the provisioner's, not nodevold's";
}

TEST(ClassParams, NfsKeysImplyNfsAndPassThrough) {
  ClassParams p;
  ASSERT_TRUE(Parse({{"pool", "shared"}, {"pathPattern", "${namespace}/${pvcName}"}, {"onDelete", "archive"}}, &p,
                    {"nfsvers=4.1", "hard"})
                  .ok());
  EXPECT_TRUE(p.IsNfs());
  EXPECT_EQ(p.volume_params.at("pathPattern"), "${namespace}/${pvcName}");
  EXPECT_EQ(p.volume_params.at("onDelete"), "archive");
  EXPECT_EQ(p.mount_options, (std::vector<std::string>{"nfsvers=4.1", "hard"}));
}

// Every refusal names the parameter so the event tells the user what to fix.
TEST(ClassParams, RefusalsNameTheParameter) {
  struct Case {
    std::map<std::string, std::string> params;
    std::vector<std::string> mount_options;
    std::string named;
  };
  std::vector<Case> cases = {
      {{{"pool", "p"}, {"colour", "red"}}, {}, "colour"},
      {{{"backend", "ceph"}, {"pool", "p"}}, {}, "backend"},
      {{{"backend", "lvm"}}, {}, "pool"},
      {{{"pool", "p"}, {"fsType", "btrfs"}}, {}, "fsType"},
      {{{"backend", "dir"}, {"pool", "p"}, {"fsType", "ext4"}}, {}, "fsType"},
      {{{"pool", "p"}, {"mode", "0999"}}, {}, "mode"},
      {{{"pool", "p"}, {"uid", "-1"}}, {}, "uid"},
      {{{"backend", "lvm"}, {"pool", "p"}, {"share", "/x"}}, {}, "share"},
      {{{"pool", "p"}, {"onDelete", "shred"}}, {}, "onDelete"},
      {{{"pool", "p"}, {"onDelete", "delete"}, {"archiveOnDelete", "true"}}, {}, "archiveOnDelete"},
      {{{"pool", "p"}, {"share", "/x"}, {"subDir", "a"}}, {}, "share"},
      {{{"pool", "p"}}, {"ro,noexec"}, "mountOptions"},
      {{{"pool", "p"}, {"volumeSource", "hostPath"}}, {}, "volumeSource"},
  };
  for (const auto& c : cases) {
    ClassParams p;
    Status st = Parse(c.params, &p, c.mount_options);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << c.named;
    EXPECT_NE(st.message().find(c.named), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace nodevol::provisioner
