// net::Admission: whom a full listener keeps. Strangers (kNew) only ever
// take each other's places; an authenticated client is never dropped for a
// newcomer unless the listener lets anyone authenticate (evict_idle); one
// address holds at most its share; deadlines expire strangers and idlers.
#include "net/admission.h"

#include <gtest/gtest.h>

namespace nodevol::net {
namespace {

using namespace std::chrono_literals;
using Clock = Admission::Clock;

AdmissionLimits Limits(size_t max, size_t per_peer = 0, bool evict_idle = false) {
  AdmissionLimits l;
  l.max_connections = max;
  l.max_per_peer = per_peer;
  l.evict_idle = evict_idle;
  l.handshake_timeout = 3s;
  l.idle_timeout = 120s;
  return l;
}

TEST(AdmissionTest, AFullListenerGivesTheOldestStrangersPlaceToANewcomer) {
  Admission a(Limits(3, 3));
  auto t = Clock::now();
  auto first = a.Arrive("10.0.0.1", t);
  auto second = a.Arrive("10.0.0.2", t + 1ms);
  auto third = a.Arrive("10.0.0.3", t + 2ms);
  ASSERT_TRUE(first.id && second.id && third.id);
  EXPECT_EQ(first.evict, 0u);
  a.Set(first.id, ConnState::kIdle, t + 3ms);  // authenticated
  auto fourth = a.Arrive("10.0.0.4", t + 4ms);
  EXPECT_NE(fourth.id, 0u);
  EXPECT_EQ(fourth.evict, second.id) << "the oldest connection that has not authenticated goes";
  EXPECT_EQ(a.size(), 3u);
  a.Remove(second.id);  // its socket closing later changes nothing
  EXPECT_EQ(a.size(), 3u);
}

TEST(AdmissionTest, AuthenticatedClientsAreNeverDroppedForAStranger) {
  Admission a(Limits(2, 2));
  auto t = Clock::now();
  auto one = a.Arrive("10.0.0.1", t), two = a.Arrive("10.0.0.1", t);
  a.Set(one.id, ConnState::kIdle, t);
  a.Set(two.id, ConnState::kBusy, t);
  auto stranger = a.Arrive("10.0.0.9", t + 1s);
  EXPECT_EQ(stranger.id, 0u) << "refused";
  EXPECT_EQ(stranger.evict, 0u);
  EXPECT_EQ(a.size(), 2u);
}

TEST(AdmissionTest, WhereAnyoneAuthenticatesTheLongestIdleGivesWay) {
  Admission a(Limits(2, 2, /*evict_idle=*/true));
  auto t = Clock::now();
  auto one = a.Arrive("10.0.0.1", t), two = a.Arrive("10.0.0.2", t);
  a.Set(two.id, ConnState::kIdle, t + 1s);
  a.Set(one.id, ConnState::kIdle, t + 2s);
  auto three = a.Arrive("10.0.0.3", t + 3s);
  EXPECT_NE(three.id, 0u);
  EXPECT_EQ(three.evict, two.id) << "idle since t+1s, the longest";
  // Anyone can keep a request busy for ever (pipelined requests, answers
  // read slowly): there, busy connections give way too, last.
  a.Set(one.id, ConnState::kBusy, t + 3s);
  a.Set(three.id, ConnState::kBusy, t + 4s);
  auto four = a.Arrive("10.0.0.4", t + 5s);
  EXPECT_NE(four.id, 0u);
  EXPECT_EQ(four.evict, one.id) << "busy since t+3s, the longest";
}

TEST(AdmissionTest, TheVictimComesFromTheAddressHoldingTheMost) {
  Admission a(Limits(6, 4));
  auto t = Clock::now();
  auto client = a.Arrive("10.0.0.1", t);  // the oldest stranger, alone at its address
  std::vector<Admission::Id> flood;
  for (int i = 0; i < 4; ++i) flood.push_back(a.Arrive("10.0.0.66", t + std::chrono::milliseconds(1 + i)).id);
  a.Arrive("10.0.0.77", t + 10ms);
  // Full: the newcomer takes the flooding address's oldest place, not the
  // client's, although the client is older.
  auto v = a.Arrive("10.0.0.88", t + 20ms);
  EXPECT_NE(v.id, 0u);
  EXPECT_EQ(v.evict, flood[0]);
  EXPECT_NE(v.evict, client.id);
}

TEST(AdmissionTest, OneAddressHoldsAtMostItsShare) {
  Admission a(Limits(8));  // per peer: half, 4
  EXPECT_EQ(a.max_per_peer(), 4u);
  auto t = Clock::now();
  std::vector<Admission::Id> flood;
  for (int i = 0; i < 4; ++i) flood.push_back(a.Arrive("10.0.0.66", t + std::chrono::milliseconds(i)).id);
  // The flooder's fifth takes its own oldest's place, not a slot of the rest.
  auto fifth = a.Arrive("10.0.0.66", t + 10ms);
  EXPECT_EQ(fifth.evict, flood[0]);
  EXPECT_EQ(a.peer_count("10.0.0.66"), 4u);
  // Others still find room without evicting anyone.
  for (int i = 0; i < 4; ++i) {
    auto v = a.Arrive("10.0.1." + std::to_string(i), t + 20ms);
    EXPECT_NE(v.id, 0u);
    EXPECT_EQ(v.evict, 0u);
  }
  EXPECT_EQ(a.size(), 8u);
  // Once the flooder's own are all authenticated, its next is refused
  // (another's stranger is not its to take).
  for (Admission::Id id : {flood[1], flood[2], flood[3], fifth.id}) a.Set(id, ConnState::kBusy, t + 30ms);
  EXPECT_EQ(a.Arrive("10.0.0.66", t + 40ms).id, 0u);
}

TEST(AdmissionTest, StrangersExpireAtTheHandshakeDeadlineIdlersAtTheIdleOne) {
  Admission a(Limits(8, 8));
  auto t = Clock::now();
  auto stranger = a.Arrive("10.0.0.1", t);
  auto client = a.Arrive("10.0.0.2", t);
  auto busy = a.Arrive("10.0.0.3", t);
  a.Set(client.id, ConnState::kIdle, t + 1s);
  a.Set(busy.id, ConnState::kBusy, t + 1s);
  EXPECT_TRUE(a.Expired(t + 2999ms).empty());
  EXPECT_EQ(a.Expired(t + 3s), std::vector<Admission::Id>{stranger.id});
  EXPECT_TRUE(a.Expired(t + 120s).empty());
  EXPECT_EQ(a.Expired(t + 121s), std::vector<Admission::Id>{client.id});
  EXPECT_TRUE(a.Expired(t + 1000s).empty()) << "a busy connection has no deadline here";
  EXPECT_EQ(a.size(), 1u);
}

}  // namespace
}  // namespace nodevol::net
