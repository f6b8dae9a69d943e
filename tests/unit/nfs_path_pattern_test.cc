// Path patterns of NFS subdirectory volumes (backend/nfs/path_pattern.h):
// rendering, the provisioners' spellings, and every way out of the export
// refused, whether it comes from the pattern or from a claim's values.
#include <gtest/gtest.h>

#include "backend/nfs/path_pattern.h"

namespace nodevol {
namespace {

Params Claim() {
  return {{"nodevol.io/pvc-namespace", "team-a"},
          {"nodevol.io/pvc-name", "data"},
          {"nodevol.io/pv-name", "pvc-1234"},
          {"nodevol.io/pvc-annotation.nfs.io/storage-path", "projects/x"},
          {"nodevol.io/pvc-annotation.owner", "alice"},
          {"nodevol.io/pvc-label.app", "web"}};
}

std::string Render(const std::string& pattern, Params p = Claim(), const std::string& volume = "vol-1") {
  std::string out;
  Status st = RenderPathPattern(pattern, p, volume, &out);
  return st.ok() ? out : "ERROR: " + st.message();
}

bool Refused(const std::string& pattern, Params p = Claim()) {
  std::string out;
  Status st = RenderPathPattern(pattern, p, "vol-1", &out);
  if (st.ok()) return false;
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  return true;
}

TEST(NfsPathPattern, DefaultIsTheProvisionersName) {
  EXPECT_EQ(Render(kDefaultPathPattern), "team-a-data-pvc-1234");
}

TEST(NfsPathPattern, EverySpelling) {
  EXPECT_EQ(Render("${namespace}/${pvcName}/${pvName}"), "team-a/data/pvc-1234");
  EXPECT_EQ(Render("${.PVC.namespace}/${.PVC.name}/${.PV.name}"), "team-a/data/pvc-1234");
  EXPECT_EQ(Render("${pvc.metadata.namespace}/${pvc.metadata.name}/${pv.metadata.name}"), "team-a/data/pvc-1234");
  EXPECT_EQ(Render("${.PVC.annotations.owner}-${.PVC.labels.app}"), "alice-web");
  // nfs-subdir-external-provisioner's documented example.
  EXPECT_EQ(Render("${.PVC.namespace}/${.PVC.annotations.nfs.io/storage-path}"), "team-a/projects/x");
}

TEST(NfsPathPattern, LiteralsAndDollars) {
  EXPECT_EQ(Render("static"), "static");
  EXPECT_EQ(Render("a/b/c"), "a/b/c");
  EXPECT_EQ(Render("cost$5-${pvcName}"), "cost$5-data");
  EXPECT_EQ(Render("x$"), "x$");
  EXPECT_EQ(Render("${pvcName}${pvcName}"), "datadata");
}

TEST(NfsPathPattern, PvNameFallsBackToTheVolumeName) {
  Params p = Claim();
  p.erase("nodevol.io/pv-name");
  EXPECT_EQ(Render("${pvName}", p, "vol-7"), "vol-7");
}

TEST(NfsPathPattern, UnknownVariableIsNamed) {
  std::string r = Render("${namespace}/${colour}");
  EXPECT_NE(r.find("unknown variable ${colour}"), std::string::npos) << r;
  EXPECT_TRUE(Refused("${}"));
  EXPECT_TRUE(Refused("${.PVC.annotations.}"));
  EXPECT_TRUE(Refused("${.PVC.labels.}"));
  EXPECT_TRUE(Refused("${PVCNAME}"));
  EXPECT_TRUE(Refused("${ namespace}"));
}

TEST(NfsPathPattern, MissingClaimValuesAreErrorsNamingTheParameter) {
  std::string r = Render("${.PVC.annotations.missing}");
  EXPECT_NE(r.find("nodevol.io/pvc-annotation.missing"), std::string::npos) << r;
  r = Render("${.PVC.labels.tier}");
  EXPECT_NE(r.find("nodevol.io/pvc-label.tier"), std::string::npos) << r;
  r = Render("${namespace}", {});
  EXPECT_NE(r.find("nodevol.io/pvc-namespace"), std::string::npos) << r;
  r = Render(kDefaultPathPattern, {{"nodevol.io/pvc-namespace", "ns"}});
  EXPECT_NE(r.find("nodevol.io/pvc-name"), std::string::npos) << r;
}

TEST(NfsPathPattern, UnterminatedVariable) {
  std::string r = Render("a-${pvcName");
  EXPECT_NE(r.find("not closed"), std::string::npos) << r;
  EXPECT_TRUE(Refused("${"));
}

TEST(NfsPathPattern, EscapesFromThePatternAreRefused) {
  for (const char* bad : {"", "/", "/abs", "/${namespace}", "..", "../x", "x/..", "x/../y", "a/./b", ".", "./a",
                          "a//b", "a/", "a/b/", "//", "a..b", "...", "x/.../y", ".nodevol-trash", "a/.nodevol"})
    EXPECT_TRUE(Refused(bad)) << "\"" << bad << "\"";
}

TEST(NfsPathPattern, EscapesThroughClaimValuesAreRefused) {
  for (const char* value : {"..", "../../etc", "/etc", "a/../../b", "", "a//b", "x/", "/", ".", "a/./b", "..."}) {
    Params p = Claim();
    p["nodevol.io/pvc-annotation.owner"] = value;
    EXPECT_TRUE(Refused("${.PVC.annotations.owner}", p)) << "\"" << value << "\"";
    p["nodevol.io/pvc-name"] = value;
    EXPECT_TRUE(Refused("${namespace}/${pvcName}", p)) << "\"" << value << "\"";
  }
  // An empty namespace makes an empty segment.
  Params p = Claim();
  p["nodevol.io/pvc-namespace"] = "";
  EXPECT_TRUE(Refused("${namespace}/${pvcName}", p));
  // ...but "-data-pvc-1234" is a fine name.
  EXPECT_EQ(Render(kDefaultPathPattern, p), "-data-pvc-1234");
}

TEST(NfsPathPattern, ControlCharactersAndNul) {
  Params p = Claim();
  p["nodevol.io/pvc-name"] = std::string("a\0b", 3);
  EXPECT_TRUE(Refused("${pvcName}", p));
  p["nodevol.io/pvc-name"] = "a\nb";
  EXPECT_TRUE(Refused("${pvcName}", p));
  p["nodevol.io/pvc-name"] = "a\x7f";
  EXPECT_TRUE(Refused("${pvcName}", p));
  EXPECT_TRUE(Refused(std::string("x\0y", 3)));
  EXPECT_TRUE(Refused("tab\there"));
  // Non-ASCII UTF-8 is fine.
  p["nodevol.io/pvc-name"] = "d\xc3\xa4ten";
  EXPECT_EQ(Render("${pvcName}", p), "d\xc3\xa4ten");
}

TEST(NfsPathPattern, Lengths) {
  Params p = Claim();
  p["nodevol.io/pvc-name"] = std::string(255, 'a');
  EXPECT_EQ(Render("${pvcName}", p), std::string(255, 'a'));
  EXPECT_TRUE(Refused("x${pvcName}", p));  // 256 bytes in one segment
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "abcd/";
  deep += "x";
  EXPECT_TRUE(Refused(deep));  // more than 1024 bytes in all
}

TEST(NfsPathPattern, CheckSubdirPathAlone) {
  EXPECT_TRUE(CheckSubdirPath("a").ok());
  EXPECT_TRUE(CheckSubdirPath("a/b-c_d.e").ok());
  EXPECT_TRUE(CheckSubdirPath(".hidden").ok());
  EXPECT_TRUE(CheckSubdirPath("archived-x").ok());
  EXPECT_FALSE(CheckSubdirPath("a/../b").ok());
  EXPECT_FALSE(CheckSubdirPath("/a").ok());
}

}  // namespace
}  // namespace nodevol
