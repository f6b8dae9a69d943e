// nodevol-flex install/uninstall: the installed driver is a complete 0755
// copy, and kubelet's fsnotify-driven probing can never catch a partial one
// (no non-dot name ever shows a partial file or directory).
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "flex_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr char kDriverDir[] = "nodevol.io~volume";

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
  return out;
}

// Reads an open file to its end; false on a read error.
bool ReadFd(int fd, std::string* out) {
  out->clear();
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) return false;
    out->append(buf, static_cast<size_t>(n));
  }
  return true;
}

class FlexInstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nodevol-flex-install-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    plugin_ = root_ + "/exec";
    fs::create_directories(plugin_);
    driver_ = ReadAll(NODEVOL_FLEX_PATH);
    ASSERT_GT(driver_.size(), 0u);
  }
  void TearDown() override {
    if (!ro_.empty()) ::umount2(ro_.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FlexResult Run(const std::string& exe, const std::vector<std::string>& args) {
    return RunExe(exe, args, {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}});
  }
  std::string Installed() const { return plugin_ + "/" + kDriverDir + "/volume"; }

  std::string root_, plugin_, driver_, ro_;
};

TEST_F(FlexInstallTest, InstallsACompleteExecutableThatAnswersInit) {
  for (int round = 0; round < 2; ++round) {  // first install, then an upgrade in place
    FlexResult r = Run(NODEVOL_FLEX_PATH, {"install", plugin_});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    struct stat st {};
    ASSERT_EQ(::lstat(Installed().c_str(), &st), 0) << Describe(r);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0755u);
    EXPECT_TRUE(ReadAll(Installed()) == driver_) << "installed file differs from " << NODEVOL_FLEX_PATH;
    // No temp files left behind, dotted or not.
    EXPECT_EQ(Entries(plugin_), std::vector<std::string>{kDriverDir});
    EXPECT_EQ(Entries(plugin_ + "/" + kDriverDir), std::vector<std::string>{"volume"});
    EXPECT_TRUE(HasStatus(Run(Installed(), {"init"}), "Success"));
  }
}

TEST_F(FlexInstallTest, UninstallRemovesTheDriverDirectory) {
  ASSERT_EQ(Run(NODEVOL_FLEX_PATH, {"install", plugin_}).exit_code, 0);
  FlexResult r = Run(NODEVOL_FLEX_PATH, {"uninstall", plugin_});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Entries(plugin_).empty()) << "left: " << (Entries(plugin_).empty() ? "" : Entries(plugin_)[0]);
}

TEST_F(FlexInstallTest, InstallIntoAMissingOrUnwritableDirFails) {
  std::string missing = root_ + "/no/such/dir";
  FlexResult r = Run(NODEVOL_FLEX_PATH, {"install", missing});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.output.find(missing), std::string::npos) << "message should name the dir: " << Describe(r);
  EXPECT_FALSE(fs::exists(missing));

  std::string file = root_ + "/a-file";
  std::ofstream(file) << "x";
  r = Run(NODEVOL_FLEX_PATH, {"install", file});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_FALSE(r.output.empty());

  // Root ignores permission bits; a read-only mount stops it.
  ro_ = root_ + "/ro";
  fs::create_directories(ro_);
  ASSERT_EQ(::mount(ro_.c_str(), ro_.c_str(), nullptr, MS_BIND, nullptr), 0);
  ASSERT_EQ(::mount(nullptr, ro_.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0);
  r = Run(NODEVOL_FLEX_PATH, {"install", ro_});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.output.find(ro_), std::string::npos) << "message should name the dir: " << Describe(r);
  EXPECT_TRUE(Entries(ro_).empty());
}

