// Carbon Aware SDK and Electricity Maps clients against a local server on
// 127.0.0.1 (port 0) that serves responses in the documented shapes, and
// every failure mode: timeout, HTTP error, malformed JSON, gap, null, stale.
#include "carbon/carbon_aware_sdk_provider.h"
#include "carbon/electricitymaps_provider.h"
#include "carbon/stale_fallback_provider.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "common/spawn.h"

#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace carbon {
namespace {

using Kind = ProviderError::Kind;

// A canned-response server: path -> (status, body, delay).
class FakeApi {
 public:
  struct Reply {
    int status = 200;
    std::string body;
    std::chrono::milliseconds delay{0};
  };
  FakeApi() {
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      Reply r;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_ = req;
        requests_.push_back(req);
        if (auto h = handlers_.find(req.path); h != handlers_.end()) {
          r = h->second(req);
        } else if (auto it = replies_.find(req.path); it != replies_.end()) {
          r = it->second;
        } else {
          res.status = 404;
          res.set_content("{\"error\":\"not found\"}", "application/json");
          return;
        }
      }
      if (r.delay.count() > 0) std::this_thread::sleep_for(r.delay);
      res.status = r.status;
      res.set_content(r.body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeApi() {
    server_.stop();
    thread_.join();
  }
  void set(const std::string& path, Reply r) {
    std::lock_guard<std::mutex> lock(mu_);
    replies_[path] = std::move(r);
  }
  // A reply computed from the request (its query), for `path`.
  void handle(const std::string& path, std::function<Reply(const httplib::Request&)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    handlers_[path] = std::move(f);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<httplib::Request> requests(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<httplib::Request> out;
    for (const auto& r : requests_)
      if (r.path == path) out.push_back(r);
    return out;
  }
  httplib::Request last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, Reply> replies_;
  std::map<std::string, std::function<Reply(const httplib::Request&)>> handlers_;
  httplib::Request last_;
  std::vector<httplib::Request> requests_;
};

HttpOptions options(const FakeApi& api) {
  HttpOptions o;
  o.base_url = api.url();
  o.connect_timeout = std::chrono::milliseconds(500);
  o.read_timeout = std::chrono::milliseconds(1000);  // generous: CI machines are busy
  o.max_age = Hours{2};
  return o;
}

const Time kNow = parse_time("2024-03-01T12:20:00Z");

template <class F>
Kind kind_of(F&& f) {
  try {
    f();
  } catch (const ProviderError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no ProviderError";
  return Kind::kNoData;
}

// --- Carbon Aware SDK -------------------------------------------------------

const char* kSdkEmissions = R"([
  {"location":"westus","time":"2024-03-01T10:00:00+00:00","rating":210.5,"duration":"01:00:00"},
  {"location":"westus","time":"2024-03-01T11:00:00+00:00","rating":190.0,"duration":"01:00:00"},
  {"location":"westus","time":"2024-03-01T12:00:00+00:00","rating":170.25,"duration":"01:00:00"}])";

const char* kSdkForecast = R"([{
  "generatedAt":"2024-03-01T12:15:00+00:00","requestedAt":"2024-03-01T12:15:00+00:00","location":"westus",
  "dataStartAt":"2024-03-01T12:00:00+00:00","dataEndAt":"2024-03-01T15:00:00+00:00","windowSize":5,
  "optimalDataPoints":[{"location":"westus","timestamp":"2024-03-01T14:00:00+00:00","duration":30,"value":95.0}],
  "forecastData":[
    {"location":"westus","timestamp":"2024-03-01T12:00:00+00:00","duration":30,"value":150.0},
    {"location":"westus","timestamp":"2024-03-01T12:30:00+00:00","duration":30,"value":130.0},
    {"location":"westus","timestamp":"2024-03-01T13:00:00+00:00","duration":30,"value":120.0},
    {"location":"westus","timestamp":"2024-03-01T13:30:00+00:00","duration":30,"value":100.0},
    {"location":"westus","timestamp":"2024-03-01T14:00:00+00:00","duration":30,"value":95.0},
    {"location":"westus","timestamp":"2024-03-01T14:30:00+00:00","duration":30,"value":105.0}]}])";

