// The flight recorder (comm/flight_recorder.h) and rank 0's hang diagnosis (comm/hang_report.h), on
// recorders and summaries built by hand: no MPI, no clock waits.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/flight_recorder.h"
#include "comm/hang_report.h"

namespace atl::comm {
namespace {

bool has_line_with(const std::vector<std::string>& lines, const std::vector<std::string>& parts) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](const std::string& part) { return line.find(part) != std::string::npos; });
  });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TEST(FlightRecorder, NumbersOperationsPerGroupAndCountsIssuedAndCompleted) {
  FlightRecorder recorder(16);
  const uint64_t a = recorder.start("dp[0,1]", OpKind::kAllReduce, 64);
  const uint64_t b = recorder.start("tp[0,2]", OpKind::kAllGather, 32);
  const uint64_t c = recorder.start("dp[0,1]", OpKind::kReduceScatter, 16);
  recorder.finish(a);
  recorder.finish(c);

  const std::vector<FlightRecord> records = recorder.records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].id, a);
  EXPECT_EQ(records[0].seq, 1u);
  EXPECT_EQ(records[1].id, b);
  EXPECT_EQ(records[1].seq, 1u);  // the first on tp, whatever dp did before
  EXPECT_EQ(records[2].id, c);
  EXPECT_EQ(records[2].seq, 2u);
  EXPECT_EQ(records[2].op, OpKind::kReduceScatter);
  EXPECT_EQ(records[2].bytes, 16u);
  EXPECT_FALSE(records[0].in_flight());
  EXPECT_TRUE(records[1].in_flight());
  EXPECT_FALSE(records[2].in_flight());
  EXPECT_GE(records[2].end_s, records[2].start_s);

  const auto progress = recorder.progress();
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress.at("dp[0,1]").issued, 2u);
  EXPECT_EQ(progress.at("dp[0,1]").completed, 2u);
  EXPECT_EQ(progress.at("tp[0,2]").issued, 1u);
  EXPECT_EQ(progress.at("tp[0,2]").completed, 0u);

  ASSERT_TRUE(recorder.oldest_in_flight().has_value());
  EXPECT_EQ(recorder.oldest_in_flight()->id, b);
  recorder.finish(b);
  EXPECT_FALSE(recorder.oldest_in_flight().has_value());
  EXPECT_EQ(recorder.progress().at("tp[0,2]").completed, 1u);
}

TEST(FlightRecorder, FinishingTwiceOrAnUnknownIdChangesNothing) {
  FlightRecorder recorder(4);
  const uint64_t id = recorder.start("dp[0,1]", OpKind::kAllReduce, 8);
  recorder.finish(id);
  recorder.finish(id);
  recorder.finish(id + 100);
  EXPECT_EQ(recorder.progress().at("dp[0,1]").completed, 1u);
}

TEST(FlightRecorder, RingKeepsCapacityRecordsPlusOlderOnesStillInFlight) {
  FlightRecorder recorder(3);
  const uint64_t stuck = recorder.start("pp[0,1] p2p", OpKind::kRecv, 128);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(recorder.start("dp[0,1]", OpKind::kAllReduce, 4));
    recorder.finish(ids.back());
  }

  // The ring holds the last three; the stuck receive, evicted from it, comes first.
  const std::vector<FlightRecord> records = recorder.records();
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].id, stuck);
  EXPECT_TRUE(records[0].in_flight());
  EXPECT_EQ(records[0].group, "pp[0,1] p2p");
  EXPECT_EQ(records[1].id, ids[2]);
  EXPECT_EQ(records[2].id, ids[3]);
  EXPECT_EQ(records[3].id, ids[4]);
  EXPECT_EQ(records[3].seq, 5u);

  ASSERT_TRUE(recorder.oldest_in_flight().has_value());
  EXPECT_EQ(recorder.oldest_in_flight()->id, stuck);
  EXPECT_EQ(recorder.oldest_in_flight()->op, OpKind::kRecv);

  // Finishing the evicted record still counts it and drops it from the dump.
  recorder.finish(stuck);
  EXPECT_EQ(recorder.progress().at("pp[0,1] p2p").issued, 1u);
  EXPECT_EQ(recorder.progress().at("pp[0,1] p2p").completed, 1u);
  EXPECT_FALSE(recorder.oldest_in_flight().has_value());
  EXPECT_EQ(recorder.records().size(), 3u);
}

