#include "commands.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iostream>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "nodevol/v1/node.grpc.pb.h"
#include "output.h"
#include "printable.h"
#include "base/size.h"

namespace nodevol::ctl {
namespace {

namespace v1 = ::nodevol::v1;
using StringMap = google::protobuf::Map<std::string, std::string>;

std::string ReadPem(const char* option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(std::string("--") + option + " " + path + ": cannot read the file");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::shared_ptr<grpc::Channel> Connect(const Globals& g) {
  if (g.address.empty()) return grpc::CreateChannel("unix:" + g.socket, grpc::InsecureChannelCredentials());
  // One call per process: plain SSL credentials read once are enough here
  // (the provisioner's long-lived channels watch the files instead).
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ReadPem("tls-ca", g.tls_ca);
  tls.pem_cert_chain = ReadPem("tls-cert", g.tls_cert);
  tls.pem_private_key = ReadPem("tls-key", g.tls_key);
  grpc::ChannelArguments args;
  if (!g.tls_server_name.empty()) args.SetSslTargetNameOverride(g.tls_server_name);
  return grpc::CreateCustomChannel(g.address, grpc::SslCredentials(tls), args);
}

// One unary call with the --timeout deadline; `rpc(stub, context)` makes it.
template <typename Rpc>
void Call(const Globals& g, Rpc&& rpc) {
  auto stub = v1::Node::NewStub(Connect(g));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + g.timeout);
  if (grpc::Status status = rpc(*stub, &context); !status.ok()) throw RpcError(std::move(status));
}

// ------------------------------------------------------------ option values

uint64_t SizeOption(const po::variables_map& vm, const std::string& name) {
  const auto& text = vm[name].as<std::string>();
  if (auto size = ParseSize(text)) return *size;
  throw UsageError("invalid size '" + text + "' for --" + name + ": " + std::string(kSizeForms));
}

uint32_t Uint32Option(const po::variables_map& vm, const std::string& name, const std::string& what) {
  const auto& text = vm[name].as<std::string>();
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError("invalid --" + name + " '" + text + "': expected " + what);
  }
  return value;
}

std::string StringOption(const po::variables_map& vm, const std::string& name) {
  return vm.count(name) ? vm[name].as<std::string>() : std::string();
}

std::vector<std::string> ListOption(const po::variables_map& vm, const std::string& name) {
  return vm.count(name) ? vm[name].as<std::vector<std::string>>() : std::vector<std::string>();
}

void ParamsOption(const po::variables_map& vm, StringMap* params) {
  for (const auto& item : ListOption(vm, "param")) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("invalid --param '" + item + "': expected KEY=VALUE");
    std::string key = item.substr(0, eq);
    if (params->count(key)) throw UsageError("--param " + key + " given twice");
    (*params)[key] = item.substr(eq + 1);
  }
}

// ------------------------------------------------------------ rendering

std::string StateName(v1::VolumeState state) {
  std::string name = v1::VolumeState_Name(state);
  if (name.empty()) return std::to_string(static_cast<int>(state));
  return name.substr(name.rfind('_') + 1);  // VOLUME_STATE_READY -> READY
}

std::string SizeWithBytes(uint64_t bytes) { return FormatSize(bytes) + " (" + std::to_string(bytes) + " bytes)"; }

void PrintVolume(const v1::Volume& v) {
  PrintFields(std::cout, {
                             {"Name", v.name()},
                             {"Pool", v.pool()},
                             {"Backend", v.backend()},
                             {"Size", SizeWithBytes(v.size_bytes())},
                             {"FS type", v.fs_type()},
                             {"State", StateName(v.state())},
                             {"Ephemeral", v.ephemeral() ? "yes" : "no"},
                             {"Created", FormatTime(v.created_unix())},
                             {"Parameters", Join(v.parameters())},
                             {"Attributes", Join(v.attributes())},
                             {"Published at", Join(v.published_at())},
                             {"Made from", !v.from_snapshot().empty() ? "snapshot " + v.from_snapshot()
                                           : !v.from_volume().empty() ? "volume " + v.from_volume()
                                                                      : std::string()},
                         });
}

void PrintSnapshot(const v1::Snapshot& s) {
  PrintFields(std::cout, {
                             {"Name", s.name()},
                             {"Source volume", s.source_volume()},
                             {"Pool", s.pool()},
                             {"Backend", s.backend()},
                             {"Size", SizeWithBytes(s.size_bytes())},
                             {"FS type", s.block() ? "(raw block)" : s.fs_type()},
                             {"State", StateName(s.state())},
                             {"Created", FormatTime(s.created_unix())},
                             {"Attributes", Join(s.attributes())},
                         });
}