TEST(CarbonAwareSdk, CurrentTakesTheNewestPointAndSendsTheQuery) {
  FakeApi api;
  api.set("/emissions/bylocations", {200, kSdkEmissions});
  CarbonAwareSdkProvider p(options(api));
  auto r = p.current("westus", kNow);
  EXPECT_DOUBLE_EQ(r.gco2_per_kwh, 170.25);
  EXPECT_EQ(r.time, parse_time("2024-03-01T12:00Z"));
  EXPECT_FALSE(r.stale);
  auto req = api.last();
  EXPECT_EQ(req.get_param_value("location"), "westus");
  EXPECT_EQ(req.get_param_value("toTime"), "2024-03-01T12:20:00Z");
}

TEST(CarbonAwareSdk, HistoryIsHourly) {
  FakeApi api;
  api.set("/emissions/bylocations", {200, kSdkEmissions});
  CarbonAwareSdkProvider p(options(api));
  auto s = p.history("westus", parse_time("2024-03-01T10:00Z"), parse_time("2024-03-01T13:00Z"));
  EXPECT_EQ(s.values(), (std::vector<double>{210.5, 190.0, 170.25}));
}

TEST(CarbonAwareSdk, ForecastAveragesPerHourAndReadsOptimalDataPoints) {
  FakeApi api;
  api.set("/emissions/forecasts/current", {200, kSdkForecast});
  CarbonAwareSdkProvider p(options(api));
  auto f = p.forecast("westus", kNow, Hours{24});
  EXPECT_EQ(f.series.start(), parse_time("2024-03-01T12:00Z"));
  EXPECT_EQ(f.series.values(), (std::vector<double>{140.0, 110.0, 100.0}));
  ASSERT_EQ(f.optimal.size(), 1u);
  EXPECT_DOUBLE_EQ(f.optimal[0].gco2_per_kwh, 95.0);
  EXPECT_EQ(f.generated_at, parse_time("2024-03-01T12:15Z"));
}

TEST(CarbonAwareSdk, AcceptsTheOlderSingularOptimalDataPoint) {
  FakeApi api;
  std::string body = kSdkForecast;
  auto a = body.find("\"optimalDataPoints\":[");
  body.replace(a, std::string("\"optimalDataPoints\":[").size(), "\"optimalDataPoint\":");
  auto b = body.find("}],", a);
  body.replace(b, 3, "},");
  api.set("/emissions/forecasts/current", {200, body});
  CarbonAwareSdkProvider p(options(api));
  auto f = p.forecast("westus", kNow, Hours{24});
  ASSERT_EQ(f.optimal.size(), 1u);
  EXPECT_EQ(f.optimal[0].time, parse_time("2024-03-01T14:00Z"));
}

TEST(CarbonAwareSdk, FailureModesAreTypedErrors) {
  FakeApi api;
  CarbonAwareSdkProvider p(options(api));
  // HTTP error
  api.set("/emissions/bylocations", {500, "{\"title\":\"boom\"}"});
  EXPECT_EQ(kind_of([&] { p.current("westus", kNow); }), Kind::kHttp);
  // malformed JSON
  api.set("/emissions/bylocations", {200, "[{\"location\": \"westus\","});
  EXPECT_EQ(kind_of([&] { p.current("westus", kNow); }), Kind::kMalformed);
  // wrong shape
  api.set("/emissions/bylocations", {200, "{\"rating\": 3}"});
  EXPECT_EQ(kind_of([&] { p.current("westus", kNow); }), Kind::kMalformed);
  // null rating: a gap, not a zero
  api.set("/emissions/bylocations", {200, R"([{"location":"westus","time":"2024-03-01T12:00:00Z","rating":null}])"});
  EXPECT_EQ(kind_of([&] { p.current("westus", kNow); }), Kind::kGap);
  // a missing hour in history
  api.set("/emissions/bylocations", {200, R"([{"location":"westus","time":"2024-03-01T10:00:00Z","rating":1},
                                              {"location":"westus","time":"2024-03-01T12:00:00Z","rating":2}])"});
  EXPECT_EQ(kind_of([&] { p.history("westus", parse_time("2024-03-01T10:00Z"), parse_time("2024-03-01T13:00Z")); }),
            Kind::kGap);
  // stale: newest point three hours old
  api.set("/emissions/bylocations", {200, R"([{"location":"westus","time":"2024-03-01T09:00:00Z","rating":1}])"});
  EXPECT_EQ(kind_of([&] { p.current("westus", kNow); }), Kind::kStale);
  // a forecast whose location is not a string: malformed, not an escaped JSON
  // type error (found by a 10 M fuzz_provider_json campaign)
  api.set("/emissions/forecasts/current", {200, R"([{"locantio":"00:00:00"},{"location":170.25}])"});
  EXPECT_EQ(kind_of([&] { p.forecast("westus", kNow, Hours{4}); }), Kind::kMalformed);
  // empty answer
  api.set("/emissions/bylocations", {200, "[]"});
  EXPECT_EQ(kind_of([&] { p.current("westus", kNow); }), Kind::kNoData);
  // read timeout
  api.set("/emissions/bylocations", {200, kSdkEmissions, std::chrono::milliseconds(1600)});
  EXPECT_EQ(kind_of([&] { p.current("westus", kNow); }), Kind::kTimeout);
}