TEST(FlightRecorder, ZeroCapacityStillKeepsTheNewestRecord) {
  FlightRecorder recorder(0);
  recorder.finish(recorder.start("dp[0,1]", OpKind::kBarrier, 0));
  const uint64_t last = recorder.start("dp[0,1]", OpKind::kBroadcast, 4);
  const std::vector<FlightRecord> records = recorder.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].id, last);
}

TEST(FlightRecorder, JsonHasGroupsAndRecordsWithTheirState) {
  FlightRecorder recorder(8);
  recorder.finish(recorder.start("dp[0,1]", OpKind::kAllReduce, 64));
  recorder.start("tp[0,2]", OpKind::kBroadcast, 32);
  const std::string text = recorder.to_json(3, "watchdog: \"tp\" stuck");
  const nlohmann::json json = nlohmann::json::parse(text);

  EXPECT_EQ(json["rank"], 3) << text;
  EXPECT_EQ(json["reason"], "watchdog: \"tp\" stuck") << text;
  ASSERT_EQ(json["groups"].size(), 2u) << text;
  EXPECT_EQ(json["groups"][0], nlohmann::json({{"group", "dp[0,1]"}, {"issued", 1}, {"completed", 1}}))
      << text;
  EXPECT_EQ(json["groups"][1], nlohmann::json({{"group", "tp[0,2]"}, {"issued", 1}, {"completed", 0}}))
      << text;
  ASSERT_EQ(json["records"].size(), 2u) << text;
  const nlohmann::json& done = json["records"][0];
  EXPECT_EQ(done["group"], "dp[0,1]");
  EXPECT_EQ(done["seq"], 1);
  EXPECT_EQ(done["op"], "all_reduce");
  EXPECT_EQ(done["bytes"], 64);
  EXPECT_EQ(done["state"], "completed");
  const nlohmann::json& waiting = json["records"][1];
  EXPECT_EQ(waiting["op"], "broadcast");
  EXPECT_EQ(waiting["bytes"], 32);
  EXPECT_EQ(waiting["state"], "in flight");
  EXPECT_EQ(text.back(), '\n');  // a file ends with a newline
}

TEST(FlightRecorder, JsonKeepsGroupLabelsLongerThanAFormatBuffer) {
  // A 512-rank data-parallel group: its label alone is ~2 KB.
  std::string label = "dp[";
  for (int r = 0; r < 512; ++r) label += (r ? "," : "") + std::to_string(r);
  label += "]";
  FlightRecorder recorder(4);
  recorder.start(label, OpKind::kAllReduce, 1024);
  const nlohmann::json json = nlohmann::json::parse(recorder.to_json(0, "test"));

  EXPECT_EQ(json["groups"][0], nlohmann::json({{"group", label}, {"issued", 1}, {"completed", 0}}));
  EXPECT_EQ(json["records"][0]["group"], label);
  EXPECT_EQ(json["records"][0]["seq"], 1);
  EXPECT_EQ(json["records"][0]["bytes"], 1024);
  EXPECT_EQ(json["records"][0]["state"], "in flight");
}

