// The controller's serving certificate and key, replaced while it serves
// (a cert-manager renewal, a rotated Secret) without a restart.
//
// install(ctx) sets a certificate callback (SSL_CTX_set_cert_cb) on the
// server's context: each new TLS handshake takes the pair in force at that
// moment, from an immutable snapshot; connections already open keep theirs.
// replace() swaps in a new pair only when the certificate chain and the key
// parse and the key matches the certificate; otherwise the pair in force
// stays and the reason is returned. The watch (a FileWatch on both files, in
// ApiServer) calls replace() on every change and on SIGHUP.
#pragma once

#include <memory>
#include <mutex>
#include <string>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace controller {

class TlsCredentials {
 public:
  // Checks the PEM text of both files (the paths name them in errors);
  // throws std::runtime_error naming the file and what is wrong.
  TlsCredentials(std::string cert_path, std::string key_path, const std::string& cert_pem,
                 const std::string& key_pem);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  // Every later handshake on `ctx` uses the pair in force. Call before serving.
  void install(SSL_CTX* ctx);
  // "" when the pair is now in force; else why not (the old pair stays).
  std::string replace(const std::string& cert_pem, const std::string& key_pem);
  const std::string& cert_path() const { return cert_path_; }
  const std::string& key_path() const { return key_path_; }

 private:
  struct Pair;
  // The pair in cert_pem (leaf, then its chain) and key_pem, or nullptr and
  // `why` (the certificate's problem first, then the key's, then a mismatch).
  std::shared_ptr<const Pair> parse(const std::string& cert_pem, const std::string& key_pem, std::string& why) const;
  static int on_handshake(SSL* ssl, void* self);
  std::shared_ptr<const Pair> current() const;

  const std::string cert_path_, key_path_;
  mutable std::mutex mu_;
  std::shared_ptr<const Pair> pair_;
};

}  // namespace controller