TEST(CarbonAwareSdk, UnreachableServerIsATimeoutKindError) {
  int port = gstest::free_port();  // bound and closed again: nothing listens there
  HttpOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(port);
  o.connect_timeout = std::chrono::milliseconds(300);
  CarbonAwareSdkProvider p(o);
  try {
    p.current("westus", kNow);
    FAIL();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), Kind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("/emissions/bylocations"), std::string::npos) << e.what();
  }
}

// --- Electricity Maps --------------------------------------------------------

const char* kEmLatest =
    R"({"zone":"DE","carbonIntensity":302,"datetime":"2024-03-01T12:00:00.000Z","updatedAt":"2024-03-01T12:05:11.000Z",
        "createdAt":"2024-02-26T12:00:00.000Z","emissionFactorType":"lifecycle","isEstimated":true,"estimationMethod":"TIME_SLICER_AVERAGE"})";
const char* kEmHistory = R"({"zone":"DE","history":[
    {"zone":"DE","carbonIntensity":310,"datetime":"2024-03-01T09:00:00.000Z","isEstimated":false},
    {"zone":"DE","carbonIntensity":305,"datetime":"2024-03-01T10:00:00.000Z","isEstimated":false},
    {"zone":"DE","carbonIntensity":300,"datetime":"2024-03-01T11:00:00.000Z","isEstimated":true}]})";
const char* kEmForecast = R"({"zone":"DE","forecast":[
    {"carbonIntensity":290,"datetime":"2024-03-01T12:00:00.000Z"},
    {"carbonIntensity":250,"datetime":"2024-03-01T13:00:00.000Z"},
    {"carbonIntensity":230,"datetime":"2024-03-01T14:00:00.000Z"}],"updatedAt":"2024-03-01T11:58:00.000Z"})";

TEST(ElectricityMaps, LatestHistoryForecastWithAuthToken) {
  FakeApi api;
  api.set("/v3/carbon-intensity/latest", {200, kEmLatest});
  api.set("/v3/carbon-intensity/history", {200, kEmHistory});
  api.set("/v3/carbon-intensity/forecast", {200, kEmForecast});
  ElectricityMapsProvider p(options(api), "secret-token");
  auto r = p.current("DE", kNow);
  EXPECT_DOUBLE_EQ(r.gco2_per_kwh, 302);
  EXPECT_TRUE(r.estimated);
  EXPECT_EQ(api.last().get_header_value("auth-token"), "secret-token");
  EXPECT_EQ(api.last().get_param_value("zone"), "DE");
  auto h = p.history("DE", parse_time("2024-03-01T10:00Z"), parse_time("2024-03-01T12:00Z"));
  EXPECT_EQ(h.values(), (std::vector<double>{305, 300}));
  auto f = p.forecast("DE", kNow, Hours{2});
  EXPECT_EQ(f.series.values(), (std::vector<double>{290, 250}));
  EXPECT_EQ(f.generated_at, parse_time("2024-03-01T11:58Z"));
}

