// Bad requests: each must be INVALID_ARGUMENT and must change nothing on
// disk (the sandbox's file tree with every file's contents and the mount
// table are compared before and after every call), nor what a restarted
// nodevold reports. Also the idempotency rules of CreateVolume.
#include <grpcpp/grpcpp.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <fcntl.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>
#include <fstream>
#include <functional>
#include <sstream>

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using Code = grpc::StatusCode;

class BadInputTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartDaemon();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
    target_ = MakeTarget("pod-1", "data");
    plugin_dir_ = pods_root_ + "/pod-1/volumes/nodevol.io~volume";
  }

  // Every path below the sandbox with its type, mode, owner, size and a
  // hash of its contents (a symlink: its target; the daemon's log excepted:
  // it grows with every call), plus the number of mounts. Contents, since a
  // record rewritten to the same length changes nothing else.
  std::string Snapshot() {
    std::ostringstream out;
    out << "mounts=" << MountsBelow(root_) << "\n";
    std::vector<std::string> lines;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root_, ec); it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->path() == log_path_) continue;
      struct stat st;
      if (::lstat(it->path().c_str(), &st) != 0) continue;
      std::ostringstream line;
      line << it->path().string() << " mode=" << std::oct << st.st_mode << std::dec << " uid=" << st.st_uid
           << " gid=" << st.st_gid;
      if (S_ISREG(st.st_mode)) line << " size=" << st.st_size << " fnv=" << std::hex << Fnv(it->path()) << std::dec;
      if (S_ISLNK(st.st_mode)) line << " -> " << fs::read_symlink(it->path(), ec).string();
      lines.push_back(line.str());
    }
    std::sort(lines.begin(), lines.end());
    for (const std::string& l : lines) out << l << "\n";
    return out.str();
  }

  // FNV-1a of a file's contents.
  static uint64_t Fnv(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    uint64_t h = 1469598103934665603ull;
    for (char c; in.get(c);) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
  }

  // What the daemon reports: every volume as GetVolume returns it.
  std::string Reported() {
    std::string out;
    for (const v1::Volume& v : ListVolumes()) {
      v1::Volume got;
      grpc::Status st = Get(v.name(), &got);
      out += v.name() + (st.ok() ? ": " + got.ShortDebugString() : ": GetVolume failed: " + st.error_message()) + "\n";
    }
    return out;
  }

  // Runs each call, expecting INVALID_ARGUMENT and no change on disk; then
  // restarts nodevold: its reconcile must find nothing to do, the files stay
  // as they were and GetVolume reports what it did before.
  void ExpectInvalidAndNoChange(const std::vector<std::pair<std::string, std::function<grpc::Status()>>>& cases) {
    const std::string first = Snapshot(), reported = Reported();
    for (const auto& [what, call] : cases) {
      SCOPED_TRACE(what);
      std::string before = Snapshot();
      grpc::Status st = call();
      EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT) << what << ": " << st.error_message();
      EXPECT_FALSE(st.error_message().empty());
      EXPECT_EQ(Snapshot(), before) << what << " changed the sandbox";
    }
    ExpectSameAfterRestart(first, reported);
  }

  void ExpectSameAfterRestart(const std::string& snapshot, const std::string& reported) {
    ASSERT_EQ(StopDaemon(), 0);
    StartDaemon();
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(Snapshot(), snapshot) << "the restart after the bad calls changed the sandbox";
    EXPECT_EQ(Reported(), reported) << "after the bad calls and a restart";
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetInfoResponse info;
    ASSERT_TRUE(stub()->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
    EXPECT_EQ(info.drift_size(), 0) << "reconcile found something to do: " << info.ShortDebugString();
  }

  grpc::Status Create(const std::string& name, uint64_t size, const std::string& pool = "default",
                      std::map<std::string, std::string> params = {}, const std::string& fs_type = "") {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CreateVolumeRequest req;
    req.set_name(name);
    req.set_pool(pool);
    req.set_size_bytes(size);
    req.set_fs_type(fs_type);
    req.mutable_parameters()->insert(params.begin(), params.end());
    v1::CreateVolumeResponse resp;
    return stub()->CreateVolume(&ctx, req, &resp);
  }

  grpc::Status PublishWith(const std::function<void(v1::PublishRequest*)>& edit) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PublishRequest req;
    req.set_volume("v1");
    req.set_target(target_);
    edit(&req);
    v1::PublishResponse resp;
    return stub()->Publish(&ctx, req, &resp);
  }

  grpc::Status PublishTo(const std::string& target) {
    return PublishWith([&](v1::PublishRequest* r) { r->set_target(target); });
  }

  grpc::Status UnpublishOf(const std::string& target) { return Unpublish(target); }

  grpc::Status Stats(const std::string& target) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetVolumeStatsRequest req;
    req.set_target(target);
    v1::GetVolumeStatsResponse resp;
    return stub()->GetVolumeStats(&ctx, req, &resp);
  }

  grpc::Status Get(const std::string& name, v1::Volume* out = nullptr) {
    grpc::Status st;
    v1::Volume v = GetVolume(name, &st);
    if (out) *out = v;
    return st;
  }

  grpc::Status Delete(const std::string& name) { return DeleteVolume(name); }

  grpc::Status Expand(const std::string& name, uint64_t size) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::ExpandVolumeRequest req;
    req.set_name(name);
    req.set_size_bytes(size);
    v1::ExpandVolumeResponse resp;
    return stub()->ExpandVolume(&ctx, req, &resp);
  }

  std::string target_;      // pods/pod-1/volumes/nodevol.io~volume/data
  std::string plugin_dir_;  // pods/pod-1/volumes/nodevol.io~volume
};

