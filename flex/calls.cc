#include "calls.h"

#include <charconv>
#include <memory>
#include <string_view>

#include "base/utf8.h"
#include "client.h"
#include "config.h"
#include "options.h"
#include "output.h"

namespace nodevol::flex {
namespace {

using Args = std::vector<std::string>;

// Connects to nodevold; on failure fills *reply and returns null. The
// client is never destroyed: the process ends with _exit right after its
// answer.
std::unique_ptr<Client> Connect(Reply* reply) {
  Config config;
  std::string error;
  if (!LoadConfig(&config, &error)) {
    *reply = Reply::Failure(error);
    return nullptr;
  }
  // However the daemon behaves, the call ends soon after its deadline.
  ArmWatchdog(config.timeout + std::chrono::seconds(1),
              "nodevol-flex gave up waiting for nodevold at " + config.socket +
                  "; check `systemctl status nodevold`");
  auto client = std::make_unique<Client>(config);
  if (!client->Connect(&error)) {
    *reply = Reply::Failure(error);
    return nullptr;
  }
  return client;
}

Reply Mount(const Args& a) {
  const std::string& target = a[1];
  Options o;
  std::string error;
  if (!ParseMountOptions(a[2], &o, &error)) return Reply::Failure(error);

  v1::DoorRequest door;
  v1::PublishRequest& req = *door.mutable_publish();
  if (o.inline_spec) {
    auto* in = req.mutable_inline_();
    in->set_pool(o.inline_spec->pool);
    in->set_size_bytes(o.inline_spec->size_bytes);
    in->set_fs_type(o.inline_spec->fs_type);
    for (const auto& [k, v] : o.inline_spec->parameters) (*in->mutable_parameters())[k] = v;
  } else {
    req.set_volume(o.volume);
    req.set_pool(o.pool);
  }
  req.set_target(target);
  req.set_read_only(o.read_only);
  for (const auto& opt : o.mount_options) req.add_mount_options(opt);
  if (o.fs_group) req.set_fs_group(*o.fs_group);
  auto* pod = req.mutable_pod();
  pod->set_uid(o.pod.uid);
  pod->set_name(o.pod.name);
  pod->set_namespace_(o.pod.namespace_);
  pod->set_service_account(o.pod.service_account);

  Reply reply;
  std::unique_ptr<Client> client = Connect(&reply);
  if (!client) return reply;
  v1::DoorResponse resp;
  if (!client->Call(door, &resp, &error)) return Reply::Failure("publish: " + error);
  if (resp.code() != 0) return Reply::Failure(client->Describe("publish", resp));
  return Reply::Success("volume " + resp.publish().volume() + " published" + (o.read_only ? " read-only" : ""));
}

Reply Unmount(const Args& a) {
  Reply reply;
  std::unique_ptr<Client> client = Connect(&reply);
  if (!client) return reply;
  v1::DoorRequest req;
  req.mutable_unpublish()->set_target(a[1]);
  v1::DoorResponse resp;
  std::string error;
  if (!client->Call(req, &resp, &error)) return Reply::Failure("unpublish: " + error);
  if (resp.code() != 0) return Reply::Failure(client->Describe("unpublish", resp));
  return Reply::Success(resp.unpublish().was_published() ? "unpublished" : "nothing was published there");
}

// expandfs <json> <devicePath> <deviceMountPath> <newBytes> <oldBytes>:
// grows the volume to at least newBytes (a retry after success is a no-op).
Reply ExpandFs(const Args& a) {
  std::string volume, error;
  if (!ParseVolumeName(a[1], &volume, &error)) return Reply::Failure(error);
  const std::string& text = a[4];
  uint64_t new_bytes = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), new_bytes);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || new_bytes == 0)
    return Reply::Failure("expandfs: new size \"" + text + "\" is not a positive number of bytes");

  Reply reply;
  std::unique_ptr<Client> client = Connect(&reply);
  if (!client) return reply;
  {
    v1::DoorRequest req;
    req.mutable_get_volume()->set_name(volume);
    v1::DoorResponse resp;
    if (!client->Call(req, &resp, &error)) return Reply::Failure("expand: " + error);
    if (resp.code() != 0) return Reply::Failure(client->Describe("expand", resp));
    uint64_t has = resp.get_volume().volume().size_bytes();
    if (has >= new_bytes) return Reply::Success("volume " + volume + " already has " + std::to_string(has) + " bytes");
  }
  v1::DoorRequest req;
  req.mutable_expand_volume()->set_name(volume);
  req.mutable_expand_volume()->set_size_bytes(new_bytes);
  v1::DoorResponse resp;
  if (!client->Call(req, &resp, &error)) return Reply::Failure("expand: " + error);
  if (resp.code() != 0) return Reply::Failure(client->Describe("expand", resp));
  return Reply::Success("volume " + volume + " expanded to " + std::to_string(new_bytes) + " bytes");
}

Reply Init(const Args&) { return Reply::Init(); }

struct Call {
  std::string_view name;
  size_t args;  // arguments after the call name
  Reply (*run)(const Args&);
};

constexpr Call kCalls[] = {
    {"init", 0, Init},
    {"mount", 2, Mount},
    {"unmount", 1, Unmount},
    {"expandfs", 5, ExpandFs},
};

// Calls of attachable drivers; answered the same way whatever the arguments.
constexpr std::string_view kNotSupported[] = {
    "getvolumename", "attach", "detach", "waitforattach", "isattached",
    "mountdevice",   "unmountdevice", "expandvolume",
};

}  // namespace

Reply RunCall(const Args& args) {
  if (args.empty()) return Reply::Failure("no call given; kubelet calls e.g. `init`, `mount <dir> <json>`");
  // What is forwarded goes in protobuf strings, which nodevold would refuse
  // whole ("not a DoorRequest"): say which argument is wrong instead.
  for (size_t i = 0; i < args.size(); ++i)
    if (!IsValidUtf8(args[i]))
      return Reply::Failure("argument " + std::to_string(i) + " is not valid UTF-8; kubelet passes UTF-8 paths and JSON");
  for (std::string_view name : kNotSupported)
    if (args[0] == name) return Reply::NotSupported("nodevol volumes are not attachable; " + args[0] + " is not used");
  for (const Call& call : kCalls) {
    if (args[0] != call.name) continue;
    if (args.size() - 1 != call.args)
      return Reply::Failure(args[0] + " expects " + std::to_string(call.args) + " arguments, got " +
                            std::to_string(args.size() - 1));
    return call.run(args);
  }
  return Reply::Failure("unknown call \"" + args[0] + "\"");
}

}  // namespace nodevol::flex
