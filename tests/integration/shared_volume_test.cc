// Volumes another node made (mountd/node/shared.cc), on the node layer with
// real bind mounts: two Nodes, each with its own state and pods root, over
// one directory pool that stands in for an NFS export. The seam is narrow:
// a backend that is the real dir backend plus FindShared answering from
// what the test put on the "export". The NFS backend's own side — records
// on a real export, two nodevolds on one nfsd — is tests/vm's
// nfs_two_nodes_test.sh.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "backend/registry.h"
#include "daemon_fixture.h"
#include "node/node.h"
#include "state/store.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

// What the creating node left on the shared storage, by volume name.
struct Export {
  std::mutex mu;
  std::map<std::string, VolumeRecord> records;
  int finds = 0;
  // As an NFS pool: binds are re-created after the start, in the
  // background. With `hold` a Stage waits until it is cleared.
  bool stage_may_wait = false;
  bool hold = false;
  int held = 0;  // Stages waiting now
  std::condition_variable cv;
};

class SharingDirBackend : public Backend {
 public:
  SharingDirBackend(std::unique_ptr<Backend> dir, Export* exp) : dir_(std::move(dir)), exp_(exp) {}
  std::string kind() const override { return dir_->kind(); }
  std::vector<std::string> fs_types() const override { return dir_->fs_types(); }
  bool size_enforced() const override { return dir_->size_enforced(); }
  Params attributes() const override { return dir_->attributes(); }
  Status Validate(const VolumeSpec& spec) const override { return dir_->Validate(spec); }
  Status Create(VolumeRecord* record) override { return dir_->Create(record); }
  Status Delete(const VolumeRecord& record) override {
    NODEVOL_RETURN_IF_ERROR(dir_->Delete(record));
    std::lock_guard<std::mutex> l(exp_->mu);
    exp_->records.erase(record.spec.name);
    return Status::Ok();
  }
  Status Expand(VolumeRecord* record, uint64_t n) override { return dir_->Expand(record, n); }
  Status Stage(const VolumeRecord& record, std::string* path) override {
    std::unique_lock<std::mutex> l(exp_->mu);
    ++exp_->held;
    exp_->cv.notify_all();
    exp_->cv.wait(l, [&] { return !exp_->hold; });
    --exp_->held;
    l.unlock();
    return dir_->Stage(record, path);
  }
  bool StageMayWait() const override { return exp_->stage_may_wait; }
  Status Unstage(const VolumeRecord& record) override { return dir_->Unstage(record); }
  Status Check(const VolumeRecord& record) override { return dir_->Check(record); }
  Status GetCapacity(Capacity* out) override { return dir_->GetCapacity(out); }
  Status FindShared(const std::string& volume, VolumeRecord* out) override {
    std::lock_guard<std::mutex> l(exp_->mu);
    ++exp_->finds;
    auto it = exp_->records.find(volume);
    if (it == exp_->records.end()) return Status::NotFound("no record of " + volume + " on the export");
    *out = it->second;
    out->state = VolumeState::kReady;
    out->shared_copy = true;
    return Status::Ok();
  }

 private:
  std::unique_ptr<Backend> dir_;
  Export* exp_;
};

class SharedVolumeTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    a_ = MakeNode("a");
    b_ = MakeNode("b");
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    stores_.clear();
    DaemonFixture::TearDown();
  }

  std::unique_ptr<Node> MakeNode(const std::string& id) {
    std::string state = root_ + "/state-" + id;
    auto store = std::make_unique<Store>(state);
    EXPECT_TRUE(store->Open().ok());
    std::map<std::string, std::unique_ptr<Backend>> pools;
    std::unique_ptr<Backend> dir;
    EXPECT_TRUE(MakeBackend("shared", "dir", {{"path", pool_dir_}}, &dir).ok());
    pools["shared"] = std::make_unique<SharingDirBackend>(std::move(dir), &export_);
    fs::create_directories(root_ + "/pods-" + id);
    auto node = std::make_unique<Node>(fs::canonical(root_ + "/pods-" + id).string(), store.get(), std::move(pools));
    Status st = node->Start();
    EXPECT_TRUE(st.ok()) << st.ToString();
    stores_[id] = std::move(store);
    return node;
  }

  // A pod volume directory on node `id`, as kubelet makes it.
  std::string Target(const std::string& id, const std::string& pod) {
    std::string t = root_ + "/pods-" + id + "/" + pod + "/volumes/nodevol.io~volume/data";
    fs::create_directories(t);
    return t;
  }

  // Node a makes the volume for a claim of namespace `ns`, and puts its
  // record on the "export", as the NFS backend does.
  void CreateOnA(const std::string& name, const std::string& ns) {
    VolumeView v;
    Status st = a_->CreateVolume({name, "shared", 1 << 20, "", {{"nodevol.io/pvc-namespace", ns}}}, &v);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::lock_guard<std::mutex> l(export_.mu);
    export_.records[name] = v.record;
  }

  Status PublishOn(Node* n, const std::string& volume, const std::string& target, const std::string& ns,
                   const std::string& pool = "shared") {
    PublishArgs args;
    args.volume = volume;
    args.target = target;
    args.pool = pool;
    args.pod = {"", "web-0", ns, "default"};
    std::string v, t;
    return n->Publish(args, &v, &t);
  }

  // Volume records in node id's state dir.
  size_t RecordsOf(const std::string& id) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(root_ + "/state-" + id + "/volumes"))
      n += e.path().extension() == ".json";
    return n;
  }

  Export export_;
  std::map<std::string, std::unique_ptr<Store>> stores_;
  std::unique_ptr<Node> a_, b_;
};