TEST_F(BadInputTest, TargetsOutsideThePodsRootOrOfTheWrongShape) {
  // Real directories, so that only the shape can be what is wrong.
  std::string outside = root_ + "/outside/pod-x/volumes/nodevol.io~volume/data";
  fs::create_directories(outside);
  fs::create_directories(target_ + "/sub");
  fs::create_directories(pods_root_ + "/pod-1/vols/nodevol.io~volume/data");
  fs::create_directories(pods_root_ + "/pod-1/volumes/nodevol.io/data");
  fs::create_directories(pods_root_ + "/pod-1/volumes/~volume/data");
  fs::create_directories(pods_root_ + "/pod-1/volumes/nodevol.io~/data");
  std::ofstream(plugin_dir_ + "/a-file").close();
  std::string nul = target_;
  nul.insert(pods_root_.size() + 3, 1, '\0');

  ExpectInvalidAndNoChange({
      {"outside the pods root", [&] { return PublishTo(outside); }},
      {"the root directory", [&] { return PublishTo("/"); }},
      {"/tmp", [&] { return PublishTo("/tmp"); }},
      {"'..' leading out", [&] { return PublishTo(plugin_dir_ + "/../../../../outside/pod-x/volumes/nodevol.io~volume/data"); }},
      {"'..' staying inside", [&] { return PublishTo(target_ + "/../other"); }},
      {"'..' at the end", [&] { return PublishTo(target_ + "/sub/.."); }},
      {"'.' component", [&] { return PublishTo(pods_root_ + "/pod-1/./volumes/nodevol.io~volume/data"); }},
      {"empty component", [&] { return PublishTo(pods_root_ + "/pod-1//volumes/nodevol.io~volume/data"); }},
      {"the pods root itself", [&] { return PublishTo(pods_root_); }},
      {"a pod dir", [&] { return PublishTo(pods_root_ + "/pod-1"); }},
      {"a plugin dir (too few components)", [&] { return PublishTo(plugin_dir_); }},
      {"too many components", [&] { return PublishTo(target_ + "/sub"); }},
      {"missing 'volumes'", [&] { return PublishTo(pods_root_ + "/pod-1/vols/nodevol.io~volume/data"); }},
      {"plugin without '~'", [&] { return PublishTo(pods_root_ + "/pod-1/volumes/nodevol.io/data"); }},
      {"plugin without vendor", [&] { return PublishTo(pods_root_ + "/pod-1/volumes/~volume/data"); }},
      {"plugin without driver", [&] { return PublishTo(pods_root_ + "/pod-1/volumes/nodevol.io~/data"); }},
      {"a file, not a directory", [&] { return PublishTo(plugin_dir_ + "/a-file"); }},
      {"relative path", [&] { return PublishTo("pod-1/volumes/nodevol.io~volume/data"); }},
      {"relative path with the pods root", [&] { return PublishTo(pods_root_.substr(1) + "/pod-1/volumes/nodevol.io~volume/data"); }},
      {"empty target", [&] { return PublishTo(""); }},
      {"NUL byte in target", [&] { return PublishTo(nul); }},
      {"missing pod dir", [&] { return PublishTo(pods_root_ + "/no-pod/volumes/nodevol.io~volume/data"); }},
      {"unpublish outside", [&] { return UnpublishOf(outside); }},
      {"unpublish with '..'", [&] { return UnpublishOf(target_ + "/../data"); }},
      {"unpublish relative", [&] { return UnpublishOf("pods/pod-1/volumes/nodevol.io~volume/data"); }},
      {"unpublish too few components", [&] { return UnpublishOf(plugin_dir_); }},
      {"stats outside", [&] { return Stats(outside); }},
      {"stats with '..'", [&] { return Stats(target_ + "/.."); }},
  });
  EXPECT_FALSE(fs::exists(target_ + "/../other"));
}