TEST(ElectricityMaps, FailureModesAreTypedErrors) {
  FakeApi api;
  ElectricityMapsProvider p(options(api), "t");
  api.set("/v3/carbon-intensity/latest", {401, R"({"error":"invalid auth-token"})"});
  try {
    p.current("DE", kNow);
    FAIL();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), Kind::kHttp);
    EXPECT_NE(std::string(e.what()).find("HTTP 401"), std::string::npos);
  }
  api.set("/v3/carbon-intensity/latest", {200, "not json"});
  EXPECT_EQ(kind_of([&] { p.current("DE", kNow); }), Kind::kMalformed);
  api.set("/v3/carbon-intensity/latest", {200, R"({"zone":"DE","carbonIntensity":null,"datetime":"2024-03-01T12:00:00Z"})"});
  EXPECT_EQ(kind_of([&] { p.current("DE", kNow); }), Kind::kGap);
  api.set("/v3/carbon-intensity/latest", {200, R"({"zone":"DE","carbonIntensity":302,"datetime":"2024-02-28T12:00:00Z"})"});
  EXPECT_EQ(kind_of([&] { p.current("DE", kNow); }), Kind::kStale);
  api.set("/v3/carbon-intensity/history", {200, R"({"zone":"DE","history":[
    {"carbonIntensity":310,"datetime":"2024-03-01T09:00:00Z"},{"carbonIntensity":300,"datetime":"2024-03-01T11:00:00Z"}]})"});
  EXPECT_EQ(kind_of([&] { p.history("DE", parse_time("2024-03-01T09:00Z"), parse_time("2024-03-01T12:00Z")); }), Kind::kGap);
  api.set("/v3/carbon-intensity/history", {200, kEmHistory});
  // After the newest point: nothing to ask /past-range for.
  EXPECT_EQ(kind_of([&] { p.history("DE", parse_time("2024-03-01T10:00Z"), parse_time("2024-03-01T14:00Z")); }),
            Kind::kNoData);
  EXPECT_TRUE(api.requests("/v3/carbon-intensity/past-range").empty());
  api.set("/v3/carbon-intensity/forecast", {200, R"({"zone":"DE","forecasts":[]})"});
  EXPECT_EQ(kind_of([&] { p.forecast("DE", kNow, Hours{2}); }), Kind::kMalformed);
  api.set("/v3/carbon-intensity/forecast", {200, kEmForecast, std::chrono::milliseconds(1600)});
  EXPECT_EQ(kind_of([&] { p.forecast("DE", kNow, Hours{2}); }), Kind::kTimeout);
}

// /v3/carbon-intensity/past-range in the documented shape: hourly points from
// `start` to `end`, both included (so the client must drop the end point),
// value 100 + (unix hour mod 97); `skip` leaves one hour out.
FakeApi::Reply past_range(const httplib::Request& req, Time skip = Time{}) {
  Time a{}, b{};
  if (!parse_time(req.get_param_value("start"), &a) || !parse_time(req.get_param_value("end"), &b))
    return {400, R"({"error":"start and end must be ISO timestamps"})"};
  if (b - a > Hours{240}) return {400, R"({"error":"range exceeds 10 days"})"};
  std::string body = R"({"zone":")" + req.get_param_value("zone") + R"(","temporalGranularity":"hourly","data":[)";
  for (Time t = a; t <= b; t += Hours{1}) {
    if (t == skip) continue;
    if (body.back() == '}') body += ",";
    body += R"({"zone":"DE","carbonIntensity":)" + std::to_string(100 + (to_unix(t) / 3600) % 97) +
            R"(,"datetime":")" + format_time(t).substr(0, 19) + R"(.000Z","isEstimated":false,"updatedAt":"2024-03-01T00:00:00.000Z"})";
  }
  return {200, body + "]}"};
}

TEST(ElectricityMaps, HistoryBeforeTheLast24HoursComesFromPastRangeInTenDayChunks) {
  FakeApi api;
  api.set("/v3/carbon-intensity/history", {200, kEmHistory});   // the last 24 h: 2024-03-01 09..11
  api.handle("/v3/carbon-intensity/past-range", [](const httplib::Request& r) { return past_range(r); });
  ElectricityMapsProvider p(options(api), "secret-token");
  const Time from = parse_time("2024-02-01T09:30Z"), to = parse_time("2024-02-20T12:00Z");
  auto s = p.history("DE", from, to);
  // 459 hours: [02-01 09:00, 02-20 12:00), asked as 240 h + 219 h.
  auto reqs = api.requests("/v3/carbon-intensity/past-range");
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].get_param_value("zone"), "DE");
  EXPECT_EQ(reqs[0].get_param_value("start"), "2024-02-01T09:00:00Z");
  EXPECT_EQ(reqs[0].get_param_value("end"), "2024-02-11T09:00:00Z");
  EXPECT_EQ(reqs[1].get_param_value("start"), "2024-02-11T09:00:00Z");
  EXPECT_EQ(reqs[1].get_param_value("end"), "2024-02-20T12:00:00Z");
  for (const auto& r : reqs) EXPECT_EQ(r.get_header_value("auth-token"), "secret-token");
  ASSERT_TRUE(s.covers(floor_hour(from), to));
  EXPECT_EQ(s.start(), floor_hour(from));
  EXPECT_EQ(s.end(), to);
  for (Time t = s.start(); t < s.end(); t += Hours{1})
    ASSERT_DOUBLE_EQ(s.at(t), 100 + (to_unix(t) / 3600) % 97) << format_time(t);
  // A range inside the last 24 h never reaches /past-range.
  auto recent = p.history("DE", parse_time("2024-03-01T09:00Z"), parse_time("2024-03-01T11:00Z"));
  EXPECT_EQ(recent.values(), (std::vector<double>{310, 305}));
  EXPECT_EQ(api.requests("/v3/carbon-intensity/past-range").size(), 2u);
}

