#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics/exposition.h"

namespace nodevol::provisioner {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

// Value of the sample whose line starts with `series ` (exact series match).
std::string Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  return "<missing " + series + ">";
}

nodes::NodeState Node(std::string name, bool reachable, std::vector<nodes::PoolCapacity> pools) {
  nodes::NodeState n;
  n.name = std::move(name);
  n.reachable = reachable;
  n.pools = std::move(pools);
  return n;
}

nodes::PoolCapacity Pool(std::string name, std::string backend, uint64_t free) {
  nodes::PoolCapacity p;
  p.name = std::move(name);
  p.backend = std::move(backend);
  p.free_bytes = free;
  return p;
}

TEST(ProvisionerMetrics, EmptyDeclaresEveryFamilyWithTheLibrarysNames) {
  ProvisionerMetrics m;
  std::string out = m.Render();
  for (const char* f : {"controller_persistentvolumeclaim_provision_total counter",
                        "controller_persistentvolumeclaim_provision_failed_total counter",
                        "controller_persistentvolumeclaim_provision_duration_seconds histogram",
                        "controller_persistentvolume_delete_total counter",
                        "controller_persistentvolume_delete_failed_total counter",
                        "controller_persistentvolume_delete_duration_seconds histogram",
                        "nodevol_provisioner_nodes gauge", "nodevol_provisioner_pool_free_bytes gauge",
                        "nodevol_provisioner_leader gauge", "nodevol_provisioner_queue_depth gauge",
                        "nodevol_provisioner_snapshot_operations_total counter",
                        "nodevol_provisioner_snapshot_operation_duration_seconds histogram"}) {
    EXPECT_TRUE(HasLine(out, std::string("# TYPE ") + f)) << f << "\n" << out;
  }
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_nodes{state="reachable"} 0)")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_nodes{state="unreachable"} 0)")) << out;
  EXPECT_TRUE(HasLine(out, "nodevol_provisioner_leader 0")) << out;
  EXPECT_EQ(out.back(), '\n');
}

TEST(ProvisionerMetrics, ProvisionOutcomesByClassAndSource) {
  ProvisionerMetrics m;
  m.ProvisionSucceeded("fast", "", 0.2);
  m.ProvisionSucceeded("fast", "", 0.3);
  m.ProvisionFailed("fast", "");
  m.ProvisionFailed("nfs", "VolumeSnapshot");
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolumeclaim_provision_total{class="fast",source=""} 2)")) << out;
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolumeclaim_provision_failed_total{class="fast",source=""} 1)"));
  EXPECT_TRUE(
      HasLine(out, R"(controller_persistentvolumeclaim_provision_failed_total{class="nfs",source="VolumeSnapshot"} 1)"));
  // Failures are not timed (the library ignores them) but the series exist at 0.
  EXPECT_TRUE(
      HasLine(out, R"(controller_persistentvolumeclaim_provision_total{class="nfs",source="VolumeSnapshot"} 0)"));
  EXPECT_EQ(Sample(out, R"(controller_persistentvolumeclaim_provision_duration_seconds_count{class="nfs",source="VolumeSnapshot"})"),
            "0");
  EXPECT_EQ(Sample(out, R"(controller_persistentvolumeclaim_provision_duration_seconds_count{class="fast",source=""})"),
            "2");
  EXPECT_NEAR(std::stod(Sample(out, R"(controller_persistentvolumeclaim_provision_duration_seconds_sum{class="fast",source=""})")),
              0.5, 1e-12);
}

TEST(ProvisionerMetrics, DeleteOutcomesByClass) {
  ProvisionerMetrics m;
  m.DeleteSucceeded("fast", 1.5);
  m.DeleteFailed("fast");
  m.DeleteFailed("fast");
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolume_delete_total{class="fast"} 1)")) << out;
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolume_delete_failed_total{class="fast"} 2)"));
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolume_delete_duration_seconds_bucket{class="fast",le="1"} 0)"));
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolume_delete_duration_seconds_bucket{class="fast",le="2.5"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolume_delete_duration_seconds_sum{class="fast"} 1.5)"));
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolume_delete_duration_seconds_count{class="fast"} 1)"));
}