TEST_F(BadInputTest, SymlinksLeadingOutOfThePodsRoot) {
  std::string outside = root_ + "/outside";
  fs::create_directories(outside);
  // A symlinked volume dir inside a real pod dir...
  fs::create_symlink(outside, plugin_dir_ + "/evil");
  // ...a symlinked pod dir whose tree looks right...
  fs::create_directories(root_ + "/fake-pod/volumes/nodevol.io~volume/data");
  fs::create_symlink(root_ + "/fake-pod", pods_root_ + "/pod-link");
  // ...and a symlinked plugin dir.
  fs::create_directories(root_ + "/fake-plugin/data");
  fs::create_directories(pods_root_ + "/pod-3/volumes");
  fs::create_symlink(root_ + "/fake-plugin", pods_root_ + "/pod-3/volumes/nodevol.io~volume");

  ExpectInvalidAndNoChange({
      {"symlinked volume dir", [&] { return PublishTo(plugin_dir_ + "/evil"); }},
      {"symlinked pod dir", [&] { return PublishTo(pods_root_ + "/pod-link/volumes/nodevol.io~volume/data"); }},
      {"symlinked plugin dir", [&] { return PublishTo(pods_root_ + "/pod-3/volumes/nodevol.io~volume/data"); }},
      {"below a symlinked pod dir, missing",
       [&] { return PublishTo(pods_root_ + "/pod-link/volumes/nodevol.io~volume/new"); }},
  });
  EXPECT_FALSE(fs::exists(root_ + "/fake-pod/volumes/nodevol.io~volume/new"));
}

