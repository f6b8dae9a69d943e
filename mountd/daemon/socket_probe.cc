#include "daemon/socket_probe.h"

#include <grpcpp/grpcpp.h>

#include "nodevol/v1/node.grpc.pb.h"
#include "server/node_service.h"

namespace nodevol {

bool SocketProbe::Run() {
  grpc::ChannelArguments args;
  // A channel of its own with a subchannel of its own: gRPC would otherwise
  // share the connection of an earlier probe.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel("unix:" + socket_, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Node::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline_);
  ctx.AddMetadata(kProbeMetadata, "1");
  v1::GetInfoResponse resp;
  grpc::Status st = stub->GetInfo(&ctx, v1::GetInfoRequest(), &resp);
  std::lock_guard<std::mutex> l(mu_);
  failure_ = st.ok() ? "" : "the unix socket " + socket_ + " did not answer GetInfo: " + st.error_message();
  return st.ok();
}

std::string SocketProbe::Failure() const {
  std::lock_guard<std::mutex> l(mu_);
  return failure_;
}

}  // namespace nodevol
