#include "server/call_join.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include "base/call_scope.h"
#include "nodevol/v1/node.pb.h"

namespace nodevol {
namespace {

v1::PublishRequest Request(bool read_only = false) {
  v1::PublishRequest r;
  r.set_volume("pv-a");
  r.set_target("/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/pv-a");
  r.set_read_only(read_only);
  return r;
}

// The first call, held inside fn until the test lets it go.
struct Held {
  CallJoin* join;
  std::string key;
  std::promise<void> go;
  std::atomic<bool> running{false};
  v1::PublishResponse resp;
  Status status;
  std::thread thread;

  Held(CallJoin* j, std::string k, Status answer) : join(j), key(std::move(k)) {
    thread = std::thread([this, answer, f = go.get_future().share()] {
      bool joined = false;
      status = join->Run(key, &resp, [&] {
        running = true;
        f.wait();
        resp.set_volume("answer of the first call");
        return answer;
      }, &joined);
    });
    while (!running) std::this_thread::yield();
  }
  void Land() {
    go.set_value();
    thread.join();
  }
};

// Until the repeat waits for the flight under key, or finished without
// waiting (a join that does not happen fails the test, never hangs it).
void AwaitJoinerOrEnd(CallJoin* join, const std::string& key, const std::atomic<bool>& done) {
  while (join->Joiners(key) == 0 && !done) std::this_thread::yield();
}

// A repeat waits for the first call's answer and gets it, status and
// response, without running: its fn is never called.
TEST(CallJoin, ARepeatInFlightGetsTheFirstAnswerWithoutRunning) {
  CallJoin join;
  const std::string key = CallJoin::Key("Publish", Request());
  Held first(&join, key, Status::Ok());
  std::atomic<int> ran{0};
  v1::PublishResponse resp;
  Status st;
  bool joined = false;
  std::atomic<bool> done{false};
  std::thread repeat([&] {
    st = join.Run(key, &resp, [&] { ++ran; return Status::Internal("ran again"); }, &joined);
    done = true;
  });
  AwaitJoinerOrEnd(&join, key, done);
  first.Land();
  repeat.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(joined);
  EXPECT_EQ(ran.load(), 0) << "the repeat ran the call again";
  EXPECT_EQ(resp.volume(), "answer of the first call");
  EXPECT_EQ(join.joined(), 1);
  EXPECT_EQ(join.Joiners(key), 0);
}

// A failure is the repeat's answer too: the same request would fail the same.
TEST(CallJoin, ARepeatGetsTheFirstCallsFailure) {
  CallJoin join;
  const std::string key = CallJoin::Key("Publish", Request());
  Held first(&join, key, Status::FailedPrecondition("volume pv-a is published read-only at another target"));
  Status st;
  v1::PublishResponse resp;
  bool joined = false;
  std::atomic<bool> done{false};
  std::thread repeat([&] {
    st = join.Run(key, &resp, [] { return Status::Ok(); }, &joined);
    done = true;
  });
  AwaitJoinerOrEnd(&join, key, done);
  first.Land();
  repeat.join();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
}

// Any field that differs (read-only here) is another call: it runs at once,
// beside the first, and gets its own answer.
TEST(CallJoin, ARequestThatDiffersInOneFieldRunsOnItsOwn) {
  CallJoin join;
  Held first(&join, CallJoin::Key("Publish", Request(false)), Status::Ok());
  v1::PublishResponse resp;
  bool joined = true;
  Status st = join.Run(CallJoin::Key("Publish", Request(true)), &resp, [&] {
    resp.set_volume("its own");
    return Status::Ok();
  }, &joined);
  EXPECT_FALSE(joined);
  EXPECT_EQ(resp.volume(), "its own");
  // Another method with the same bytes is another call too.
  st = join.Run(CallJoin::Key("Unpublish", Request(false)), &resp, [] { return Status::Ok(); }, &joined);
  EXPECT_FALSE(joined);
  first.Land();
}

// A joiner waits no longer than its own caller: DEADLINE_EXCEEDED saying it
// joined, while the first call goes on and lands later.
TEST(CallJoin, AJoinerEndsAtItsOwnDeadline) {
  CallJoin join;
  const std::string key = CallJoin::Key("Publish", Request());
  Held first(&join, key, Status::Ok());
  v1::PublishResponse resp;
  bool joined = false;
  Status st;
  {
    CallScope scope(std::chrono::system_clock::now() + std::chrono::milliseconds(200), "Publish");
    st = join.Run(key, &resp, [] { return Status::Ok(); }, &joined);
  }
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("joined it rather than repeating it"), std::string::npos) << st.message();
  EXPECT_TRUE(joined);
  first.Land();
  EXPECT_TRUE(first.status.ok());
}

// When the first call gave up at its own (earlier) deadline, a joiner with
// time left is not cut short: it runs the call itself.
TEST(CallJoin, AJoinerWithTimeLeftRunsWhenTheFirstTimedOut) {
  CallJoin join;
  const std::string key = CallJoin::Key("Publish", Request());
  Held first(&join, key, Status::DeadlineExceeded("the first caller's deadline"));
  v1::PublishResponse resp;
  Status st;
  std::atomic<int> ran{0};
  bool joined = false;
  std::atomic<bool> done{false};
  std::thread repeat([&] {
    st = join.Run(key, &resp, [&] {
      ++ran;
      resp.set_volume("ran it itself");
      return Status::Ok();
    }, &joined);
    done = true;
  });
  AwaitJoinerOrEnd(&join, key, done);
  first.Land();
  repeat.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(resp.volume(), "ran it itself");
}

// An answer is not kept once the flight landed: the next call runs anew
// (the state may have changed since).
TEST(CallJoin, AnAnswerIsNotKeptAfterTheFlightLands) {
  CallJoin join;
  const std::string key = CallJoin::Key("Publish", Request());
  v1::PublishResponse resp;
  bool joined = false;
  int ran = 0;
  for (int i = 0; i < 2; ++i) join.Run(key, &resp, [&] { ++ran; return Status::Ok(); }, &joined);
  EXPECT_EQ(ran, 2);
  EXPECT_FALSE(joined);
}

// A call that ends by an exception still lands its flight: the next
// identical call runs at once instead of waiting on a flight that never ends.
TEST(CallJoin, AFlightEndedByAnExceptionLands) {
  CallJoin join;
  const std::string key = CallJoin::Key("Publish", Request());
  v1::PublishResponse resp;
  bool joined = false;
  EXPECT_THROW(join.Run(key, &resp, []() -> Status { throw std::runtime_error("boom"); }, &joined),
               std::runtime_error);
  EXPECT_EQ(join.Joiners(key), 0);
  CallScope scope(std::chrono::system_clock::now() + std::chrono::seconds(2), "Publish");
  Status st = join.Run(key, &resp, [] { return Status::Ok(); }, &joined);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(joined);
}

// The key is the request's bytes in protobuf's deterministic form: the same
// map given in another order is the same call.
TEST(CallJoin, TheKeyIgnoresMapOrder) {
  v1::PublishRequest a = Request(), b = Request();
  auto* pa = a.mutable_inline_()->mutable_parameters();
  auto* pb = b.mutable_inline_()->mutable_parameters();
  for (int i = 0; i < 20; ++i) (*pa)["k" + std::to_string(i)] = "v";
  for (int i = 19; i >= 0; --i) (*pb)["k" + std::to_string(i)] = "v";
  EXPECT_EQ(CallJoin::Key("Publish", a), CallJoin::Key("Publish", b));
  (*pb)["k0"] = "w";
  EXPECT_NE(CallJoin::Key("Publish", a), CallJoin::Key("Publish", b));
}

}  // namespace
}  // namespace nodevol