// The guard against a target swapped for a symlink between its check and
// the mount (bind.cc's PinnedDir): a thread keeps exchanging the target with
// a symlink to a directory outside the pods root (renameat2 RENAME_EXCHANGE,
// atomic) while Publish runs again and again. Publish may succeed or fail,
// but nothing may ever be mounted outside the pods root, and a publication
// is only ever at the target. Mounting by path instead of through the
// pinned descriptor puts the volume on the outside directory here.
TEST_F(BadInputTest, TargetSwappedForASymlinkNeverMountsOutside) {
  const std::string outside = root_ + "/outside";
  const std::string spare = plugin_dir_ + "/swap";
  fs::create_directories(outside);
  fs::create_symlink(outside, spare);
  // Exchanges target_ and spare until told to stop; pauses on request with
  // the directory back at target_ (acknowledged, so the main thread knows).
  std::mutex mu;
  std::condition_variable cv;
  bool pause = true, paused = false, stop = false;
  int exchanges = 0;
  bool swapped = false;  // target_ is the symlink now
  // Whatever happens, the flipper ends with the test (an ASSERT returns).
  struct Joiner {
    std::function<void()> fn;
    ~Joiner() { fn(); }
  };
  std::thread flipper([&] {
    std::unique_lock<std::mutex> l(mu);
    while (!stop) {
      if (pause) {
        if (swapped && ::renameat2(AT_FDCWD, target_.c_str(), AT_FDCWD, spare.c_str(), RENAME_EXCHANGE) == 0)
          swapped = false;
        paused = true;
        cv.notify_all();
        cv.wait(l, [&] { return !pause || stop; });
        paused = false;
        continue;
      }
      l.unlock();
      bool ok = ::renameat2(AT_FDCWD, target_.c_str(), AT_FDCWD, spare.c_str(), RENAME_EXCHANGE) == 0;
      l.lock();
      if (ok) swapped = !swapped, ++exchanges;
    }
  });
  Joiner joiner{[&] {
    {
      std::lock_guard<std::mutex> l(mu);
      stop = true;
      cv.notify_all();
    }
    if (flipper.joinable()) flipper.join();
  }};
  auto set_pause = [&](bool p) {
    std::unique_lock<std::mutex> l(mu);
    pause = p;
    cv.notify_all();
    if (p) cv.wait(l, [&] { return paused; });
  };

  int published = 0, refused = 0, at_spare = 0;
  for (int i = 0; i < 300; ++i) {
    set_pause(false);
    grpc::Status st = PublishTo(target_);
    set_pause(true);
    (st.ok() ? published : refused)++;
    // A refusal names the caller's problem (the target changed, is not a
    // directory), never an internal error.
    ASSERT_NE(st.error_code(), grpc::StatusCode::INTERNAL) << "round " << i << ": " << st.error_message();
    ASSERT_EQ(MountsBelow(outside), 0) << "round " << i << ": a Publish mounted outside the pods root";
    ASSERT_EQ(MountsBelow(pods_root_), st.ok() ? 1 : 0) << "round " << i;
    // The directory may have been exchanged away between the check and the
    // mount: the mount then sits on it at the spare name, still inside the
    // pods root (and a mount point cannot be renamed back). Undo that here.
    if (IsMountPoint(spare)) {
      ++at_spare;
      ASSERT_EQ(::umount2(spare.c_str(), MNT_DETACH), 0) << std::strerror(errno);
    }
    {
      std::lock_guard<std::mutex> l(mu);
      if (swapped) {
        ASSERT_EQ(::renameat2(AT_FDCWD, target_.c_str(), AT_FDCWD, spare.c_str(), RENAME_EXCHANGE), 0);
        swapped = false;
      }
    }
    if (st.ok()) {
      grpc::Status u = UnpublishOf(target_);
      ASSERT_TRUE(u.ok()) << "round " << i << ": " << u.error_message();
    }
    ASSERT_EQ(MountsBelow(pods_root_), 0) << "round " << i;
  }
  joiner.fn();
  joiner.fn = [] {};
  std::cout << "symlink swap: " << exchanges << " exchanges, " << published << " publishes OK (" << at_spare
            << " of them mounted on the directory at its swapped-in name), " << refused << " refused" << std::endl;
  // The race ran: the target did change under Publish, and both outcomes
  // happened (else the loop tested a static case).
  EXPECT_GT(exchanges, 300);
  EXPECT_GT(published, 0);
  EXPECT_GT(refused, 0);
  EXPECT_TRUE(fs::is_empty(outside));
}

// A symlink to a directory that does not exist (yet): realpath() fails with
// ENOENT, which must not be taken for "the target does not exist".
TEST_F(BadInputTest, DanglingSymlinkTargetIsInvalid) {
  fs::create_symlink(root_ + "/not-yet", plugin_dir_ + "/dangling");
  fs::create_symlink(pods_root_ + "/pod-1/volumes/nodevol.io~volume/also-not-yet", plugin_dir_ + "/dangling-inside");
  ExpectInvalidAndNoChange({
      {"dangling symlink leading out", [&] { return PublishTo(plugin_dir_ + "/dangling"); }},
  });
  EXPECT_FALSE(fs::exists(root_ + "/not-yet"));
  EXPECT_FALSE(IsMountPoint(plugin_dir_ + "/dangling"));
  // Staying inside, it may be resolved (and the directory made) or refused,
  // but it is not an internal error.
  grpc::Status st = PublishTo(plugin_dir_ + "/dangling-inside");
  EXPECT_TRUE(st.ok() || st.error_code() == Code::INVALID_ARGUMENT) << st.error_code() << " " << st.error_message();
}

TEST_F(BadInputTest, UnpublishThroughASymlinkLeavesTheMountOutsideAlone) {
  std::string outside = root_ + "/outside";
  fs::create_directories(outside);
  ASSERT_EQ(::mount("nodevol-test", outside.c_str(), "tmpfs", 0, "size=1m"), 0) << strerror(errno);
  fs::create_symlink(outside, plugin_dir_ + "/evil");

  ExpectInvalidAndNoChange({
      {"unpublish via symlink", [&] { return UnpublishOf(plugin_dir_ + "/evil"); }},
      {"publish via symlink onto a mount", [&] { return PublishTo(plugin_dir_ + "/evil"); }},
  });
  EXPECT_TRUE(IsMountPoint(outside));
  ::umount2(outside.c_str(), MNT_DETACH);
}

