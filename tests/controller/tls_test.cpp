// HTTPS end to end: a CA and server certificates made with the real openssl
// CLI; the real greenshard-controller serving them (--tls-cert/--tls-key);
// the real greenshard CLI verifying it (--ca-bundle, GREENSHARD_CA_BUNDLE,
// the config file; no bundle, another CA's bundle and a certificate for
// another host all fail, naming --ca-bundle); cpp-httplib's client on
// /healthz; the worker's HTTP client (worker/status.h) and, when
// greenshard-worker is built, the real worker: an unreadable
// GREENSHARD_CA_BUNDLE is its exit-2 configuration error, and a job the
// controller runs pushes its status over verified HTTPS with the bundle the
// controller hands down (and fails to, with another CA's). The chart's TLS
// worker defaults (real helm) go through the controller's parser into the
// worker pod it renders.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/spawn.h"
#include "controller/core/api_types.h"
#include "controller/executors/executor_k8s.h"
#include "process.h"
#include "worker/spec/job_spec.h"
#include "worker/status.h"

using json = nlohmann::json;
using ctltest::ControllerProcess;

namespace {

const char* kUser = "user-token-team-a-0001";

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

gstest::RankResult run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {}) {
  return gstest::run_process(argv, env, std::chrono::seconds(120));
}

// Certificates made with the real openssl CLI (EC P-256, two days), once per
// test program:
//   ca.pem              the CA the controller's certificate chains to
//   server.pem/.key     for IP 127.0.0.1 (subjectAltName), signed by ca.pem
//   other-ca.pem        an unrelated CA
//   not-pem.txt         a file that holds no certificate
class Pki {
 public:
  static Pki& get() {
    static Pki pki;
    return pki;
  }
  std::string file(const std::string& name) const { return dir_.file(name); }
  const std::string& error() const { return error_; }

 private:
  Pki() {
    write(file("ca.cnf"),
          "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = GreenShard test CA\n"
          "[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
          "subjectKeyIdentifier = hash\n");
    write(file("server.cnf"), "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = 127.0.0.1\n");
    write(file("server.ext"),
          "[v3_server]\nbasicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n"
          "extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1\nauthorityKeyIdentifier = keyid\n");
    write(file("not-pem.txt"), "this is not a certificate\n");
    const std::string ec[] = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"};
    auto make_ca = [&](const std::string& name) {
      std::vector<std::string> a = {OPENSSL_BIN, "req", "-x509", "-config", file("ca.cnf"), "-extensions", "v3_ca"};
      a.insert(a.end(), std::begin(ec), std::end(ec));
      for (const std::string& x : std::vector<std::string>{"-keyout", file(name + ".key"), "-out", file(name + ".pem"),
                                                           "-days", "2"})
        a.push_back(x);
      return a;
    };
    std::vector<std::string> csr = {OPENSSL_BIN, "req", "-new", "-config", file("server.cnf")};
    csr.insert(csr.end(), std::begin(ec), std::end(ec));
    for (const std::string& x : std::vector<std::string>{"-keyout", file("server.key"), "-out", file("server.csr")})
      csr.push_back(x);
    // A renewal: a new key and certificate (serial 3) for the same name and CA.
    std::vector<std::string> csr2 = {OPENSSL_BIN, "req", "-new", "-config", file("server.cnf")};
    csr2.insert(csr2.end(), std::begin(ec), std::end(ec));
    for (const std::string& x : std::vector<std::string>{"-keyout", file("server2.key"), "-out", file("server2.csr")})
      csr2.push_back(x);
    const std::vector<std::vector<std::string>> steps = {
        make_ca("ca"),
        make_ca("other-ca"),
        csr,
        csr2,
        {OPENSSL_BIN, "x509", "-req", "-in", file("server2.csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"),
         "-set_serial", "3", "-days", "2", "-extfile", file("server.ext"), "-extensions", "v3_server", "-out",
         file("server2.pem")},
        {OPENSSL_BIN, "x509", "-req", "-in", file("server.csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"),
         "-set_serial", "2", "-days", "2", "-extfile", file("server.ext"), "-extensions", "v3_server", "-out",
         file("server.pem")},
        // The certificate really is for 127.0.0.1 and chains to ca.pem.
        {OPENSSL_BIN, "verify", "-CAfile", file("ca.pem"), "-verify_ip", "127.0.0.1", file("server.pem")},
    };
    for (const auto& s : steps) {
      auto r = run(s);
      if (r.exit_code != 0) {
        error_ += s[1] + ": " + r.output;
        return;
      }
    }
  }
  gstest::TempDir dir_;
  std::string error_;
};

