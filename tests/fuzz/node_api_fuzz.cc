// Node API requests as nodevold's NodeService decodes, validates and
// carries them out (mountd/server/node_service.h), against a real Node with
// a dir pool (inline volumes allowed) under /run/nodevol-fuzz, on a tmpfs
// in a mount namespace of the fuzzer's own: real directories, records and
// bind mounts, never the host's. An input is a sequence of up to 16 calls
// in protobuf text format (node_api_input.proto). Needs root.
// Properties: every refusal carries a message; nothing is ever mounted but
// bind mounts at kubelet-shaped targets below the pods directory; and after
// each input, unpublishing every publication and deleting every snapshot
// and volume succeeds and leaves no mount, no record and an empty pool:
// whatever a caller made, the API can unmake.
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <spdlog/spdlog.h>

#include "backend/dir/dir_backend.h"
#include "backend/registry.h"
#include "metrics/metrics.h"
#include "node/capacity_monitor.h"
#include "node/node.h"
#include "server/node_service.h"
#include "state/store.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/node_api_input.pb.h"

namespace {

using namespace nodevol;
namespace fs = std::filesystem;

const std::string kRoot = "/run/nodevol-fuzz";
const std::string kPods = kRoot + "/pods";
const std::string kPool = kRoot + "/pool";
const std::string kState = kRoot + "/state";

struct World {
  std::unique_ptr<Store> store;
  std::unique_ptr<Node> node;
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<CapacityMonitor> capacity;
  std::unique_ptr<NodeService> service;
};
World* world = nullptr;

void Die(const std::string& why) {
  std::fprintf(stderr, "node_api fuzz set-up: %s\n", why.c_str());
  std::exit(1);
}

// Mount points below kRoot (but kRoot itself), from this namespace's table.
std::vector<std::string> MountsBelowRoot() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, mp;
    f >> id >> parent >> dev >> root >> mp;
    if (mp.rfind(kRoot + "/", 0) == 0) out.push_back(mp);
  }
  return out;
}

// A target as kubelet makes them: <pods>/<uid>/volumes/<plugin>/<name> or
// <pods>/<uid>/volumeDevices/... (the domain's own rules may be narrower).
bool KubeletShaped(const std::string& mp) {
  if (mp.rfind(kPods + "/", 0) != 0) return false;
  std::string rest = mp.substr(kPods.size() + 1);
  return rest.find("/volumes/") != std::string::npos || rest.find("/volumeDevices/") != std::string::npos;
}

void Check(const grpc::Status& st, const char* method) {
  if (!st.ok() && st.error_message().empty()) fuzz::Broken(std::string(method) + " refused without a message");
}