TEST(HangReport, EncodeDecodeRoundTrip) {
  RankFlightSummary s;
  s.rank = 5;
  s.answered = true;
  s.groups["dp[0,5]"] = {12, 11};
  s.groups["pp[0,1] p2p"] = {7, 7};
  FlightRecord waiting;
  waiting.group = "pp[0,1] p2p";
  waiting.op = OpKind::kSend;
  waiting.seq = 8;
  waiting.bytes = 4096;
  s.waiting = waiting;
  s.waiting_s = 42.5;

  const RankFlightSummary back = decode(encode(s));
  EXPECT_EQ(back.rank, 5);
  EXPECT_TRUE(back.answered);
  ASSERT_EQ(back.groups.size(), 2u);
  EXPECT_EQ(back.groups.at("dp[0,5]").issued, 12u);
  EXPECT_EQ(back.groups.at("dp[0,5]").completed, 11u);
  EXPECT_EQ(back.groups.at("pp[0,1] p2p").issued, 7u);
  EXPECT_EQ(back.groups.at("pp[0,1] p2p").completed, 7u);
  ASSERT_TRUE(back.waiting.has_value());
  EXPECT_EQ(back.waiting->group, "pp[0,1] p2p");
  EXPECT_EQ(back.waiting->op, OpKind::kSend);
  EXPECT_EQ(back.waiting->seq, 8u);
  EXPECT_EQ(back.waiting->bytes, 4096u);
  EXPECT_DOUBLE_EQ(back.waiting_s, 42.5);
}

TEST(HangReport, EncodeDecodeWithoutWaiting) {
  RankFlightSummary s;
  s.rank = 0;
  s.answered = true;
  s.groups["world[0,1]"] = {3, 3};
  const RankFlightSummary back = decode(encode(s));
  EXPECT_EQ(back.rank, 0);
  EXPECT_EQ(back.groups.at("world[0,1]").issued, 3u);
  EXPECT_FALSE(back.waiting.has_value());
}

// A message with a field that does not read (found by tests/fuzz/fuzz_flight_summary): the rank
// counts as one that did not answer, and the diagnosis names it, instead of std::stoi throwing
// in rank 0 while it diagnoses a hang.
TEST(HangReport, UnreadableSummaryCountsAsSilent) {
  for (const std::string text : {"rank\tx\n", "rank\t1\ngroup\tdp[0,1]\t99999999999999999999999\t1\n",
                                 "rank\t1\ngroup\tdp[0,1]\t3\t2\nwaiting\tdp[0,1]\tbogus\t1\t2\t3.5\n",
                                 "rank\t1\nwaiting\tdp[0,1]\tall_reduce\t1\t2\tsoon\n"}) {
    const RankFlightSummary s = decode(text);
    EXPECT_FALSE(s.answered) << text;
    EXPECT_TRUE(s.groups.empty()) << text;
    EXPECT_FALSE(s.waiting.has_value()) << text;
  }
  EXPECT_TRUE(members_of("dp[0,x]").empty());
  EXPECT_TRUE(members_of("dp[0,99999999999]").empty());
}

TEST(HangReport, SummarizeReadsTheRecorder) {
  FlightRecorder recorder(4);
  recorder.finish(recorder.start("dp[0,1]", OpKind::kAllReduce, 8));
  recorder.start("dp[0,1]", OpKind::kAllGather, 16);
  const RankFlightSummary s = summarize(1, recorder);
  EXPECT_EQ(s.rank, 1);
  EXPECT_TRUE(s.answered);
  EXPECT_EQ(s.groups.at("dp[0,1]").issued, 2u);
  ASSERT_TRUE(s.waiting.has_value());
  EXPECT_EQ(s.waiting->seq, 2u);
  EXPECT_GE(s.waiting_s, 0.0);
}

