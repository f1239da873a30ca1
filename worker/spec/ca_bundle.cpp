#include "worker/spec/ca_bundle.h"

#ifndef GREENSHARD_NO_OPENSSL
#include <openssl/pem.h>
#include <openssl/x509.h>
#endif
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace greenshard {

int pem_certificate_count(const std::string& pem) {
#ifdef GREENSHARD_NO_OPENSSL
  // A portable build without OpenSSL (cmake/Dependencies.cmake) has no TLS,
  // so no bundle can be used: check_ca_bundle says so.
  (void)pem;
  return 0;
#else
  BIO* bio = BIO_new_mem_buf(pem.data(), int(pem.size()));
  if (!bio) return 0;
  int n = 0;
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_free(x);
    ++n;
  }
  BIO_free(bio);
  return n;
#endif
}

void check_ca_bundle(const std::string& path, const std::string& what) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw std::runtime_error(what + ": cannot read '" + path + "' (not a file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(what + ": cannot read '" + path + "'");
  const std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(what + ": cannot read '" + path + "'");
#ifdef GREENSHARD_NO_OPENSSL
  throw std::runtime_error(what + ": '" + path + "' cannot be used: this build has no OpenSSL, so no TLS");
#endif
  if (pem_certificate_count(pem) == 0)
    throw std::runtime_error(what + ": '" + path + "' holds no PEM certificate");
}

}  // namespace greenshard