// The controller over HTTPS (one local region), and the CLI against it.
class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pki().error(), "") << "openssl failed";
    write(dir.file("tokens"), std::string(kUser) + ",team-a,user\n");
    write(dir.file("regions.yaml"), "regions:\n  - {name: local, nodes: 1, intensity: 250, pue: 1.1}\n");
    write(dir.file("home/.keep"), "");
  }

  static Pki& pki() { return Pki::get(); }

  void start(const std::map<std::string, std::string>& env = {}, const std::string& worker = "",
             const std::string& cert = "", const std::string& key = "") {
    std::vector<std::string> args = {"--port", "0", "--data-dir", dir.file("data"), "--tokens", dir.file("tokens"),
                                     "--regions", dir.file("regions.yaml"), "--cycle-ms", "100",
                                     "--tls-cert", cert.empty() ? pki().file("server.pem") : cert,
                                     "--tls-key", key.empty() ? pki().file("server.key") : key};
    if (!worker.empty()) {
      args.push_back("--worker");
      args.push_back(worker);
    }
    ctl = std::make_unique<ControllerProcess>(CONTROLLER_BIN, args, dir.file("controller.log"), dir.file("port"), env);
    port = ctl->port();
    url = "https://127.0.0.1:" + std::to_string(port);
  }

  // The CLI with nothing from the test's environment or home directory.
  gstest::RankResult cli(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), CLI_BIN);
    std::map<std::string, std::string> e = {{"HOME", dir.file("home")},
                                            {"GREENSHARD_SERVER", ""},
                                            {"GREENSHARD_TOKEN", ""},
                                            {"GREENSHARD_CONFIG", ""},
                                            {"GREENSHARD_CA_BUNDLE", ""}};
    for (const auto& [k, v] : env) e[k] = v;
    return run(args, e);
  }
  std::vector<std::string> server_args() { return {"--server", url, "--token", kUser}; }
  std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  httplib::Client client(const std::string& ca) {
    httplib::Client c(url);
    c.enable_server_certificate_verification(true);
    if (!ca.empty()) c.set_ca_cert_path(ca.c_str());
    c.set_bearer_token_auth(kUser);
    c.set_read_timeout(std::chrono::seconds(30));
    return c;
  }

  gstest::TempDir dir;
  std::unique_ptr<ControllerProcess> ctl;
  int port = 0;
  std::string url;
};