TEST_F(SharedVolumeTest, AnotherNodePublishesWithACopyItDropsAtTheLastUnpublish) {
  CreateOnA("pvc-1", "team");
  std::string t1 = Target("b", "pod-1"), t2 = Target("b", "pod-2");
  Status st = PublishOn(b_.get(), "pvc-1", t1, "team");
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(PublishOn(b_.get(), "pvc-1", t2, "team").ok());
  EXPECT_TRUE(IsMountPoint(t1) && IsMountPoint(t2));
  std::ofstream(t1 + "/hello") << "from b";
  EXPECT_TRUE(fs::exists(pool_dir_ + "/pvc-1/hello")) << "not the volume's directory";

  VolumeView v;
  ASSERT_TRUE(b_->GetVolume("pvc-1", &v).ok());
  EXPECT_TRUE(v.record.shared_copy);
  EXPECT_EQ(v.published_at.size(), 2u);
  EXPECT_EQ(RecordsOf("b"), 1u) << "the copy is durable while published (reconcile needs it)";

  bool was = false;
  ASSERT_TRUE(b_->Unpublish(t1, &was).ok());
  EXPECT_EQ(RecordsOf("b"), 1u) << "dropped while still published at pod-2";
  ASSERT_TRUE(b_->Unpublish(t2, &was).ok());
  EXPECT_FALSE(IsMountPoint(t1) || IsMountPoint(t2));
  EXPECT_EQ(RecordsOf("b"), 0u) << "the copy outlived its publications";
  EXPECT_EQ(b_->GetVolume("pvc-1", &v).code(), Status::Code::kNotFound);
  // The creating node and the data are untouched.
  EXPECT_TRUE(a_->GetVolume("pvc-1", &v).ok());
  EXPECT_TRUE(fs::exists(pool_dir_ + "/pvc-1/hello"));
}

