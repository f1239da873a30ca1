// The only code that touches libsentencepiece: a small module that
// tokenizer.cpp loads with dlopen(RTLD_LOCAL | RTLD_DEEPBIND).
//
// Why: Debian's libsentencepiece carries its own protobuf-lite 3.14 and
// exports its symbols; LibTorch loads the system libprotobuf 3.21. Linked
// into one process, whichever library comes first in the global symbol
// scope serves the other's protobuf calls, and the process dies at start
// (libprotobuf calling sentencepiece's MergeFromImpl) or at the version
// check. Loaded locally and deep-bound, sentencepiece and its protobuf copy
// only see each other. The functions are extern "C" for dlsym; they take
// C++ types (the one libstdc++ of the process), and never throw.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace {

// The lines of a text ('\n' separated; empty lines skipped).
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::string_view text) : text_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    for (;;) {
      if (pos_ >= text_.size()) {
        done_ = true;
        return;
      }
      size_t nl = text_.find('\n', pos_);
      if (nl == std::string_view::npos) nl = text_.size();
      value_.assign(text_.data() + pos_, nl - pos_);
      pos_ = nl + 1;
      if (!value_.empty()) return;
    }
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  bool done_ = false;
  std::string value_;
};

}  // namespace

extern "C" {

void* gs_spm_load(const char* path, std::string* error) {
  auto* sp = new (std::nothrow) sentencepiece::SentencePieceProcessor();
  if (!sp) return nullptr;
  const auto st = sp->Load(path);
  if (!st.ok()) {
    *error = st.ToString();
    delete sp;
    return nullptr;
  }
  return sp;
}

void gs_spm_free(void* h) { delete static_cast<sentencepiece::SentencePieceProcessor*>(h); }

int gs_spm_piece_size(void* h) { return static_cast<sentencepiece::SentencePieceProcessor*>(h)->GetPieceSize(); }

int gs_spm_unk_id(void* h) { return static_cast<sentencepiece::SentencePieceProcessor*>(h)->unk_id(); }

// The id of a byte piece "<0xNN>", or -1 when the model has none.
int gs_spm_byte_id(void* h, int byte) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(h);
  static const char* kHex = "0123456789ABCDEF";
  const std::string name = std::string("<0x") + kHex[(byte >> 4) & 15] + kHex[byte & 15] + ">";
  const int id = sp->PieceToId(name);
  return id != sp->unk_id() && sp->IsByte(id) ? id : -1;
}

bool gs_spm_encode(void* h, const char* text, size_t n, std::vector<int>* ids, std::string* error) {
  try {
    const auto st = static_cast<sentencepiece::SentencePieceProcessor*>(h)->Encode(std::string_view(text, n), ids);
    if (!st.ok()) *error = st.ToString();
    return st.ok();
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

bool gs_spm_decode(void* h, const std::vector<int>* ids, std::string* out, std::string* error) {
  try {
    const auto st = static_cast<sentencepiece::SentencePieceProcessor*>(h)->Decode(*ids, out);
    if (!st.ok()) *error = st.ToString();
    return st.ok();
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

// Trains on the lines of `text` (no file: the model records no path).
bool gs_spm_train(const std::unordered_map<std::string, std::string>* args, const std::string_view* text, unsigned seed,
                  std::string* model_proto, std::string* error) {
  try {
    sentencepiece::SetRandomGeneratorSeed(seed);
    LineIterator lines(*text);
    const auto st = sentencepiece::SentencePieceTrainer::Train(*args, &lines, model_proto);
    if (!st.ok()) *error = st.ToString();
    return st.ok();
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

}  // extern "C"
