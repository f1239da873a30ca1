// shard::s3 (shard/src/s3_client.*) against a real S3 server: s3rver, started
// per test by gstest::S3Server on 127.0.0.1, port 0, in a temp directory.
//
// s3rver itself does NOT verify SigV4 signatures: it only checks that the
// access key id is one it knows (S3RVER), and a wrong secret still gets 200.
// Our runner (tests/shard/s3rver_run.mjs) re-signs every request with the AWS
// SDK's own signer (@smithy/signature-v4) and answers 403
// SignatureDoesNotMatch on a difference, so these tests do check that libcurl's
// signature over our requests is what AWS computes (the official client's
// requests in TheOfficialAwsClientReadsWhatWeWrote pass the same check). They
// do not check the body against x-amz-content-sha256, nor real IAM.
// AWS's own client (@aws-sdk/client-s3, via tests/shard/s3_read.mjs) reads
// back what we wrote.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "common/spawn.h"
#include "s3_client.h"
#include "s3_config.h"
#include "s3_signing.h"
#include "s3_xml.h"
#include "shard/object_store_url.h"
#include "shard/s3_server.h"

namespace s3 = shard::s3;

namespace {

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&s[i], &v, std::min<size_t>(8, n - i));
  }
  return s;
}

// getenv over a map (nullptr when absent).
std::function<const char*(const char*)> env_of(const std::map<std::string, std::string>& m) {
  return [&m](const char* name) -> const char* {
    auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument thrown)";
}

