// The status push between the worker (its reporter builds a StatusPush,
// StatusPusher sends to_json) and the controller (POST /v1/jobs/{id}/status
// reads it with read_status_push): what is sent is read back as it was, and
// a body the reader refuses is named by its code and field.
#include <gtest/gtest.h>

#include <string>

#include "worker/spec/status_push.h"

using greenshard::RunPhase;
using greenshard::StatusPush;
using greenshard::StatusPushError;
using nlohmann::json;

TEST(StatusPush, WhatTheReporterSendsIsReadBackAsItWasSent) {
  StatusPush running{RunPhase::kRunning, 12, 100, 3072, 2.75, std::nullopt, 812.5, 0.31, 40.0, 360.0, 0.04, 0.01, ""};
  StatusPush failed{RunPhase::kFailed, 0, 100, 0, std::nullopt, std::nullopt, 0, 0, 0, 0, 0, 0, "rank 1 died"};
  for (const StatusPush& s : {running, failed}) {
    const json sent = greenshard::to_json(s);
    const StatusPush read = greenshard::read_status_push(sent);
    EXPECT_EQ(greenshard::to_json(read), sent);
  }
  EXPECT_TRUE(greenshard::to_json(running)["val_loss"].is_null()) << "not evaluated yet: null";
}

TEST(StatusPush, EveryPhaseHasItsOwnNameAndParsesBack) {
  for (RunPhase p : greenshard::kAllRunPhases) {
    EXPECT_EQ(greenshard::parse_run_phase(greenshard::to_string(p)), p) << greenshard::to_string(p);
  }
  EXPECT_FALSE(greenshard::parse_run_phase("done"));
  EXPECT_EQ(greenshard::phase_of(greenshard::RunEnd::kSucceeded), RunPhase::kSucceeded);
  EXPECT_EQ(greenshard::phase_of(greenshard::RunEnd::kPreempted), RunPhase::kPreempted);
}

TEST(StatusPush, NullMeansNotKnownYetExceptForStateAndMessage) {
  const StatusPush p = greenshard::read_status_push(json{{"state", "running"}, {"step", nullptr}, {"loss", nullptr}});
  EXPECT_EQ(p.step, 0);
  EXPECT_FALSE(p.loss);
}

TEST(StatusPush, ABodyTheReaderRefusesIsNamedByCodeAndField) {
  struct Case {
    const char* sentence;
    json body;
    std::string code, field, message_has;
  };
  const std::string long_message(greenshard::kStatusMessageMaxBytes + 1, 'x');
  const Case cases[] = {
      {"a body that is no object", json::array(), "invalid_body", "", "JSON object"},
      {"no state", json{{"step", 1}}, "missing_field", "state", "state: required"},
      {"a state that is no phase", json{{"state", "done"}}, "invalid_field", "state", "expected running"},
      {"a null state", json{{"state", nullptr}}, "invalid_field", "state", "expected running"},
      {"a negative step", json{{"state", "running"}, {"step", -1}}, "invalid_field", "step", "integer >= 0"},
      {"a fractional step", json{{"state", "running"}, {"step", 1.5}}, "invalid_field", "step", "integer >= 0"},
      {"a step beyond int64", json{{"state", "running"}, {"step", uint64_t(1) << 63}}, "invalid_field", "step",
       "integer >= 0"},
      {"a negative loss", json{{"state", "running"}, {"loss", -0.5}}, "invalid_field", "loss", "finite number"},
      {"a string for a measure", json{{"state", "running"}, {"mfu", "high"}}, "invalid_field", "mfu",
       "finite number"},
      {"a message too long", json{{"state", "failed"}, {"message", long_message}}, "invalid_field", "message",
       "at most 4096 bytes"},
      {"a null message", json{{"state", "failed"}, {"message", nullptr}}, "invalid_field", "message", "string"},
      {"an unknown field", json{{"state", "running"}, {"speed", 1}}, "unknown_field", "speed", "unknown field"},
  };
  for (const auto& c : cases) {
    try {
      greenshard::read_status_push(c.body);
      ADD_FAILURE() << c.sentence << ": accepted " << c.body.dump();
    } catch (const StatusPushError& e) {
      EXPECT_EQ(e.code, c.code) << c.sentence;
      EXPECT_EQ(e.field, c.field) << c.sentence;
      EXPECT_NE(std::string(e.what()).find(c.message_has), std::string::npos) << c.sentence << ": " << e.what();
    }
  }
}
