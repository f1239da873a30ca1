// The readers of the Kubernetes API's answers (controller/executors/k8s_answers.h), on
// bodies no well-behaved API server sends: wrong types, numbers past int,
// bodies that are not objects. The mapping on well-formed answers is the
// KubeGangEnd table in k8s_test.cpp (through the executor and a fake API
// server); these are the cases fuzz_k8s_answers guards, as a table.
#include <gtest/gtest.h>

#include <string>

#include "controller/executors/k8s_answers.h"

namespace controller {
namespace {

struct AnswerCase {
  const char* sentence;
  int code;
  const char* job;
  const char* pods;
  bool stop_requested;
  GangPhase want;
  const char* message_has;  // "" when any
};

class KubeAnswers : public ::testing::TestWithParam<AnswerCase> {};

TEST_P(KubeAnswers, MapToTheirPhase) {
  const AnswerCase& c = GetParam();
  const k8s::JobAnswer job = k8s::read_job(k8s::parse_object(c.job));
  const k8s::PodsVerdict pods = k8s::read_pods(k8s::parse_object(c.pods));
  const k8s::Decision d = k8s::decide("gs-j1-1", c.code, job, pods, c.stop_requested, GangPhase::kRunning);
  EXPECT_EQ(to_string(d.status.phase), to_string(c.want)) << c.sentence << ": " << d.status.message;
  EXPECT_NE(d.status.message.find(c.message_has), std::string::npos) << c.sentence << ": " << d.status.message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, KubeAnswers,
    ::testing::Values(
        AnswerCase{"a body that is not JSON reads as a Job with no status: starting", 200, "<html>", "", false,
                   GangPhase::kStarting, "0 of 1 pods"},
        AnswerCase{"a body that is a JSON array reads as an empty Job", 200, "[1,2]", "", false, GangPhase::kStarting,
                   "0 of 1 pods"},
        AnswerCase{"spec.suspend given as a string is not a suspension (and does not throw)", 200,
                   R"({"spec":{"suspend":"true","parallelism":1},"status":{"active":1,"ready":1}})", "", false,
                   GangPhase::kRunning, ""},
        AnswerCase{"a ready count past int reads as absent, not as a wrapped number", 200,
                   R"({"spec":{"parallelism":2},"status":{"active":2,"ready":4294967298}})", "", false,
                   GangPhase::kStarting, "0 of 2 pods"},
        AnswerCase{"a negative parallelism past int reads as absent (completions then)", 200,
                   R"({"spec":{"parallelism":-9999999999,"completions":2},"status":{"active":2,"ready":2}})", "",
                   false, GangPhase::kRunning, ""},
        AnswerCase{"conditions that are not objects are skipped", 200,
                   R"({"status":{"conditions":[1,"Complete",{"type":"Failed","status":"True","reason":7}]}})",
                   R"({"items":"none"})", false, GangPhase::kFailed, "failed"},
        AnswerCase{"an exit code given as a string is no exit code", 200,
                   R"({"status":{"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded"}]}})",
                   R"({"items":[{"metadata":{"name":"p0"},"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":"2"}}}]}}]})",
                   false, GangPhase::kFailed, "exited -1"},
        AnswerCase{"a summary that is not an object is no summary: completed", 200,
                   R"({"status":{"conditions":[{"type":"Complete","status":"True"}]}})",
                   R"({"items":[{"metadata":{"name":"p0"},"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":0,"message":"[\"preempted\"]"}}}]}}]})",
                   false, GangPhase::kSucceeded, "completed"},
        AnswerCase{"no answer keeps the last phase", 0, "", "", false, GangPhase::kRunning, "unreachable"}),
    [](const auto& info) { return "Case" + std::to_string(info.index); });

TEST(KubeAnswersReaders, FirstPodNameIsEmptyForAnythingButAPodList) {
  EXPECT_EQ(k8s::first_pod_name(k8s::parse_object("")), "");
  EXPECT_EQ(k8s::first_pod_name(k8s::parse_object(R"({"items":[]})")), "");
  EXPECT_EQ(k8s::first_pod_name(k8s::parse_object(R"({"items":[{"metadata":{"name":5}}]})")), "");
  EXPECT_EQ(k8s::first_pod_name(k8s::parse_object(R"({"items":[{"metadata":{"name":"gs-j1-1-0"}}]})")), "gs-j1-1-0");
}

TEST(KubeAnswersReaders, AFailedJobIsRemovedUnlessItsStopWasRequested) {
  const auto job = k8s::read_job(k8s::parse_object(R"({"status":{"conditions":[{"type":"Failed","status":"True"}]}})"));
  const auto d = k8s::decide("j", 200, job, {}, false, GangPhase::kRunning);
  ASSERT_NE(d.remove, nullptr);
  EXPECT_STREQ(d.remove, "Background");
  EXPECT_TRUE(d.forget);
  EXPECT_EQ(k8s::decide("j", 200, job, {}, true, GangPhase::kRunning).remove, nullptr);
  // A running gang whose stop's delete did not get through gets it again.
  const auto running = k8s::read_job(k8s::parse_object(R"({"status":{"active":1}})"));
  const auto again = k8s::decide("j", 200, running, {}, true, GangPhase::kRunning);
  ASSERT_NE(again.remove, nullptr);
  EXPECT_STREQ(again.remove, k8s::kStopPropagation);
  const auto deleting = k8s::read_job(k8s::parse_object(R"({"metadata":{"deletionTimestamp":"x"},"status":{"active":1}})"));
  EXPECT_EQ(k8s::decide("j", 200, deleting, {}, true, GangPhase::kRunning).remove, nullptr);
}

}  // namespace
}  // namespace controller
