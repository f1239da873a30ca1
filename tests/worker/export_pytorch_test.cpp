// The torch_save export read by real PyTorch: a GPT with random weights
// (every parameter, biases and LayerNorms included, so a misnamed,
// transposed or skipped tensor changes the logits) is exported through a
// one-rank FullyShardedModel; tests/python/check_export.py loads it with
// torch.load into a reference GPT-2 written in plain PyTorch and compares
// its logits with LibTorch's.
#include "common/spawn.h"
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/policy.h"
#include "shard/rendezvous.h"
#include "worker/model.h"
#include "worker/model_card.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <fstream>
#include <string>

namespace {

using greenshard::GPT;
using greenshard::GPTConfig;

// Values far from the GPT-2 initialization: LayerNorm gains around 1,
// biases and gains non-zero, matrices large enough that GELU's tanh
// approximation and the exact one differ visibly.
void randomize(GPT& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& p : model->named_parameters(true)) {
    const std::string& n = p.key();
    at::Tensor& t = p.value();
    const bool norm = n.rfind("ln_f.", 0) == 0 || n.find(".ln_") != std::string::npos;
    if (norm && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0) {
      t.normal_(1.0, 0.2, gen);
    } else if (n.compare(n.size() - 5, 5, ".bias") == 0) {
      t.normal_(0.0, 0.2, gen);
    } else {
      t.normal_(0.0, 0.25, gen);
    }
  }
}

TEST(ExportPyTorch, TorchLoadIntoAPlainPyTorchGpt2GivesLibTorchsLogitsWithin1e5) {
  ASSERT_STRNE(GS_TORCH_PYTHON, "")
      << "no Python interpreter that imports torch was found when CMake configured the build: install "
         "python3-torch (Debian) or pass -DGREENSHARD_TORCH_PYTHON=/path/to/python3";
  gstest::TempDir dir;
  GPTConfig gc;
  gc.vocab_size = 260;  // not a multiple of anything in particular; > the byte tokenizer's 256
  gc.block_size = 24;
  gc.n_layer = 2;
  gc.n_head = 4;
  gc.n_embd = 32;
  torch::manual_seed(5);
  GPT model(gc);
  randomize(model, 77);
  model->eval();

  // Tokens (2, 24): the full context, two different rows.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor tokens = at::randint(gc.vocab_size, {2, gc.block_size}, gen, at::kLong);
  at::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = model->forward(tokens).contiguous();
  }
  ASSERT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, gc.block_size, gc.vocab_size}));

  // Export through FSDP (one rank, one unit per block as the trainer wraps).
  const std::string file = dir.file("model.pt");
  {
    shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
    auto rdzv = shard::Rendezvous::connect(info);
    shard::FullyShardOptions so;
    so.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
    shard::FullyShardedModel fsdp(model.ptr(), rdzv, so);
    shard::export_full_state_dict(fsdp, file, shard::ExportFormat::kTorchSave);
  }
  greenshard::ModelCard card;
  card.layers = gc.n_layer;
  card.heads = gc.n_head;
  card.embd = gc.n_embd;
  card.context = gc.block_size;
  card.vocab = gc.vocab_size;
  greenshard::write_model_card(file + ".json", card);

  {
    std::ofstream t(dir.file("tokens.json"));
    t << "{\"shape\": [" << tokens.size(0) << ", " << tokens.size(1) << "], \"tokens\": [";
    const int64_t* p = tokens.data_ptr<int64_t>();
    for (int64_t i = 0; i < tokens.numel(); ++i) t << (i ? ", " : "") << p[i];
    t << "]}\n";
    std::ofstream l(dir.file("logits.bin"), std::ios::binary);
    l.write(static_cast<const char*>(logits.data_ptr()), static_cast<std::streamsize>(logits.numel() * sizeof(float)));
    ASSERT_TRUE(t && l);
  }
  auto py = gstest::run_process({GS_TORCH_PYTHON, GS_SOURCE_DIR "/tests/python/check_export.py", "--export", file,
                                 "--tokens", dir.file("tokens.json"), "--logits", dir.file("logits.bin"),
                                 "--tolerance", "1e-5"},
                                {{"OMP_NUM_THREADS", "1"}, {"PYTHONDONTWRITEBYTECODE", "1"}}, std::chrono::seconds(300));
  std::cout << py.output;
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_NE(py.output.find("max |dlogit|"), std::string::npos) << py.output;
}

}  // namespace