TEST(ElectricityMaps, PastRangeFailuresAreTypedErrors) {
  FakeApi api;
  api.set("/v3/carbon-intensity/history", {200, kEmHistory});
  ElectricityMapsProvider p(options(api), "t");
  const Time from = parse_time("2024-02-01T00:00Z"), to = parse_time("2024-02-02T00:00Z");
  // A missing hour inside the range: a gap, never a zero.
  api.handle("/v3/carbon-intensity/past-range",
             [](const httplib::Request& r) { return past_range(r, parse_time("2024-02-01T05:00Z")); });
  EXPECT_EQ(kind_of([&] { p.history("DE", from, to); }), Kind::kGap);
  // The range's last hour missing: the answer does not cover it.
  api.handle("/v3/carbon-intensity/past-range",
             [](const httplib::Request& r) { return past_range(r, parse_time("2024-02-01T23:00Z")); });
  EXPECT_EQ(kind_of([&] { p.history("DE", from, to); }), Kind::kGap);
  api.handle("/v3/carbon-intensity/past-range", [](const httplib::Request&) {
    return FakeApi::Reply{200, R"({"zone":"DE","data":[{"carbonIntensity":null,"datetime":"2024-02-01T00:00:00Z"}]})"};
  });
  EXPECT_EQ(kind_of([&] { p.history("DE", from, to); }), Kind::kGap);
  api.handle("/v3/carbon-intensity/past-range",
             [](const httplib::Request&) { return FakeApi::Reply{200, R"({"zone":"DE","data":[]})"}; });
  EXPECT_EQ(kind_of([&] { p.history("DE", from, to); }), Kind::kNoData);
  api.handle("/v3/carbon-intensity/past-range",
             [](const httplib::Request&) { return FakeApi::Reply{200, R"({"zone":"DE","history":[]})"}; });
  EXPECT_EQ(kind_of([&] { p.history("DE", from, to); }), Kind::kMalformed);
  api.handle("/v3/carbon-intensity/past-range", [](const httplib::Request&) {
    return FakeApi::Reply{403, R"({"error":"past-range is not included in your plan"})"};
  });
  try {
    p.history("DE", from, to);
    FAIL();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), Kind::kHttp);
    EXPECT_NE(std::string(e.what()).find("past-range"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("HTTP 403"), std::string::npos) << e.what();
  }
}

// --- sub-hourly data (HttpOptions::resolution) ---------------------------------

// Bodies in the documented shapes: points every `step_min` minutes from
// `start` with `values` (a value < 0 skips that point).
std::string sdk_forecast_body(const char* start, int step_min, const std::vector<double>& values) {
  std::string data;
  Time t = parse_time(start);
  for (double v : values) {
    if (v >= 0)
      data += std::string(data.empty() ? "" : ",") + R"({"location":"westus","timestamp":")" + format_time(t) +
              R"(","duration":)" + std::to_string(step_min) + R"(,"value":)" + std::to_string(v) + "}";
    t += std::chrono::minutes{step_min};
  }
  return R"([{"generatedAt":"2024-03-01T12:15:00+00:00","location":"westus","optimalDataPoints":[],"forecastData":[)" +
         data + "]}]";
}

std::string sdk_emissions_body(const char* start, int step_min, const std::vector<double>& values) {
  std::string data;
  Time t = parse_time(start);
  for (double v : values) {
    if (v >= 0)
      data += std::string(data.empty() ? "" : ",") + R"({"location":"westus","time":")" + format_time(t) +
              R"(","rating":)" + std::to_string(v) + "}";
    t += std::chrono::minutes{step_min};
  }
  return "[" + data + "]";
}

std::string em_body(const char* key, const char* start, int step_min, const std::vector<double>& values) {
  std::string data;
  Time t = parse_time(start);
  for (double v : values) {
    if (v >= 0)
      data += std::string(data.empty() ? "" : ",") + R"({"zone":"DE","carbonIntensity":)" + std::to_string(v) +
              R"(,"datetime":")" + format_time(t).substr(0, 19) + R"(.000Z","isEstimated":false})";
    t += std::chrono::minutes{step_min};
  }
  return R"({"zone":"DE",")" + std::string(key) + R"(":[)" + data + R"(],"updatedAt":"2024-03-01T11:58:00.000Z"})";
}

