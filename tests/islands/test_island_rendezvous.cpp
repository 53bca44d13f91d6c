// Outer-round membership between islands in separate processes, met through `RendezvousServer`:
// a late island sits a round out and is in the next; an island killed mid-round (SIGKILL) fails its
// round's group, and the survivors meet again and finish the round among themselves. Members are
// this binary started again (member_processes.h); each writes what it saw to its file.
// A restartable rendezvous (issue 63): its state file round-trips and refuses damage; islands
// (threads here, each with connections of its own) carry on across the server stopped and started
// again on the same port with the same state file -- between rounds and inside one -- and find the
// rounds, members and outcomes they acted on still there; an island whose rendezvous does not come
// back fails with one line naming it and how long it waited.
#include "comm/island_rendezvous.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <barrier>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "comm/rendezvous_server.h"
#include "comm/rendezvous_state.h"
#include "tests/islands/member_processes.h"
#include "tests/temp_dir_test.h"

namespace atl::comm {
namespace {

constexpr int kIslands = 3;

int env_int(const char* name) {
  return std::atoi(std::getenv(name));
}

std::string describe(const RoundMembership& m) {
  std::string ids;
  for (int id : m.islands) ids += std::to_string(id) + ",";
  return "round " + std::to_string(m.round) + " attempt " + std::to_string(m.attempt) + " members " + ids +
         " index " + std::to_string(m.index);
}

IslandRendezvous connect(int island) {
  IslandRendezvousOptions options;
  options.island = island;
  options.min_islands = 2;
  options.max_islands = kIslands;
  options.grace = std::chrono::seconds(1);
  options.timeout = std::chrono::seconds(20);
  return IslandRendezvous({"127.0.0.1", static_cast<uint16_t>(env_int("ATOLL_RDV_PORT"))}, options);
}

// The sum over the round's members of (island + 1), through their group at position 0.
int64_t sum_of_members(IslandRendezvous& rendezvous, const RoundMembership& m, int island) {
  auto group = rendezvous.group(m, 0, "islands");
  const at::Tensor value = at::full({16}, island + 1, at::kLong);
  group->all_reduce(value, ReduceOp::kSum)->wait();
  return value[0].item<int64_t>();
}

// What island `island` of this scenario has written so far (its ATOLL_RDV_OUT, beside this one's).
std::string written_by(int island) {
  std::string path = std::getenv("ATOLL_RDV_OUT");
  path.back() = static_cast<char>('0' + island);
  return test::read_file(path);
}

// Waits (at most 60 s) until island `island` has written a line starting with `prefix`.
void wait_for_line_of(int island, const std::string& prefix) {
  for (int i = 0; i < 6000; ++i) {
    const std::string text = written_by(island);
    if (text.rfind(prefix, 0) == 0 || text.find("\n" + prefix) != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("island " + std::to_string(island) + " never wrote '" + prefix + "'");
}

// Island 2 arrives at round 0 once islands 0 and 1 have closed it between them (after 1 s of grace),
// so it sits the round out; they wait for it to have done so before round 1, where all three meet.
// (Events, not sleeps: on a loaded machine a late start of islands 0 and 1 cannot turn island 2's
// late arrival into an early one.)
int late_island(int island, std::ofstream& out) {
  IslandRendezvous rendezvous = connect(island);
  if (island == 2) wait_for_line_of(0, "round 0 ");
  const RoundMembership first = rendezvous.join(0);
  out << describe(first) << std::endl;
  if (first.member()) wait_for_line_of(2, "round 0 ");
  const RoundMembership second = rendezvous.join(1);
  out << describe(second) << " sum " << sum_of_members(rendezvous, second, island) << "\n";
  return 0;
}

// All three meet for round 0 and reduce once.
int meeting_islands(int island, std::ofstream& out) {
  IslandRendezvous rendezvous = connect(island);
  const RoundMembership round = rendezvous.join(0);
  out << describe(round) << " sum " << sum_of_members(rendezvous, round, island) << "\n";
  return 0;
}

// All three meet and reduce once; island 2 is then killed before the second reduction; the others'
// reduction fails, they meet again (attempt 1) and reduce among themselves.
int killed_island(int island, std::ofstream& out) {
  IslandRendezvous rendezvous = connect(island);
  const RoundMembership round = rendezvous.join(0);
  auto group = rendezvous.group(round, 0, "islands");
  at::Tensor value = at::full({16}, island + 1, at::kLong);
  group->all_reduce(value, ReduceOp::kSum)->wait();
  out << describe(round) << " sum " << value[0].item<int64_t>() << "\n" << std::flush;
  if (island == 2) std::raise(SIGKILL);
  try {
    value.fill_(island + 1);
    group->all_reduce(value, ReduceOp::kSum)->wait();
    out << "second reduction did not fail\n";
    return 1;
  } catch (const GroupFailure& e) {
    std::cerr << e.what() << "\n";
  }
  const RoundMembership again = rendezvous.join(0, 1);
  out << describe(again) << " sum " << sum_of_members(rendezvous, again, island) << "\n";
  return 0;
}

class IslandRounds : public test::TempDirTest {
 protected:
  // Starts the three islands of `scenario` and returns their exit statuses.
  std::vector<int> run(const std::string& scenario) { return run(scenario, server_.port()); }
  std::vector<int> run(const std::string& scenario, uint16_t port) {
    std::vector<pid_t> islands;
    for (int i = 0; i < kIslands; ++i)
      islands.push_back(
          test::start_member({"ATOLL_RDV_SCENARIO=" + scenario, "ATOLL_RDV_ISLAND=" + std::to_string(i),
                              "ATOLL_RDV_PORT=" + std::to_string(port), "ATOLL_RDV_OUT=" + out(i)},
                             out(i) + ".err"));
    return test::wait_all(islands, std::chrono::seconds(90));
  }
  std::string out(int island) const { return path("island-" + std::to_string(island)); }
  std::string seen(int island) const { return test::read_file(out(island)); }

  RendezvousServer server_{0};
};

TEST_F(IslandRounds, ALateIslandSitsTheRoundOutAndIsInTheNext) {
  const std::vector<int> statuses = run("late");
  for (int i = 0; i < kIslands; ++i)
    ASSERT_EQ(statuses[i], 0) << "island " << i << ": " << test::read_file(out(i) + ".err");
  EXPECT_EQ(seen(0),
            "round 0 attempt 0 members 0,1, index 0\nround 1 attempt 0 members 0,1,2, index 0 sum 6\n");
  EXPECT_EQ(seen(1),
            "round 0 attempt 0 members 0,1, index 1\nround 1 attempt 0 members 0,1,2, index 1 sum 6\n");
  EXPECT_EQ(seen(2),
            "round 0 attempt 0 members 0,1, index -1\nround 1 attempt 0 members 0,1,2, index 2 sum 6\n");
}

TEST_F(IslandRounds, SurvivorsOfAKilledIslandMeetAgainAndFinishTheRound) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int> statuses = run("killed");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(statuses[2], -1) << "island 2 was to die by SIGKILL";
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(statuses[i], 0) << "island " << i << ": " << test::read_file(out(i) + ".err");
    EXPECT_EQ(seen(i), "round 0 attempt 0 members 0,1,2, index " + std::to_string(i) +
                           " sum 6\nround 0 attempt 1 members 0,1, index " + std::to_string(i) + " sum 3\n");
    EXPECT_EQ(
        test::last_line(test::read_file(out(i) + ".err")).rfind("Gloo group islands: an operation failed", 0),
        0u)
        << test::read_file(out(i) + ".err");
  }
  EXPECT_EQ(seen(2), "round 0 attempt 0 members 0,1,2, index 2 sum 6\n");
  // The failure is seen when the connections close, and attempt 1 closes after its 1 s of grace.
  EXPECT_LT(seconds, 15.0);
}

TEST_F(IslandRounds, TheAtollRendezvousCommandServesTheIslandsUntilSigterm) {
  const char* atoll = std::getenv("ATOLL_BIN");
  ASSERT_NE(atoll, nullptr) << "ATOLL_BIN names the atoll binary (tests/CMakeLists.txt sets it)";
  uint16_t port = 0;
  {
    RendezvousServer probe(0);  // a port free a moment ago
    port = probe.port();
  }
  const pid_t server = test::start_process({atoll, "rendezvous", "--port", std::to_string(port)}, {},
                                           path("rendezvous.out"), path("rendezvous.err"));
  const std::string serving = "atoll rendezvous: serving islands on port " + std::to_string(port);
  for (int i = 0; i < 500 && test::read_file(path("rendezvous.out")).rfind(serving, 0) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(test::read_file(path("rendezvous.out")).rfind(serving, 0), 0u)
      << test::read_file(path("rendezvous.err"));
  const std::vector<int> statuses = run("meet", port);
  for (int i = 0; i < kIslands; ++i) {
    EXPECT_EQ(statuses[i], 0) << "island " << i << ": " << test::read_file(out(i) + ".err");
    EXPECT_EQ(seen(i), "round 0 attempt 0 members 0,1,2, index " + std::to_string(i) + " sum 6\n");
  }
  kill(server, SIGTERM);
  EXPECT_EQ(test::wait_all({server}, std::chrono::seconds(10))[0], 0);
  EXPECT_EQ(test::last_line(test::read_file(path("rendezvous.out"))), "atoll rendezvous: stopped by SIGTERM");
}

// RendezvousState ------------------------------------------------------------------------------

class RendezvousStateTest : public test::TempDirTest {};

TEST_F(RendezvousStateTest, RecordsRoundTripAndOldRoundsAreDropped) {
  RendezvousState state = RendezvousState::load(path("state"));
  const std::string binary("a\0b\nc d\xff", 8);
  state.record({{"round/0/0/members", "0:x:,1:y:,"}, {"key with spaces\n", binary}});
  state.record({{durable::kLatestRound, "3"}});
  RendezvousState again = RendezvousState::load(path("state"));
  EXPECT_EQ(again.records(), state.records());
  EXPECT_EQ(again.records().at("key with spaces\n"), binary);
  EXPECT_EQ(again.latest_round(), 3);
  // A removal is written too.
  again.record({{"key with spaces\n", std::nullopt}});
  EXPECT_EQ(RendezvousState::load(path("state")).records().count("key with spaces\n"), 0u);
  // Rounds more than kKeptRounds behind the newest that counted are dropped; newer ones kept.
  again.record({{durable::kLatestRound, std::to_string(RendezvousState::kKeptRounds + 1)}});
  EXPECT_EQ(RendezvousState::load(path("state")).records().count("round/0/0/members"), 0u);
  again.record({{"round/1/0/members", "0:x:,"}});
  EXPECT_EQ(RendezvousState::load(path("state")).records().count("round/1/0/members"), 1u);
}

TEST_F(RendezvousStateTest, ADamagedFileIsOneLineNamingItNeverANewRun) {
  RendezvousState state = RendezvousState::load(path("state"));
  state.record({{durable::kLatestRound, "7"}, {"round/7/0/members", "0:x:,"}});
  const std::string whole = test::read_file(path("state"));
  const auto refusal = [&](const std::string& text) {
    write_file("state", text);
    try {
      RendezvousState::load(path("state"));
      return std::string("loaded");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
  };
  const std::string prefix = "atoll rendezvous --state " + path("state") + ": ";
  const std::string fix =
      "; restore the file from a copy, or start a new run with a new --state file (the islands then resume "
      "from "
      "their checkpoints)";
  std::string flipped = whole;
  flipped[30] = flipped[30] == '0' ? '1' : '0';
  EXPECT_EQ(refusal(flipped).rfind(prefix + "fails its checksum (", 0), 0u) << refusal(flipped);
  EXPECT_EQ(
      refusal(whole.substr(0, whole.size() / 2)),
      prefix +
          "is not a whole rendezvous state file (no 'atoll rendezvous state 1' header or no closing line)" +
          fix);
  EXPECT_EQ(refusal(""),
            prefix +
                "is not a whole rendezvous state file (no 'atoll rendezvous state 1' header or no "
                "closing line)" +
                fix);
  write_file("state", whole);
  EXPECT_EQ(RendezvousState::load(path("state")).latest_round(), 7);
}

// A restarted rendezvous -------------------------------------------------------------------------

class RestartedRendezvous : public test::TempDirTest {
 protected:
  std::shared_ptr<const MessageAuthenticator> secret_ =
      std::make_shared<MessageAuthenticator>(std::string(32, 's'), "test secret");

  void start(uint16_t port) { server_ = std::make_unique<RendezvousServer>(port, secret_, path("state")); }
  IslandRendezvous island(int id, uint16_t port) const {
    IslandRendezvousOptions options;
    options.island = id;
    options.min_islands = 1;
    options.max_islands = 2;
    options.grace = std::chrono::seconds(30);  // rounds close when both are there
    options.timeout = std::chrono::seconds(20);
    options.reconnect = std::chrono::seconds(20);
    options.authenticator = secret_;
    options.shared_settings = "model.dim: 32\n";
    return IslandRendezvous({"127.0.0.1", port}, options);
  }

  std::unique_ptr<RendezvousServer> server_;
};

TEST_F(RestartedRendezvous, IslandsCarryOnAcrossRestartsBetweenAndInsideRounds) {
  start(0);
  const uint16_t port = server_->port();
  // Main thread and two islands meet at each phase; an island that fails drops out of the barrier.
  std::barrier phase(3);
  std::mutex mutex;
  std::vector<std::string> seen(2), failures;
  const auto island_thread = [&](int id) {
    try {
      IslandRendezvous rendezvous = island(id, port);
      const auto round = [&](int64_t r) {
        const RoundMembership m = rendezvous.join(r);
        const bool counted = rendezvous.settle(m, 0, 1, true);
        if (counted) rendezvous.record_round(r);
        seen[id] += describe(m) + (counted ? " counted" : " failed") + "\n";
        return m;
      };
      const std::string nonce = rendezvous.session(round(0), 0).substr(0, 32);
      phase.arrive_and_wait();  // 1: the server stops and starts again, between rounds
      phase.arrive_and_wait();  // 2
      round(1);
      // Round 2: the members are kept, then the server stops and starts again before the outcome.
      const RoundMembership m = rendezvous.join(2);
      phase.arrive_and_wait();  // 3
      phase.arrive_and_wait();  // 4
      const bool counted = rendezvous.settle(m, 0, 1, true);
      if (counted) rendezvous.record_round(2);
      seen[id] += describe(m) + (counted ? " counted" : " failed") + "\n";
      // The admission nonce (in every exchange's tags) is the run's, not a new one.
      seen[id] += rendezvous.session(m, 0).substr(0, 32) == nonce ? "same nonce\n" : "new nonce\n";
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex);
      failures.push_back("island " + std::to_string(id) + ": " + e.what());
      phase.arrive_and_drop();
    }
  };
  std::thread first(island_thread, 0), second(island_thread, 1);
  phase.arrive_and_wait();  // 1
  server_.reset();
  start(port);
  EXPECT_EQ(server_->resumed_round(), 0);
  phase.arrive_and_wait();  // 2
  phase.arrive_and_wait();  // 3: both hold round 2's members
  server_.reset();
  start(port);
  phase.arrive_and_wait();  // 4
  first.join();
  second.join();
  ASSERT_TRUE(failures.empty()) << failures.front();
  for (int id = 0; id < 2; ++id) {
    std::string expected;
    for (int r = 0; r < 3; ++r)
      expected +=
          "round " + std::to_string(r) + " attempt 0 members 0,1, index " + std::to_string(id) + " counted\n";
    EXPECT_EQ(seen[id], expected + "same nonce\n");
  }
  // Island 1 again as a new job (a new token) arriving at round 2 after it closed sits it out: the
  // members survived the restart.
  IslandRendezvous late = island(1, port);
  EXPECT_FALSE(late.join(2).member());
  EXPECT_EQ(late.latest_round(), 2);
}

TEST_F(RestartedRendezvous, AnIslandWhoseRendezvousDoesNotComeBackFailsWithOneLine) {
  start(0);
  const uint16_t port = server_->port();
  IslandRendezvousOptions options;
  options.authenticator = secret_;
  options.reconnect = std::chrono::seconds(1);
  IslandRendezvous rendezvous({"127.0.0.1", port}, options);
  server_.reset();
  const auto start_time = std::chrono::steady_clock::now();
  try {
    rendezvous.latest_round();
    FAIL() << "the lost rendezvous went unnoticed";
  } catch (const std::runtime_error& e) {
    const std::string expected = "outer.rendezvous 127.0.0.1:" + std::to_string(port) +
                                 " was lost and did not come back within 1 s (outer.reconnect_s; last: ";
    EXPECT_EQ(std::string(e.what()).rfind(expected, 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("); restart it on port " + std::to_string(port) +
                                         " with its --state file, then resume the island jobs from their "
                                         "checkpoints"),
              std::string::npos)
        << e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 10.0);
}

TEST_F(RestartedRendezvous, AnotherSecretThanTheKeptRunsIsRefused) {
  start(0);
  const uint16_t port = server_->port();
  server_.reset();
  const auto other = std::make_shared<MessageAuthenticator>(std::string(32, 'o'), "--secret-file other");
  try {
    RendezvousServer server(port, other, path("state"));
    FAIL() << "a rendezvous with another secret resumed the run";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "atoll rendezvous: --secret-file other is not the secret of the run kept in --state " +
                  path("state") +
                  "; pass that run's secret file, or start a new run with a new --state file");
  }
}

TEST(RendezvousAddress, ParsesHostAndPortAndNamesTheFix) {
  const RendezvousAddress a = parse_rendezvous("10.0.0.5:29400");
  EXPECT_EQ(a.host, "10.0.0.5");
  EXPECT_EQ(a.port, 29400);
  for (const std::string bad : {"10.0.0.5", ":29400", "host:", "host:0", "host:70000", "host:29a"}) {
    try {
      parse_rendezvous(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("outer.rendezvous = '" + bad + "'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("HOST:PORT"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace atl::comm

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("ATOLL_RDV_SCENARIO")) {
    const int island = std::atoi(std::getenv("ATOLL_RDV_ISLAND"));
    std::ofstream out(std::getenv("ATOLL_RDV_OUT"));
    try {
      const std::string name = scenario;
      if (name == "late") return atl::comm::late_island(island, out);
      if (name == "killed") return atl::comm::killed_island(island, out);
      return atl::comm::meeting_islands(island, out);
    } catch (const std::exception& e) {
      std::cerr << "island " << island << ": " << e.what() << "\n";
      return 1;
    }
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
