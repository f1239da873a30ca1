// greenshard-worker (the real binary) against object-store outages at start
// (issue 34): an endpoint that cannot be reached is a retryable failure
// (exit 1: the controller restarts the gang), one that comes back within the
// S3 client's retry budget costs nothing, and what retrying cannot fix (a
// missing bucket, a wrong secret) stays a configuration error (exit 2).
// docs/worker-controller.md, "Exit status"; docs/reliability.md.
// Real processes: the worker on 2 local ranks, s3rver (gstest::S3Server) on
// loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/spawn.h"
#include "shard/s3_server.h"

namespace {

using namespace std::chrono_literals;

const std::string kWorker = GS_WORKER_BIN;
const std::string kText = "/usr/share/common-licenses/GPL-3";  // real English text, always on Debian

// Prepared data and a 2-step job checkpointing to `root`.
struct Job {
  gstest::TempDir dir;
  std::string spec;
  explicit Job(const std::string& root) {
    auto r = gstest::run_process({kWorker, "prepare", "--input", kText, "--out", dir.file("data")}, {}, 120s);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    spec = dir.file("job.yaml");
    std::ofstream(spec) << "model: {layers: 1, heads: 2, embd: 32, context: 16}\n"
                        << "data: {train: " << dir.file("data/train.bin") << ", val: " << dir.file("data/val.bin")
                        << "}\n"
                        << "schedule: {steps: 2, batch_size: 4, eval_interval: 20, eval_batches: 2}\n"
                        << "checkpoint: {dir: '" << root << "', interval: 10, keep_last: 0}\n"
                        << "summary_path: " << dir.file("summary.json") << "\n";
  }
  std::vector<std::string> args() const { return {kWorker, "--config", spec, "--nproc", "2"}; }
};

std::map<std::string, std::string> with(std::map<std::string, std::string> env,
                                        const std::map<std::string, std::string>& more) {
  for (const auto& [k, v] : more) env[k] = v;
  env["OMP_NUM_THREADS"] = "1";
  return env;
}

TEST(WorkerS3Outage, AnEndpointThatCannotBeReachedIsRetryableNotAConfigError) {
  gstest::S3Server s3("gs-ckpt");
  Job job("s3://gs-ckpt/jobs/j1");
  auto env = s3.env();
  // Nothing listens there.
  env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:" + std::to_string(gstest::free_port());
  auto r = gstest::run_process(job.args(), with(env, {{"GREENSHARD_S3_RETRY_SECONDS", "1"}}), 300s);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("config error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("checkpoint.dir: 's3://gs-ckpt/jobs/j1' cannot be reached (retryable)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" attempts over "), std::string::npos) << r.output;
}

TEST(WorkerS3Outage, AnEndpointDownAtStartThatComesBackWithinTheBudgetCostsNothing) {
  gstest::S3Server s3("gs-ckpt");
  const std::string root = "s3://gs-ckpt/jobs/j2";
  Job job(root);
  s3.stop();  // down while the gang starts ...
  gstest::Background worker(job.args(), with(s3.env(), {{"GREENSHARD_S3_RETRY_SECONDS", "120"}}));
  std::this_thread::sleep_for(2s);
  const bool alive_while_down = worker.running();
  s3.restart();  // ... and back 2 s later, on the same port and data
  auto r = worker.wait(300s);
  EXPECT_TRUE(alive_while_down) << "the worker waited for the endpoint: " << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output << s3.log();
  EXPECT_NE(r.output.find("checkpoint " + root + "/step_00000002"), std::string::npos) << r.output;
}

TEST(WorkerS3Outage, AMissingBucketOrAWrongSecretStaysAConfigError) {
  gstest::S3Server s3("gs-ckpt");
  {
    Job job("s3://no-such-bucket/jobs/j3");
    auto r = gstest::run_process(job.args(), with(s3.env(), {}), 300s);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("config error: checkpoint.dir: 's3://no-such-bucket/jobs/j3' is not usable"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("NoSuchBucket"), std::string::npos) << r.output;
  }
  {
    Job job("s3://gs-ckpt/jobs/j3");
    auto r = gstest::run_process(job.args(), with(s3.env(), {{"AWS_SECRET_ACCESS_KEY", "wrong"}}), 300s);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("SignatureDoesNotMatch"), std::string::npos) << r.output;
  }
  {
    Job job("s3://gs-ckpt/jobs/j3");
    auto r = gstest::run_process(job.args(), with(s3.env(), {{"GREENSHARD_S3_RETRY_SECONDS", "soon"}}), 300s);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("GREENSHARD_S3_RETRY_SECONDS=soon"), std::string::npos) << r.output;
  }
}

}  // namespace