TEST_F(Tls, TheCliVerifiesTheServerWithTheCaBundleFromFlagEnvironmentOrConfig) {
  start();
  auto flag = cli(with(server_args(), {"--ca-bundle", pki().file("ca.pem"), "list"}));
  EXPECT_EQ(flag.exit_code, 0) << flag.output;
  EXPECT_NE(flag.output.find("ID"), std::string::npos) << flag.output;

  auto env = cli(with(server_args(), {"-o", "json", "regions"}), {{"GREENSHARD_CA_BUNDLE", pki().file("ca.pem")}});
  ASSERT_EQ(env.exit_code, 0) << env.output;
  EXPECT_NE(env.output.find("\"local\""), std::string::npos) << env.output;

  write(dir.file("cli.yaml"),
        "server: " + url + "\ntoken: " + kUser + "\nca_bundle: " + pki().file("ca.pem") + "\n");
  auto config = cli({"--config", dir.file("cli.yaml"), "list"});
  EXPECT_EQ(config.exit_code, 0) << config.output;
  // Server and token from flags, the bundle from the (default) config file.
  write(dir.file("home/.config/greenshard/config.yaml"), "ca_bundle: " + pki().file("ca.pem") + "\n");
  auto home = cli(with(server_args(), {"list"}));
  EXPECT_EQ(home.exit_code, 0) << home.output;
  std::filesystem::remove(dir.file("home/.config/greenshard/config.yaml"));
  // --ca-file, the old name, still works.
  auto old = cli(with(server_args(), {"--ca-file", pki().file("ca.pem"), "list"}));
  EXPECT_EQ(old.exit_code, 0) << old.output;

  // The flag wins over the environment, both ways.
  auto flag_wins = cli(with(server_args(), {"--ca-bundle", pki().file("ca.pem"), "list"}),
                       {{"GREENSHARD_CA_BUNDLE", pki().file("other-ca.pem")}});
  EXPECT_EQ(flag_wins.exit_code, 0) << flag_wins.output;
  auto flag_loses = cli(with(server_args(), {"--ca-bundle", pki().file("other-ca.pem"), "list"}),
                        {{"GREENSHARD_CA_BUNDLE", pki().file("ca.pem")}});
  EXPECT_EQ(flag_loses.exit_code, 3) << flag_loses.output;
}

TEST_F(Tls, TheCliRefusesAServerItCannotVerifyAndSaysToUseCaBundle) {
  start();
  const std::string failed = "greenshard: TLS: certificate verify failed for " + url;
  // No bundle: the system's CAs do not know the test CA.
  auto none = cli(with(server_args(), {"list"}));
  EXPECT_EQ(none.exit_code, 3) << none.output;
  EXPECT_NE(none.output.find(failed + ": "), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("checked against the system's CAs"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("(use --ca-bundle FILE"), std::string::npos) << none.output;

  // Another CA's bundle.
  auto other = cli(with(server_args(), {"--ca-bundle", pki().file("other-ca.pem"), "list"}));
  EXPECT_EQ(other.exit_code, 3) << other.output;
  EXPECT_NE(other.output.find(failed + ": "), std::string::npos) << other.output;
  EXPECT_NE(other.output.find("checked against the CA bundle '" + pki().file("other-ca.pem") + "'"),
            std::string::npos)
      << other.output;
  EXPECT_NE(other.output.find("--ca-bundle"), std::string::npos) << other.output;

  // The right CA, but the certificate names 127.0.0.1 and not localhost.
  const std::string by_name = "https://localhost:" + std::to_string(port);
  auto name = cli({"--server", by_name, "--token", kUser, "--ca-bundle", pki().file("ca.pem"), "list"});
  EXPECT_EQ(name.exit_code, 3) << name.output;
  EXPECT_NE(name.output.find("TLS: certificate verify failed for " + by_name +
                             ": the certificate does not name the host of " + by_name),
            std::string::npos)
      << name.output;

  // Plain http to the https port is no answer either.
  auto plain = cli({"--server", "http://127.0.0.1:" + std::to_string(port), "--token", kUser, "list"});
  EXPECT_EQ(plain.exit_code, 3) << plain.output;
}

TEST_F(Tls, AnUnreadableCaBundleIsAUsageErrorNamingIt) {
  start();
  auto missing = cli(with(server_args(), {"--ca-bundle", dir.file("missing.pem"), "list"}));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("greenshard: --ca-bundle: cannot read '" + dir.file("missing.pem") + "'"),
            std::string::npos)
      << missing.output;

  auto a_dir = cli(with(server_args(), {"--ca-bundle", dir.path(), "list"}));
  EXPECT_EQ(a_dir.exit_code, 2) << a_dir.output;
  EXPECT_NE(a_dir.output.find("--ca-bundle: cannot read '" + dir.path() + "' (not a file)"), std::string::npos)
      << a_dir.output;

  auto not_pem = cli(with(server_args(), {"--ca-bundle", pki().file("not-pem.txt"), "list"}));
  EXPECT_EQ(not_pem.exit_code, 2) << not_pem.output;
  EXPECT_NE(not_pem.output.find("--ca-bundle: '" + pki().file("not-pem.txt") + "' holds no PEM certificate"),
            std::string::npos)
      << not_pem.output;

  auto env = cli(with(server_args(), {"list"}), {{"GREENSHARD_CA_BUNDLE", dir.file("missing.pem")}});
  EXPECT_EQ(env.exit_code, 2) << env.output;
  EXPECT_NE(env.output.find("--ca-bundle (from GREENSHARD_CA_BUNDLE): cannot read"), std::string::npos) << env.output;
}