template <class F>
s3::Error s3_error(F&& f) {
  try {
    f();
  } catch (const s3::Error& e) {
    return e;
  }
  return s3::Error("(no s3::Error thrown)", -1);
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// ------------------------------------------------------------------ s3:// URLs --

// The URL rules live in shard/object_store_url.h (also the controller's and
// the job spec's); the store parses checkpoint roots with them.
TEST(S3Url, ParsesBucketAndPrefix) {
  EXPECT_TRUE(shard::is_object_store_url("s3://ckpt"));
  EXPECT_FALSE(shard::is_object_store_url("/data/ckpt"));
  EXPECT_FALSE(shard::is_object_store_url("S3://ckpt"));
  EXPECT_FALSE(shard::is_object_store_url("http://ckpt"));

  struct Case {
    const char* url;
    const char* bucket;
    const char* prefix;
  } cases[] = {
      {"s3://ckpt", "ckpt", ""},
      {"s3://ckpt/", "ckpt", ""},
      {"s3://ckpt/run-1", "ckpt", "run-1"},
      {"s3://ckpt/run-1/", "ckpt", "run-1"},
      {"s3://my.bucket-01/jobs/a/b//", "my.bucket-01", "jobs/a/b"},
      {"s3://a-b/(step)_1!*'/x.y", "a-b", "(step)_1!*'/x.y"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.url);
    shard::ObjectStoreUrl u = shard::parse_object_store_url(c.url);
    EXPECT_EQ(u.bucket, c.bucket);
    EXPECT_EQ(u.prefix, c.prefix);
  }
}

TEST(S3Url, RejectsBadBucketNamesAndPrefixes) {
  const std::string long64(64, 'a');
  for (const std::string& bad :
       {std::string("s3://"), std::string("s3:///prefix"), std::string("s3://ab"), std::string("s3://" + long64),
        std::string("s3://Ckpt"), std::string("s3://my_bucket"), std::string("s3://-ckpt"), std::string("s3://ckpt-"),
        std::string("s3://.ckpt"), std::string("s3://a..b"), std::string("s3://192.168.1.10/x"),
        std::string("s3://ck pt/x"), std::string("http://ckpt/x"), std::string("ckpt/x"), std::string("s3://abc//x"),
        std::string("s3://abc/a/../b"), std::string("s3://abc/step 1"), std::string("s3://abc/a?b=1")}) {
    SCOPED_TRACE(bad);
    const std::string msg = invalid_argument_message([&] { shard::parse_object_store_url(bad); });
    EXPECT_FALSE(msg.empty());
    EXPECT_EQ(msg, shard::object_store_url_problem(bad));
  }
  EXPECT_NE(invalid_argument_message([] { shard::parse_object_store_url("s3://My-Bucket/x"); }).find("My-Bucket"),
            std::string::npos);
  // 63 characters is the longest allowed.
  EXPECT_EQ(shard::parse_object_store_url("s3://" + std::string(63, 'b')).bucket, std::string(63, 'b'));
}

// --------------------------------------------------------------- config_from_env --

TEST(S3Config, ReadsTheEnvironment) {
  std::map<std::string, std::string> env = {{"AWS_ENDPOINT_URL_S3", "http://minio:9000"},
                                            {"AWS_ENDPOINT_URL", "http://ignored:1"},
                                            {"AWS_REGION", "eu-west-3"},
                                            {"AWS_DEFAULT_REGION", "us-west-2"},
                                            {"AWS_ACCESS_KEY_ID", "AKID"},
                                            {"AWS_SECRET_ACCESS_KEY", "se/cr+et"},
                                            {"AWS_SESSION_TOKEN", "tok"}};
  s3::Config c = s3::config_from_env(env_of(env));
  EXPECT_EQ(c.endpoint, "http://minio:9000");
  EXPECT_EQ(c.region, "eu-west-3");
  EXPECT_EQ(c.access_key, "AKID");
  EXPECT_EQ(c.secret_key, "se/cr+et");
  EXPECT_EQ(c.session_token, "tok");

  // Fallbacks: AWS_ENDPOINT_URL, AWS_DEFAULT_REGION, then us-east-1; a trailing '/' is fine.
  env.erase("AWS_ENDPOINT_URL_S3");
  env["AWS_ENDPOINT_URL"] = "https://s3.eu-west-3.amazonaws.com/";
  env.erase("AWS_REGION");
  env.erase("AWS_SESSION_TOKEN");
  c = s3::config_from_env(env_of(env));
  EXPECT_EQ(c.endpoint, "https://s3.eu-west-3.amazonaws.com");
  EXPECT_EQ(c.region, "us-west-2");
  EXPECT_EQ(c.session_token, "");
  env.erase("AWS_DEFAULT_REGION");
  env["AWS_REGION"] = "";  // empty counts as unset
  EXPECT_EQ(s3::config_from_env(env_of(env)).region, "us-east-1");
  env["AWS_ENDPOINT_URL"] = "http://[::1]:9000";
  EXPECT_EQ(s3::config_from_env(env_of(env)).endpoint, "http://[::1]:9000");
}

TEST(S3Config, RejectsEachMissingOrBadVariableByName) {
  const std::map<std::string, std::string> good = {{"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000"},
                                                   {"AWS_ACCESS_KEY_ID", "AKID"},
                                                   {"AWS_SECRET_ACCESS_KEY", "secret"}};
  ASSERT_NO_THROW(s3::config_from_env(env_of(good)));
  struct Case {
    std::string var, value;  // value "" = unset
    std::string named;       // must appear in the message
  } cases[] = {
      {"AWS_ENDPOINT_URL_S3", "", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "minio:9000", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "ftp://minio", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "http://", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "http://minio:9000/bucket", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "http://minio:0", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "http://minio:70000", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "http://minio:", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "http://user:pw@minio", "AWS_ENDPOINT_URL_S3"},
      {"AWS_ENDPOINT_URL_S3", "http://minio?x=1", "AWS_ENDPOINT_URL_S3"},
      {"AWS_REGION", "US East 1", "AWS_REGION"},
      {"AWS_DEFAULT_REGION", "eu:west", "AWS_DEFAULT_REGION"},
      {"AWS_ACCESS_KEY_ID", "", "AWS_ACCESS_KEY_ID"},
      {"AWS_SECRET_ACCESS_KEY", "", "AWS_SECRET_ACCESS_KEY"},
      {"AWS_SECRET_ACCESS_KEY", "secret\n", "AWS_SECRET_ACCESS_KEY"},
      {"AWS_SESSION_TOKEN", "tok\r\nX-Evil: 1", "AWS_SESSION_TOKEN"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.var + "=" + c.value);
    auto env = good;
    if (c.value.empty()) env.erase(c.var);
    else env[c.var] = c.value;
    const std::string msg = invalid_argument_message([&] { s3::config_from_env(env_of(env)); });
    EXPECT_NE(msg.find(c.named), std::string::npos) << msg;
  }
  // A bad AWS_ENDPOINT_URL (used when AWS_ENDPOINT_URL_S3 is unset) is named as such.
  auto env = good;
  env.erase("AWS_ENDPOINT_URL_S3");
  env["AWS_ENDPOINT_URL"] = "minio";
  const std::string msg = invalid_argument_message([&] { s3::config_from_env(env_of(env)); });
  EXPECT_NE(msg.find("AWS_ENDPOINT_URL=minio"), std::string::npos) << msg;
}

TEST(S3Config, ReadsCredentialsFromTheSecretDirectory) {
  gstest::TempDir tmp;
  const std::string dir = tmp.path();
  write_file(dir + "/AWS_ACCESS_KEY_ID", "FILEKEY\n");
  write_file(dir + "/AWS_SECRET_ACCESS_KEY", "  file/secret \n");
  std::map<std::string, std::string> env = {{"AWS_ENDPOINT_URL_S3", "http://minio:9000"},
                                            {"AWS_ACCESS_KEY_ID", "ENVKEY"},
                                            {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                                            {"AWS_SESSION_TOKEN", "envtoken"},
                                            {"GREENSHARD_S3_SECRET_DIR", dir}};
  // The files win; the variables are ignored (also the token: no file, no token).
  s3::Config c = s3::config_from_env(env_of(env));
  EXPECT_EQ(c.access_key, "FILEKEY");
  EXPECT_EQ(c.secret_key, "file/secret");
  EXPECT_EQ(c.session_token, "");
  write_file(dir + "/AWS_SESSION_TOKEN", "filetoken\n");
  EXPECT_EQ(s3::config_from_env(env_of(env)).session_token, "filetoken");

  // Without the variables too (a Pod with only the mounted Secret).
  env.erase("AWS_ACCESS_KEY_ID");
  env.erase("AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(s3::config_from_env(env_of(env)).access_key, "FILEKEY");

  // A missing required file, an empty one, an unreadable one (a directory), a missing directory.
  std::filesystem::remove(dir + "/AWS_SECRET_ACCESS_KEY");
  std::string msg = invalid_argument_message([&] { s3::config_from_env(env_of(env)); });
  EXPECT_NE(msg.find("GREENSHARD_S3_SECRET_DIR"), std::string::npos) << msg;
  EXPECT_NE(msg.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << msg;
  write_file(dir + "/AWS_SECRET_ACCESS_KEY", "\n");
  msg = invalid_argument_message([&] { s3::config_from_env(env_of(env)); });
  EXPECT_NE(msg.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  write_file(dir + "/AWS_SECRET_ACCESS_KEY", "s");
  std::filesystem::remove(dir + "/AWS_SESSION_TOKEN");
  std::filesystem::create_directory(dir + "/AWS_SESSION_TOKEN");
  msg = invalid_argument_message([&] { s3::config_from_env(env_of(env)); });
  EXPECT_NE(msg.find("AWS_SESSION_TOKEN"), std::string::npos) << msg;
  env["GREENSHARD_S3_SECRET_DIR"] = dir + "/nope";
  msg = invalid_argument_message([&] { s3::config_from_env(env_of(env)); });
  EXPECT_NE(msg.find("GREENSHARD_S3_SECRET_DIR"), std::string::npos) << msg;
}

TEST(S3Config, ClientRejectsABadEndpoint) {
  s3::Config c;
  c.access_key = c.secret_key = "x";
  c.endpoint = "localhost:9000";
  EXPECT_THROW(s3::Client{c}, std::invalid_argument);
  c.endpoint = "http://localhost:9000";
  c.region = "";
  EXPECT_THROW(s3::Client{c}, std::invalid_argument);
}

// ------------------------------------------------------------- request helpers --

TEST(S3Detail, EncodesKeysAndQueriesTheWaySigV4Wants) {
  EXPECT_EQ(s3::detail::uri_encode("a/b c/ü~._-+*%", true), "a/b%20c/%C3%BC~._-%2B%2A%25");
  EXPECT_EQ(s3::detail::uri_encode("a/b", false), "a%2Fb");
  EXPECT_EQ(s3::detail::canonical_query({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(s3::detail::canonical_query({{"prefix", "run 1/"}, {"list-type", "2"}, {"delimiter", "/"}}),
            "delimiter=%2F&list-type=2&prefix=run%201%2F");
  EXPECT_EQ(s3::detail::canonical_query({{"uploadId", "x+y="}, {"partNumber", "3"}}), "partNumber=3&uploadId=x%2By%3D");
  EXPECT_EQ(s3::detail::sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(s3::detail::sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string xml =
      "<?xml version=\"1.0\"?><R xmlns=\"x\"><KeyCount>2</KeyCount><Key>a &amp; b &lt;&#233;&#x4E2D;&gt;</Key>"
      "<Empty/></R>";
  EXPECT_EQ(s3::detail::xml_text(xml, "Key").value_or("?"), "a & b <\xC3\xA9\xE4\xB8\xAD>");
  EXPECT_EQ(s3::detail::xml_text(xml, "KeyCount").value_or("?"), "2");
  EXPECT_EQ(s3::detail::xml_text(xml, "Empty").value_or("?"), "");
  EXPECT_FALSE(s3::detail::xml_text(xml, "Missing").has_value());
}

// ------------------------------------------------------------------ retries --

TEST(S3Retry, BackoffIsExponentialWithFullJitterUpToTheCap) {
  using ms = std::chrono::milliseconds;
  const ms base(100), cap(5000);
  // The ceiling min(cap, base * 2^attempt), reached as u approaches 1 ...
  const int64_t ceilings[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
  for (int a = 0; a < 8; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(s3::detail::backoff_delay(a, base, cap, 0.0).count(), 0) << "full jitter starts at zero";
    EXPECT_EQ(s3::detail::backoff_delay(a, base, cap, 0.5).count(), ceilings[a] / 2);
    EXPECT_EQ(s3::detail::backoff_delay(a, base, cap, 1.0).count(), ceilings[a]);
  }
  // ... with no overflow however many attempts.
  EXPECT_EQ(s3::detail::backoff_delay(1000000, base, cap, 1.0).count(), 5000);
  EXPECT_EQ(s3::detail::backoff_delay(3, ms(0), cap, 1.0).count(), 0);
}

TEST(S3Retry, OnlyTransientHttpAnswersAreRetried) {
  for (long status : {429L, 500L, 502L, 503L, 504L}) EXPECT_TRUE(s3::detail::transient_http(status, "")) << status;
  EXPECT_TRUE(s3::detail::transient_http(400, "RequestTimeout"));
  EXPECT_TRUE(s3::detail::transient_http(503, "SlowDown"));
  EXPECT_TRUE(s3::detail::transient_http(0, "InternalError")) << "a CompleteMultipartUpload 200 with an <Error>";
  for (long status : {400L, 401L, 403L, 404L, 409L, 416L, 501L, 505L})
    EXPECT_FALSE(s3::detail::transient_http(status, "")) << status;
  EXPECT_FALSE(s3::detail::transient_http(403, "AccessDenied"));
  EXPECT_FALSE(s3::detail::transient_http(404, "NoSuchBucket"));
  EXPECT_FALSE(s3::detail::transient_http(0, "InvalidPart"));
}

TEST(S3Config, RetryBudgetAndPartSizeComeFromTheEnvironmentAndAreValidated) {
  std::map<std::string, std::string> env = {{"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000"},
                                            {"AWS_ACCESS_KEY_ID", "AKID"},
                                            {"AWS_SECRET_ACCESS_KEY", "secret"}};
  s3::Config c = s3::config_from_env(env_of(env));
  EXPECT_GE(c.retry_budget, std::chrono::seconds(30)) << "outlives a server restart by default";
  EXPECT_EQ(c.part_bytes, size_t{16} << 20);
  env["GREENSHARD_S3_RETRY_SECONDS"] = "2.5";
  env["GREENSHARD_S3_PART_MIB"] = "5";
  c = s3::config_from_env(env_of(env));
  EXPECT_EQ(c.retry_budget, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.part_bytes, size_t{5} << 20);
  env["GREENSHARD_S3_RETRY_SECONDS"] = "0";  // one attempt
  EXPECT_EQ(s3::config_from_env(env_of(env)).retry_budget.count(), 0);
  env["GREENSHARD_S3_RETRY_SECONDS"] = "";  // unset: the default
  EXPECT_GE(s3::config_from_env(env_of(env)).retry_budget, std::chrono::seconds(30));
  for (const char* bad : {"-1", "abc", "1e3", "90000", "30s", ".", "1.2.3", " 5"}) {
    SCOPED_TRACE(bad);
    auto e = env;
    e["GREENSHARD_S3_RETRY_SECONDS"] = bad;
    const std::string msg = invalid_argument_message([&] { s3::config_from_env(env_of(e)); });
    EXPECT_NE(msg.find(std::string("GREENSHARD_S3_RETRY_SECONDS=") + bad), std::string::npos) << msg;
  }
  for (const char* bad : {"4", "5121", "6.5", "x", "-5"}) {
    SCOPED_TRACE(bad);
    auto e = env;
    e["GREENSHARD_S3_PART_MIB"] = bad;
    const std::string msg = invalid_argument_message([&] { s3::config_from_env(env_of(e)); });
    EXPECT_NE(msg.find(std::string("GREENSHARD_S3_PART_MIB=") + bad), std::string::npos) << msg;
  }
}

TEST(S3Retry, AnEndpointWhereNothingListensIsATransientErrorAfterTheBudget) {
  // A loopback port nobody listens on: every connect is refused at once.
  s3::Config c;
  c.endpoint = "http://127.0.0.1:" + std::to_string(gstest::free_port());
  c.access_key = c.secret_key = "x";
  c.retry_budget = std::chrono::milliseconds(500);
  s3::Client client(c);
  s3::Error e = s3_error([&] { client.list("ckpt", "x/"); });
  EXPECT_EQ(e.http_status, 0) << e.what();
  EXPECT_TRUE(e.transient) << e.what();
  const std::string what = e.what();
  EXPECT_NE(what.find("LIST s3://ckpt/x/: Couldn't connect to server"), std::string::npos) << what;
  EXPECT_NE(what.find(" attempts over "), std::string::npos) << what;
  // A budget of zero: one attempt, nothing about attempts.
  c.retry_budget = std::chrono::milliseconds(0);
  s3::Client once(c);
  e = s3_error([&] { once.list("ckpt", "x/"); });
  EXPECT_TRUE(e.transient) << e.what();
  EXPECT_EQ(std::string(e.what()).find("attempts"), std::string::npos) << e.what();
}

// ------------------------------------------------------------ against s3rver --

class S3 : public ::testing::Test {
 protected:
  void SetUp() override {
    // Fails (not skips) when node or the packages are missing: setup installs them.
    ASSERT_TRUE(gstest::S3Server::available()) << gstest::S3Server::unavailable_reason();
    server_ = std::make_unique<gstest::S3Server>("ckpt");
    env_ = server_->env();
    client_ = std::make_unique<s3::Client>(config());
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }
  s3::Config config(std::chrono::milliseconds retry_budget = std::chrono::seconds(60)) {
    s3::Config c = s3::config_from_env(env_of(env_));
    c.retry_budget = retry_budget;
    return c;
  }
  // node tests/shard/s3_read.mjs args... with the server's environment.
  gstest::RankResult sdk(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {gstest::S3Server::node(), gstest::S3Server::script("s3_read.mjs")};
    argv.insert(argv.end(), args.begin(), args.end());
    return gstest::run_process(argv, env_, std::chrono::seconds(120));
  }

  std::unique_ptr<gstest::S3Server> server_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<s3::Client> client_;
};

TEST_F(S3, PutGetHeadRoundTripBinaryAndUnusualKeys) {
  s3::Client& c = *client_;
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes += static_cast<char>(i);
  all_bytes += std::string("\0\0\r\n", 4);
  const std::string big = random_bytes(3 * 1024 * 1024 + 17, 1);
  const std::map<std::string, std::string> objects = {
      {"run/bytes.bin", all_bytes},
      {"run/big.bin", big},
      {"run/empty", ""},
      {"run/dir with spaces/ünïcödé 名前.bin", "unicode key"},
      {"run/odd+chars=&?#%~!*'(),;:@$.bin", "odd key"},
  };
  for (const auto& [key, value] : objects) c.put("ckpt", key, value.data(), value.size());
  for (const auto& [key, value] : objects) {
    SCOPED_TRACE(key);
    auto got = c.get("ckpt", key);
    ASSERT_TRUE(got.has_value());
    EXPECT_TRUE(*got == value) << "sizes " << got->size() << " vs " << value.size();
    auto size = c.head("ckpt", key);
    ASSERT_TRUE(size.has_value());
    EXPECT_EQ(*size, static_cast<int64_t>(value.size()));
  }
  // Overwrite.
  c.put("ckpt", "run/empty", "now", 3);
  EXPECT_EQ(c.get("ckpt", "run/empty").value_or("?"), "now");
  // The listing has the exact keys.
  std::set<std::string> listed;
  for (const auto& [key, size] : c.list("ckpt", "run/").objects) listed.insert(key);
  std::set<std::string> want;
  for (const auto& [key, value] : objects) want.insert(key);
  EXPECT_EQ(listed, want);
}

TEST_F(S3, MissingKeysAreNulloptAndAMissingBucketIsAnError) {
  EXPECT_FALSE(client_->get("ckpt", "nope").has_value());
  EXPECT_FALSE(client_->head("ckpt", "nope").has_value());
  s3::Error e = s3_error([&] { client_->get("nobucket", "k"); });
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.code, "NoSuchBucket");
  EXPECT_NE(std::string(e.what()).find("GET s3://nobucket/k: HTTP 404 NoSuchBucket"), std::string::npos) << e.what();
  e = s3_error([&] { client_->put("nobucket", "k", "x", 1); });
  EXPECT_EQ(e.http_status, 404);
  EXPECT_NE(std::string(e.what()).find("PUT s3://nobucket/k"), std::string::npos) << e.what();
  EXPECT_THROW(client_->get("Bad_Bucket", "k"), std::invalid_argument);
  EXPECT_THROW(client_->get("ckpt", ""), std::invalid_argument);
}

TEST_F(S3, GetRange) {
  const std::string data = random_bytes(100000, 2);
  client_->put("ckpt", "r.bin", data.data(), data.size());
  // (0, 1) is "bytes=0-0", which s3rver answers with the whole object: the
  // client keeps the first byte and stops the transfer.
  for (auto [off, n] : std::vector<std::pair<int64_t, size_t>>{{0, 1}, {0, 100000}, {99999, 1}, {12345, 54321}}) {
    SCOPED_TRACE(std::to_string(off) + "+" + std::to_string(n));
    std::string buf(n, '\0');
    client_->get_range("ckpt", "r.bin", off, n, buf.data());
    EXPECT_TRUE(buf == data.substr(static_cast<size_t>(off), n));
  }
  client_->get_range("ckpt", "r.bin", 5, 0, nullptr);  // nothing asked, nothing done
  std::string buf(10, '\0');
  // Past the end: fewer bytes than asked.
  s3::Error e = s3_error([&] { client_->get_range("ckpt", "r.bin", 99995, 10, buf.data()); });
  EXPECT_NE(std::string(e.what()).find("short read"), std::string::npos) << e.what();
  // Starting past the end: 416.
  e = s3_error([&] { client_->get_range("ckpt", "r.bin", 100000, 10, buf.data()); });
  EXPECT_EQ(e.http_status, 416) << e.what();
  // A missing key: 404, an Error (not a silent zero fill).
  e = s3_error([&] { client_->get_range("ckpt", "nope", 0, 10, buf.data()); });
  EXPECT_EQ(e.http_status, 404) << e.what();
  EXPECT_EQ(e.code, "NoSuchKey");
  EXPECT_NE(std::string(e.what()).find("GET s3://ckpt/nope (bytes 0-9)"), std::string::npos) << e.what();
}

TEST_F(S3, ListWithPrefixAndDelimiter) {
  s3::Client& c = *client_;
  const std::map<std::string, std::string> objects = {
      {"job/step_00000001/shard_0", "aaaa"}, {"job/step_00000001/shard_1", "bb"},
      {"job/step_00000002/shard_0", "c"},    {"job/step_00000002/DONE", ""},
      {"job/latest", "step_00000002"},      {"jobs/other", "x"},
      {"elsewhere/x", "y"},
  };
  for (const auto& [key, value] : objects) c.put("ckpt", key, value.data(), value.size());

  s3::ListResult top = c.list("ckpt", "job/", "/");
  ASSERT_EQ(top.objects.size(), 1u);
  EXPECT_EQ(top.objects[0].first, "job/latest");
  EXPECT_EQ(top.objects[0].second, 13);
  EXPECT_EQ(top.prefixes, (std::vector<std::string>{"job/step_00000001/", "job/step_00000002/"}));

  s3::ListResult step = c.list("ckpt", "job/step_00000001/");
  EXPECT_EQ(step.objects, (std::vector<std::pair<std::string, int64_t>>{{"job/step_00000001/shard_0", 4},
                                                                         {"job/step_00000001/shard_1", 2}}));
  EXPECT_TRUE(step.prefixes.empty());

  // "job" without the slash also matches "jobs/".
  EXPECT_EQ(c.list("ckpt", "job").objects.size(), 6u);
  EXPECT_EQ(c.list("ckpt", "").objects.size(), objects.size());
  EXPECT_TRUE(c.list("ckpt", "nothing/").objects.empty());
  s3::ListResult root = c.list("ckpt", "", "/");
  EXPECT_TRUE(root.objects.empty());
  EXPECT_EQ(root.prefixes, (std::vector<std::string>{"elsewhere/", "job/", "jobs/"}));
}

TEST_F(S3, ListFollowsContinuationTokensPastAThousandObjects) {
  // 1100 objects, put from 8 threads at once through one Client.
  constexpr int kObjects = 1100, kThreads = 8;
  std::atomic<int> next{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = next++; i < kObjects; i = next++) {
          char key[64];
          std::snprintf(key, sizeof key, "many/obj_%05d", i);
          const std::string value(static_cast<size_t>(i % 7), 'x');
          client_->put("ckpt", key, value.data(), value.size());
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) ASSERT_EQ(e, "");

  for (int max_keys : {0, 1000, 101}) {
    SCOPED_TRACE("max_keys " + std::to_string(max_keys));
    s3::ListResult all = client_->list("ckpt", "many/", "", max_keys);
    ASSERT_EQ(all.objects.size(), static_cast<size_t>(kObjects));
    for (int i = 0; i < kObjects; ++i) {
      char key[64];
      std::snprintf(key, sizeof key, "many/obj_%05d", i);
      ASSERT_EQ(all.objects[static_cast<size_t>(i)].first, key);
      ASSERT_EQ(all.objects[static_cast<size_t>(i)].second, i % 7);
    }
  }
}

TEST_F(S3, RemoveIsIdempotent) {
  client_->put("ckpt", "gone", "x", 1);
  ASSERT_TRUE(client_->head("ckpt", "gone").has_value());
  client_->remove("ckpt", "gone");
  EXPECT_FALSE(client_->get("ckpt", "gone").has_value());
  EXPECT_FALSE(client_->head("ckpt", "gone").has_value());
  client_->remove("ckpt", "gone");  // missing: fine
  EXPECT_TRUE(client_->list("ckpt", "gone").objects.empty());
}

TEST_F(S3, CreateBucketIsIdempotent) {
  client_->create_bucket("ckpt");  // exists already (the fixture made it)
  client_->create_bucket("second");
  client_->create_bucket("second");
  client_->put("second", "k", "v", 1);
  EXPECT_EQ(client_->get("second", "k").value_or("?"), "v");
  EXPECT_TRUE(client_->list("ckpt", "").objects.empty());
}

TEST_F(S3, MultipartUploadOfTwelveMiBInThreeParts) {
  constexpr size_t kMiB = 1024 * 1024;
  const std::string data = random_bytes(12 * kMiB + 123, 3);
  const std::string key = "job/step_00000003/rank 0.bin";
  const std::string id = client_->create_multipart("ckpt", key);
  ASSERT_FALSE(id.empty());
  std::vector<std::string> etags;
  const size_t part_size = 5 * kMiB;
  for (size_t off = 0, part = 1; off < data.size(); off += part_size, ++part) {
    const size_t n = std::min(part_size, data.size() - off);
    etags.push_back(client_->upload_part("ckpt", key, id, static_cast<int>(part), data.data() + off, n));
    EXPECT_FALSE(etags.back().empty());
  }
  ASSERT_EQ(etags.size(), 3u);
  // Not visible before completion.
  EXPECT_FALSE(client_->head("ckpt", key).has_value());
  client_->complete_multipart("ckpt", key, id, etags);
  EXPECT_EQ(client_->head("ckpt", key).value_or(-1), static_cast<int64_t>(data.size()));
  auto got = client_->get("ckpt", key);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got == data);
  // A range across the first part boundary.
  std::string buf(1000, '\0');
  client_->get_range("ckpt", key, static_cast<int64_t>(part_size) - 500, buf.size(), buf.data());
  EXPECT_TRUE(buf == data.substr(part_size - 500, 1000));

  EXPECT_THROW(client_->upload_part("ckpt", key, id, 0, "x", 1), std::invalid_argument);
  EXPECT_THROW(client_->upload_part("ckpt", key, id, 10001, "x", 1), std::invalid_argument);
  EXPECT_THROW(client_->complete_multipart("ckpt", key, id, {}), std::invalid_argument);
}

TEST_F(S3, AbortDropsTheUpload) {
  const std::string key = "aborted.bin";
  const std::string part = random_bytes(5 * 1024 * 1024, 4);
  const std::string id = client_->create_multipart("ckpt", key);
  const std::string etag = client_->upload_part("ckpt", key, id, 1, part.data(), part.size());
  client_->abort_multipart("ckpt", key, id);
  EXPECT_FALSE(client_->head("ckpt", key).has_value());
  // The upload is gone: completing it fails, aborting it again is fine.
  s3::Error e = s3_error([&] { client_->complete_multipart("ckpt", key, id, {etag}); });
  EXPECT_EQ(e.http_status, 404) << e.what();
  EXPECT_EQ(e.code, "NoSuchUpload") << e.what();
  client_->abort_multipart("ckpt", key, id);
  EXPECT_FALSE(client_->head("ckpt", key).has_value());
  EXPECT_TRUE(client_->list("ckpt", "").objects.empty());
}

TEST_F(S3, AKilledServerGivesErrorsNamingTheOperationAndRestartKeepsTheData) {
  // A budget of 300 ms: the server stays down longer than that.
  s3::Client c(config(std::chrono::milliseconds(300)));
  c.put("ckpt", "before", "kept", 4);
  const std::string id = c.create_multipart("ckpt", "mp");
  const std::string part = random_bytes(5 * 1024 * 1024, 5);
  const std::string etag1 = c.upload_part("ckpt", "mp", id, 1, part.data(), part.size());

  server_->stop();
  EXPECT_FALSE(server_->running());
  s3::Error e = s3_error([&] { c.put("ckpt", "after", "lost", 4); });
  EXPECT_EQ(e.http_status, 0);
  EXPECT_TRUE(e.transient) << e.what();  // a connection refused may pass
  EXPECT_NE(std::string(e.what()).find("s3: PUT s3://ckpt/after: "), std::string::npos) << e.what();
  // Retried until the budget was spent, and the message says so.
  EXPECT_NE(std::string(e.what()).find(" attempts over "), std::string::npos) << e.what();
  e = s3_error([&] { c.get("ckpt", "before"); });
  EXPECT_NE(std::string(e.what()).find("s3: GET s3://ckpt/before: "), std::string::npos) << e.what();
  e = s3_error([&] { c.upload_part("ckpt", "mp", id, 2, "tail", 4); });
  EXPECT_NE(std::string(e.what()).find("PUT s3://ckpt/mp (part 2)"), std::string::npos) << e.what();
  e = s3_error([&] { c.list("ckpt", "x/"); });
  EXPECT_NE(std::string(e.what()).find("LIST s3://ckpt/x/"), std::string::npos) << e.what();

  const int port = server_->port();
  server_->restart();
  EXPECT_TRUE(server_->running());
  EXPECT_EQ(server_->port(), port);
  // The same Client works again (its pooled connections died with the server).
  EXPECT_EQ(c.get("ckpt", "before").value_or("?"), "kept");
  EXPECT_FALSE(c.head("ckpt", "after").has_value());
  // The multipart upload survived too: finish it.
  const std::string etag2 = c.upload_part("ckpt", "mp", id, 2, "tail", 4);
  c.complete_multipart("ckpt", "mp", id, {etag1, etag2});
  EXPECT_EQ(c.get("ckpt", "mp").value_or("?"), part + "tail");
}

TEST_F(S3, AServerKilledAndRestartedTwoSecondsLaterWithinTheBudgetFailsNoRequest) {
  s3::Client c(config(std::chrono::seconds(120)));  // (a hang detector: the outage is 2 s)
  const std::string data = random_bytes(5 * 1024 * 1024, 8);
  const std::string id = c.create_multipart("ckpt", "mp");
  const std::string etag1 = c.upload_part("ckpt", "mp", id, 1, data.data(), data.size());
  server_->stop();
  // While it is down, a part upload starts: refused, it backs off and retries.
  std::string etag2, error;
  std::atomic<bool> finished{false};
  std::thread uploader([&] {
    try {
      etag2 = c.upload_part("ckpt", "mp", id, 2, "tail", 4);
    } catch (const std::exception& e) {
      error = e.what();
    }
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const bool finished_while_down = finished;
  server_->restart();  // (from this thread: the server dies with the thread that started it)
  uploader.join();
  EXPECT_FALSE(finished_while_down) << "the upload cannot succeed while the server is down: " << error;
  ASSERT_EQ(error, "");
  c.complete_multipart("ckpt", "mp", id, {etag1, etag2});
  EXPECT_EQ(c.get("ckpt", "mp").value_or("?"), data + "tail");
}

// ListMultipartUploads: s3rver 3.7.1 answers it 501 NotImplemented; our
// runner (tests/shard/s3rver_run.mjs) answers it from s3rver's own upload
// folders, as S3 documents the call. So this checks our client against
// that implementation of the call (and AbortMultipartUpload, also the
// runner's), not against AWS itself.
TEST_F(S3, ListMultipartUploadsShowsTheIncompleteOnesUnderAPrefix) {
  const std::string part = random_bytes(5 * 1024 * 1024, 9);
  const std::string a = client_->create_multipart("ckpt", "job/step_00000001/rank_0.bin");
  const std::string b = client_->create_multipart("ckpt", "job/step_00000002/rank 1.bin");
  const std::string b2 = client_->create_multipart("ckpt", "job/step_00000002/rank 1.bin");
  const std::string other = client_->create_multipart("ckpt", "jobs/x");
  const std::string done = client_->create_multipart("ckpt", "job/done.bin");
  client_->upload_part("ckpt", "job/step_00000001/rank_0.bin", a, 1, part.data(), part.size());
  const std::string etag = client_->upload_part("ckpt", "job/done.bin", done, 1, "x", 1);
  client_->complete_multipart("ckpt", "job/done.bin", done, {etag});

  std::vector<s3::Upload> got = client_->list_multipart("ckpt", "job/");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].key, "job/step_00000001/rank_0.bin");
  EXPECT_EQ(got[0].upload_id, a);
  EXPECT_EQ(got[1].key, "job/step_00000002/rank 1.bin");
  EXPECT_EQ(got[2].key, "job/step_00000002/rank 1.bin");
  EXPECT_EQ(std::set<std::string>({got[1].upload_id, got[2].upload_id}), std::set<std::string>({b, b2}));
  EXPECT_FALSE(got[0].initiated.empty());
  EXPECT_EQ(client_->list_multipart("ckpt", "").size(), 4u) << "with jobs/x";
  EXPECT_TRUE(client_->list_multipart("ckpt", "nothing/").empty());

  client_->abort_multipart("ckpt", got[0].key, got[0].upload_id);
  got = client_->list_multipart("ckpt", "job/");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].key, "job/step_00000002/rank 1.bin");
  s3::Error e = s3_error([&] { client_->list_multipart("nobucket", ""); });
  EXPECT_EQ(e.http_status, 404) << e.what();
  EXPECT_EQ(e.code, "NoSuchBucket") << e.what();
  EXPECT_FALSE(e.transient);
}

TEST_F(S3, ClientErrorsAreNotRetried) {
  // An access key s3rver does not know: 403 InvalidAccessKeyId, at once.
  s3::Config bad = config();
  bad.access_key = "NOT-S3RVER";
  s3::Client c(bad);
  s3::Error e = s3_error([&] { c.put("ckpt", "k", "v", 1); });
  EXPECT_EQ(e.http_status, 403);
  EXPECT_EQ(e.code, "InvalidAccessKeyId");
  EXPECT_FALSE(e.transient);
  std::string what = e.what();
  EXPECT_EQ(what.rfind("s3: PUT s3://ckpt/k: HTTP 403 InvalidAccessKeyId: ", 0), 0u) << what;
  EXPECT_EQ(what.find("attempts"), std::string::npos) << what;  // one attempt only
}

TEST_F(S3, AWrongSecretFailsTheSignatureCheck) {
  // The runner's SigV4 check (s3rver alone would answer 200).
  s3::Config bad = config();
  bad.secret_key = "not-the-secret";
  s3::Client c(bad);
  for (auto& call : std::vector<std::function<void()>>{
           [&] { c.put("ckpt", "k", "v", 1); }, [&] { c.get("ckpt", "k"); }, [&] { c.list("ckpt", "a b/", "/"); },
           [&] { c.create_multipart("ckpt", "k"); }}) {
    s3::Error e = s3_error(call);
    EXPECT_EQ(e.http_status, 403) << e.what();
    EXPECT_EQ(e.code, "SignatureDoesNotMatch") << e.what();
    EXPECT_FALSE(e.transient) << e.what();
    EXPECT_EQ(std::string(e.what()).find("attempts"), std::string::npos) << e.what();
  }
  // With a session token (signed as x-amz-security-token), the right secret passes.
  s3::Config with_token = config();
  with_token.session_token = "token/with+odd=chars";
  s3::Client t(with_token);
  t.put("ckpt", "token key", "v", 1);
  EXPECT_EQ(t.get("ckpt", "token key").value_or("?"), "v");
}

TEST_F(S3, TheOfficialAwsClientReadsWhatWeWrote) {
  constexpr size_t kMiB = 1024 * 1024;
  const std::string small = random_bytes(1000, 6);
  const std::string unicode_key = "sdk/dir with space/ünï+cödé.bin";
  const std::string big = random_bytes(11 * kMiB + 5, 7);
  client_->put("ckpt", "sdk/small.bin", small.data(), small.size());
  client_->put("ckpt", unicode_key, "unicode", 7);
  client_->put("ckpt", "sdk/empty", "", 0);
  const std::string id = client_->create_multipart("ckpt", "sdk/big.bin");
  std::vector<std::string> etags;
  for (size_t off = 0, part = 1; off < big.size(); off += 5 * kMiB, ++part) {
    const size_t n = std::min(5 * kMiB, big.size() - off);
    etags.push_back(client_->upload_part("ckpt", "sdk/big.bin", id, static_cast<int>(part), big.data() + off, n));
  }
  client_->complete_multipart("ckpt", "sdk/big.bin", id, etags);

  gstest::RankResult listed = sdk({"list", "ckpt", "sdk/"});
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  std::map<std::string, int64_t> got;
  std::istringstream lines(listed.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("sdk/", 0) != 0) continue;  // stderr noise (warnings), if any
    const size_t sp = line.rfind(' ');
    got[line.substr(0, sp)] = std::stoll(line.substr(sp + 1));
  }
  EXPECT_EQ(got, (std::map<std::string, int64_t>{{"sdk/big.bin", static_cast<int64_t>(big.size())},
                                                 {unicode_key, 7},
                                                 {"sdk/empty", 0},
                                                 {"sdk/small.bin", 1000}}))
      << listed.output;

  gstest::TempDir tmp;
  for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
           {"sdk/small.bin", small}, {unicode_key, "unicode"}, {"sdk/empty", ""}, {"sdk/big.bin", big}}) {
    SCOPED_TRACE(key);
    const std::string out = tmp.path() + "/out.bin";
    std::filesystem::remove(out);
    gstest::RankResult r = sdk({"get", "ckpt", key, out});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string bytes = read_file(out);
    EXPECT_EQ(bytes.size(), want.size());
    EXPECT_TRUE(bytes == want);
  }
  // And a missing key is an error there too.
  gstest::RankResult missing = sdk({"get", "ckpt", "sdk/nope", tmp.path() + "/nope"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("NoSuchKey"), std::string::npos) << missing.output;
}

TEST(S3ServerFixture, LeavesNoProcessBehind) {
  ASSERT_TRUE(gstest::S3Server::available()) << gstest::S3Server::unavailable_reason();
  int pid = -1;
  std::string dir;
  {
    gstest::S3Server server("other-bucket");
    EXPECT_EQ(server.bucket(), "other-bucket");
    EXPECT_EQ(server.endpoint(), "http://127.0.0.1:" + std::to_string(server.port()));
    EXPECT_TRUE(std::filesystem::is_directory(server.dir() + "/other-bucket"));
    dir = server.dir();
    server.restart();
    // The child of this process running s3rver_run.mjs.
    for (int child : gstest::child_pids(::getpid())) {
      std::ifstream cmd("/proc/" + std::to_string(child) + "/cmdline");
      std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
      if (line.find("s3rver_run.mjs") != std::string::npos && line.find(dir) != std::string::npos) pid = child;
    }
    ASSERT_GT(pid, 0);
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: gone
  EXPECT_FALSE(std::filesystem::exists(dir));
}
