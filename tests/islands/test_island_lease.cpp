// One job per island id: while a job holds its island's lease at the rendezvous (its heartbeat
// moving), a second claim for that id is refused with one line; a clean holder releases the id at
// once; a holder that stopped beating (killed) is taken over once its heartbeat stood still; a held
// island stays held across a restart of the rendezvous (its state file, the holder's heartbeat
// reconnecting), and a job ending while its rendezvous is gone does not wait for it.
#include "comm/island_lease.h"

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm/rendezvous_client.h"
#include "comm/rendezvous_server.h"
#include "tests/temp_dir_test.h"

namespace atl::comm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class IslandLeaseTest : public ::testing::Test {
 protected:
  RendezvousAddress address() const { return {"127.0.0.1", server_.port()}; }
  std::unique_ptr<IslandLease> claim(int island, const std::string& token) {
    return std::make_unique<IslandLease>(address(), island, token, std::chrono::seconds(10),
                                         std::chrono::seconds(10));
  }

  RendezvousServer server_{0};
};

TEST_F(IslandLeaseTest, ASecondJobForAHeldIslandIsRefusedWithOneLine) {
  const auto first = claim(2, "job-a");
  const auto start = Clock::now();
  try {
    claim(2, "job-b");
    FAIL() << "a second job took island 2 while job-a held it";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "outer.rendezvous 127.0.0.1:" + std::to_string(server_.port()) +
                  " refused island 2: another running job holds island 2 (its heartbeat "
                  "moved within the last 3 s); give each island job its own "
                  "outer.island, or stop the other job first");
  }
  // It watched the holder's heartbeat before refusing.
  EXPECT_GE(seconds_since(start), 2.9);
  // Other ids are free.
  EXPECT_NO_THROW(claim(1, "job-b"));
}

TEST_F(IslandLeaseTest, AJobThatEndedReleasedItsIslandAtOnce) {
  claim(0, "job-a").reset();
  const auto start = Clock::now();
  EXPECT_NO_THROW(claim(0, "job-b"));
  // Without watching a heartbeat for kSilence (3 s): a bound no slow machine reaches by accident.
  EXPECT_LT(seconds_since(start), 2.9);
}

TEST_F(IslandLeaseTest, AHolderWhoseHeartbeatStoodStillIsTakenOver) {
  // A killed job: its token holds the id, and its heartbeat never moves again.
  RendezvousClient client(address(), std::chrono::seconds(10), std::chrono::seconds(10));
  c10d::Store* store = &client.store();
  const std::string dead = "job-killed";
  store->set("island/3/holder", std::vector<uint8_t>(dead.begin(), dead.end()));
  store->add("island/3/beat/" + dead, 7);
  const auto start = Clock::now();
  const auto successor = claim(3, "job-restarted");
  EXPECT_GE(seconds_since(start), 2.9);
  const std::vector<uint8_t> holder = store->get("island/3/holder");
  EXPECT_EQ(std::string(holder.begin(), holder.end()), "job-restarted");
  // And the successor now holds it against a third job.
  EXPECT_THROW(claim(3, "job-third"), std::invalid_argument);
}

class RestartedLease : public test::TempDirTest {};

TEST_F(RestartedLease, AHeldIslandStaysHeldAcrossARestartOfTheRendezvous) {
  auto server = std::make_unique<RendezvousServer>(0, nullptr, path("state"));
  const RendezvousAddress address{"127.0.0.1", server->port()};
  const IslandLease held(address, 2, "job-a", std::chrono::seconds(10), std::chrono::seconds(20));
  server = nullptr;
  server = std::make_unique<RendezvousServer>(address.port, nullptr, path("state"));
  // The holder was kept, and job-a's heartbeat reconnected and moves again: job-b is refused.
  try {
    IslandLease(address, 2, "job-b", std::chrono::seconds(10), std::chrono::seconds(20));
    FAIL() << "job-b took island 2 from job-a across the restart";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("refused island 2: another running job holds island 2"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(RestartedLease, AJobEndingWhileItsRendezvousIsGoneDoesNotWaitForIt) {
  auto server = std::make_unique<RendezvousServer>(0, nullptr, path("state"));
  auto held = std::make_unique<IslandLease>(RendezvousAddress{"127.0.0.1", server->port()}, 2, "job-a",
                                            std::chrono::seconds(10), std::chrono::seconds(60));
  server = nullptr;
  // Two heartbeat periods: the heartbeat has found the rendezvous gone and waits for it (the lease
  // shows no event to poll for).
  std::this_thread::sleep_for(2 * IslandLease::kBeat);
  const auto start = Clock::now();
  held = nullptr;
  // Not the 60 s of reconnecting: the heartbeat stops waiting once its try (0.5 s, as c10d counts)
  // or pause (1 s at most) ends.
  const double waited = seconds_since(start);
  EXPECT_LT(waited, 10.0);
  std::cout << "the lease's end waited " << waited << " s for its heartbeat\n";
}

}  // namespace
}  // namespace atl::comm