// The serial number of the certificate a new TLS connection to `port` is
// served (no verification: the test compares serials), or -1.
long served_serial(int port) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  BIO* b = BIO_new_ssl_connect(ctx);
  const std::string host = "127.0.0.1:" + std::to_string(port);
  BIO_set_conn_hostname(b, host.c_str());
  long serial = -1;
  SSL* ssl = nullptr;
  if (BIO_do_connect(b) > 0 && BIO_do_handshake(b) > 0 && BIO_get_ssl(b, &ssl) > 0 && ssl) {
    if (X509* c = SSL_get1_peer_certificate(ssl)) {
      serial = ASN1_INTEGER_get(X509_get_serialNumber(c));
      X509_free(c);
    }
  }
  BIO_free_all(b);
  SSL_CTX_free(ctx);
  return serial;
}

// Replaces `path` by rename, as Kubernetes updates a mounted Secret.
void replace_file(const std::string& path, const std::string& text) {
  write(path + ".new", text);
  std::filesystem::rename(path + ".new", path);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(Tls, ARenewedCertificateIsServedWithoutARestartAndABrokenOneKeepsTheOldOne) {
  const std::string cert = dir.file("tls/tls.crt"), key = dir.file("tls/tls.key");
  write(cert, read_text(pki().file("server.pem")));
  write(key, read_text(pki().file("server.key")));
  start({}, "", cert, key);
  ASSERT_EQ(served_serial(port), 2);
  auto metric = [&](const std::string& name) -> double {
    auto r = client(pki().file("ca.pem")).Get("/metrics");
    if (!r) return -1;
    const size_t at = r->body.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(r->body.substr(at + name.size() + 2));
  };
  EXPECT_EQ(metric("greenshard_tls_reloads_total"), 0);
  // The renewal: key, then certificate (a moment with a mismatched pair in
  // between is refused, and the next change completes it).
  replace_file(key, read_text(pki().file("server2.key")));
  replace_file(cert, read_text(pki().file("server2.pem")));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (served_serial(port) != 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(served_serial(port), 3) << read_text(dir.file("controller.log"));
  EXPECT_GE(metric("greenshard_tls_reloads_total"), 1);
  // It verifies against the same CA, and the API answers on it.
  auto ok = client(pki().file("ca.pem")).Get("/healthz");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);

  // A broken certificate: refused, named in the log; the renewed one stays.
  const double failures = metric("greenshard_tls_reload_failures_total");
  replace_file(cert, "not a certificate\n");
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (metric("greenshard_tls_reload_failures_total") <= failures && std::chrono::steady_clock::now() < later)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GT(metric("greenshard_tls_reload_failures_total"), failures);
  EXPECT_EQ(served_serial(port), 3);
  EXPECT_NE(read_text(dir.file("controller.log"))
                .find("TLS certificate reload failed, keeping the one in force: '" + cert + "': no PEM certificate"),
            std::string::npos)
      << read_text(dir.file("controller.log"));
}

TEST_F(Tls, HealthzAnswersOverVerifiedHttps) {
  start();
  auto ok = client(pki().file("ca.pem")).Get("/healthz");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  EXPECT_NE(ok->body.find("\"ok\""), std::string::npos) << ok->body;

  auto c = client(pki().file("other-ca.pem"));
  auto other = c.Get("/healthz");
  EXPECT_FALSE(other);
  EXPECT_EQ(other.error(), httplib::Error::SSLServerVerification);

  httplib::Client plain("127.0.0.1", port);
  plain.set_read_timeout(std::chrono::seconds(10));
  auto p = plain.Get("/healthz");
  EXPECT_FALSE(p && p->status == 200) << "plain HTTP answered on the TLS port";
}

TEST_F(Tls, TheWorkersClientVerifiesTheControllerWithItsBundle) {
  start();
  const std::string intensity = url + "/v1/regions/local/intensity";
  auto v = greenshard::fetch_intensity(intensity, kUser, pki().file("ca.pem"));
  ASSERT_TRUE(v.has_value());
  EXPECT_DOUBLE_EQ(*v, 250.0);
  EXPECT_FALSE(greenshard::fetch_intensity(intensity, kUser, pki().file("other-ca.pem")).has_value());
  EXPECT_FALSE(greenshard::fetch_intensity(intensity, kUser, std::string()).has_value());  // the system's CAs
}

TEST(TlsWorkerConfig, GreenshardCaBundleIsReadAndCheckedFromTheEnvironment) {
  Pki& pki = Pki::get();
  ASSERT_EQ(pki.error(), "");
  EXPECT_EQ(greenshard::ca_bundle_from_env({}), "");
  EXPECT_EQ(greenshard::ca_bundle_from_env({{"GREENSHARD_CA_BUNDLE", ""}}), "");
  EXPECT_EQ(greenshard::ca_bundle_from_env({{"GREENSHARD_CA_BUNDLE", pki.file("ca.pem")}}), pki.file("ca.pem"));
  struct Bad {
    std::string path, says;
  };
  for (const Bad& b : {Bad{pki.file("missing.pem"), "cannot read '" + pki.file("missing.pem") + "' (not a file)"},
                       Bad{pki.file("not-pem.txt"), "'" + pki.file("not-pem.txt") + "' holds no PEM certificate"}}) {
    try {
      greenshard::ca_bundle_from_env({{"GREENSHARD_CA_BUNDLE", b.path}});
      ADD_FAILURE() << "accepted " << b.path;
    } catch (const greenshard::ConfigError& e) {
      EXPECT_EQ(e.field, "GREENSHARD_CA_BUNDLE");
      EXPECT_EQ(std::string(e.what()), "environment GREENSHARD_CA_BUNDLE: " + b.says);
    }
  }
}

TEST(TlsController, AnUnreadableGreenshardCaBundleStopsTheControllerAtStart) {
  gstest::TempDir dir;
  write(dir.file("tokens"), std::string(kUser) + ",team-a,user\n");
  auto r = run({CONTROLLER_BIN, "--port", "0", "--data-dir", dir.file("data"), "--tokens", dir.file("tokens")},
               {{"GREENSHARD_CA_BUNDLE", dir.file("missing.pem")}});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("GREENSHARD_CA_BUNDLE (the CA bundle local ranks verify the controller's https:// URL "
                          "with): cannot read '" + dir.file("missing.pem") + "'"),
            std::string::npos)
      << r.output;
}