TEST_F(FlexInstallTest, UpgradeWhileTheInstalledDriverRuns) {
  // kubelet may be running the driver while an operator upgrades it: writing
  // into the busy file would fail (ETXTBSY); replacing it must not.
  ASSERT_EQ(Run(NODEVOL_FLEX_PATH, {"install", plugin_}).exit_code, 0);
  std::string silent = root_ + "/silent.sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", silent.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  FlexResult busy;
  std::thread call([&] {
    busy = RunExe(Installed(), {"unmount", "/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/v"},
                  {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}, {"NODEVOL_FLEX_SOCKET", silent}, {"NODEVOL_FLEX_TIMEOUT", "2s"}});
  });
  std::this_thread::sleep_for(300ms);
  std::string other_exe = root_ + "/nodevol-flex-other";
  std::string other = driver_ + std::string(4096, '\x5a');
  std::ofstream(other_exe, std::ios::binary) << other;
  fs::permissions(other_exe, fs::perms(0755));
  FlexResult r = Run(other_exe, {"install", plugin_});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(ReadAll(Installed()) == other) << "upgrade did not replace the busy driver";
  // The installed driver reinstalling itself leaves it intact.
  r = Run(Installed(), {"install", plugin_});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(ReadAll(Installed()) == other) << "self-reinstall changed the driver";
  call.join();
  ::close(fd);
  EXPECT_TRUE(HasStatus(busy, "Failure"));  // the old process still answered properly
}

// Watches the plugin dir and every driver dir that appears in it, checking
// each non-dot appearance the moment it is seen, as kubelet's prober would.
class Watcher {
 public:
  Watcher(std::string plugin, std::vector<std::string> good) : plugin_(std::move(plugin)), good_(std::move(good)) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    plugin_wd_ = inotify_add_watch(fd_, plugin_.c_str(), IN_CREATE | IN_MOVED_TO);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Watcher() {
    Stop();
    for (auto& [wd, dfd] : dirs_) ::close(dfd);
    ::close(fd_);
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool ok() const { return fd_ >= 0 && plugin_wd_ >= 0; }
  std::vector<std::string> violations() {
    std::lock_guard<std::mutex> l(mu_);
    return violations_;
  }
  std::atomic<int> dirs_seen{0}, files_seen{0};

 private:
  void Violation(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    violations_.push_back(what);
  }
  // The file must be complete (one of the good contents) and 0755.
  void CheckFile(int dirfd, const std::string& what, bool missing_ok) {
    int f = ::openat(dirfd, "volume", O_RDONLY | O_CLOEXEC);
    if (f < 0) {
      if (!missing_ok) Violation(what + ": no volume file in a visible driver dir");
      return;
    }
    struct stat st {};
    std::string content;
    bool read = ::fstat(f, &st) == 0 && ReadFd(f, &content);
    ::close(f);
    if (!read) return Violation(what + ": unreadable");
    if ((st.st_mode & 07777) != 0755) Violation(what + ": mode " + std::to_string(st.st_mode & 07777));
    if (std::find(good_.begin(), good_.end(), content) == good_.end())
      Violation(what + ": partial or foreign content, " + std::to_string(content.size()) + " bytes");
  }
  void DirAppeared() {
    std::string path = plugin_ + "/" + kDriverDir;
    int dfd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;  // already uninstalled again
    struct stat pinned {}, now {};
    ::fstat(dfd, &pinned);
    // A missing file is fine only if this dir is no longer the live one.
    bool still_live = ::stat(path.c_str(), &now) == 0 && now.st_ino == pinned.st_ino;
    CheckFile(dfd, "driver dir appeared", !still_live);
    int wd = inotify_add_watch(fd_, ("/proc/self/fd/" + std::to_string(dfd)).c_str(),
                               IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE);
    if (wd < 0 || dirs_.count(wd)) return (void)::close(dfd);
    dirs_[wd] = dfd;
    ++dirs_seen;
  }
  void Loop() {
    alignas(inotify_event) char buf[65536];
    while (!stop_) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        std::string name = ev->len ? ev->name : "";
        if (ev->mask & IN_Q_OVERFLOW) Violation("inotify queue overflow: events lost");
        if (ev->mask & IN_IGNORED) {
          if (auto it = dirs_.find(ev->wd); it != dirs_.end()) ::close(it->second), dirs_.erase(it);
          continue;
        }
        if (name.empty() || name[0] == '.') continue;  // kubelet ignores dot names
        if (ev->wd == plugin_wd_) {
          if (name != kDriverDir) Violation("unexpected entry in the plugin dir: " + name);
          else DirAppeared();
          continue;
        }
        auto it = dirs_.find(ev->wd);
        if (it == dirs_.end()) continue;
        if (name != "volume") {
          Violation("unexpected entry in the driver dir: " + name);
        } else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
          Violation("the visible executable was written in place");
        } else {
          ++files_seen;
          CheckFile(it->second, "volume appeared", true);
        }
      }
    }
  }

  std::string plugin_;
  std::vector<std::string> good_;
  int fd_ = -1, plugin_wd_ = -1;
  std::map<int, int> dirs_;  // watch -> pinned driver dir
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> violations_;
  std::thread thread_;
};