struct SubHourlyCase {
  const char* name;
  bool em;                        // Electricity Maps (else the Carbon Aware SDK)
  const char* path;               // the endpoint that answers `body`
  std::string body;
  int resolution_min;             // HttpOptions::resolution
  const char* from;               // history(from, to); nullptr: forecast(kNow, 4 h)
  const char* to;
  // expectations
  bool ok;
  const char* start;
  int step_min;
  std::vector<double> values;
  const char* granularity;        // Electricity Maps: temporalGranularity sent ("": none)
  Kind kind;                      // when !ok
  const char* error_has;
};

void PrintTo(const SubHourlyCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class SubHourlyProviders : public ::testing::TestWithParam<SubHourlyCase> {};

TEST_P(SubHourlyProviders, KeepTheStepAskedForOrNameTheFirstBadTimestamp) {
  const auto& c = GetParam();
  FakeApi api;
  api.set(c.path, {200, c.body});
  HttpOptions o = options(api);
  o.resolution = std::chrono::minutes{c.resolution_min};
  std::unique_ptr<IntensityProvider> p;
  if (c.em) p = std::make_unique<ElectricityMapsProvider>(o, "t");
  else p = std::make_unique<CarbonAwareSdkProvider>(o);
  auto call = [&] {
    return c.from ? p->history(c.em ? "DE" : "westus", parse_time(c.from), parse_time(c.to))
                  : p->forecast(c.em ? "DE" : "westus", kNow, Hours{4}).series;
  };
  if (!c.ok) {
    try {
      call();
      FAIL() << "no error for: " << c.name;
    } catch (const ProviderError& e) {
      EXPECT_EQ(e.kind(), c.kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.error_has), std::string::npos) << e.what();
    }
    return;
  }
  IntensitySeries got = call();
  EXPECT_EQ(got.start(), parse_time(c.start));
  EXPECT_EQ(got.step(), std::chrono::minutes{c.step_min});
  EXPECT_EQ(got.values(), c.values);
  if (c.em) {
    auto reqs = api.requests(c.path);
    ASSERT_FALSE(reqs.empty());
    EXPECT_EQ(reqs.back().get_param_value("temporalGranularity"), c.granularity);
  }
}