TEST(ProvisionerMetrics, SnapshotOperationsByOperationAndResult) {
  ProvisionerMetrics m;
  m.SnapshotOperation("create", true, 0.4);
  m.SnapshotOperation("create", false);
  m.SnapshotOperation("delete", true, 0.1);
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, "# TYPE nodevol_provisioner_snapshot_operations_total counter")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_snapshot_operations_total{operation="create",result="success"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_snapshot_operations_total{operation="create",result="failure"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_snapshot_operations_total{operation="delete",result="failure"} 0)"));
  EXPECT_EQ(Sample(out, R"(nodevol_provisioner_snapshot_operation_duration_seconds_count{operation="create"})"), "1");
}

TEST(ProvisionerMetrics, HistogramBucketsAreCumulativeWithInf) {
  ProvisionerMetrics m;
  m.ProvisionSucceeded("c", "", 0.001);  // first bucket
  m.ProvisionSucceeded("c", "", 0.01);   // exactly on a bound: le is inclusive
  m.ProvisionSucceeded("c", "", 0.7);
  m.ProvisionSucceeded("c", "", 60);     // beyond 10 s: only +Inf
  m.ProvisionSucceeded("c", "", -1);     // a clock step back counts as 0
  std::string out = m.Render();
  auto bucket = [&](const std::string& le) {
    return Sample(out, R"(controller_persistentvolumeclaim_provision_duration_seconds_bucket{class="c",source="",le=")" +
                           le + "\"}");
  };
  // Prometheus' DefBuckets, in increasing order, then +Inf.
  const std::vector<std::pair<std::string, std::string>> want = {
      {"0.005", "2"}, {"0.01", "3"}, {"0.025", "3"}, {"0.05", "3"}, {"0.1", "3"}, {"0.25", "3"},
      {"0.5", "3"},   {"1", "4"},    {"2.5", "4"},   {"5", "4"},    {"10", "4"},  {"+Inf", "5"}};
  size_t pos = 0;
  for (const auto& [le, n] : want) {
    EXPECT_EQ(bucket(le), n) << "le=" << le << "\n" << out;
    size_t at = out.find("le=\"" + le + "\"", pos);
    ASSERT_NE(at, std::string::npos) << le;
    pos = at;
  }
  EXPECT_EQ(Sample(out, R"(controller_persistentvolumeclaim_provision_duration_seconds_count{class="c",source=""})"),
            "5");
  EXPECT_NEAR(std::stod(Sample(out, R"(controller_persistentvolumeclaim_provision_duration_seconds_sum{class="c",source=""})")),
              60.711, 1e-9);
}

TEST(ProvisionerMetrics, LabelValuesAreEscaped) {
  ProvisionerMetrics m;
  m.ProvisionFailed("a\"b\\c\nd", "k\"");
  m.DeleteFailed("x\\y");
  m.SetNodes({Node("n\"1", true, {Pool("p\n", "dir", 7)})});
  m.SetQueueDepth("q\"", 1);
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolumeclaim_provision_failed_total{class="a\"b\\c\nd",source="k\""} 1)"))
      << out;
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolume_delete_failed_total{class="x\\y"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_pool_free_bytes{node="n\"1",pool="p\n",backend="dir"} 7)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_queue_depth{queue="q\""} 1)"));
}

TEST(ProvisionerMetrics, NodeGaugesFollowTheLastSnapshot) {
  ProvisionerMetrics m;
  m.SetNodes({Node("a", true, {Pool("fast", "lvm", 100), Pool("bulk", "dir", 5)}),
              Node("b", false, {Pool("fast", "lvm", 9)}), Node("c", true, {})});
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_nodes{state="reachable"} 2)")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_nodes{state="unreachable"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_pool_free_bytes{node="a",pool="fast",backend="lvm"} 100)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_pool_free_bytes{node="a",pool="bulk",backend="dir"} 5)"));
  // An unreachable node's last figures are stale: not exposed.
  EXPECT_EQ(out.find(R"(node="b")"), std::string::npos) << out;

  m.SetNodes({Node("b", true, {Pool("fast", "lvm", 9)})});
  out = m.Render();
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_nodes{state="reachable"} 1)")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_nodes{state="unreachable"} 0)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_pool_free_bytes{node="b",pool="fast",backend="lvm"} 9)"));
  EXPECT_EQ(out.find(R"(node="a")"), std::string::npos) << "a dropped node's series must vanish\n" << out;
}

