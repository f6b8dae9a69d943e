#include "server/call_join.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "base/call_scope.h"

namespace nodevol {

using SteadyClock = std::chrono::steady_clock;

std::string CallJoin::Key(const char* method, const google::protobuf::Message& request) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  return std::string(method) + '\0' + bytes;
}

Status CallJoin::Run(const std::string& key, google::protobuf::Message* response, const std::function<Status()>& fn,
                     bool* joined) {
  *joined = false;
  auto mine = std::make_shared<Flight>();
  {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      auto it = flights_.find(key);
      if (it == flights_.end()) {
        mine->since = SteadyClock::now();
        flights_.emplace(key, mine);
        break;
      }
      std::shared_ptr<Flight> f = it->second;
      ++f->joiners;
      ++joined_;
      *joined = true;
      const auto deadline = CallScope::SteadyDeadline();
      bool landed = true;
      if (deadline == SteadyClock::time_point::max())
        cv_.wait(l, [&] { return f->done; });
      else
        landed = cv_.wait_until(l, deadline, [&] { return f->done; });
      --f->joiners;
      if (!landed) {
        auto secs = std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - f->since).count();
        return Status::DeadlineExceeded("the same " + key.substr(0, key.find('\0')) + " has been in flight for " +
                                        std::to_string(secs) +
                                        " s; this call joined it rather than repeating it, and it goes on: "
                                        "try again later for its answer");
      }
      // The first call gave up at its own deadline; this one has time
      // left, so it runs the call itself (or joins whoever does now).
      if (f->status.code() == Status::Code::kDeadlineExceeded && SteadyClock::now() < deadline) continue;
      if (f->response) response->CopyFrom(*f->response);
      return f->status;
    }
  }
  Status st = fn();
  {
    std::lock_guard<std::mutex> l(mu_);
    mine->status = st;
    mine->response.reset(response->New());
    mine->response->CopyFrom(*response);
    mine->done = true;
    auto it = flights_.find(key);
    if (it != flights_.end() && it->second == mine) flights_.erase(it);
  }
  cv_.notify_all();
  return st;
}

int CallJoin::Joiners(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = flights_.find(key);
  return it == flights_.end() ? 0 : it->second->joiners;
}

}  // namespace nodevol