using V = std::vector<double>;
V ramp(int n) {   // 1, 2, ..., n
  V v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i + 1;
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, SubHourlyProviders,
    ::testing::Values(
        // Carbon Aware SDK
        SubHourlyCase{"sdk: a 30-minute forecast stays 30-minute at a 30-minute resolution", false,
                      "/emissions/forecasts/current", kSdkForecast, 30, nullptr, nullptr, true, "2024-03-01T12:00Z", 30,
                      V{150, 130, 120, 100, 95, 105}, "", Kind::kNoData, ""},
        SubHourlyCase{"sdk: a 5-minute forecast starts at the five minutes of now", false, "/emissions/forecasts/current",
                      sdk_forecast_body("2024-03-01T12:00Z", 5, {1, 2, 3, 4, 5, 6, 7, 8}), 5, nullptr, nullptr, true,
                      "2024-03-01T12:20Z", 5, V{5, 6, 7, 8}, "", Kind::kNoData, ""},
        SubHourlyCase{"sdk: 5-minute points are averaged per quarter hour at a 15-minute resolution", false,
                      "/emissions/forecasts/current", sdk_forecast_body("2024-03-01T12:15Z", 5, {10, 20, 30, 40, 50, 60}),
                      15, nullptr, nullptr, true, "2024-03-01T12:15Z", 15, V{20, 50}, "", Kind::kNoData, ""},
        SubHourlyCase{"sdk: 15-minute emissions make a 15-minute history", false, "/emissions/bylocations",
                      sdk_emissions_body("2024-03-01T10:00Z", 15, {1, 2, 3, 4, 5, 6}), 15, "2024-03-01T10:15Z",
                      "2024-03-01T11:15Z", true, "2024-03-01T10:15Z", 15, V{2, 3, 4, 5}, "", Kind::kNoData, ""},
        SubHourlyCase{"sdk: hourly emissions are held over each half hour at a 30-minute resolution", false,
                      "/emissions/bylocations", kSdkEmissions, 30, "2024-03-01T10:00Z", "2024-03-01T13:00Z", true,
                      "2024-03-01T10:00Z", 30, V{210.5, 210.5, 190, 190, 170.25, 170.25}, "", Kind::kNoData, ""},
        SubHourlyCase{"sdk: the default still averages 5-minute points per hour", false, "/emissions/forecasts/current",
                      sdk_forecast_body("2024-03-01T12:00Z", 5, ramp(24)), 60, nullptr, nullptr, true,
                      "2024-03-01T12:00Z", 60, V{6.5, 18.5}, "", Kind::kNoData, ""},
        SubHourlyCase{"sdk: a 20-minute step is malformed and named", false, "/emissions/forecasts/current",
                      sdk_forecast_body("2024-03-01T12:00Z", 20, {1, 2, 3}), 30, nullptr, nullptr, false, "", 0, {}, "",
                      Kind::kMalformed, "2024-03-01T12:20:00Z is 1200 s after the previous one"},
        SubHourlyCase{"sdk: a 15-minute point mixed into 30-minute data is malformed and named", false,
                      "/emissions/forecasts/current",
                      R"([{"location":"westus","forecastData":[
                        {"location":"westus","timestamp":"2024-03-01T12:00:00Z","duration":30,"value":1},
                        {"location":"westus","timestamp":"2024-03-01T12:30:00Z","duration":30,"value":2},
                        {"location":"westus","timestamp":"2024-03-01T12:45:00Z","duration":15,"value":3}]}])",
                      30, nullptr, nullptr, false, "", 0, {}, "", Kind::kMalformed,
                      "2024-03-01T12:45:00Z is not on the 30-minute grid"},
        SubHourlyCase{"sdk: 30-minute points off their grid are malformed and named", false,
                      "/emissions/forecasts/current", sdk_forecast_body("2024-03-01T12:10Z", 30, {1, 2, 3}), 30, nullptr,
                      nullptr, false, "", 0, {}, "", Kind::kMalformed, "2024-03-01T12:10:00Z is not on the 30-minute grid"},
        SubHourlyCase{"sdk: a missing 15 minutes is a gap", false, "/emissions/bylocations",
                      sdk_emissions_body("2024-03-01T10:00Z", 15, {1, 2, -1, 4}), 15, "2024-03-01T10:00Z",
                      "2024-03-01T11:00Z", false, "", 0, {}, "", Kind::kGap, "no data for 2024-03-01T10:30:00Z"},
        // Electricity Maps
        SubHourlyCase{"em: a 15-minute forecast asks for 15_minutes and keeps them", true, "/v3/carbon-intensity/forecast",
                      em_body("forecast", "2024-03-01T12:00Z", 15, {1, 2, 3, 4, 5, 6}), 15, nullptr, nullptr, true,
                      "2024-03-01T12:15Z", 15, V{2, 3, 4, 5, 6}, "15_minutes", Kind::kNoData, ""},
        SubHourlyCase{"em: a 5-minute history asks for 5_minutes and keeps them", true, "/v3/carbon-intensity/history",
                      em_body("history", "2024-03-01T11:00Z", 5, {1, 2, 3, 4, 5, 6}), 5, "2024-03-01T11:05Z",
                      "2024-03-01T11:20Z", true, "2024-03-01T11:05Z", 5, V{2, 3, 4}, "5_minutes", Kind::kNoData, ""},
        SubHourlyCase{"em: a 30-minute resolution asks for 15_minutes and averages pairs", true,
                      "/v3/carbon-intensity/forecast", em_body("forecast", "2024-03-01T12:00Z", 15, {10, 20, 30, 50}), 30,
                      nullptr, nullptr, true, "2024-03-01T12:00Z", 30, V{15, 40}, "15_minutes", Kind::kNoData, ""},
        SubHourlyCase{"em: an hourly answer to a 30-minute request is held over each half hour", true,
                      "/v3/carbon-intensity/forecast", kEmForecast, 30, nullptr, nullptr, true, "2024-03-01T12:00Z", 30,
                      V{290, 290, 250, 250, 230, 230}, "15_minutes", Kind::kNoData, ""},
        SubHourlyCase{"em: hourly stays the default and asks for no granularity", true, "/v3/carbon-intensity/forecast",
                      kEmForecast, 60, nullptr, nullptr, true, "2024-03-01T12:00Z", 60, V{290, 250, 230}, "",
                      Kind::kNoData, ""},
        SubHourlyCase{"em: a 15-minute point after hourly ones is malformed and named", true,
                      "/v3/carbon-intensity/forecast", R"({"zone":"DE","forecast":[
                        {"carbonIntensity":1,"datetime":"2024-03-01T12:00:00Z"},
                        {"carbonIntensity":2,"datetime":"2024-03-01T13:00:00Z"},
                        {"carbonIntensity":3,"datetime":"2024-03-01T13:15:00Z"}]})",
                      60, nullptr, nullptr, false, "", 0, {}, "", Kind::kMalformed,
                      "2024-03-01T13:15:00Z is not on the hourly grid"}),
    [](const ::testing::TestParamInfo<SubHourlyCase>& info) { return gstest::test_name(info.param.name); });