TEST(ProvisionerMetrics, LeaderAndQueueDepth) {
  ProvisionerMetrics m;
  m.SetLeader(true);
  m.SetQueueDepth("claim", 3);
  m.SetQueueDepth("volume", 0);
  m.SetQueueDepth("claim", 12);  // replaces
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, "nodevol_provisioner_leader 1")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_queue_depth{queue="claim"} 12)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_queue_depth{queue="volume"} 0)"));
  m.SetLeader(false);
  EXPECT_TRUE(HasLine(m.Render(), "nodevol_provisioner_leader 0"));
}

// Every sample belongs to the family whose # HELP and # TYPE came just
// before it, and each family is declared once.
TEST(ProvisionerMetrics, EverySampleFollowsItsTypeLine) {
  ProvisionerMetrics m;
  m.ProvisionSucceeded("a", "", 0.1);
  m.DeleteFailed("a");
  m.SetNodes({Node("n", true, {Pool("p", "dir", 1)})});
  m.SetQueueDepth("claim", 1);
  std::istringstream in(m.Render());
  std::set<std::string> helped, typed;
  std::string current, type;
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helped.insert(name).second) << "HELP twice: " << name;
    } else if (line.rfind("# TYPE ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      type = line.substr(line.rfind(' ') + 1);
      EXPECT_TRUE(helped.count(current)) << "TYPE before HELP: " << current;
      EXPECT_TRUE(typed.insert(current).second) << "TYPE twice: " << current;
    } else {
      ++samples;
      std::string name = line.substr(0, line.find_first_of("{ "));
      if (type == "histogram") {
        EXPECT_TRUE(name == current + "_bucket" || name == current + "_sum" || name == current + "_count") << line;
      } else {
        EXPECT_EQ(name, current) << line;
      }
    }
  }
  EXPECT_EQ(typed.size(), 13u);
  EXPECT_GT(samples, 20);
}

TEST(ProvisionerMetrics, StepsHaveSubMillisecondBuckets) {
  ProvisionerMetrics m;
  m.ProvisionStep("create_volume", 0.0007);
  m.ProvisionStep("create_volume", 0.003);
  m.ProvisionStep("save_pv", 2.0);
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_provision_step_seconds_bucket{step="create_volume",le="0.0005"} 0)"))
      << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_provision_step_seconds_bucket{step="create_volume",le="0.001"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_provision_step_seconds_bucket{step="create_volume",le="0.005"} 2)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_provision_step_seconds_count{step="create_volume"} 2)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_provisioner_provision_step_seconds_count{step="save_pv"} 1)"));
}

TEST(ProvisionerMetrics, ConcurrentObservationsAllCount) {
  ProvisionerMetrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 1000; ++i) {
        m.ProvisionSucceeded(t % 2 ? "odd" : "even", "", 0.01);
        if (i % 100 == 0) m.Render();
      }
    });
  for (auto& th : threads) th.join();
  std::string out = m.Render();
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolumeclaim_provision_total{class="odd",source=""} 2000)")) << out;
  EXPECT_TRUE(HasLine(out, R"(controller_persistentvolumeclaim_provision_total{class="even",source=""} 2000)"));
}

TEST(Exposition, HelpIsEscapedAndNumbersReadLikeOtherExporters) {
  std::string out;
  exposition::AppendFamily(out, "x", "gauge", "a\\b\nc");
  EXPECT_EQ(out, "# HELP x a\\\\b\\nc\n# TYPE x gauge\n");
  out.clear();
  exposition::AppendSample(out, "x", {}, 1e21);
  exposition::AppendSample(out, "x", {}, 0.25);
  exposition::AppendSample(out, "x", {{"a", "b"}}, uint64_t{18446744073709551615u});
  EXPECT_EQ(out, "x 1e+21\nx 0.25\nx{a=\"b\"} 18446744073709551615\n");
}

}  // namespace
}  // namespace nodevol::provisioner