TEST_F(FlexInstallTest, NoWatcherEverSeesAPartialDriver) {
  // A second, different driver (the same ELF plus trailing bytes) so every
  // upgrade really replaces the content.
  std::string other_exe = root_ + "/other/nodevol-flex";
  fs::create_directories(root_ + "/other");
  std::string other = driver_ + std::string(8192, '\x5a');
  std::ofstream(other_exe, std::ios::binary) << other;
  fs::permissions(other_exe, fs::perms(0755));
  const std::string exes[2] = {NODEVOL_FLEX_PATH, other_exe};

  Watcher w(plugin_, {driver_, other});
  ASSERT_TRUE(w.ok());
  // Kubelet may also read the file at any moment: it must never be partial.
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, bad_reads{0};
  std::thread reader([&] {
    while (!stop) {
      int f = ::open(Installed().c_str(), O_RDONLY | O_CLOEXEC);
      if (f < 0) continue;
      std::string c;
      struct stat st {};
      if (::fstat(f, &st) == 0 && ReadFd(f, &c)) {
        ++reads;
        if ((c != driver_ && c != other) || (st.st_mode & 07777) != 0755) ++bad_reads;
      }
      ::close(f);
    }
  });

  auto install = [&](int i, const char* verb = "install") {
    FlexResult r = Run(exes[i % 2], {verb, plugin_});
    EXPECT_EQ(r.exit_code, 0) << verb << " " << i << ": " << Describe(r);
  };
  install(0);
  // Upgrades happen in the dir the watcher must already be watching.
  for (int i = 0; i < 500 && w.dirs_seen == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GT(w.dirs_seen, 0) << "watcher never saw the first install";
  for (int i = 1; i <= 10; ++i) install(i);
  for (int i = 0; i < 10; ++i) {
    install(i, "uninstall");
    install(i + 1);
  }
  std::this_thread::sleep_for(300ms);  // let the watcher drain its queue
  stop = true;
  reader.join();
  w.Stop();

  for (const std::string& v : w.violations()) ADD_FAILURE() << v;
  EXPECT_EQ(bad_reads, 0) << "of " << reads << " reads of the installed driver";
  EXPECT_GT(reads, 0);
  EXPECT_GE(w.dirs_seen, 2) << "uninstall/install cycles not observed";
  EXPECT_GE(w.files_seen, 1) << "upgrades in place not observed";
  EXPECT_EQ(Entries(plugin_), std::vector<std::string>{kDriverDir});
  EXPECT_EQ(Entries(plugin_ + "/" + kDriverDir), std::vector<std::string>{"volume"});
  EXPECT_TRUE(ReadAll(Installed()) == driver_) << "the last install (of the built driver) is not in place";
}

}  // namespace
}  // namespace nodevol::testing
