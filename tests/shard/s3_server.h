// A real S3 server for tests: s3rver (npm, a Node process) on loopback.
//
//   gstest::S3Server s3;                        // bucket "ckpt", any free port
//   auto cfg = shard::s3::config_from_env([&](const char* n) { ... s3.env() ... });
//   s3.stop();    // SIGKILL: the server dies as in a crash (mid-upload, say)
//   s3.restart(); // same data directory and port: earlier objects are back
//
// Needs node and the npm packages of scripts/install_s3_tools.sh in
// <tools>/s3/node_modules, <tools> being $GREENSHARD_TOOLS_DIR or
// <repo>/.tools ($GREENSHARD_S3_TOOLS names the s3 folder itself; $NODE the
// node binary). When they are missing the constructor throws, saying what is
// missing and how to install it, so the test fails (it does not skip).
//
// s3rver itself does not verify SigV4 signatures (only that the access key id
// is S3RVER); s3rver_run.mjs does, with the AWS SDK's signer: a request signed
// with another secret gets 403 SignatureDoesNotMatch. The body is not checked
// against x-amz-content-sha256. Besides, s3rver answers "Range: bytes=0-0"
// with the whole object (from byte 0). Multipart calls s3rver lacks are the
// runner's: AbortMultipartUpload (DELETE /bucket/key?uploadId=) and
// ListMultipartUploads (GET /bucket?uploads&prefix=), which s3rver answers 501.
//
// No process outlives the fixture: the destructor kills the server, and the
// server dies with the test process too (PR_SET_PDEATHSIG, and it exits when
// its stdin, a pipe from us, closes). Not copyable; use from the thread that
// created it.
#pragma once

#include <map>
#include <string>

namespace gstest {

class S3Server {
 public:
  // Starts s3rver on 127.0.0.1 (port 0: the kernel picks) in a fresh temp
  // directory with `bucket` created, and waits until it serves requests.
  // std::runtime_error when node or the packages are missing or it fails to start.
  explicit S3Server(const std::string& bucket = "ckpt");
  ~S3Server();  // kills the server, removes the temp directory
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  std::string endpoint() const;  // "http://127.0.0.1:PORT"
  int port() const;
  std::string bucket() const;
  std::string dir() const;  // s3rver's data directory (one folder per bucket)
  bool running() const;
  void stop();     // SIGKILL and reap; no-op when stopped
  // (Stops, then) starts again on the same directory and port. Throws, with
  // the server's stderr, should another process have taken the port meanwhile.
  void restart();
  std::string log() const;  // the server's stderr so far, for failure messages

  // For child processes and config_from_env: AWS_ENDPOINT_URL_S3, AWS_REGION
  // (us-east-1), AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (S3RVER, the only
  // key s3rver knows), and GREENSHARD_S3_TOOLS (where the node modules are).
  std::map<std::string, std::string> env() const;

  static bool available();                  // node and both packages found
  static std::string unavailable_reason();  // "" when available()
  static std::string node();                // the node binary ("" when not found)
  static std::string tools_dir();           // <tools>/s3
  static std::string script(const std::string& name);  // <repo>/tests/shard/<name>

 private:
  void start(int port);

  std::string bucket_;
  std::string tmp_;  // temp root: data/ and server.log
  int port_ = 0;
  int pid_ = -1;
  int stdin_fd_ = -1;  // the write end of the server's stdin
};

}  // namespace gstest
