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
  // The flight lands however fn ends, an exception included: a flight
  // left in the table would hold every later identical call until its
  // deadline.
  struct Land {
    CallJoin* join;
    const std::string& key;
    std::shared_ptr<Flight> flight;
    google::protobuf::Message* response;
    Status status = Status::Internal("the call ended without an answer");
    ~Land() {
      {
        std::lock_guard<std::mutex> l(join->mu_);
        flight->status = status;
        flight->response.reset(response->New());
        flight->response->CopyFrom(*response);
        flight->done = true;
        auto it = join->flights_.find(key);
        if (it != join->flights_.end() && it->second == flight) join->flights_.erase(it);
      }
      join->cv_.notify_all();
    }
  } land{this, key, mine, response};
  land.status = fn();
  return land.status;
}

int CallJoin::Joiners(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = flights_.find(key);
  return it == flights_.end() ? 0 : it->second->joiners;
}

}  // namespace nodevol
