// The flags of the benchmarks that train the GPT on real rank processes
// (bench_fsdp_step, bench_activation_checkpointing): --ranks --steps
// --warmup --batch --seq --layers --embd --vocab, each an integer >= 1 (else
// exit 2 naming the flag), and the model they describe.
#pragma once

#include <algorithm>

#include "bench_flags.h"
#include "shard/rendezvous.h"
#include "worker/model.h"

namespace gsbench {

struct ModelArgs {
  int ranks = 2, steps = 5, warmup = 1, batch = 4, seq = 128, layers = 6, embd = 512, vocab = 10240;
};

// `defaults` with the flags given on the command line applied.
inline ModelArgs parse_model_flags(int argc, char** argv, ModelArgs defaults, const char* program) {
  ModelArgs a = defaults;
  const std::map<std::string, int*> ints{{"--ranks", &a.ranks}, {"--steps", &a.steps}, {"--warmup", &a.warmup},
                                         {"--batch", &a.batch}, {"--seq", &a.seq},     {"--layers", &a.layers},
                                         {"--embd", &a.embd},   {"--vocab", &a.vocab}};
  parse_int_flags(argc, argv, ints, program);
  return a;
}

// The GPT of that shape: one head per 64 embedding channels (at least one),
// a context of --seq tokens.
inline greenshard::GPTConfig model_config(const ModelArgs& a) {
  greenshard::GPTConfig c;
  c.vocab_size = a.vocab;
  c.block_size = a.seq;
  c.n_layer = a.layers;
  c.n_embd = a.embd;
  c.n_head = std::max(1, a.embd / 64);
  return c;
}

// A step's time on the ranks: the slowest rank's `ms` (an all-gather over
// the world, so every rank calls it).
inline double slowest_rank_ms(shard::Rendezvous& rdzv, double ms) {
  at::Tensor mine = at::full({1}, ms, at::kDouble);
  at::Tensor all = at::empty({rdzv.world_size()}, at::kDouble);
  rdzv.world()->all_gather_into(all, mine)->wait();
  return all.max().item<double>();
}

}  // namespace gsbench
