// The run summary between the worker (worker/reporter.cpp writes it with
// to_json) and the controller (its executors read it with
// read_run_summary): what is written is read back as it was, and a summary
// the reader refuses names the field.
#include <gtest/gtest.h>

#include <string>

#include "common/spawn.h"
#include "worker/spec/run_summary.h"

using greenshard::RunEnd;
using greenshard::RunSummary;
using nlohmann::json;

TEST(RunSummary, WhatTheReporterWritesIsReadBackAsItWasWritten) {
  RunSummary full{RunEnd::kPreempted, 40, 5120, 2.5, 7200.0, 0.8, 0.2};
  RunSummary bare{RunEnd::kSucceeded, 3, 96, std::nullopt, 1.0, 0.0, 0.0};  // never evaluated
  for (const RunSummary& s : {full, bare}) {
    json written = greenshard::to_json(s);
    written["mfu"] = 0.31;  // summary.json's other fields are not the controller's
    std::string error;
    const auto read = greenshard::read_run_summary(written, &error);
    ASSERT_TRUE(read) << error << " in " << written.dump();
    EXPECT_EQ(greenshard::to_json(*read), greenshard::to_json(s));
  }
  EXPECT_TRUE(greenshard::to_json(bare)["final_val_loss"].is_null());
}

TEST(RunSummary, FieldsLeftOutAreLeftOutNotZero) {
  std::string error;
  const auto s = greenshard::read_run_summary(json{{"state", "succeeded"}, {"steps", 4}}, &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->state, RunEnd::kSucceeded);
  EXPECT_EQ(s->steps, 4);
  EXPECT_FALSE(s->tokens);
  EXPECT_FALSE(s->energy_joules);
}

struct BadSummary {
  const char* sentence;
  json summary;
  const char* error;
};

class RefusedSummary : public ::testing::TestWithParam<BadSummary> {};

TEST_P(RefusedSummary, IsNoSummaryAndNamesTheField) {
  std::string error;
  EXPECT_FALSE(greenshard::read_run_summary(GetParam().summary, &error)) << GetParam().summary.dump();
  EXPECT_EQ(error, GetParam().error);
}

const BadSummary kBad[] = {
    {"a list is not a summary", json::array({"preempted"}), "expected an object"},
    {"a summary without a state", json{{"steps", 4}}, "state: expected succeeded or preempted"},
    {"a state no worker writes", json{{"state", "done"}}, "state: expected succeeded or preempted, got 'done'"},
    {"a state with control bytes is named printably", json{{"state", "a\nb"}},
     "state: expected succeeded or preempted, got 'a?b'"},
    {"steps as text", json{{"state", "succeeded"}, {"steps", "40"}}, "steps: expected a number >= 0"},
    {"tokens as a fraction", json{{"state", "succeeded"}, {"tokens", 1.5}}, "tokens: expected a number >= 0"},
    {"energy as text", json{{"state", "preempted"}, {"energy_joules", "7200"}}, "energy_joules: expected a number >= 0"},
    {"negative steps", json{{"state", "succeeded"}, {"steps", -3}}, "steps: expected a number >= 0"},
    {"tokens beyond int64", json{{"state", "succeeded"}, {"tokens", uint64_t(1) << 63}}, "tokens: expected a number >= 0"},
    {"negative grams", json{{"state", "succeeded"}, {"operational_grams", -0.5}}, "operational_grams: expected a number >= 0"},
};

INSTANTIATE_TEST_SUITE_P(Table, RefusedSummary, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

// summary.json and a termination log are text the worker wrote: read with a
// size limit, and with nesting skipped rather than built (a summary is flat).
TEST(RunSummary, TextIsReadWithASizeLimitAndNestedContainersAreSkippedNotBuilt) {
  const std::string fields = R"("state": "succeeded", "steps": 7, "tokens": 896, "energy_joules": 2.5)";
  std::string error;
  // 30,000 levels deep in a field the controller does not read: that field
  // is skipped while parsing, and the summary is read.
  const std::string deep_small =
      "{" + fields + R"(, "extra": )" + std::string(30000, '[') + std::string(30000, ']') + "}";
  ASSERT_LE(deep_small.size(), greenshard::kMaxRunSummaryBytes);
  const auto s = greenshard::parse_run_summary(deep_small, &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->steps, 7);
  EXPECT_EQ(s->tokens, 896);

  // Longer than the limit: refused, naming the size.
  const std::string deep = "{" + fields + R"(, "extra": )" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_FALSE(greenshard::parse_run_summary(deep, &error));
  EXPECT_NE(error.find("more than the " + std::to_string(greenshard::kMaxRunSummaryBytes)), std::string::npos) << error;
  // Not JSON, or JSON that is no summary.
  EXPECT_FALSE(greenshard::parse_run_summary("{\"state\": ", &error));
  EXPECT_EQ(error, "not JSON");
  EXPECT_FALSE(greenshard::parse_run_summary("[1, 2]", &error));
  EXPECT_EQ(error, "expected an object");
  // The worker's own output reads back.
  const std::string written = greenshard::to_json(RunSummary{RunEnd::kPreempted, 3, 96, 1.5, 1.0, 0.1, 0.0}).dump(2);
  const auto back = greenshard::parse_run_summary(written, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(greenshard::to_json(*back).dump(), greenshard::to_json(RunSummary{RunEnd::kPreempted, 3, 96, 1.5, 1.0, 0.1, 0.0}).dump());
}
