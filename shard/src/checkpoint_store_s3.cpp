// The S3 checkpoint store (see checkpoint_store.h): "s3://bucket/prefix",
// object "<prefix>/<name>". Endpoint, region and credentials come from the
// environment (s3::config_from_env). A writer buffers one part
// (s3::Config::part_bytes, 16 MiB unless GREENSHARD_S3_PART_MIB says
// otherwise): an object that fits is one PUT; a larger one a multipart
// upload, visible only once completed, aborted when the writer is dropped
// uncommitted. Every request is retried on transient failures (s3::Config:
// full-jitter backoff within GREENSHARD_S3_RETRY_SECONDS, default 60 s), so
// a server that restarts within the budget does not fail a save.
#include "checkpoint_store.h"
#include "s3_client.h"
#include "shard/object_store_url.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace shard {
#ifdef GREENSHARD_NO_S3
// bench/gpu's standalone build on an image without libcurl/OpenSSL headers.
std::shared_ptr<CheckpointStore> make_s3_store(const std::string& url) {
  throw std::invalid_argument("checkpoint: " + url + ": this build has no S3 store (built without libcurl)");
}
#else
namespace {

class S3Writer final : public ObjectWriter {
 public:
  S3Writer(std::shared_ptr<s3::Client> client, std::string bucket, std::string key, std::string display)
      : client_(std::move(client)),
        bucket_(std::move(bucket)),
        key_(std::move(key)),
        display_(std::move(display)),
        part_bytes_(client_->config().part_bytes) {
    part_.reserve(part_bytes_);
  }
  ~S3Writer() override {
    if (!upload_id_.empty() && !committed_) {
      try {
        client_->abort_multipart(bucket_, key_, upload_id_);
      } catch (const std::exception&) {
        // (the server is gone: its unfinished upload is not an object)
      }
    }
  }

  void append(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const size_t k = std::min(n, part_bytes_ - part_.size());
      part_.insert(part_.end(), p, p + k);
      p += k;
      n -= k;
      size_ += static_cast<int64_t>(k);
      if (part_.size() == part_bytes_) upload_part();
    }
  }

  void flush() override {}  // parts go out as they fill

  int64_t commit() override {
    if (upload_id_.empty()) {
      client_->put(bucket_, key_, part_.data(), part_.size());
    } else {
      if (!part_.empty()) upload_part();
      client_->complete_multipart(bucket_, key_, upload_id_, etags_);
    }
    committed_ = true;
    return size_;
  }

 private:
  void upload_part() {
    if (upload_id_.empty()) upload_id_ = client_->create_multipart(bucket_, key_);
    etags_.push_back(client_->upload_part(bucket_, key_, upload_id_, static_cast<int>(etags_.size()) + 1,
                                          part_.data(), part_.size()));
    part_.clear();
  }

  std::shared_ptr<s3::Client> client_;
  std::string bucket_, key_, display_;
  size_t part_bytes_;
  std::vector<char> part_;
  std::string upload_id_;
  std::vector<std::string> etags_;
  int64_t size_ = 0;
  bool committed_ = false;
};

class S3Store final : public CheckpointStore {
 public:
  explicit S3Store(const std::string& url)
      : root_(url), url_(parse_object_store_url(url)), client_(std::make_shared<s3::Client>(s3::config_from_env())) {
    // The user's spelling, without a trailing '/', so path() reads well.
    while (root_.size() > 5 && root_.back() == '/') root_.pop_back();
  }
  const std::string& root() const override { return root_; }

  std::unique_ptr<ObjectWriter> create(const std::string& name) override {
    return std::make_unique<S3Writer>(client_, url_.bucket, key(name), path(name));
  }
  void put(const std::string& name, const std::string& bytes) override {
    client_->put(url_.bucket, key(name), bytes.data(), bytes.size());
  }
  std::optional<std::string> get(const std::string& name) override { return client_->get(url_.bucket, key(name)); }
  std::optional<int64_t> size(const std::string& name) override { return client_->head(url_.bucket, key(name)); }
  void read(const std::string& name, int64_t offset, size_t n, void* dst) override {
    if (n > 0) client_->get_range(url_.bucket, key(name), offset, n, dst);
  }
  std::vector<std::string> list_dirs(const std::string& prefix) override {
    const std::string base = key("");
    std::vector<std::string> out;
    for (const auto& p : client_->list(url_.bucket, base + prefix, "/").prefixes) {
      std::string d = p.substr(base.size());
      if (!d.empty() && d.back() == '/') d.pop_back();
      if (!d.empty()) out.push_back(d);
    }
    return out;
  }
  void remove(const std::string& name) override { client_->remove(url_.bucket, key(name)); }
  void remove_dir(const std::string& dir) override {
    for (const auto& [k, size] : client_->list(url_.bucket, key(dir) + "/").objects) client_->remove(url_.bucket, k);
  }
  void make_dir(const std::string&) override {}
  int abort_stale_uploads(const std::string& up_to_dir) override {
    const std::string base = key("");
    int n = 0;
    for (const auto& u : client_->list_multipart(url_.bucket, base + "step_")) {
      const std::string rel = u.key.substr(base.size());
      const size_t slash = rel.find('/');
      if (slash == std::string::npos || rel.substr(0, slash) > up_to_dir) continue;
      client_->abort_multipart(url_.bucket, u.key, u.upload_id);
      ++n;
    }
    return n;
  }

 private:
  std::string key(const std::string& name) const { return url_.prefix.empty() ? name : url_.prefix + "/" + name; }

  std::string root_;
  ObjectStoreUrl url_;
  std::shared_ptr<s3::Client> client_;
};

}  // namespace

std::shared_ptr<CheckpointStore> make_s3_store(const std::string& url) { return std::make_shared<S3Store>(url); }
#endif

std::shared_ptr<CheckpointStore> open_checkpoint_store(const std::string& root) {
  if (root.empty()) throw std::invalid_argument("checkpoint: empty checkpoint root");
  if (is_object_store_url(root)) return make_s3_store(root);
  return make_local_store(root);
}

}  // namespace shard
