// greenshard-worker: one training job's rank (or, with --nproc or the
// Kubernetes PET_* variables, the launcher of this node's ranks).
//
//   greenshard-worker prepare --input PATH_OR_GLOB... --out DIR [--val-fraction 0.05] [--tokenizer byte|bpe]
//                             [--vocab 8192] [--tokenizer-model FILE] [--shard-tokens N] [--threads N] [--sample-mb 16]
//   greenshard-worker sample (--checkpoint DIR | --export FILE) --prompt TEXT --tokens N [--temperature T]
//                            [--top-k K] [--seed S] [--tokenizer-model FILE]
//   greenshard-worker --config job.json [--section.field VALUE ...] [--log-format json] [--print-config] [--nproc N]
//
// The job spec, the environment and the exit codes: docs/worker-controller.md.
#include "shard/launch.h"
#include "worker/spec/job_spec.h"
#include "worker/prepare.h"
#include "worker/sample.h"
#include "worker/status.h"
#include "worker/trainer.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

int run_prepare(const greenshard::PrepareOptions& o) {
  const auto r = greenshard::prepare(o);
  auto files = [](const std::vector<std::string>& f) {
    if (f.empty()) return std::string("no files");
    return f.size() == 1 ? f.front() : f.front() + " .. " + f.back() + " (" + std::to_string(f.size()) + " shards)";
  };
  std::cout << "prepare: " << r.input_bytes << " bytes -> train " << r.train_tokens << " tokens in " << files(r.train_files)
            << ", val " << r.val_tokens << " tokens in " << files(r.val_files) << "; tokenizer "
            << greenshard::to_string(r.tokenizer.kind) << ", vocabulary " << r.tokenizer.vocab
            << (r.tokenizer_model.empty() ? std::string() : ", model " + r.tokenizer_model) << "; manifest "
            << o.out_dir << "/manifest.json" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"greenshard-worker: trains a GPT with fully sharded data parallelism and accounts its carbon.\n"
               "Fields come from --config (JSON or YAML), then GREENSHARD_* variables, then --section.field flags."};
  app.set_help_flag("-h,--help", "Print this help (every job-spec field is a flag below)");
  app.require_subcommand(0, 1);
  std::string config_path;
  bool print_config = false;
  int nproc = 0;
  app.add_option("--config", config_path, "job spec file (JSON or YAML)");
  app.add_flag("--print-config", print_config, "print the resolved config as JSON and exit");
  app.add_option("--nproc", nproc, "start this many local ranks (like torchrun --standalone)")->check(CLI::Range(1, 1024));
  std::string log_format;
  app.add_option("--log-format", log_format, "same as --log.format: text | json (one JSON object per line)");
  std::map<std::string, std::string> flag_values;
  for (const auto& f : greenshard::config_fields()) {
    app.add_option("--" + f.path, flag_values[f.path], f.help + " [" + f.type + ", default " +
                                                          (f.default_value.empty() ? "''" : f.default_value) + "]");
  }
  auto* prepare = app.add_subcommand(
      "prepare", "turn text into token shards DIR/train-NNNNN.bin and DIR/val-NNNNN.bin (docs/worker-controller.md)");
  greenshard::PrepareOptions popt;
  prepare->add_option("--input", popt.inputs, "text files, named pipes or glob patterns, read in order")->required();
  prepare->add_option("--out", popt.out_dir, "output directory")->required();
  prepare->add_option("--val-fraction", popt.val_fraction, "share of tokens for validation, [0, 1) [0.05]");
  prepare->add_option("--tokenizer", popt.tokenizer, "byte (vocabulary 256) | bpe (SentencePiece BPE) [byte]");
  prepare->add_option("--vocab", popt.vocab, "bpe: vocabulary to train, [260, 65536] [8192]");
  prepare->add_option("--tokenizer-model", popt.tokenizer_model,
                      "an existing SentencePiece .model to encode with (copied to DIR/tokenizer.model)");
  prepare->add_option("--shard-tokens", popt.shard_tokens, "tokens per shard file [2^28]");
  prepare->add_option("--threads", popt.threads, "encoding threads, [1, 64] [hardware threads]");
  prepare->add_option("--sample-mb", popt.sample_mb, "bpe: train on the first N MB of the text, [1, 256] [16]");
  greenshard::SampleOptions sample_options;
  auto* sample = greenshard::add_sample_command(app, sample_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << greenshard::kConfigErrorPrefix << e.what() << " (run with --help for the flags)" << std::endl;
    return greenshard::kExitBadConfig;
  }
  try {
    if (prepare->parsed()) {
      if (prepare->count("--tokenizer-model") && !prepare->count("--tokenizer")) popt.tokenizer = "bpe";
      if (prepare->count("--threads") && popt.threads < 1) throw std::invalid_argument("--threads: must be in [1, 64]");
      if (prepare->count("--vocab") && popt.tokenizer != "bpe")
        throw std::invalid_argument("--vocab: only with --tokenizer bpe (the byte tokenizer's vocabulary is 256)");
      if (prepare->count("--vocab") && prepare->count("--tokenizer-model"))
        throw std::invalid_argument("--vocab: not with --tokenizer-model (the model fixes the vocabulary)");
      return run_prepare(popt);
    }
    if (sample->parsed()) return greenshard::run_sample(sample_options, std::cout);

    greenshard::JobConfig cfg;
    if (!config_path.empty()) greenshard::apply_config_file(cfg, config_path);
    const auto env = greenshard::environment_map();
    greenshard::apply_environment(cfg, env);
    if (app.count("--log-format")) greenshard::apply_field(cfg, "log.format", log_format, "--log-format");
    for (const auto& f : greenshard::config_fields())
      if (app.count("--" + f.path)) greenshard::apply_field(cfg, f.path, flag_values[f.path], "--" + f.path);
    greenshard::validate(cfg);
    // The CA bundle an https:// status.url / carbon.intensity_url is verified with.
    greenshard::ca_bundle_from_env(env);
    if (print_config) {
      std::cout << greenshard::to_json(cfg) << std::endl;
      return 0;
    }
    const auto plan = greenshard::resolve_launch(env, nproc);
    if (plan.spawn_local) {
      // This process launches the node's ranks: each re-runs this binary
      // with the same arguments and RANK, WORLD_SIZE... set.
      shard::LocalLaunchOptions lo;
      lo.nproc = plan.nproc_per_node;
      lo.master_addr = plan.master_addr == "127.0.0.1" && plan.nnodes == 1 ? "" : plan.master_addr;
      lo.master_port = plan.master_port;
      lo.node_rank = plan.node_rank;
      lo.nnodes = plan.nnodes;
      lo.forward_signals = true;
      // The ranks must not launch again.
      lo.env = {{"PET_NNODES", ""}};
      std::vector<std::string> args{"/proc/self/exe"};
      for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--nproc") {
          ++i;
          continue;
        }
        if (a.rfind("--nproc=", 0) == 0) continue;
        args.push_back(a);
      }
      auto res = shard::launch_local(args, lo);
      int code = 0;
      for (int c : res.exit_codes)
        if (c != 0 && code == 0) code = c == greenshard::kExitBadConfig ? c : greenshard::kExitFailure;
      return code;
    }
    if (plan.standalone) {
      // One rank on its own: a private rendezvous on loopback.
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(shard::free_loopback_port()).c_str(), 1);
      ::setenv("RANK", "0", 1);
      ::setenv("WORLD_SIZE", "1", 1);
      ::setenv("LOCAL_RANK", "0", 1);
      ::setenv("LOCAL_WORLD_SIZE", "1", 1);
    }
    greenshard::install_preemption_handlers();
    return greenshard::train(cfg);
  } catch (const std::invalid_argument& e) {  // greenshard::ConfigError, shard's option checks
    // One line: the local executor reports it as the job's failure_reason.
    std::string line = e.what();
    for (char& ch : line)
      if (ch == '\n' || ch == '\r') ch = ' ';
    std::cerr << greenshard::kConfigErrorPrefix << line << std::endl;
    return greenshard::kExitBadConfig;
  } catch (const std::exception& e) {
    std::cerr << "greenshard-worker: error: " << e.what() << std::endl;
    return greenshard::kExitFailure;
  }
}