// A bad pair at start is an exit naming the file and what is wrong, before
// anything listens: unreadable, not PEM, or a key that is not the
// certificate's.
TEST(TlsController, ABadCertificateOrKeyStopsTheControllerAtStartNamingTheFile) {
  ASSERT_EQ(Pki::get().error(), "") << "openssl failed";
  gstest::TempDir dir;
  write(dir.file("tokens"), std::string(kUser) + ",team-a,user\n");
  write(dir.file("not.pem"), "not a certificate\n");
  const std::string cert = Pki::get().file("server.pem"), key = Pki::get().file("server.key");
  const std::string other_key = Pki::get().file("server2.key");
  struct Bad {
    std::string cert, key, says;
  };
  for (const Bad& b : {Bad{dir.file("missing.pem"), key, "TLS: cannot read '" + dir.file("missing.pem") + "'"},
                       Bad{dir.file("not.pem"), key, "TLS: '" + dir.file("not.pem") + "': no PEM certificate"},
                       Bad{cert, dir.file("not.pem"), "TLS: '" + dir.file("not.pem") + "': no PEM private key"},
                       Bad{cert, other_key, "TLS: the key in '" + other_key + "' does not match the certificate in '" +
                                                cert + "'"}}) {
    auto r = run({CONTROLLER_BIN, "--port", "0", "--data-dir", dir.file("data"), "--tokens", dir.file("tokens"),
                  "--tls-cert", b.cert, "--tls-key", b.key});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(b.says), std::string::npos) << b.says << "\n" << r.output;
    EXPECT_EQ(r.output.find("listening"), std::string::npos) << r.output;
  }
}