void Call(const nodevol::fuzz::NodeApiCall& c) {
  NodeService* s = world->service.get();
  grpc::ServerContext ctx;
  switch (c.call_case()) {
    case nodevol::fuzz::NodeApiCall::kCreateVolume: {
      v1::CreateVolumeResponse r;
      Check(s->CreateVolume(&ctx, &c.create_volume(), &r), "CreateVolume");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kDeleteVolume: {
      v1::DeleteVolumeResponse r;
      Check(s->DeleteVolume(&ctx, &c.delete_volume(), &r), "DeleteVolume");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kExpandVolume: {
      v1::ExpandVolumeResponse r;
      Check(s->ExpandVolume(&ctx, &c.expand_volume(), &r), "ExpandVolume");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kGetVolume: {
      v1::GetVolumeResponse r;
      Check(s->GetVolume(&ctx, &c.get_volume(), &r), "GetVolume");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kListVolumes: {
      v1::ListVolumesResponse r;
      Check(s->ListVolumes(&ctx, &c.list_volumes(), &r), "ListVolumes");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kCreateSnapshot: {
      v1::CreateSnapshotResponse r;
      Check(s->CreateSnapshot(&ctx, &c.create_snapshot(), &r), "CreateSnapshot");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kDeleteSnapshot: {
      v1::DeleteSnapshotResponse r;
      Check(s->DeleteSnapshot(&ctx, &c.delete_snapshot(), &r), "DeleteSnapshot");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kGetSnapshot: {
      v1::GetSnapshotResponse r;
      Check(s->GetSnapshot(&ctx, &c.get_snapshot(), &r), "GetSnapshot");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kListSnapshots: {
      v1::ListSnapshotsResponse r;
      Check(s->ListSnapshots(&ctx, &c.list_snapshots(), &r), "ListSnapshots");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kPublish: {
      v1::PublishResponse r;
      Check(s->Publish(c.publish(), std::chrono::system_clock::now() + std::chrono::seconds(10), &r), "Publish");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kUnpublish: {
      v1::UnpublishResponse r;
      Check(s->Unpublish(&ctx, &c.unpublish(), &r), "Unpublish");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kGetVolumeStats: {
      v1::GetVolumeStatsResponse r;
      Check(s->GetVolumeStats(&ctx, &c.get_volume_stats(), &r), "GetVolumeStats");
      break;
    }
    case nodevol::fuzz::NodeApiCall::kGetCapacity: {
      v1::GetCapacityResponse r;
      Check(s->GetCapacity(&ctx, &c.get_capacity(), &r), "GetCapacity");
      break;
    }
    case nodevol::fuzz::NodeApiCall::CALL_NOT_SET:
      break;
  }
}

// Unmakes everything through the API; each step must succeed.
void TearDown() {
  NodeService* s = world->service.get();
  grpc::ServerContext ctx;
  v1::ListVolumesResponse volumes;
  v1::ListVolumesRequest all;
  if (!s->ListVolumes(&ctx, &all, &volumes).ok()) fuzz::Broken("ListVolumes failed at teardown");
  for (const auto& v : volumes.volumes())
    for (const auto& t : v.published_at()) {
      v1::UnpublishRequest u;
      u.set_target(t);
      v1::UnpublishResponse r;
      grpc::Status st = s->Unpublish(&ctx, &u, &r);
      if (!st.ok()) fuzz::Broken("unpublishing " + t + " at teardown: " + st.error_message());
    }
  v1::ListSnapshotsResponse snapshots;
  v1::ListSnapshotsRequest every;
  if (!s->ListSnapshots(&ctx, &every, &snapshots).ok()) fuzz::Broken("ListSnapshots failed at teardown");
  for (const auto& snap : snapshots.snapshots()) {
    v1::DeleteSnapshotRequest d;
    d.set_name(snap.name());
    v1::DeleteSnapshotResponse r;
    grpc::Status st = s->DeleteSnapshot(&ctx, &d, &r);
    if (!st.ok()) fuzz::Broken("deleting snapshot " + snap.name() + " at teardown: " + st.error_message());
  }
  for (const auto& v : volumes.volumes()) {
    v1::DeleteVolumeRequest d;
    d.set_name(v.name());
    v1::DeleteVolumeResponse r;
    grpc::Status st = s->DeleteVolume(&ctx, &d, &r);
    if (!st.ok()) fuzz::Broken("deleting volume " + v.name() + " at teardown: " + st.error_message());
  }
  for (const auto& mp : MountsBelowRoot()) fuzz::Broken("still mounted after teardown: " + mp);
  // The pool's snapshot area (.snapshots) stays, empty.
  for (const auto& e : fs::directory_iterator(kPool))
    if (e.path().filename() != ".snapshots" || !fs::is_empty(e.path()))
      fuzz::Broken("left in the pool after teardown: " + e.path().string());
  // What the fuzzer made below the pods dir (targets) is kubelet's to
  // remove; do it, so inputs do not see each other's.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kPods, ec)) fs::remove_all(e.path(), ec);
}

}  // namespace

// This binary is built with the dir backend only (not backend/registry.cc,
// which brings lvm and nfs): GetInfo reports what it has.
std::vector<std::string> nodevol::BackendKinds() { return {"dir"}; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (::geteuid() != 0) Die("needs root (real mounts)");
  // Our own mount namespace: every mount made here vanishes with us.
  if (::unshare(CLONE_NEWNS) != 0) Die("unshare(CLONE_NEWNS) failed");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Die("making / private failed");
  ::mkdir(kRoot.c_str(), 0700);
  if (::mount("nodevol-fuzz", kRoot.c_str(), "tmpfs", 0, "size=64m,mode=0700") != 0) Die("tmpfs on " + kRoot);
  for (const auto& d : {kPods, kPool, kState}) ::mkdir(d.c_str(), 0750);
  spdlog::set_level(spdlog::level::off);
  world = new World;
  world->store = std::make_unique<Store>(kState);
  if (!world->store->Open().ok()) Die("store");
  std::unique_ptr<Backend> dir;
  if (Status st = DirBackend::Make("dir", {{"path", kPool}}, &dir); !st.ok()) Die(st.ToString());
  std::map<std::string, std::unique_ptr<Backend>> pools;
  pools.emplace("dir", std::move(dir));
  world->node = std::make_unique<Node>(kPods, world->store.get(), std::move(pools));
  world->node->SetInlinePolicies({{"dir", InlinePolicy{true, uint64_t{1} << 30}}});
  if (Status st = world->node->Start(); !st.ok()) Die(st.ToString());
  world->registry = std::make_unique<metrics::Registry>();
  world->capacity = std::make_unique<CapacityMonitor>(world->node.get(), std::chrono::hours(1),
                                                      [](const std::vector<PoolCapacityView>&) {});
  world->service = std::make_unique<NodeService>(world->node.get(), world->capacity.get(), world->registry.get(),
                                                 "fuzz-node", 10);
  return 0;
}

// Most mutations are not valid text format; their errors are not news.
class Quiet : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nodevol::fuzz::NodeApiInput input;
  Quiet quiet;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&quiet);
  if (!parser.ParseFromString(std::string(reinterpret_cast<const char*>(data), size), &input))
    return -1;  // not an input: keep it out of the corpus
  int n = 0;
  for (const auto& c : input.calls()) {
    if (++n > 16) break;
    Call(c);
    for (const auto& mp : MountsBelowRoot())
      if (!KubeletShaped(mp)) fuzz::Broken("mounted outside the pods dir's volume targets: " + mp);
  }
  TearDown();
  return 0;
}
