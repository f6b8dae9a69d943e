#include "options.h"

#include <gtest/gtest.h>

namespace nodevol::flex {
namespace {

Options MustParse(const std::string& json) {
  Options o;
  std::string error;
  EXPECT_TRUE(ParseMountOptions(json, &o, &error)) << error;
  return o;
}

std::string MustFail(const std::string& json) {
  Options o;
  std::string error;
  EXPECT_FALSE(ParseMountOptions(json, &o, &error)) << json;
  return error;
}

TEST(FlexOptions, NamedVolumeWithKubeletKeys) {
  Options o = MustParse(R"({"kubernetes.io/fsType":"","kubernetes.io/readwrite":"rw",
    "kubernetes.io/pod.uid":"u1","kubernetes.io/pod.name":"web-0","kubernetes.io/pod.namespace":"ns",
    "kubernetes.io/serviceAccount.name":"sa","kubernetes.io/pvOrVolumeName":"pv1",
    "kubernetes.io/mounterArgs.FsGroup":"2000","volume":"pvc-1","some.future/key":"x"})");
  EXPECT_EQ(o.volume, "pvc-1");
  EXPECT_FALSE(o.inline_spec);
  EXPECT_FALSE(o.read_only);
  ASSERT_TRUE(o.fs_group);
  EXPECT_EQ(*o.fs_group, 2000u);
  EXPECT_EQ(o.pod.uid, "u1");
  EXPECT_EQ(o.pod.name, "web-0");
  EXPECT_EQ(o.pod.namespace_, "ns");
  EXPECT_EQ(o.pod.service_account, "sa");
  EXPECT_EQ(o.pool, "");
}

// An NFS PV names its pool, so a node that did not make the volume knows
// which export holds its record.
TEST(FlexOptions, NamedVolumeWithPool) {
  Options o = MustParse(R"({"kubernetes.io/pod.namespace":"ns","volume":"pvc-1","pool":"shared"})");
  EXPECT_EQ(o.volume, "pvc-1");
  EXPECT_EQ(o.pool, "shared");
  EXPECT_FALSE(o.inline_spec);
}

TEST(FlexOptions, ReadOnlyAndMountOptions) {
  Options o = MustParse(R"({"kubernetes.io/pod.namespace":"ns","kubernetes.io/readwrite":"ro","volume":"v","mountOptions":"nosuid, nodev,,noexec"})");
  EXPECT_TRUE(o.read_only);
  EXPECT_EQ(o.mount_options, (std::vector<std::string>{"nosuid", "nodev", "noexec"}));
  EXPECT_FALSE(o.fs_group);
}

TEST(FlexOptions, EscapedCharactersArriveDecoded) {
  Options o = MustParse(R"({"volume":"v","kubernetes.io/pod.namespace":"ns","kubernetes.io/pod.name":"a\u003cb\u003e\u0026c"})");
  EXPECT_EQ(o.pod.name, "a<b>&c");
}

TEST(FlexOptions, InlineVolume) {
  Options o = MustParse(R"({"pool":"fast","size":"64Mi","mode":"0700","uid":"10","kubernetes.io/pod.namespace":"ns",
    "kubernetes.io/fsType":"xfs","kubernetes.io/secret/token":"c2VjcmV0","k8s.io/x":"y"})");
  ASSERT_TRUE(o.inline_spec);
  EXPECT_EQ(o.inline_spec->pool, "fast");
  EXPECT_EQ(o.inline_spec->size_bytes, 64u << 20);
  EXPECT_EQ(o.inline_spec->fs_type, "xfs");
  EXPECT_EQ(o.inline_spec->parameters, (std::map<std::string, std::string>{{"mode", "0700"}, {"uid", "10"}}));
}

TEST(FlexOptions, UserFsTypeWinsOverKubelets) {
  Options o = MustParse(R"({"pool":"p","size":"1Gi","fsType":"ext4","kubernetes.io/fsType":"xfs","kubernetes.io/pod.namespace":"ns"})");
  EXPECT_EQ(o.inline_spec->fs_type, "ext4");
}

TEST(FlexOptions, Errors) {
  EXPECT_NE(MustFail(R"({"kubernetes.io/readwrite":"rw","kubernetes.io/pod.namespace":"ns"})").find("option volume is required"), std::string::npos);
  EXPECT_NE(MustFail(R"({"pool":"p","kubernetes.io/pod.namespace":"ns"})").find("option size is required"), std::string::npos);
  EXPECT_NE(MustFail(R"({"pool":"p","size":"-1","kubernetes.io/pod.namespace":"ns"})").find("invalid option size"), std::string::npos);
  EXPECT_NE(MustFail(R"({"volume":"v","kubernetes.io/readwrite":"maybe"})").find("readwrite"), std::string::npos);
  EXPECT_NE(MustFail(R"({"volume":"v","kubernetes.io/mounterArgs.FsGroup":"12x"})").find("FsGroup"),
            std::string::npos);
  EXPECT_NE(MustFail(R"({"volume":1})").find("\"volume\" must be a string"), std::string::npos);
  EXPECT_NE(MustFail(R"(["volume"])").find("JSON object"), std::string::npos);
}

// Without the pod's namespace nodevold could not tell whose volume it is.
TEST(FlexOptions, MountWithoutThePodNamespaceFails) {
  EXPECT_NE(MustFail(R"({"volume":"pvc-1","kubernetes.io/readwrite":"rw"})").find("kubernetes.io/pod.namespace"),
            std::string::npos);
  EXPECT_NE(MustFail(R"({"pool":"p","size":"1Gi"})").find("kubernetes.io/pod.namespace"), std::string::npos);
}

TEST(FlexOptions, ErrorsNeverQuoteSecrets) {
  // Invalid JSON right after a secret value: the parser's own message would
  // quote the input around the error.
  std::string error = MustFail(R"({"kubernetes.io/secret/password":"aHVudGVyMg==", oops})");
  EXPECT_EQ(error.find("aHVudGVyMg"), std::string::npos) << error;
  EXPECT_NE(error.find("not valid JSON"), std::string::npos);
  error = MustFail(R"({"kubernetes.io/secret/password":"aHVudGVyMg=="})");
  EXPECT_EQ(error.find("aHVudGVyMg"), std::string::npos) << error;
}

TEST(FlexOptions, VolumeNameForExpand) {
  std::string volume, error;
  EXPECT_TRUE(ParseVolumeName(R"({"volume":"pvc-9","kubernetes.io/readwrite":"rw"})", &volume, &error));
  EXPECT_EQ(volume, "pvc-9");
  EXPECT_FALSE(ParseVolumeName(R"({"pool":"p","size":"1Gi"})", &volume, &error));
  EXPECT_NE(error.find("option volume is required"), std::string::npos);
}

}  // namespace
}  // namespace nodevol::flex