TEST_F(BadInputTest, BadVolumeNames) {
  const std::string nul("ab\0cd", 5);
  const std::string too_long(201, 'a');
  std::vector<std::pair<std::string, std::function<grpc::Status()>>> cases;
  for (const std::string& name : {std::string("a/b"), std::string("../v1"), std::string(".."), nul, std::string(""),
                                  too_long, std::string(".hidden"), std::string("-dash"), std::string("_under"),
                                  std::string("sp ace"), std::string("uni\xc3\xa9")}) {
    std::string label = "name \"" + (name.size() > 20 ? name.substr(0, 20) + "..." : name) + "\" (" +
                        std::to_string(name.size()) + " bytes)";
    cases.push_back({"create " + label, [=, this] { return Create(name, 1 << 20); }});
    if (name.empty()) continue;  // an empty volume is "no source" for Publish, checked below
    cases.push_back({"publish " + label, [=, this] {
                       return PublishWith([&](v1::PublishRequest* r) { r->set_volume(name); });
                     }});
    cases.push_back({"delete " + label, [=, this] { return Delete(name); }});
    cases.push_back({"expand " + label, [=, this] { return Expand(name, 2 << 20); }});
    cases.push_back({"get " + label, [=, this] { return Get(name); }});
  }
  cases.push_back({"publish without a source", [&] {
                     return PublishWith([](v1::PublishRequest* r) { r->clear_volume(); });
                   }});
  ExpectInvalidAndNoChange(cases);
}

TEST_F(BadInputTest, LongestNameIsAccepted) {
  std::string name(200, 'a');
  grpc::Status st = Create(name, 1 << 20);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(fs::is_directory(pool_dir_ + "/" + name));
}

TEST_F(BadInputTest, BadVolumeSpecs) {
  ExpectInvalidAndNoChange({
      {"size 0", [&] { return Create("v2", 0); }},
      {"unknown pool", [&] { return Create("v2", 1 << 20, "no-such-pool"); }},
      {"empty pool", [&] { return Create("v2", 1 << 20, ""); }},
      {"unknown dir parameter", [&] { return Create("v2", 1 << 20, "default", {{"colour", "blue"}}); }},
      {"mode not octal", [&] { return Create("v2", 1 << 20, "default", {{"mode", "0999"}}); }},
      {"mode symbolic", [&] { return Create("v2", 1 << 20, "default", {{"mode", "rwxr-xr-x"}}); }},
      {"mode too large", [&] { return Create("v2", 1 << 20, "default", {{"mode", "17777"}}); }},
      {"mode empty", [&] { return Create("v2", 1 << 20, "default", {{"mode", ""}}); }},
      {"uid not a number", [&] { return Create("v2", 1 << 20, "default", {{"uid", "root"}}); }},
      {"gid negative", [&] { return Create("v2", 1 << 20, "default", {{"gid", "-1"}}); }},
      {"fs_type for a dir pool", [&] { return Create("v2", 1 << 20, "default", {}, "ext4"); }},
      {"expand to 0", [&] { return Expand("v1", 0); }},
      {"inline size 0", [&] {
         return PublishWith([](v1::PublishRequest* r) {
           r->mutable_inline_()->set_pool("default");
           r->mutable_inline_()->set_size_bytes(0);
         });
       }},
      {"inline unknown pool", [&] {
         return PublishWith([](v1::PublishRequest* r) {
           r->mutable_inline_()->set_pool("no-such-pool");
           r->mutable_inline_()->set_size_bytes(1 << 20);
         });
       }},
      {"inline bad mode", [&] {
         return PublishWith([](v1::PublishRequest* r) {
           r->mutable_inline_()->set_pool("default");
           r->mutable_inline_()->set_size_bytes(1 << 20);
           (*r->mutable_inline_()->mutable_parameters())["mode"] = "888";
         });
       }},
  });
}

TEST_F(BadInputTest, BadPublishOptions) {
  ExpectInvalidAndNoChange({
      {"unknown mount option", [&] { return PublishWith([](v1::PublishRequest* r) { r->add_mount_options("bogus"); }); }},
      {"suid is not offered", [&] { return PublishWith([](v1::PublishRequest* r) { r->add_mount_options("suid"); }); }},
      {"remount", [&] { return PublishWith([](v1::PublishRequest* r) { r->add_mount_options("remount"); }); }},
      {"option with a value", [&] { return PublishWith([](v1::PublishRequest* r) { r->add_mount_options("size=1m"); }); }},
      {"good then bad option", [&] {
         return PublishWith([](v1::PublishRequest* r) {
           r->add_mount_options("noexec");
           r->add_mount_options("exec");
         });
       }},
      {"empty option", [&] { return PublishWith([](v1::PublishRequest* r) { r->add_mount_options(""); }); }},
      {"pod uid differs from the target's", [&] {
         return PublishWith([](v1::PublishRequest* r) { r->mutable_pod()->set_uid("pod-2"); });
       }},
  });
  EXPECT_FALSE(IsMountPoint(target_));
}

