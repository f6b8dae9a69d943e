// NFS mount options, pool options and the backend's reading of volume
// parameters (what CreateVolume accepts, before any server is asked).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "backend/nfs/mount_options.h"
#include "backend/nfs/nfs_backend.h"
#include "backend/nfs/pool_options.h"

namespace nodevol {
namespace {

std::string Canon(const std::string& text) {
  NfsMountOptions o;
  Status st = o.Add(text);
  return st.ok() ? o.ToString() : "ERROR: " + st.message();
}

TEST(NfsMountOptions, KnownOptionsAreCanonical) {
  EXPECT_EQ(Canon(""), "");
  EXPECT_EQ(Canon("vers=4.2,hard,timeo=600"), "hard,timeo=600,vers=4.2");
  // Order, separators and the nfsvers spelling do not matter.
  EXPECT_EQ(Canon("timeo=600 hard  nfsvers=4.2"), Canon("vers=4.2,hard,timeo=600"));
  EXPECT_EQ(Canon("rw,vers=3"), "vers=3");
  // Sorted by group (ac, actimeo, atime, cto, ...), one option each.
  EXPECT_EQ(Canon("proto=tcp,port=2049,rsize=1048576,wsize=65536,nconnect=4,sec=krb5p,lookupcache=pos,"
                  "actimeo=3,noac,noatime,nodiratime,nosuid,nodev,noexec,local_lock=none,minorversion=1,"
                  "noresvport,fsc,nosharecache,retrans=3,softerr,nolock,nocto"),
            "noac,actimeo=3,noatime,nocto,nodev,nodiratime,noexec,fsc,softerr,local_lock=none,nolock,"
            "lookupcache=pos,minorversion=1,nconnect=4,port=2049,proto=tcp,noresvport,retrans=3,rsize=1048576,"
            "sec=krb5p,nosharecache,nosuid,wsize=65536");
}

TEST(NfsMountOptions, LaterReplacesEarlierOfItsGroup) {
  NfsMountOptions o;
  ASSERT_TRUE(o.Add("vers=4.1 hard timeo=600").ok());
  ASSERT_TRUE(o.Add("soft,nfsvers=4.2").ok());  // a volume's options over a pool's
  EXPECT_EQ(o.ToString(), "soft,timeo=600,vers=4.2");
  EXPECT_EQ(o.Get("hard"), "soft");
  EXPECT_EQ(o.Get("vers"), "vers=4.2");
  EXPECT_EQ(o.Get("nconnect"), "");
}

TEST(NfsMountOptions, BadValuesNameTheOption) {
  for (const char* bad : {"vers=5", "vers=4.3", "nfsvers=2", "vers", "timeo=0", "timeo=abc", "timeo=",
                          "retrans=-1", "rsize=512", "wsize=2097152", "nconnect=17", "nconnect=0", "port=65536",
                          "proto=sctp", "sec=ntlm", "lookupcache=some", "local_lock=maybe", "minorversion=3",
                          "hard=1", "noac=yes", "actimeo=999999", "clientaddr=", "clientaddr=a b"}) {
    std::string r = Canon(bad);
    ASSERT_EQ(r.rfind("ERROR: ", 0), 0u) << bad << " -> " << r;
    std::string name = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(r.find(name), std::string::npos) << r;
  }
}

TEST(NfsMountOptions, UnknownAndRefusedOptions) {
  std::string r = Canon("vers=4.2,colour=blue");
  EXPECT_NE(r.find("\"colour=blue\""), std::string::npos) << r;
  EXPECT_NE(r.find("known:"), std::string::npos) << r;
  for (const char* refused : {"ro", "bg", "addr=10.0.0.1", "intr", "remount", "bind", "suid", "dev"}) {
    r = Canon(refused);
    EXPECT_NE(r.find("not allowed"), std::string::npos) << refused << " -> " << r;
  }
  EXPECT_EQ(Canon("vers=4.2,a\x01"), "ERROR: NFS mount options contain a control character");
}

TEST(NfsMountOptions, FailedAddChangesNothing) {
  NfsMountOptions o;
  ASSERT_TRUE(o.Add("hard").ok());
  EXPECT_FALSE(o.Add("soft,vers=9").ok());
  EXPECT_EQ(o.ToString(), "hard");
}

Status Pool(Params p, NfsPoolOptions* o) { return ParseNfsPoolOptions("shared", p, o); }

// Issue 30 item 8: a mount sharing another's superblock (sharecache) shows
// that one's timeo, retrans, nconnect, fsc, noresvport in mountinfo.
TEST(NfsMountOptions, OptionsNotAppliedByASharedSuperblock) {
  const std::string super = "rw,vers=4.2,rsize=1048576,hard,proto=tcp,timeo=77,retrans=3,sec=sys,addr=127.0.0.1";
  EXPECT_TRUE(OptionsNotApplied("retrans=3,timeo=77,vers=4.2", super).empty());
  EXPECT_TRUE(OptionsNotApplied("", super).empty());
  EXPECT_TRUE(OptionsNotApplied("nconnect=1,nofsc,resvport", super).empty());
  EXPECT_EQ(OptionsNotApplied("retrans=3,timeo=50,vers=4.2", super), std::vector<std::string>{"timeo=50"});
  EXPECT_EQ(OptionsNotApplied("nconnect=2,retrans=5", super), (std::vector<std::string>{"nconnect=2", "retrans=5"}));
  EXPECT_EQ(OptionsNotApplied("fsc,noresvport", super), (std::vector<std::string>{"fsc", "noresvport"}));
  EXPECT_TRUE(OptionsNotApplied("nconnect=2,fsc", super + ",nconnect=2,fsc").empty());
  EXPECT_EQ(OptionsNotApplied("nofsc", super + ",fsc"), std::vector<std::string>{"nofsc"});
  // Options the kernel compares (or shows otherwise) are not judged here.
  EXPECT_TRUE(OptionsNotApplied("soft,actimeo=1,nosharecache", super).empty());
}

// issue 69 item 4: a record on the export (written by another node, the
// server, or root on any client) decided this node's mount options.
TEST(NfsMountOptions, ARecordNeverDecidesWhatThePoolDecides) {
  NfsMountOptions pool;
  ASSERT_TRUE(pool.Add("hard,sec=krb5p,vers=4.2,timeo=600,clientaddr=10.0.0.5").ok());
  auto from = [&](const std::string& record) {
    NfsMountOptions out;
    Status st = OptionsFromRecord(pool, record, &out);
    return st.ok() ? out.ToString() : "ERROR " + std::string(st.code() == Status::Code::kFailedPrecondition
                                                                 ? "precondition: " : "invalid: ") + st.message();
  };
  // What a creator with the same pool wrote, tuned per volume: the tuning
  // comes along, this node's clientaddr stays.
  EXPECT_EQ(from("hard,sec=krb5p,vers=4.2,timeo=50,rsize=65536,clientaddr=10.9.9.9"),
            "clientaddr=10.0.0.5,hard,rsize=65536,sec=krb5p,timeo=50,vers=4.2");
  EXPECT_EQ(from("sec=krb5p,vers=4.2,hard"), "clientaddr=10.0.0.5,hard,sec=krb5p,timeo=600,vers=4.2");
  // Nor this node's local cache: a record's fsc (or fsc=ID, which picks the
  // cache a superblock shares) is dropped; the pool's stays.
  EXPECT_EQ(from("sec=krb5p,vers=4.2,hard,fsc=shared-with-another"), "clientaddr=10.0.0.5,hard,sec=krb5p,timeo=600,vers=4.2");
  EXPECT_EQ(from("sec=krb5p,vers=4.2,hard,fsc"), "clientaddr=10.0.0.5,hard,sec=krb5p,timeo=600,vers=4.2");
  NfsMountOptions cached_pool;
  ASSERT_TRUE(cached_pool.Add("hard,sec=krb5p,vers=4.2,fsc").ok());
  NfsMountOptions merged;
  ASSERT_TRUE(OptionsFromRecord(cached_pool, "hard,sec=krb5p,vers=4.2,nofsc", &merged).ok());
  EXPECT_EQ(merged.Get("fsc"), "fsc") << merged.ToString();
  for (const char* forged : {"soft,sec=krb5p,vers=4.2", "hard,sec=sys,vers=4.2", "hard,sec=krb5p,vers=3",
                             "hard,sec=krb5p", "hard,sec=krb5p,vers=4.2,mounthost=10.6.6.6",
                             "hard,sec=krb5p,vers=4.2,port=2050", "hard,sec=krb5p,vers=4.2,nolock",
                             "hard,sec=krb5p,vers=4.2,noexec"}) {
    std::string got = from(forged);
    EXPECT_EQ(got.rfind("ERROR precondition: ", 0), 0u) << forged << ": " << got;
    EXPECT_NE(got.find("the pool's to decide"), std::string::npos) << got;
  }
  EXPECT_NE(from("soft,sec=krb5p,vers=4.2").find("\"soft\" where this pool's say \"hard\""), std::string::npos)
      << from("soft,sec=krb5p,vers=4.2");
  EXPECT_EQ(from("hard,sec=krb5p,vers=4.2,bg").rfind("ERROR invalid: ", 0), 0u);
  // On a soft pool, timeo and retrans decide when I/O fails: the pool's.
  NfsMountOptions soft_pool;
  ASSERT_TRUE(soft_pool.Add("soft,timeo=600,retrans=5").ok());
  NfsMountOptions out;
  EXPECT_EQ(OptionsFromRecord(soft_pool, "soft,timeo=1,retrans=5", &out).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(OptionsFromRecord(soft_pool, "soft,timeo=600,retrans=0", &out).code(), Status::Code::kFailedPrecondition);
  EXPECT_TRUE(OptionsFromRecord(soft_pool, "soft,timeo=600,retrans=5,rsize=65536", &out).ok());
  // Never suid or dev, from a record or anywhere (MountNfs adds nosuid,nodev).
  for (const char* forged : {"hard,sec=krb5p,vers=4.2,suid", "hard,sec=krb5p,vers=4.2,dev"}) {
    std::string got = from(forged);
    EXPECT_EQ(got.rfind("ERROR invalid: ", 0), 0u) << got;
    EXPECT_NE(got.find("nosuid,nodev"), std::string::npos) << got;
  }
}

TEST(NfsPoolOptions, Defaults) {
  NfsPoolOptions o;
  ASSERT_TRUE(Pool({{"server", "10.0.0.5"}, {"share", "/export"}}, &o).ok());
  EXPECT_EQ(o.server, "10.0.0.5");
  EXPECT_EQ(o.share, "/export");
  EXPECT_EQ(o.path_pattern, "${namespace}-${pvcName}-${pvName}");
  EXPECT_EQ(o.on_delete, "delete");
  EXPECT_EQ(o.timeout, std::chrono::seconds(30));
  EXPECT_TRUE(o.mount_options.empty());
}

TEST(NfsPoolOptions, Everything) {
  NfsPoolOptions o;
  ASSERT_TRUE(Pool({{"server", "fd00::5"}, {"share", "/"}, {"mount-options", "nfsvers=4.2 hard timeo=100"},
                    {"path-pattern", "${namespace}/${.PVC.annotations.x}"}, {"on-delete", "archive"},
                    {"timeout", "5"}},
                   &o)
                  .ok());
  EXPECT_EQ(o.mount_options.ToString(), "hard,timeo=100,vers=4.2");
  EXPECT_EQ(o.on_delete, "archive");
  EXPECT_EQ(o.timeout, std::chrono::seconds(5));
}

TEST(NfsPoolOptions, Refusals) {
  NfsPoolOptions o;
  auto msg = [&](Params p) {
    o = NfsPoolOptions{};
    Status st = Pool(p, &o);
    return st.ok() ? std::string("OK") : st.message();
  };
  Params base = {{"server", "nfs.example"}, {"share", "/export"}};
  auto with = [&](const std::string& k, const std::string& v) {
    Params p = base;
    p[k] = v;
    return msg(p);
  };
  EXPECT_NE(msg({{"share", "/x"}}).find("need server="), std::string::npos);
  EXPECT_NE(msg({{"server", "a"}}).find("need server="), std::string::npos) << msg({{"server", "a"}});
  EXPECT_NE(with("share", "export").find("absolute"), std::string::npos);
  EXPECT_NE(with("share", "/a/../b").find(".."), std::string::npos);
  EXPECT_NE(with("share", "/a//b").find("empty segment"), std::string::npos);
  EXPECT_NE(with("server", "-oops").find("starts with '-'"), std::string::npos);
  EXPECT_NE(with("server", "a b").find("not a host name"), std::string::npos);
  EXPECT_NE(with("server", "").find("empty"), std::string::npos);
  EXPECT_NE(with("mount-options", "vers=9").find("mount-options"), std::string::npos);
  EXPECT_NE(with("on-delete", "shred").find("delete, retain or archive"), std::string::npos);
  EXPECT_NE(with("timeout", "0").find("at least 1"), std::string::npos);
  EXPECT_NE(with("timeout", "3601").find("timeout"), std::string::npos);
  EXPECT_NE(with("path-pattern", "${colour}").find("unknown variable"), std::string::npos);
  EXPECT_NE(with("path-pattern", "../x").find("..\""), std::string::npos);
  EXPECT_NE(with("path-pattern", "/abs").find("absolute"), std::string::npos);
  // A pattern using an annotation is fine until a claim lacks it.
  EXPECT_EQ(with("path-pattern", "${.PVC.annotations.dir}"), "OK");
  EXPECT_NE(with("colour", "red").find("unknown nfs option \"colour\""), std::string::npos);
}

// The backend's reading of volume parameters, without a server: Validate
// contacts nothing. Make needs mount.nfs installed.
class NfsParams : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/sbin/mount.nfs", X_OK) != 0 && ::access("/usr/sbin/mount.nfs", X_OK) != 0)
      GTEST_SKIP() << "mount.nfs is not installed";
    char tmpl[] = "/tmp/nfs-params-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(NfsBackend::Make("shared",
                                 {{"server", "127.0.0.1"}, {"share", "/export"}, {"mount-options", "vers=4.2"}},
                                 dir_, &backend_)
                    .ok());
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string Check(Params p) {
    p.emplace("nodevol.io/pvc-namespace", "ns");
    p.emplace("nodevol.io/pvc-name", "claim");
    Status st = backend_->Validate({"vol-1", "shared", 1 << 20, "", p});
    return st.ok() ? "OK" : st.message();
  }
  std::string dir_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(NfsParams, SubdirectoryVolumes) {
  EXPECT_EQ(Check({}), "OK");
  EXPECT_EQ(Check({{"pathPattern", "${namespace}/${pvcName}"}, {"onDelete", "archive"}, {"mode", "0750"},
                   {"uid", "1000"}, {"gid", "1000"}, {"mountOptions", "nconnect=2,soft"}}),
            "OK");
  EXPECT_EQ(Check({{"subDir", "${pvc.metadata.namespace}"}}), "OK");
  EXPECT_EQ(Check({{"archiveOnDelete", "false"}}), "OK");
  EXPECT_NE(Check({{"archiveOnDelete", "no"}}).find("\"true\" or \"false\""), std::string::npos);
  EXPECT_NE(Check({{"onDelete", "shred"}}).find("delete, retain or archive"), std::string::npos);
  EXPECT_NE(Check({{"pathPattern", "../escape"}}).find("\"..\""), std::string::npos);
  EXPECT_NE(Check({{"pathPattern", "a"}, {"subDir", "b"}}).find("not both"), std::string::npos);
  EXPECT_NE(Check({{"mode", "999"}}).find("mode"), std::string::npos);
  EXPECT_NE(Check({{"mountOptions", "vers=4.2,ro"}}).find("not allowed"), std::string::npos);
  EXPECT_NE(Check({{"colour", "red"}}).find("unknown parameter \"colour\""), std::string::npos);
  Status st = backend_->Validate({"v", "shared", 1, "ext4", {}});
  EXPECT_NE(st.message().find("fs_type"), std::string::npos);
}

TEST_F(NfsParams, ExportVolumes) {
  EXPECT_EQ(Check({{"share", "/other"}}), "OK");
  EXPECT_EQ(Check({{"share", "/other"}, {"server", "10.1.1.1"}, {"mountOptions", "vers=3"}}), "OK");
  EXPECT_NE(Check({{"server", "10.1.1.1"}}).find("needs share"), std::string::npos);
  EXPECT_NE(Check({{"share", "/other"}, {"pathPattern", "x"}}).find("used as it is"), std::string::npos);
  EXPECT_NE(Check({{"share", "/other"}, {"onDelete", "delete"}}).find("used as it is"), std::string::npos);
  EXPECT_NE(Check({{"share", "/other"}, {"mode", "0700"}}).find("used as it is"), std::string::npos);
  EXPECT_NE(Check({{"share", "rel"}}).find("absolute"), std::string::npos);
}

TEST_F(NfsParams, PoolFacts) {
  EXPECT_EQ(backend_->kind(), "nfs");
  EXPECT_FALSE(backend_->size_enforced());
  EXPECT_EQ(backend_->fs_types(), std::vector<std::string>{""});
  Params a = backend_->attributes();
  EXPECT_EQ(a["server"], "127.0.0.1");
  EXPECT_EQ(a["mount_options"], "vers=4.2");
}

}  // namespace
}  // namespace nodevol
