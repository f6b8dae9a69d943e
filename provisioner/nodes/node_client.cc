#include "nodes/node_client.h"

#include <grpcpp/client_context.h>

namespace nodevol::nodes {

Status FromGrpc(const grpc::Status& status, std::string_view context) {
  if (status.ok()) return Status::Ok();
  // base/status.h has every gRPC code under the same number.
  auto code = static_cast<Status::Code>(status.error_code());
  std::string message = status.error_message().empty() ? "(no message)" : status.error_message();
  return Status(code, std::string(context) + ": " + message);
}

NodeClient::NodeClient(std::string node, std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout)
    : node_(std::move(node)), channel_(std::move(channel)), stub_(v1::Node::NewStub(channel_)), timeout_(timeout) {}

template <typename Req, typename Resp, typename Method>
Status NodeClient::Call(const char* name, Method method, const Req& req, Resp* out,
                        std::chrono::milliseconds timeout) const {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + (timeout.count() > 0 ? timeout : timeout_));
  grpc::Status st = (stub_.get()->*method)(&ctx, req, out);
  return FromGrpc(st, "node " + node_ + ": " + name);
}

Status NodeClient::GetInfo(v1::GetInfoResponse* out) const {
  return Call("GetInfo", &v1::Node::Stub::GetInfo, v1::GetInfoRequest(), out);
}
Status NodeClient::CreateVolume(const v1::CreateVolumeRequest& req, v1::CreateVolumeResponse* out) const {
  return Call("CreateVolume", &v1::Node::Stub::CreateVolume, req, out);
}
Status NodeClient::DeleteVolume(const v1::DeleteVolumeRequest& req, v1::DeleteVolumeResponse* out) const {
  return Call("DeleteVolume", &v1::Node::Stub::DeleteVolume, req, out);
}
Status NodeClient::ExpandVolume(const v1::ExpandVolumeRequest& req, v1::ExpandVolumeResponse* out) const {
  return Call("ExpandVolume", &v1::Node::Stub::ExpandVolume, req, out);
}
Status NodeClient::GetVolume(const v1::GetVolumeRequest& req, v1::GetVolumeResponse* out) const {
  return Call("GetVolume", &v1::Node::Stub::GetVolume, req, out);
}
Status NodeClient::ListVolumes(const v1::ListVolumesRequest& req, v1::ListVolumesResponse* out) const {
  return Call("ListVolumes", &v1::Node::Stub::ListVolumes, req, out);
}

Status NodeClient::ListAllVolumes(v1::ListVolumesResponse* out, std::chrono::milliseconds page_timeout) const {
  out->Clear();
  v1::ListVolumesRequest req;
  req.set_max_entries(1000);
  for (;;) {
    v1::ListVolumesResponse page;
    if (Status st = Call("ListVolumes", &v1::Node::Stub::ListVolumes, req, &page, page_timeout); !st.ok()) return st;
    for (auto& v : *page.mutable_volumes()) *out->add_volumes() = std::move(v);
    if (page.next_token().empty()) return Status::Ok();
    req.set_starting_token(page.next_token());
  }
}

Status NodeClient::CreateSnapshot(const v1::CreateSnapshotRequest& req, v1::CreateSnapshotResponse* out) const {
  return Call("CreateSnapshot", &v1::Node::Stub::CreateSnapshot, req, out);
}
Status NodeClient::DeleteSnapshot(const v1::DeleteSnapshotRequest& req, v1::DeleteSnapshotResponse* out) const {
  return Call("DeleteSnapshot", &v1::Node::Stub::DeleteSnapshot, req, out);
}
Status NodeClient::GetSnapshot(const v1::GetSnapshotRequest& req, v1::GetSnapshotResponse* out) const {
  return Call("GetSnapshot", &v1::Node::Stub::GetSnapshot, req, out);
}

}  // namespace nodevol::nodes