TEST_F(BadInputTest, CtlRejectsANegativeSizeAsAUsageError) {
  std::string before = Snapshot();
  std::string out, err;
  EXPECT_EQ(Ctl({"volume", "create", "neg", "--pool", "default", "--size", "-1"}, &out, &err), 2) << out << err;
  EXPECT_NE(err.find("size"), std::string::npos) << err;
  EXPECT_EQ(Ctl({"volume", "create", "neg", "--pool", "default", "--size=-1"}, &out, &err), 2) << out << err;
  EXPECT_EQ(Ctl({"volume", "create", "neg", "--pool", "default", "--size", "0"}, &out, &err), 2) << out << err;
  EXPECT_EQ(Ctl({"volume", "create", "neg", "--pool", "default", "--size", "1Zi"}, &out, &err), 2) << out << err;
  EXPECT_EQ(Ctl({"volume", "expand", "v1", "--size=-5Mi"}, &out, &err), 2) << out << err;
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Get("neg").error_code(), Code::NOT_FOUND);
}

TEST_F(BadInputTest, CreateIsIdempotentButNotForOtherParameters) {
  grpc::Status st = Create("v2", 4 << 20, "default", {{"mode", "0750"}});
  ASSERT_TRUE(st.ok()) << st.error_message();
  v1::Volume first;
  ASSERT_TRUE(Get("v2", &first).ok());
  std::ofstream(pool_dir_ + "/v2/data") << "keep";

  st = Create("v2", 4 << 20, "default", {{"mode", "0750"}});
  EXPECT_TRUE(st.ok()) << "same name, same parameters: " << st.error_message();
  v1::Volume again;
  ASSERT_TRUE(Get("v2", &again).ok());
  EXPECT_EQ(again.created_unix(), first.created_unix());

  std::string before = Snapshot(), reported = Reported();
  st = Create("v2", 8 << 20, "default", {{"mode", "0750"}});
  EXPECT_EQ(st.error_code(), Code::ALREADY_EXISTS) << st.error_message();
  st = Create("v2", 4 << 20, "default", {{"mode", "0700"}});
  EXPECT_EQ(st.error_code(), Code::ALREADY_EXISTS) << st.error_message();
  st = Create("v2", 4 << 20, "default");
  EXPECT_EQ(st.error_code(), Code::ALREADY_EXISTS) << st.error_message();
  EXPECT_EQ(Snapshot(), before);
  ASSERT_TRUE(Get("v2", &again).ok());
  EXPECT_EQ(again.size_bytes(), 4u << 20);
  EXPECT_EQ(again.parameters().at("mode"), "0750");
  EXPECT_EQ(again.ShortDebugString(), first.ShortDebugString());
  ExpectSameAfterRestart(before, reported);
  EXPECT_EQ(ReadAll(pool_dir_ + "/v2/data"), "keep");
}

TEST_F(BadInputTest, ExpandSmallerIsInvalidAndUnknownVolumesAreNotFound) {
  std::string before = Snapshot(), reported = Reported();
  grpc::Status st = Expand("v1", 512 << 10);
  EXPECT_EQ(st.error_code(), Code::INVALID_ARGUMENT) << st.error_message();
  EXPECT_EQ(Snapshot(), before);
  v1::Volume v;
  ASSERT_TRUE(Get("v1", &v).ok());
  EXPECT_EQ(v.size_bytes(), 1u << 20);
  ExpectSameAfterRestart(before, reported);

  st = Expand("v1", 1 << 20);
  EXPECT_TRUE(st.ok()) << "expanding to the same size is a no-op: " << st.error_message();
  st = Expand("v1", 2 << 20);
  EXPECT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(Get("v1", &v).ok());
  EXPECT_EQ(v.size_bytes(), 2u << 20);

  EXPECT_EQ(Get("nope").error_code(), Code::NOT_FOUND);
  EXPECT_EQ(Expand("nope", 2 << 20).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(PublishWith([](v1::PublishRequest* r) { r->set_volume("nope"); }).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(Snapshot().find("nope"), std::string::npos);
}

}  // namespace
}  // namespace nodevol::testing