// The record decides who may use the volume, not the pod's options: a pod
// of another namespace naming the volume gets nothing, and nothing is
// written on its node.
TEST_F(SharedVolumeTest, APodOfAnotherNamespaceIsRefusedAndLeavesNoCopy) {
  CreateOnA("pvc-1", "team");
  std::string t = Target("b", "pod-x");
  Status st = PublishOn(b_.get(), "pvc-1", t, "attacker");
  EXPECT_EQ(st.code(), Status::Code::kPermissionDenied) << st.ToString();
  EXPECT_FALSE(IsMountPoint(t));
  EXPECT_EQ(RecordsOf("b"), 0u);
  // Nor with another pool named, an unknown one, or a name that is no pool.
  EXPECT_EQ(PublishOn(b_.get(), "pvc-1", t, "attacker", "").code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(PublishOn(b_.get(), "pvc-1", t, "team", "other").code(), Status::Code::kNotFound);
  EXPECT_EQ(PublishOn(b_.get(), "pvc-1", t, "team", "../x\n").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(PublishOn(b_.get(), "pvc-2", t, "team").code(), Status::Code::kNotFound);
  EXPECT_EQ(RecordsOf("b"), 0u);
}

// A publish that fails after the copy was written drops it again.
TEST_F(SharedVolumeTest, AFailedPublishDropsTheCopy) {
  CreateOnA("pvc-1", "team");
  std::string t = Target("b", "pod-1");
  fs::remove(t);  // kubelet's directory is gone: the pod is
  Status st = PublishOn(b_.get(), "pvc-1", t, "team");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  fs::create_directories(t);
  ASSERT_EQ(::mount("tmpfs", t.c_str(), "tmpfs", 0, nullptr), 0);  // someone else's mount there
  st = PublishOn(b_.get(), "pvc-1", t, "team");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(RecordsOf("b"), 0u);
  ::umount(t.c_str());
}

// A copy with no publication at start (a kill -9 between an unpublish and
// the drop) goes; a published one stays, and so does the creator's record.
// issue 59 item 4: the re-staging thread dropped a target whose directory
// had gone but kept its "published" record, so DeleteVolume was refused
// until nodevold restarted.
TEST_F(SharedVolumeTest, ARestageWhoseTargetWentDropsThePublication) {
  CreateOnA("pvc-r", "team");
  std::string t = Target("a", "pod-r");
  ASSERT_TRUE(PublishOn(a_.get(), "pvc-r", t, "team").ok());
  {
    std::lock_guard<std::mutex> l(export_.mu);
    export_.stage_may_wait = true;
    export_.hold = true;
  }
  a_.reset();
  stores_.erase("a");
  ASSERT_EQ(::umount2(t.c_str(), MNT_DETACH), 0) << strerror(errno);  // a reboot
  a_ = MakeNode("a");  // the bind waits for the re-staging thread, whose Stage waits
  {
    std::unique_lock<std::mutex> l(export_.mu);
    ASSERT_TRUE(export_.cv.wait_for(l, std::chrono::seconds(10), [&] { return export_.held > 0; }));
  }
  fs::remove_all(root_ + "/pods-a/pod-r");  // the pod went meanwhile
  {
    std::lock_guard<std::mutex> l(export_.mu);
    export_.hold = false;
  }
  export_.cv.notify_all();
  VolumeView v;
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(a_->GetVolume("pvc-r", &v).ok());
    if (v.published_at.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(v.published_at.empty()) << "the publication of a target that went is still recorded";
  bool existed = false;
  Status st = a_->DeleteVolume("pvc-r", &existed);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_F(SharedVolumeTest, AStartDropsACopyWithoutPublication) {
  CreateOnA("pvc-1", "team");
  CreateOnA("pvc-2", "team");
  std::string t = Target("b", "pod-1");
  ASSERT_TRUE(PublishOn(b_.get(), "pvc-2", t, "team").ok());
  VolumeRecord copy = export_.records["pvc-1"];
  copy.state = VolumeState::kReady;
  copy.shared_copy = true;
  ASSERT_TRUE(stores_["b"]->PutVolume(copy).ok());
  b_.reset();
  stores_.erase("b");
  b_ = MakeNode("b");
  std::string drift;
  for (const std::string& d : b_->Drift()) drift += d + "\n";
  EXPECT_NE(drift.find("volume pvc-1: this node's copy of another node's record had no publication; dropped"),
            std::string::npos)
      << drift;
  VolumeView v;
  EXPECT_EQ(b_->GetVolume("pvc-1", &v).code(), Status::Code::kNotFound);
  EXPECT_TRUE(b_->GetVolume("pvc-2", &v).ok()) << "a published copy was dropped";
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_TRUE(a_->GetVolume("pvc-1", &v).ok());
  bool was = false;
  EXPECT_TRUE(b_->Unpublish(t, &was).ok());
}

// Get, Expand and Delete look at the shared storage only when the caller
// names the pool; then another node can delete the volume (its creator
// down), through a durable "deleting" copy.
TEST_F(SharedVolumeTest, DeleteFromAnotherNodeOnlyWhenThePoolIsNamed) {
  CreateOnA("pvc-1", "team");
  VolumeView v;
  int finds = export_.finds;
  EXPECT_EQ(b_->GetVolume("pvc-1", &v).code(), Status::Code::kNotFound);
  bool existed = true;
  ASSERT_TRUE(b_->DeleteVolume("pvc-1", &existed).ok());
  EXPECT_FALSE(existed);
  EXPECT_EQ(export_.finds, finds) << "looked at the shared storage unasked";
  EXPECT_TRUE(fs::exists(pool_dir_ + "/pvc-1"));

  ASSERT_TRUE(b_->GetVolume("pvc-1", &v, "shared").ok());
  EXPECT_TRUE(v.published_at.empty());
  ASSERT_TRUE(b_->ExpandVolume("pvc-1", 2 << 20, &v, "shared").ok());
  EXPECT_EQ(v.record.spec.size_bytes, 2u << 20);
  EXPECT_EQ(RecordsOf("b"), 0u) << "an expansion from here keeps no copy";

  ASSERT_TRUE(b_->DeleteVolume("pvc-1", &existed, "shared").ok());
  EXPECT_TRUE(existed);
  EXPECT_FALSE(fs::exists(pool_dir_ + "/pvc-1"));
  EXPECT_EQ(RecordsOf("b"), 0u);
  EXPECT_EQ(export_.records.count("pvc-1"), 0u);
  ASSERT_TRUE(b_->DeleteVolume("pvc-1", &existed, "shared").ok()) << "a second delete is done";
  EXPECT_FALSE(existed);
}

}  // namespace
}  // namespace nodevol::testing