TEST(HangReport, MembersOfLabel) {
  EXPECT_EQ(members_of("dp[0,2,4]"), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(members_of("pp[3,7] p2p"), (std::vector<int>{3, 7}));
  EXPECT_EQ(members_of("world[0]"), (std::vector<int>{0}));
  EXPECT_TRUE(members_of("world").empty());
  EXPECT_TRUE(members_of("x[]").empty());
}

// Ranks 0, 2 and 3 wait in all_reduce #12 on dp[0,1,2,3]; rank 1's state is `rank1`.
std::vector<RankFlightSummary> stuck_all_reduce(const RankFlightSummary& rank1) {
  std::vector<RankFlightSummary> ranks;
  for (int r : {0, 2, 3}) {
    RankFlightSummary s;
    s.rank = r;
    s.answered = true;
    s.groups["dp[0,1,2,3]"] = {12, 11};
    FlightRecord w;
    w.group = "dp[0,1,2,3]";
    w.op = OpKind::kAllReduce;
    w.seq = 12;
    w.bytes = 1 << 20;
    s.waiting = w;
    s.waiting_s = 600.0 + r;
    ranks.push_back(s);
  }
  ranks.insert(ranks.begin() + 1, rank1);
  return ranks;
}

RankFlightSummary rank1_with_issued(uint64_t issued) {
  RankFlightSummary s;
  s.rank = 1;
  s.answered = true;
  s.groups["dp[0,1,2,3]"] = {issued, issued};
  return s;
}

TEST(HangReport, DiagnosesARankThatIsInNoCollective) {
  const std::vector<std::string> lines = diagnose_hang(stuck_all_reduce(rank1_with_issued(11)), 600.0);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(has_line_with({lines[0]}, {"all_reduce #12 on dp[0,1,2,3]", "ranks 0,2,3", "603.0 s"}))
      << joined(lines);
  EXPECT_TRUE(has_line_with(lines, {"rank 1 is behind", "issued 11 of 12", "in no collective"}))
      << joined(lines);
  EXPECT_FALSE(has_line_with(lines, {"rank 0 is behind"})) << joined(lines);
  EXPECT_FALSE(has_line_with(lines, {"entered it"})) << joined(lines);
  EXPECT_FALSE(has_line_with(lines, {"did not answer"})) << joined(lines);
}

TEST(HangReport, DiagnosesARankWaitingInAnotherCollective) {
  RankFlightSummary rank1 = rank1_with_issued(11);
  FlightRecord w;
  w.group = "tp[1,5]";
  w.op = OpKind::kBroadcast;
  w.seq = 3;
  rank1.groups["tp[1,5]"] = {3, 2};
  rank1.waiting = w;
  rank1.waiting_s = 550.0;
  const std::vector<std::string> lines = diagnose_hang(stuck_all_reduce(rank1), 600.0);
  EXPECT_TRUE(has_line_with(lines, {"rank 1 is behind", "issued 11 of 12",
                                    "oldest unfinished operation is broadcast #3 on tp[1,5]"}))
      << joined(lines);
  EXPECT_FALSE(has_line_with(lines, {"in no collective"})) << joined(lines);
}

TEST(HangReport, DiagnosesTheCollectiveItselfWhenEveryMemberEnteredIt) {
  const std::vector<std::string> lines = diagnose_hang(stuck_all_reduce(rank1_with_issued(12)), 600.0);
  EXPECT_TRUE(has_line_with(lines, {"every member of dp[0,1,2,3]", "entered it"})) << joined(lines);
  EXPECT_FALSE(has_line_with(lines, {"is behind"})) << joined(lines);
}

TEST(HangReport, ReportsARankThatDidNotAnswer) {
  RankFlightSummary silent;
  silent.rank = 1;
  silent.answered = false;
  const std::vector<std::string> lines = diagnose_hang(stuck_all_reduce(silent), 600.0);
  EXPECT_TRUE(has_line_with(lines, {"rank 1 did not answer"})) << joined(lines);
  EXPECT_FALSE(has_line_with(lines, {"is behind"})) << joined(lines);
  EXPECT_FALSE(has_line_with(lines, {"entered it"})) << joined(lines);
}

TEST(HangReport, NobodyWaiting) {
  RankFlightSummary idle = rank1_with_issued(3);
  RankFlightSummary silent;
  silent.rank = 2;
  const std::vector<std::string> lines = diagnose_hang({idle, silent}, 60.0);
  EXPECT_TRUE(has_line_with(lines, {"no answering rank is waiting"})) << joined(lines);
  EXPECT_TRUE(has_line_with(lines, {"rank 2 did not answer"})) << joined(lines);
}

}  // namespace
}  // namespace atl::comm