TEST(ElectricityMaps, SubHourlyPastRangeAsksForAtMost240PointsARequest) {
  FakeApi api;
  api.set("/v3/carbon-intensity/history", {200, kEmHistory});
  api.handle("/v3/carbon-intensity/past-range", [](const httplib::Request& req) {
    Time a{}, b{};
    if (!parse_time(req.get_param_value("start"), &a) || !parse_time(req.get_param_value("end"), &b) ||
        req.get_param_value("temporalGranularity") != "15_minutes" || b - a > Hours{60})
      return FakeApi::Reply{400, R"({"error":"bad request"})"};
    std::string body = R"({"zone":"DE","data":[)";
    for (Time t = a; t <= b; t += std::chrono::minutes{15}) {
      if (body.back() == '}') body += ",";
      body += R"({"carbonIntensity":)" + std::to_string(to_unix(t) / 900 % 89) + R"(,"datetime":")" + format_time(t) + "\"}";
    }
    return FakeApi::Reply{200, body + "]}"};
  });
  HttpOptions o = options(api);
  o.resolution = std::chrono::minutes{15};
  ElectricityMapsProvider p(o, "t");
  const Time from = parse_time("2024-02-01T00:00Z"), to = parse_time("2024-02-04T00:00Z");
  auto s = p.history("DE", from, to);
  auto reqs = api.requests("/v3/carbon-intensity/past-range");
  ASSERT_EQ(reqs.size(), 2u);   // 72 h = 60 h (240 quarter hours) + 12 h
  EXPECT_EQ(reqs[0].get_param_value("end"), "2024-02-03T12:00:00Z");
  EXPECT_EQ(reqs[1].get_param_value("start"), "2024-02-03T12:00:00Z");
  EXPECT_EQ(s.step(), std::chrono::minutes{15});
  ASSERT_EQ(s.size(), 288u);
  for (Time t = s.start(); t < s.end(); t += std::chrono::minutes{15})
    ASSERT_DOUBLE_EQ(s.at(t), static_cast<double>(to_unix(t) / 900 % 89)) << format_time(t);
}

TEST(HttpProviders, AResolutionOtherThan5_15_30Or60MinutesIsRefused) {
  HttpOptions o;
  o.base_url = "http://127.0.0.1:1";
  for (long m : {0, 1, 10, 20, 45, 120}) {
    o.resolution = std::chrono::minutes{m};
    EXPECT_THROW(CarbonAwareSdkProvider{o}, CarbonError) << m;
    EXPECT_THROW(ElectricityMapsProvider(o, "t"), CarbonError) << m;
  }
}

// --- explicit stale fallback ---------------------------------------------------

TEST(StaleFallback, ReturnsTheLastGoodReadingMarkedStaleThenGivesUp) {
  FakeApi api;
  api.set("/v3/carbon-intensity/latest", {200, kEmLatest});
  auto inner = std::make_shared<ElectricityMapsProvider>(options(api), "t");
  StaleFallbackProvider p(inner, Hours{1});
  EXPECT_THROW(StaleFallbackProvider(nullptr, Hours{1}), CarbonError);
  auto good = p.current("DE", kNow);
  EXPECT_FALSE(good.stale);
  api.set("/v3/carbon-intensity/latest", {503, "unavailable"});
  auto r = p.current("DE", kNow + std::chrono::minutes{10});
  EXPECT_TRUE(r.stale);
  EXPECT_DOUBLE_EQ(r.gco2_per_kwh, 302);
  EXPECT_NE(r.source.find("stale"), std::string::npos);
  EXPECT_NE(r.source.find("HTTP 503"), std::string::npos);
  // Older than the fallback limit: the error comes through.
  EXPECT_EQ(kind_of([&] { p.current("DE", kNow + Hours{2}); }), Kind::kHttp);
  // A zone never seen: the error comes through.
  EXPECT_EQ(kind_of([&] { p.current("FR", kNow); }), Kind::kHttp);
}

}  // namespace
}  // namespace carbon