void PrintCapacity(const v1::GetCapacityResponse& r) {
  Table table({"POOL", "TOTAL", "FREE", "ALLOCATED", "VOLUMES", "SNAPSHOTS"});
  for (const auto& p : r.pools()) {
    table.Add({p.pool(), FormatSize(p.total_bytes()), FormatSize(p.free_bytes()), FormatSize(p.allocated_bytes()),
               std::to_string(p.volume_count()), std::to_string(p.snapshot_count())});
  }
  table.Print(std::cout);
}

// ------------------------------------------------------------ commands

int PrintJsonOk(const google::protobuf::Message& response) {
  PrintJson(std::cout, response);
  return 0;
}

int Info(const Invocation& in) {
  v1::GetInfoResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.GetInfo(ctx, v1::GetInfoRequest(), &r); });
  if (in.globals.json) return PrintJsonOk(r);
  PrintFields(std::cout, {{"Node", r.node_name()},
                          {"Version", r.version()},
                          {"API versions", Join(r.api_versions())},
                          {"Backends", Join(r.backends())}});
  std::cout << '\n';
  Table pools({"POOL", "BACKEND", "FS-TYPES", "ENFORCED", "ATTRIBUTES"});
  for (const auto& p : r.pools()) {
    pools.Add({p.name(), p.backend(), Join(p.fs_types(), ","), p.size_enforced() ? "yes" : "no", Join(p.attributes())});
  }
  pools.Print(std::cout);
  std::cout << '\n' << (r.drift().empty() ? "Drift: none\n" : "Drift:\n");
  for (const auto& line : r.drift()) std::cout << "  " << Printable(line) << '\n';
  return 0;
}

// Waits until the channel is connected or has failed (then the call that
// follows reports why), so a daemon that accepts but never answers is caught
// by --timeout even on a stream, which has no deadline of its own.
void WaitForConnection(grpc::Channel& channel, const Globals& g) {
  auto deadline = std::chrono::system_clock::now() + g.timeout;
  for (auto state = channel.GetState(true); state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE;
       state = channel.GetState(true)) {
    if (!channel.WaitForStateChange(state, deadline)) {
      throw RpcError(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                  "no connection to nodevold within " + std::to_string(g.timeout.count()) + "s"));
    }
  }
}

int WatchCapacity(const Invocation& in, const std::string& pool) {
  v1::WatchCapacityRequest request;
  if (in.options.count("heartbeat")) {
    request.set_heartbeat_seconds(Uint32Option(in.options, "heartbeat", "a whole number of seconds"));
  }
  auto channel = Connect(in.globals);
  WaitForConnection(*channel, in.globals);
  auto stub = v1::Node::NewStub(channel);
  grpc::ClientContext context;  // no deadline: the stream runs until Ctrl-C
  auto reader = stub->WatchCapacity(&context, request);
  v1::GetCapacityResponse message;
  for (bool first = true; reader->Read(&message); first = false) {
    if (!pool.empty()) {  // the stream carries every pool: keep only the one asked for
      auto* pools = message.mutable_pools();
      pools->erase(std::remove_if(pools->begin(), pools->end(), [&](const auto& p) { return p.pool() != pool; }),
                   pools->end());
      if (first && pools->empty()) {
        context.TryCancel();
        throw RpcError(grpc::Status(grpc::StatusCode::NOT_FOUND, "no pool \"" + pool + "\" on this node"));
      }
    }
    if (in.globals.json) {
      PrintJson(std::cout, message, /*compact=*/true);
    } else {
      std::cout << (first ? "" : "\n") << "observed " << FormatTime(message.observed_unix_ms() / 1000)
                << (message.heartbeat() ? " (heartbeat)" : "") << '\n';
      PrintCapacity(message);
    }
    std::cout.flush();
  }
  if (grpc::Status status = reader->Finish(); !status.ok()) throw RpcError(std::move(status));
  return 0;
}

