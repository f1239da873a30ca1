// Where checkpoints live: a local directory, or an S3 bucket prefix
// ("s3://bucket/prefix"). Objects are named relative to the root:
// "step_00000010/rank_0.bin". The checkpoint code decides what to write and
// in which order (rank files, then the manifest, DONE last); a store only
// makes each object durable and visible under its name atomically.
//
// Contract, both stores:
//   - create(name)->append(...)...->commit(): nothing is visible under `name`
//     until commit() returned; then the whole object is, durably (local:
//     <name>.tmp, fsync, rename, fsync of the directory; S3: one PUT or a
//     completed multipart upload). A writer destroyed without commit leaves
//     no object under `name` (local: the .tmp file stays, as a crash leaves
//     it; S3: the multipart upload is aborted).
//   - put(name, bytes): the same, for a small object.
//   - Errors are std::runtime_error naming the object ("<root>/<name>").
//   - Calls are blocking and thread-safe; one writer is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shard {

class ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;
  // Appends n bytes. `data` must stay valid and unchanged until commit()
  // returned or the writer is destroyed (a writer may write it later, on a
  // thread of its own).
  virtual void append(const void* data, size_t n) = 0;
  // Everything appended so far has reached storage (not yet durable or
  // visible). For fault injection and progress only.
  virtual void flush() = 0;
  // Durable and visible under the name. Returns the object's size.
  virtual int64_t commit() = 0;
};

class CheckpointStore {
 public:
  virtual ~CheckpointStore() = default;
  // The root as the user wrote it (a path or "s3://bucket/prefix").
  virtual const std::string& root() const = 0;
  // "<root>/<name>", for messages and return values.
  std::string path(const std::string& name) const { return root() + "/" + name; }

  virtual std::unique_ptr<ObjectWriter> create(const std::string& name) = 0;
  virtual void put(const std::string& name, const std::string& bytes) = 0;
  // The whole object; nullopt when there is none.
  virtual std::optional<std::string> get(const std::string& name) = 0;
  // Its size in bytes; nullopt when there is none.
  virtual std::optional<int64_t> size(const std::string& name) = 0;
  // n bytes at offset into dst; throws when the object is shorter or gone.
  virtual void read(const std::string& name, int64_t offset, size_t n, void* dst) = 0;
  // The names of the "directories" (prefixes) directly under the root that
  // start with `prefix`, e.g. "step_00000010".
  virtual std::vector<std::string> list_dirs(const std::string& prefix) = 0;
  // Removes one object; nothing there is fine.
  virtual void remove(const std::string& name) = 0;
  // Removes everything under dir/ (and dir itself where that means
  // anything); nothing there is fine.
  virtual void remove_dir(const std::string& dir) = 0;
  // Prepares dir for writing (local: mkdir -p; S3: nothing).
  virtual void make_dir(const std::string& dir) = 0;
  // Aborts the incomplete uploads that writers which died left (S3: their
  // multipart uploads, invisible but stored and billed) in the step
  // directories that sort at or before `up_to_dir` ("step_00000010"); a
  // later one may be a save in progress. Returns how many. Local: nothing
  // to do (a dead writer's .tmp file lies in its step directory and goes
  // with it).
  virtual int abort_stale_uploads(const std::string& up_to_dir) {
    (void)up_to_dir;
    return 0;
  }
};

// The store for `root`: S3 when it starts with "s3://" (endpoint, region
// and credentials from the environment, see s3_config.h), a local directory
// otherwise. Throws std::invalid_argument naming what is wrong (a bad URL or
// a missing variable).
std::shared_ptr<CheckpointStore> open_checkpoint_store(const std::string& root);

// The two stores (checkpoint_store_local.cpp, checkpoint_store_s3.cpp).
std::shared_ptr<CheckpointStore> make_local_store(const std::string& root);
std::shared_ptr<CheckpointStore> make_s3_store(const std::string& url);

}  // namespace shard