// worker-defaults.yaml may set GREENSHARD_CA_BUNDLE (alone of GREENSHARD_*)
// when the bundle is mounted.
TEST(TlsWorkerDefaults, GreenshardCaBundleMustBeAFileUnderAMount) {
  const std::string mounts =
      "volumes:\n  - {name: ca, secret: {secretName: api-tls, items: [{key: ca.crt, path: ca.crt}]}}\n"
      "volumeMounts:\n  - {name: ca, mountPath: /etc/greenshard/ca, readOnly: true}\n";
  auto d = controller::parse_worker_defaults(
      "env:\n  - {name: GREENSHARD_CA_BUNDLE, value: /etc/greenshard/ca/ca.crt}\n" + mounts, "wd.yaml");
  ASSERT_EQ(d.env.size(), 1u);
  struct Bad {
    std::string env, says;
  };
  for (const Bad& b : {
           Bad{"{name: GREENSHARD_CA_BUNDLE, value: /etc/ssl/ca.crt}",
               "wd.yaml: env[0].value: GREENSHARD_CA_BUNDLE '/etc/ssl/ca.crt' is not a file under one of "
               "volumeMounts' mountPath (mount the CA bundle there)"},
           Bad{"{name: GREENSHARD_CA_BUNDLE, value: /etc/greenshard/ca}",
               "wd.yaml: env[0].value: GREENSHARD_CA_BUNDLE '/etc/greenshard/ca' is not a file under"},
           Bad{"{name: GREENSHARD_CA_BUNDLE, valueFrom: {configMapKeyRef: {name: x, key: y}}}",
               "wd.yaml: env[0].value: GREENSHARD_CA_BUNDLE needs a value (a path)"},
           Bad{"{name: GREENSHARD_STATUS_URL, value: http://x}",
               "wd.yaml: env[0].name: GREENSHARD_STATUS_URL is set by the controller"},
       }) {
    try {
      controller::parse_worker_defaults("env:\n  - " + b.env + "\n" + mounts, "wd.yaml");
      ADD_FAILURE() << "accepted " << b.env;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(b.says, 0), 0u) << e.what();
    }
  }
}