int Capacity(const Invocation& in) {
  std::string pool = in.args.empty() ? "" : in.args[0];
  if (in.options["watch"].as<bool>()) return WatchCapacity(in, pool);
  if (in.options.count("heartbeat")) throw UsageError("--heartbeat only goes with --watch");
  v1::GetCapacityRequest request;
  request.set_pool(pool);
  v1::GetCapacityResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.GetCapacity(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  PrintCapacity(r);
  return 0;
}

int VolumeList(const Invocation& in) {
  v1::ListVolumesRequest request;
  request.set_pool(StringOption(in.options, "pool"));
  // In pages: one answer for every volume of a big node would pass gRPC's
  // 4 MiB limit. A nodevold without paging answers all at once.
  request.set_max_entries(1000);
  v1::ListVolumesResponse r;
  for (;;) {
    v1::ListVolumesResponse page;
    Call(in.globals, [&](auto& stub, auto* ctx) { return stub.ListVolumes(ctx, request, &page); });
    for (auto& v : *page.mutable_volumes()) *r.add_volumes() = std::move(v);
    if (page.next_token().empty()) break;
    request.set_starting_token(page.next_token());
  }
  if (in.globals.json) return PrintJsonOk(r);
  Table table({"NAME", "POOL", "BACKEND", "SIZE", "STATE", "PUBLISHED"});
  for (const auto& v : r.volumes()) {
    table.Add({v.name(), v.pool(), v.backend(), FormatSize(v.size_bytes()), StateName(v.state()),
               std::to_string(v.published_at_size())});
  }
  table.Print(std::cout);
  return 0;
}

int VolumeGet(const Invocation& in) {
  v1::GetVolumeRequest request;
  request.set_name(in.args[0]);
  request.set_shared_pool(StringOption(in.options, "shared-pool"));
  v1::GetVolumeResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.GetVolume(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  PrintVolume(r.volume());
  return 0;
}

int VolumeCreate(const Invocation& in) {
  v1::CreateVolumeRequest request;
  request.set_name(in.args[0]);
  request.set_pool(StringOption(in.options, "pool"));
  request.set_size_bytes(SizeOption(in.options, "size"));
  request.set_fs_type(StringOption(in.options, "fs-type"));
  request.set_block(in.options["block"].as<bool>());
  request.set_from_snapshot(StringOption(in.options, "from-snapshot"));
  request.set_from_volume(StringOption(in.options, "from-volume"));
  if (!request.from_snapshot().empty() && !request.from_volume().empty())
    throw UsageError("give --from-snapshot or --from-volume, not both");
  ParamsOption(in.options, request.mutable_parameters());
  v1::CreateVolumeResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.CreateVolume(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  PrintVolume(r.volume());
  return 0;
}

int VolumeDelete(const Invocation& in) {
  v1::DeleteVolumeRequest request;
  request.set_name(in.args[0]);
  request.set_shared_pool(StringOption(in.options, "shared-pool"));
  v1::DeleteVolumeResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.DeleteVolume(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  std::cout << "volume " << Printable(request.name()) << (r.existed() ? " deleted\n" : " did not exist\n");
  return 0;
}

int VolumeExpand(const Invocation& in) {
  v1::ExpandVolumeRequest request;
  request.set_name(in.args[0]);
  request.set_size_bytes(SizeOption(in.options, "size"));
  request.set_shared_pool(StringOption(in.options, "shared-pool"));
  v1::ExpandVolumeResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.ExpandVolume(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  PrintVolume(r.volume());
  return 0;
}

int SnapshotList(const Invocation& in) {
  v1::ListSnapshotsRequest request;
  request.set_source_volume(StringOption(in.options, "volume"));
  v1::ListSnapshotsResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.ListSnapshots(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  Table table({"NAME", "VOLUME", "POOL", "SIZE", "STATE", "CREATED"});
  for (const auto& s : r.snapshots())
    table.Add({s.name(), s.source_volume(), s.pool(), FormatSize(s.size_bytes()), StateName(s.state()),
               FormatTime(s.created_unix())});
  table.Print(std::cout);
  return 0;
}

int SnapshotGet(const Invocation& in) {
  v1::GetSnapshotRequest request;
  request.set_name(in.args[0]);
  v1::GetSnapshotResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.GetSnapshot(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  PrintSnapshot(r.snapshot());
  return 0;
}

int SnapshotCreate(const Invocation& in) {
  v1::CreateSnapshotRequest request;
  request.set_name(in.args[0]);
  request.set_source_volume(StringOption(in.options, "volume"));
  v1::CreateSnapshotResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.CreateSnapshot(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  PrintSnapshot(r.snapshot());
  return 0;
}

int SnapshotDelete(const Invocation& in) {
  v1::DeleteSnapshotRequest request;
  request.set_name(in.args[0]);
  v1::DeleteSnapshotResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.DeleteSnapshot(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  std::cout << "snapshot " << Printable(request.name()) << (r.existed() ? " deleted\n" : " did not exist\n");
  return 0;
}

int Publish(const Invocation& in) {
  const auto& vm = in.options;
  bool named = vm.count("volume"), inline_volume = vm.count("inline-pool");
  if (named == inline_volume) throw UsageError("give either --volume NAME or --inline-pool P --inline-size SIZE");
  if (named && (vm.count("inline-size") || vm.count("inline-fs-type") || vm.count("param"))) {
    throw UsageError("--inline-size, --inline-fs-type and --param only go with --inline-pool");
  }
  if (inline_volume && !vm.count("inline-size")) throw UsageError("--inline-pool needs --inline-size SIZE");
  v1::PublishRequest request;
  if (vm.count("pool") && !named) throw UsageError("--pool goes with --volume");
  if (named) {
    request.set_volume(vm["volume"].as<std::string>());
    request.set_pool(StringOption(vm, "pool"));
  } else {
    auto* spec = request.mutable_inline_();
    spec->set_pool(vm["inline-pool"].as<std::string>());
    spec->set_size_bytes(SizeOption(vm, "inline-size"));
    spec->set_fs_type(StringOption(vm, "inline-fs-type"));
    ParamsOption(vm, spec->mutable_parameters());
  }
  request.set_target(vm["target"].as<std::string>());
  request.set_read_only(vm["read-only"].as<bool>());
  request.set_block(vm["block"].as<bool>());
  for (const auto& option : ListOption(vm, "mount-option")) request.add_mount_options(option);
  if (vm.count("fs-group")) request.set_fs_group(Uint32Option(vm, "fs-group", "a numeric group id"));
  if (vm.count("pod-uid")) request.mutable_pod()->set_uid(vm["pod-uid"].as<std::string>());
  v1::PublishResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.Publish(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  std::cout << "published volume " << Printable(r.volume()) << " at " << Printable(r.target()) << '\n';
  return 0;
}

int Unpublish(const Invocation& in) {
  v1::UnpublishRequest request;
  request.set_target(in.options["target"].as<std::string>());
  v1::UnpublishResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.Unpublish(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  std::cout << (r.was_published() ? "unpublished " : "nothing was published at ") << Printable(request.target()) << '\n';
  return 0;
}

int Stats(const Invocation& in) {
  v1::GetVolumeStatsRequest request;
  request.set_target(in.options["target"].as<std::string>());
  v1::GetVolumeStatsResponse r;
  Call(in.globals, [&](auto& stub, auto* ctx) { return stub.GetVolumeStats(ctx, request, &r); });
  if (in.globals.json) return PrintJsonOk(r);
  Table table({"VOLUME", "TOTAL", "USED", "AVAILABLE", "INODES", "IUSED", "IFREE"});
  table.Add({r.volume(), FormatSize(r.total_bytes()), FormatSize(r.used_bytes()), FormatSize(r.available_bytes()),
             std::to_string(r.total_inodes()), std::to_string(r.used_inodes()), std::to_string(r.free_inodes())});
  table.Print(std::cout);
  return 0;
}

// ------------------------------------------------------------ options

po::typed_value<std::string>* Text(const char* name) { return po::value<std::string>()->value_name(name); }
po::typed_value<std::vector<std::string>>* List(const char* name) {
  return po::value<std::vector<std::string>>()->composing()->value_name(name);
}

void TargetOption(po::options_description& o) {
  o.add_options()("target", Text("DIR")->required(), "pod volume directory (required)");
}

void SharedPoolOption(po::options_description& o) {
  o.add_options()("shared-pool", Text("P"),
                  "a volume not on this node is looked for on pool P's export (an NFS volume another node made)");
}

}  // namespace

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> commands{
      {"info", {}, "", "Show the node: name, version, backends, pools and state drift.", nullptr, Info},
      {"capacity", {"[POOL]"}, "[--watch [--heartbeat SECONDS]]",
       "Show total, free and allocated bytes of every pool (or of POOL);\n"
       "--watch prints again at every change until Ctrl-C.",
       [](po::options_description& o) {
         o.add_options()("watch", po::bool_switch(), "stream: one table (JSON line with -o json) per message")(
             "heartbeat", Text("SECONDS"), "with --watch: a message at least every SECONDS (default: nodevold's, 10)");
       },
       Capacity},
      {"volume list", {}, "[--pool P]", "List volumes.",
       [](po::options_description& o) { o.add_options()("pool", Text("P"), "only the volumes of pool P"); },
       VolumeList},
      {"volume get", {"NAME"}, "[--shared-pool P]", "Show one volume.", SharedPoolOption, VolumeGet},
      {"volume create", {"NAME"},
       "--pool P --size SIZE [--fs-type T | --block] [--param k=v ...]\n"
       "    [--from-snapshot S | --from-volume V]",
       "Create a volume (idempotent: the same arguments again succeed).",
       [](po::options_description& o) {
         o.add_options()("pool", Text("P")->required(), "pool to create the volume in (required)")(
             "size", Text("SIZE")->required(), "volume size (required), e.g. 10Gi")(
             "fs-type", Text("T"), "filesystem type (default: the pool's)")(
             "block", po::bool_switch(), "a raw block volume: no filesystem (lvm pools)")(
             "param", List("k=v"), "backend parameter, repeatable (dir: mode, uid, gid)")(
             "from-snapshot", Text("S"), "start as snapshot S's content (a restore; same pool, SIZE >= its size)")(
             "from-volume", Text("V"), "start as volume V's content now (a clone; same pool, SIZE >= its size)");
       },
       VolumeCreate},
      {"volume delete", {"NAME"}, "[--shared-pool P]", "Delete a volume (succeeds when it does not exist).",
       SharedPoolOption, VolumeDelete},
      {"volume expand", {"NAME"}, "--size SIZE [--shared-pool P]", "Grow a volume to SIZE.",
       [](po::options_description& o) {
         o.add_options()("size", Text("SIZE")->required(), "new size (required)");
         SharedPoolOption(o);
       },
       VolumeExpand},
      {"snapshot list", {}, "[--volume V]", "List snapshots.",
       [](po::options_description& o) { o.add_options()("volume", Text("V"), "only the snapshots of volume V"); },
       SnapshotList},
      {"snapshot get", {"NAME"}, "", "Show one snapshot.", nullptr, SnapshotGet},
      {"snapshot create", {"NAME"}, "--volume V",
       "Snapshot volume V as NAME (idempotent; lvm thin and dir pools: docs/snapshots.md).",
       [](po::options_description& o) {
         o.add_options()("volume", Text("V")->required(), "the volume to snapshot (required)");
       },
       SnapshotCreate},
      {"snapshot delete", {"NAME"}, "", "Delete a snapshot (succeeds when it does not exist).", nullptr,
       SnapshotDelete},
      {"publish", {},
       "(--volume NAME [--pool P] | --inline-pool P --inline-size SIZE [--inline-fs-type T] [--param k=v ...])\n"
       "    --target DIR [--read-only] [--mount-option O ...] [--fs-group GID] [--pod-uid UID] [--block]",
       "Bind-mount a volume, or a new inline ephemeral volume, at a pod volume directory.",
       [](po::options_description& o) {
         o.add_options()("volume", Text("NAME"), "existing volume to publish")(
             "pool", Text("P"), "the volume's pool: an NFS volume another node made is found on its export")(
             "inline-pool", Text("P"), "create an inline ephemeral volume in pool P")(
             "inline-size", Text("SIZE"), "size of the inline volume")(
             "inline-fs-type", Text("T"), "filesystem type of the inline volume")(
             "param", List("k=v"), "inline volume backend parameter, repeatable")(
             "target", Text("DIR")->required(), "pod volume directory (required)")(
             "read-only", po::bool_switch(), "mount read-only")(
             "mount-option", List("O"), "nosuid, nodev, noexec, noatime, nodiratime, relatime or strictatime; repeatable")(
             "fs-group", Text("GID"), "give the volume root this group, setgid and group rw")(
             "pod-uid", Text("UID"), "pod UID, checked against the one in the target path")(
             "block", po::bool_switch(), "a raw block volume's device, bound onto the file --target (below "
             "kubelet's plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/)");
       },
       Publish},
      {"unpublish", {}, "--target DIR", "Unmount a pod volume directory (deletes an inline volume).", TargetOption,
       Unpublish},
      {"stats", {}, "--target DIR", "Show byte and inode usage of a published volume.", TargetOption, Stats},
  };
  return commands;
}

}  // namespace nodevol::ctl
