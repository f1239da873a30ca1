// Tokenizers (worker/tokenizer.h): the byte tokenizer, SentencePiece BPE
// models trained here on generated text, SHA-256 of model files.
#include "common/spawn.h"
#include "worker/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

namespace {

using greenshard::TokenizerKind;
using namespace std::string_literals;

// Deterministic English-like text with some Unicode, one sentence a line.
std::string generated_text(size_t lines, uint32_t seed) {
  static const char* kWords[] = {"the", "and", "of", "to", "in", "that", "shall", "he", "unto", "for", "his",
                                 "they", "lord", "with", "not", "all", "which", "him", "was", "is", "be",
                                 "from", "people", "house", "water", "light", "earth", "heaven", "über",
                                 "naïve", "café", "Ελλάδα", "мир", "数据", "time", "king", "son"};
  std::mt19937 rng(seed);
  std::ostringstream out;
  for (size_t l = 0; l < lines; ++l) {
    const int n = 4 + static_cast<int>(rng() % 12);
    for (int w = 0; w < n; ++w) {
      if (w) out << ' ';
      out << kWords[rng() % (sizeof kWords / sizeof kWords[0])];
    }
    out << (rng() % 3 == 0 ? ", " + std::to_string(rng() % 1000) : std::string()) << ".\n";
  }
  return out.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Strings a tokenizer must give back byte for byte.
const std::vector<std::string>& hard_strings() {
  static const std::vector<std::string> s = {
      "",
      "the lord shall",
      "  leading and trailing spaces  ",
      "tabs\tand\nnewlines\n\n\r\nend\n",
      "\n",
      "Unicode: naïve café, Ελλάδα, мир, 数据, 日本語 (never seen), emoji \xF0\x9F\x98\x80",
      "control bytes \x01\x02\x7f and a NUL \0 inside"s,
      "invalid UTF-8: \xff\xfe \xc3 lone lead \x80 lone continuation \xed\xa0\x80 surrogate",
      "digits 1234567890 3.14159",
  };
  return s;
}

TEST(ByteTokenizer, TokenIsTheByteAndDecodeInvertsEncode) {
  auto tok = greenshard::make_byte_tokenizer();
  EXPECT_EQ(tok->info().kind, TokenizerKind::kByte);
  EXPECT_EQ(tok->vocab(), 256);
  EXPECT_EQ(tok->info().model_sha256, "");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const auto ids = tok->encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], static_cast<uint32_t>(b));
  EXPECT_EQ(tok->decode(ids), all);
  for (const auto& s : hard_strings()) EXPECT_EQ(tok->decode(tok->encode(s)), s);
  EXPECT_THROW(tok->decode({65, 256}), std::invalid_argument);
  std::vector<uint32_t> out{7};
  tok->encode("ab", out);
  EXPECT_EQ(out, (std::vector<uint32_t>{7, 'a', 'b'})) << "encode appends";
}

TEST(Tokenizer, KindNames) {
  EXPECT_STREQ(greenshard::to_string(TokenizerKind::kByte), "byte");
  EXPECT_STREQ(greenshard::to_string(TokenizerKind::kSentencePiece), "sentencepiece");
}

TEST(FileSha256, KnownDigestsAndAMissingFileIsNamed) {
  gstest::TempDir dir;
  write_file(dir.file("abc"), "abc");
  EXPECT_EQ(greenshard::file_sha256(dir.file("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  write_file(dir.file("empty"), "");
  EXPECT_EQ(greenshard::file_sha256(dir.file("empty")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  try {
    greenshard::file_sha256(dir.file("missing"));
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing")), std::string::npos) << e.what();
  }
}

// One BPE model for the tests below (training takes a second).
class Bpe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new gstest::TempDir;
    greenshard::BpeTrainOptions o;
    o.vocab = 400;
    greenshard::train_bpe_tokenizer(generated_text(4000, 1), dir_->file("bpe.model"), o);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static gstest::TempDir* dir_;
};
gstest::TempDir* Bpe::dir_ = nullptr;

TEST_F(Bpe, DecodeInvertsEncodeForAnyBytes) {
  auto tok = greenshard::load_sentencepiece(dir_->file("bpe.model"));
  EXPECT_EQ(tok->info().kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(tok->vocab(), 400);
  EXPECT_EQ(tok->info().model_sha256, greenshard::file_sha256(dir_->file("bpe.model")));
  for (const auto& s : hard_strings()) {
    const auto ids = tok->encode(s);
    for (auto id : ids) EXPECT_LT(id, 400u);
    EXPECT_EQ(tok->decode(ids), s) << "round trip of '" << s << "'";
  }
  // Every single byte, alone and in a run (byte fallback).
  std::string all;
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_EQ(tok->decode(tok->encode(one)), one) << "byte " << b;
    all += one;
  }
  EXPECT_EQ(tok->decode(tok->encode(all)), all);
  EXPECT_THROW(tok->decode({1, 400}), std::invalid_argument);
}

TEST_F(Bpe, CompressesTextLikeItsSampleAndEncodesLineByLine) {
  auto tok = greenshard::load_sentencepiece(dir_->file("bpe.model"));
  const std::string text = generated_text(300, 2);  // other lines, same language
  const auto ids = tok->encode(text);
  EXPECT_LT(ids.size() * 2, text.size()) << "BPE tokens are shorter than bytes";
  EXPECT_EQ(tok->decode(ids), text);
  // A cut at a newline changes nothing: encode(a + b) == encode(a) ++ encode(b).
  const size_t cut = text.find('\n', text.size() / 2) + 1;
  auto a = tok->encode(text.substr(0, cut));
  tok->encode(text.substr(cut), a);
  EXPECT_EQ(a, ids);
}

TEST_F(Bpe, TrainingIsDeterministic) {
  greenshard::BpeTrainOptions o;
  o.vocab = 400;
  greenshard::train_bpe_tokenizer(generated_text(4000, 1), dir_->file("again.model"), o);
  EXPECT_EQ(greenshard::file_sha256(dir_->file("again.model")), greenshard::file_sha256(dir_->file("bpe.model")));
}

TEST(BpeTrainer, BadVocabularyIsAnErrorNamingTheFlag) {
  gstest::TempDir dir;
  const std::string sample = generated_text(200, 3);
  greenshard::BpeTrainOptions o;
  o.vocab = 255;
  try {
    greenshard::train_bpe_tokenizer(sample, dir.file("m.model"), o);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab"), std::string::npos) << e.what();
  }
  o.vocab = greenshard::kMaxVocab + 1;  // more than the trainer's model.vocab takes
  try {
    greenshard::train_bpe_tokenizer(sample, dir.file("m.model"), o);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab: must be in [260, 65536]"), std::string::npos) << e.what();
  }
  o.vocab = 60000;  // more pieces than this little text has
  try {
    greenshard::train_bpe_tokenizer(sample, dir.file("m.model"), o);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab 60000"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::ifstream(dir.file("m.model")).good()) << "no model left behind";
}

TEST(LoadSentencepiece, MissingOrNotAModelIsAnErrorNamingTheFile) {
  gstest::TempDir dir;
  write_file(dir.file("text.model"), "this is not a model\n");
  for (const auto& path : {dir.file("missing.model"), dir.file("text.model"), dir.path()}) {
    try {
      greenshard::load_sentencepiece(path);
      ADD_FAILURE() << path;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

}  // namespace
