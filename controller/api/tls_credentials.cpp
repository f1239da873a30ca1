#include "controller/api/tls_credentials.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <stdexcept>

namespace controller {

struct TlsCredentials::Pair {
  X509* leaf = nullptr;
  STACK_OF(X509)* chain = nullptr;  // the certificates after the leaf
  EVP_PKEY* key = nullptr;
  Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
  }
};

namespace {

std::string openssl_error(const char* fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
std::unique_ptr<BIO, BioFree> memory_bio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

}  // namespace

std::shared_ptr<const TlsCredentials::Pair> TlsCredentials::parse(const std::string& cert_pem,
                                                                  const std::string& key_pem,
                                                                  std::string& why) const {
  ERR_clear_error();
  auto pair = std::make_shared<Pair>();
  auto cb = memory_bio(cert_pem);
  pair->leaf = cb ? PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr) : nullptr;
  if (!pair->leaf) {
    why = "'" + cert_path_ + "': no PEM certificate (" + openssl_error("no PEM data") + ")";
    return nullptr;
  }
  pair->chain = sk_X509_new_null();
  while (X509* more = PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr)) sk_X509_push(pair->chain, more);
  ERR_clear_error();  // the end of the chain reads as "no start line"
  auto kb = memory_bio(key_pem);
  pair->key = kb ? PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr) : nullptr;
  if (!pair->key) {
    why = "'" + key_path_ + "': no PEM private key (" + openssl_error("no PEM data") + ")";
    return nullptr;
  }
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    ERR_clear_error();
    why = "the key in '" + key_path_ + "' does not match the certificate in '" + cert_path_ + "'";
    return nullptr;
  }
  return pair;
}

TlsCredentials::TlsCredentials(std::string cert_path, std::string key_path, const std::string& cert_pem,
                               const std::string& key_pem)
    : cert_path_(std::move(cert_path)), key_path_(std::move(key_path)) {
  std::string why;
  pair_ = parse(cert_pem, key_pem, why);
  if (!pair_) throw std::runtime_error("TLS: " + why);
}

TlsCredentials::~TlsCredentials() = default;

std::shared_ptr<const TlsCredentials::Pair> TlsCredentials::current() const {
  std::lock_guard<std::mutex> l(mu_);
  return pair_;
}

void TlsCredentials::install(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, &TlsCredentials::on_handshake, this); }

int TlsCredentials::on_handshake(SSL* ssl, void* self) {
  const auto pair = static_cast<TlsCredentials*>(self)->current();
  // Takes its own references: the snapshot may be replaced right after.
  return SSL_use_cert_and_key(ssl, pair->leaf, pair->key, pair->chain, 1) == 1 ? 1 : 0;
}

std::string TlsCredentials::replace(const std::string& cert_pem, const std::string& key_pem) {
  std::string why;
  auto next = parse(cert_pem, key_pem, why);
  if (!next) return why;
  std::lock_guard<std::mutex> l(mu_);
  pair_ = std::move(next);
  return "";
}

}  // namespace controller