// The chart with TLS from cert-manager (the chart tests' values), rendered by
// the real helm: its worker-defaults.yaml goes through the controller's
// parser, and the worker pod the controller renders reads the CA from the
// mounted Secret.
TEST(TlsChart, WorkerPodsGetTheCaBundleTheChartMounts) {
  ASSERT_TRUE(std::filesystem::exists(HELM_BIN)) << HELM_BIN << ": run scripts/install_helm.sh";
  auto r = run({HELM_BIN, "template", "gs", CHART_DIR, "--namespace", "greenshard", "-f", TLS_VALUES},
               {{"HOME", ::getenv("HOME") ? ::getenv("HOME") : "/tmp"}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string defaults;
  for (const YAML::Node& doc : YAML::LoadAll(r.output))
    if (doc.IsMap() && doc["kind"] && doc["kind"].as<std::string>() == "ConfigMap" && doc["data"] &&
        doc["data"]["worker-defaults.yaml"])
      defaults = doc["data"]["worker-defaults.yaml"].as<std::string>();
  ASSERT_FALSE(defaults.empty()) << "no worker-defaults.yaml rendered";
  auto d = controller::parse_worker_defaults(defaults, "worker-defaults.yaml");

  controller::GangSpec g;
  g.job_id = "jabc123def456ghi";
  g.spec = controller::parse_job_spec(json{{"name", "demo"}, {"worker", {{"data", {{"train", "t.bin"}}}}},
                                           {"regions", {"in-cluster"}}, {"procs_per_node", 1}});
  g.region = "in-cluster";
  g.status_url = "https://gs-greenshard.greenshard.svc.cluster.local:8080/v1/jobs/jabc123def456ghi/status";
  g.status_token = "tok";
  controller::KubeClusterConfig k;
  k.namespace_ = "greenshard";
  auto o = controller::render_kube_objects(g, k, std::chrono::seconds(30), "uid-1", d);
  const json& pod = o.job["spec"]["template"]["spec"];
  const json& c = pod["containers"][0];
  json ca_env, ca_mount, ca_volume;
  for (const auto& e : c["env"])
    if (e["name"] == "GREENSHARD_CA_BUNDLE") ca_env = e;
  for (const auto& m : c["volumeMounts"])
    if (m["name"] == "greenshard-ca") ca_mount = m;
  for (const auto& v : pod["volumes"])
    if (v["name"] == "greenshard-ca") ca_volume = v;
  EXPECT_EQ(ca_env.value("value", ""), "/etc/greenshard/ca/ca.crt") << c["env"].dump();
  EXPECT_EQ(ca_mount.value("mountPath", ""), "/etc/greenshard/ca") << c["volumeMounts"].dump();
  ASSERT_TRUE(ca_volume.contains("secret")) << pod["volumes"].dump();
  EXPECT_EQ(ca_volume["secret"]["secretName"], "gs-greenshard-tls");
  EXPECT_EQ(ca_volume["secret"]["items"][0]["key"], "ca.crt");
  EXPECT_EQ(ca_volume["secret"]["optional"], true);
}

#ifdef WORKER_BIN
// The real worker: GREENSHARD_CA_BUNDLE is checked before anything runs.
TEST(TlsWorker, AnUnreadableGreenshardCaBundleIsTheWorkersConfigError) {
  Pki& pki = Pki::get();
  ASSERT_EQ(pki.error(), "");
  const std::vector<std::string> argv = {WORKER_BIN, "--data.train", "t.bin", "--print-config"};
  auto bad = run(argv, {{"GREENSHARD_CA_BUNDLE", pki.file("missing.pem")}});
  EXPECT_EQ(bad.exit_code, 2 /* kExitBadConfig */) << bad.output;
  EXPECT_NE(bad.output.find(std::string(greenshard::kConfigErrorPrefix) + "environment GREENSHARD_CA_BUNDLE: cannot read '" +
                            pki.file("missing.pem") + "'"),
            std::string::npos)
      << bad.output;
  auto not_pem = run(argv, {{"GREENSHARD_CA_BUNDLE", pki.file("not-pem.txt")}});
  EXPECT_EQ(not_pem.exit_code, 2 /* kExitBadConfig */) << not_pem.output;
  EXPECT_NE(not_pem.output.find("environment GREENSHARD_CA_BUNDLE: '" + pki.file("not-pem.txt") +
                                "' holds no PEM certificate"),
            std::string::npos)
      << not_pem.output;
  auto good = run(argv, {{"GREENSHARD_CA_BUNDLE", pki.file("ca.pem")}});
  EXPECT_EQ(good.exit_code, 0) << good.output;
}

// A job through the HTTPS controller: its rank pushes status to
// https://127.0.0.1:<port> and verifies it with the GREENSHARD_CA_BUNDLE the
// controller passed down; with another CA's bundle every push fails
// verification (and training still finishes).
class TlsJob : public Tls {
 protected:
  void SetUp() override {
    Tls::SetUp();
    std::ofstream text(dir.file("corpus.txt"));
    for (int i = 0; i < 200; ++i) text << "green shards train over verified https, line " << i << ".\n";
    text.close();
    auto prep = run({WORKER_BIN, "prepare", "--input", dir.file("corpus.txt"), "--out", dir.file("tok")});
    ASSERT_EQ(prep.exit_code, 0) << prep.output;
  }

  // Submits a 1-rank job, waits (bounded by a count of polls) for its end,
  // returns (job, rank 0's log read through the CLI).
  std::pair<json, std::string> run_job() {
    json spec = {{"name", "tls"},
                 {"worker",
                  {{"model", {{"layers", 1}, {"heads", 2}, {"embd", 16}, {"context", 16}, {"vocab", 256}}},
                   {"data", {{"train", dir.file("tok/train.bin")}}},
                   {"schedule", {{"steps", 4}, {"batch_size", 2}, {"eval_interval", 0}}},
                   {"status", {{"interval_s", 0.05}}}}},
                 {"regions", {"local"}},
                 {"procs_per_node", 1}};
    auto c = client(pki().file("ca.pem"));
    auto r = c.Post("/v1/jobs", spec.dump(), "application/json");
    if (!r || r->status != 201) {
      ADD_FAILURE() << (r ? r->body : httplib::to_string(r.error()));
      return {};
    }
    const std::string id = json::parse(r->body).value("id", "");
    json j;
    for (int i = 0; i < 3000; ++i) {
      auto g = c.Get("/v1/jobs/" + id);
      if (g && g->status == 200) j = json::parse(g->body);
      const std::string st = j.value("state", "");
      if (st == "SUCCEEDED" || st == "FAILED" || st == "CANCELLED") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    auto logs = cli(with(server_args(), {"--ca-bundle", pki().file("ca.pem"), "logs", id, "--rank", "0"}));
    EXPECT_EQ(logs.exit_code, 0) << logs.output;
    return {j, logs.output};
  }
};

TEST_F(TlsJob, RanksPushStatusOverHttpsVerifiedWithTheControllersBundle) {
  start({{"GREENSHARD_CA_BUNDLE", pki().file("ca.pem")}}, WORKER_BIN);
  auto [job, log] = run_job();
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(1) << "\n" << log << ctl->log();
  // Every push and intensity poll went through.
  EXPECT_EQ(log.find("status push"), std::string::npos) << log;
  EXPECT_EQ(log.find("intensity_url unreachable"), std::string::npos) << log;
  EXPECT_EQ(job["progress"].value("step", 0), 4) << job.dump(1);
}

TEST_F(TlsJob, WithAnotherCasBundleTheRanksRefuseTheController) {
  start({{"GREENSHARD_CA_BUNDLE", pki().file("other-ca.pem")}}, WORKER_BIN);
  auto [job, log] = run_job();
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(1) << "\n" << log << ctl->log();
  EXPECT_NE(log.find("warning: status push to " + url + "/v1/jobs/"), std::string::npos) << log;
  // The cause as carbon::explain_http_failure names it (OpenSSL's reason
  // between the two), with the bundle named by its variable.
  EXPECT_NE(log.find("failed (TLS: certificate verify failed for " + url + ": "), std::string::npos) << log;
  EXPECT_NE(log.find(", checked against GREENSHARD_CA_BUNDLE=" + pki().file("other-ca.pem") + ")"), std::string::npos)
      << log;
  EXPECT_NE(log.find("carbon.intensity_url unreachable"), std::string::npos) << log;
}
#endif

}  // namespace
