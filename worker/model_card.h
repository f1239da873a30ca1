// A model card: what a checkpoint or an export needs besides its tensors to
// be used again -- the GPT's shape and the tokenizer it was trained with.
// The trainer writes one into every checkpoint's record and next to every
// export (<export_path>.json); `greenshard-worker sample` and the PyTorch
// reference (tests/python/) read it. No LibTorch here.
//
// JSON: {"format": "greenshard-gpt/1",
//        "model": {"layers", "heads", "embd", "context", "vocab"},
//        "tokenizer": {"kind": "byte" | "sentencepiece", "vocab",
//                      "model": absolute path of the .model ("" for byte),
//                      "sha256": hex ("" for byte)}}
#pragma once

#include "worker/spec/model_shape.h"
#include "worker/tokenizer.h"

#include <cstdint>
#include <string>

namespace greenshard {

struct ModelCard : ModelShape {
  TokenizerInfo tokenizer;
  std::string tokenizer_model;   // absolute path of the SentencePiece .model; "" for byte
};

std::string to_json(const ModelCard& card);
// Throws ConfigError (worker/config.h) naming `origin` and the field
// ("model.heads", "tokenizer.kind", ...) on a missing or bad field.
ModelCard model_card_from_json(const std::string& text, const std::string& origin);
// Written to <path>.tmp, then renamed.
void write_model_card(const std::string& path, const ModelCard& card);
ModelCard read_model_card(const std::string& path);
// The tokenizer a card names: the byte tokenizer, or its .model file (or
// `override_model` when not empty), whose SHA-256 must match the card's;
// throws std::runtime_error naming the file otherwise.
std::unique_ptr<Tokenizer> open_tokenizer(const ModelCard& card, const std::string& override_model = "");

}  // namespace greenshard
