// The built-in status page (controller/api/status_page.h) on a real controller on
// loopback: served at / without a token and self-contained; then loaded in
// Debian's headless Chromium, which must show a submitted job's row and one
// intensity chart per region with the placed windows shaded, show a refused
// token as an error, and render a screenshot into the test output folder.
// Chromium is required: without it these tests fail (CI installs it).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "fixture.h"

using namespace controller;
using namespace ctltest;
using json = nlohmann::json;

#ifndef GREENSHARD_TEST_OUTPUT_DIR
#error "GREENSHARD_TEST_OUTPUT_DIR must be defined (tests/controller/CMakeLists.txt)"
#endif

namespace {

// Rank 0 stays up until the executor stops it, so the job stays RUNNING.
const char* kLongWorker = "#!/bin/sh\ntrap 'exit 0' TERM\nwhile :; do sleep 0.2; done\n";

// 2025-12-02 00:00 UTC is the fixture's "now": DE is dirty for two hours,
// then clean for two; FR is cleaner and varies through the day.
const char* kRegions =
    "regions:\n"
    "  - {name: DE, nodes: 2, pue: 1.2, hourly: [500, 480, 40, 30, 420, 450, 470, 480, 490, 500, 510, 520,"
    " 530, 520, 500, 480, 460, 440, 420, 400, 380, 360, 340, 320]}\n"
    "  - {name: FR, nodes: 1, hourly: [80, 75, 70, 65, 60, 55, 50, 55, 60, 70, 80, 90, 100, 95, 90, 85, 80,"
    " 75, 70, 65, 60, 70, 80, 90]}\n";

Options page_options() {
  Options o;
  o.worker_script = kLongWorker;
  o.regions_yaml = kRegions;
  return o;
}

std::string submit(const Controller& c, const json& s) {
  auto r = c.client(kUserA).Post("/v1/jobs", s.dump(), "application/json");
  EXPECT_TRUE(r) << "POST /v1/jobs failed";
  if (!r) return "";
  EXPECT_EQ(r->status, 201) << r->body;
  return json::parse(r->body, nullptr, false).value("id", "");
}

// The first executable named `chromium` (Debian's package) or
// `chromium-browser` on PATH; "" when there is none.
std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      std::string p = (dir.empty() ? "." : dir) + "/" + name;
      if (::access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Live (not zombie) processes whose command line mentions `needle` (our
// private temp dir), as "pid pgrp state: cmdline".
std::vector<std::pair<int, std::string>> processes_mentioning(const std::string& needle) {
  std::vector<std::pair<int, std::string>> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = read_file(e.path().string() + "/cmdline");
    if (cmd.find(needle) == std::string::npos) continue;
    // /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces.
    std::string stat = read_file(e.path().string() + "/stat");
    auto close = stat.rfind(')');
    std::istringstream fields(close == std::string::npos ? "" : stat.substr(close + 1));
    std::string state;
    int ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (state.empty() || state == "Z" || state == "X") continue;
    for (auto& ch : cmd)
      if (ch == '\0') ch = ' ';
    out.push_back({std::stoi(name), name + " pgrp " + std::to_string(pgrp) + " " + state + ": " + cmd.substr(0, 300)});
  }
  return out;
}

struct Browser {
  int exit_code = -1;
  bool timed_out = false;
  std::string out;  // stdout: the DOM for --dump-dom
  std::string err;  // stderr: Chromium's own log
};

// Runs headless Chromium once on `url` with a private profile under `dir`,
// in its own process group (gstest::run_process kills the whole group when
// it returns); then checks that none of its processes outlived it.
Browser run_chromium(const gstest::TempDir& dir, const std::vector<std::string>& extra, const std::string& url) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    ADD_FAILURE() << "Debian's `chromium` is not installed (not on PATH): the status page test needs it. "
                     "Install it: apt-get install --no-install-recommends chromium (scripts/setup.sh).";
    return {};
  }
  const std::string profile = dir.file("chromium-profile");
  std::filesystem::create_directories(profile);
  // sh execs Chromium (same process, same group) with stderr to its own file.
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$@\" 2>\"$GS_CHROMIUM_ERR\"", "sh", chromium,
                                   "--headless=new", "--no-sandbox", "--disable-gpu",
                                   "--disable-dev-shm-usage", "--no-first-run", "--user-data-dir=" + profile,
                                   "--virtual-time-budget=8000"};
  for (const auto& e : extra) argv.push_back(e);
  argv.push_back(url);
  std::map<std::string, std::string> env = {{"HOME", dir.path()},
                                            {"XDG_CONFIG_HOME", dir.file("config")},
                                            {"XDG_CACHE_HOME", dir.file("cache")},
                                            {"GS_CHROMIUM_ERR", dir.file("chromium.err")}};
  auto r = gstest::run_process(argv, env, std::chrono::seconds(120));
  Browser b;
  b.exit_code = r.exit_code;
  b.timed_out = r.timed_out;
  b.out = r.output;
  b.err = read_file(dir.file("chromium.err"));
  // Nothing of this Chromium may be left running. The group was SIGKILLed;
  // give the kernel a bounded number of polls to finish those deaths, then
  // kill and report whatever still runs (a helper that left the group).
  // Chromium's crashpad handlers start their own sessions (outside the
  // group) and end when the browser does; they name dir's config folder, so
  // look for anything under dir.
  auto left = processes_mentioning(dir.path());
  for (int i = 0; i < 250 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = processes_mentioning(dir.path());
  }
  std::string which;
  for (const auto& [pid, what] : left) {
    ::kill(pid, SIGKILL);
    which += "\n  " + what;
  }
  EXPECT_TRUE(left.empty()) << left.size() << " Chromium process(es) outlived the run:" << which;
  return b;
}

// The outer HTML of the element that starts at `open_tag`'s first match and
// ends at the first following `close`.
std::string element(const std::string& dom, const std::string& open_tag, const std::string& close) {
  auto a = dom.find(open_tag);
  if (a == std::string::npos) return "";
  auto b = dom.find(close, a);
  return b == std::string::npos ? dom.substr(a) : dom.substr(a, b + close.size() - a);
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

std::string url(const Controller& c, const std::string& token) {
  return "http://127.0.0.1:" + std::to_string(c.port) + "/#token=" + token;
}

}  // namespace

TEST(StatusPage, IsServedWithoutATokenAndReferencesNothingExternal) {
  Controller c;
  auto r = c.client().Get("/");  // no Authorization header
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type").rfind("text/html", 0), 0u) << r->get_header_value("Content-Type");
  const std::string& html = r->body;
  EXPECT_NE(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("/v1/jobs"), std::string::npos);
  EXPECT_NE(html.find("/v1/regions"), std::string::npos);
  EXPECT_NE(html.find("'Bearer '"), std::string::npos);
  EXPECT_NE(html.find("sessionStorage"), std::string::npos);
  EXPECT_NE(html.find("data-job-id"), std::string::npos);
  // Self-contained: no address anywhere, nothing loaded by src=/href=/url()/@import
  // except inline data.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("//cdn"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  static const std::regex ref(R"re(\b(src|href)\s*=\s*["']?([^"' >]*))re", std::regex::icase);
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it)
    EXPECT_EQ((*it)[2].str().rfind("data:", 0), 0u) << "external reference: " << (*it)[0].str();
  // The browser is told the same.
  const std::string csp = r->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  // A token is not needed, and a wrong one does not matter for the page itself.
  auto w = c.client("not-a-token").Get("/");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->status, 200);
  EXPECT_EQ(w->body, html);
  // The API behind it still wants a token.
  auto api = c.client().Get("/v1/jobs");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 401);
}

TEST(StatusPage, HeadlessChromiumShowsTheSubmittedJobsAndAChartPerRegion) {
  Controller c(page_options());
  // A job that runs now (FR is cleaner now) and reports progress, and a
  // delay-tolerant one that waits for DE's clean hours.
  json now_spec = spec("train-now");
  now_spec["procs_per_node"] = 1;
  now_spec["estimate"] = {{"duration_s", 3 * 3600}, {"power_watts", 300}};
  const std::string running = submit(c, now_spec);
  json later_spec = spec("train-later");
  later_spec["regions"] = {"DE"};
  later_spec["procs_per_node"] = 1;
  later_spec["max_delay_s"] = 6 * 3600;
  later_spec["estimate"] = {{"duration_s", 2 * 3600}, {"power_watts", 300}};
  const std::string later = submit(c, later_spec);
  ASSERT_FALSE(running.empty());
  ASSERT_FALSE(later.empty());
  ASSERT_TRUE(c.cycle_until([&] {
    return c.state(running) == JobState::kRunning && c.state(later) == JobState::kScheduled;
  })) << to_string(c.state(running)) << " " << to_string(c.state(later));
  ASSERT_EQ(c.registry->get(running)->placement->region, "FR");
  ASSERT_EQ(c.registry->get(later)->placement->region, "DE");
  ASSERT_GT(c.registry->get(later)->placement->start_ms, c.clock.now_ms());

  // The job's own worker token: the only one that may push its status.
  auto push = c.client(c.registry->get(running)->worker_token).Post(
      "/v1/jobs/" + running + "/status",
      R"({"state":"running","step":2,"total_steps":5,"loss":3.1,"tokens_per_s":512,"operational_grams":0.8,"embodied_grams":0.2})",
      "application/json");
  ASSERT_TRUE(push);
  ASSERT_EQ(push->status, 200) << push->body;

  auto regions = json::parse(c.client(kUserA).Get("/v1/regions")->body);
  ASSERT_EQ(regions["items"].size(), 2u);

  gstest::TempDir tmp;
  Browser b = run_chromium(tmp, {"--dump-dom"}, url(c, kUserA));
  ASSERT_FALSE(b.timed_out) << b.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string& dom = b.out;
  ASSERT_NE(dom.find("data-status=\"ok\""), std::string::npos) << dom << "\n--- stderr:\n" << b.err;

  // The running job's row: state, progress, loss, tokens/s, grams, region, saving.
  const std::string row = element(dom, "<tr data-job-id=\"" + running + "\"", "</tr>");
  ASSERT_FALSE(row.empty()) << dom;
  EXPECT_NE(row.find(">RUNNING<"), std::string::npos) << row;
  EXPECT_NE(row.find(">train-now<"), std::string::npos) << row;
  EXPECT_NE(row.find("40% \xC2\xB7 step 2/5"), std::string::npos) << row;
  EXPECT_NE(row.find(">3.100<"), std::string::npos) << row;
  EXPECT_NE(row.find(">512<"), std::string::npos) << row;
  EXPECT_NE(row.find(">1.00 g (0.80 + 0.20)<"), std::string::npos) << row;
  EXPECT_NE(row.find(">FR<"), std::string::npos) << row;
  // The waiting job's row, with a positive saving (it waits for clean hours).
  const std::string row2 = element(dom, "<tr data-job-id=\"" + later + "\"", "</tr>");
  ASSERT_FALSE(row2.empty()) << dom;
  EXPECT_NE(row2.find(">SCHEDULED<"), std::string::npos) << row2;
  EXPECT_NE(row2.find(">DE<"), std::string::npos) << row2;
  static const std::regex positive_saving(R"re(data-field="saving"[^>]*>[1-9][0-9]*\.[0-9]{2} g \([1-9][0-9]*%\)<)re");
  EXPECT_TRUE(std::regex_search(row2, positive_saving)) << row2;

  // One forecast chart per region, each with its forecast line; the placed
  // jobs' windows shaded in their region's chart only.
  EXPECT_EQ(count(dom, "class=\"forecast\""), regions["items"].size()) << dom;
  for (const auto& r : regions["items"]) {
    const std::string name = r["name"];
    const std::string fig = element(dom, "<figure class=\"region\" data-region=\"" + name + "\"", "</figure>");
    ASSERT_FALSE(fig.empty()) << name << "\n" << dom;
    EXPECT_TRUE(std::regex_search(fig, std::regex("<svg[^>]*class=\"forecast\"[^>]*data-region=\"" + name + "\"")))
        << fig;
    EXPECT_TRUE(std::regex_search(fig, std::regex("<path class=\"line\" d=\"M[0-9.]+ [0-9.]+( H[0-9.]+ V[0-9.]+)+")))
        << fig;
    const std::string mine = name == "FR" ? running : later, other = name == "FR" ? later : running;
    EXPECT_NE(fig.find("data-window-job=\"" + mine + "\""), std::string::npos) << fig;
    EXPECT_EQ(fig.find("data-window-job=\"" + other + "\""), std::string::npos) << fig;
  }
  // No error shown.
  EXPECT_TRUE(std::regex_search(dom, std::regex("<div id=\"error\" role=\"alert\" hidden=\"\">\\s*</div>"))) << dom;
  // The token was taken from the fragment: the form to enter one is hidden.
  const std::string form = element(dom, "<form id=\"token-form\"", ">");
  ASSERT_FALSE(form.empty()) << dom;
  EXPECT_NE(form.find("hidden"), std::string::npos) << form;

  // A screenshot into the test output folder.
  const std::string out_dir = GREENSHARD_TEST_OUTPUT_DIR;
  std::filesystem::create_directories(out_dir);
  const std::string png = out_dir + "/status_page.png";
  std::filesystem::remove(png);
  gstest::TempDir tmp2;
  Browser s = run_chromium(tmp2, {"--screenshot=" + png, "--window-size=1280,900", "--hide-scrollbars"},
                           url(c, kUserA));
  ASSERT_FALSE(s.timed_out) << s.err;
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  ASSERT_TRUE(std::filesystem::exists(png)) << s.out << s.err;
  const std::string bytes = read_file(png);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(bytes.size(), 5u * 1024) << png;
}

TEST(StatusPage, HeadlessChromiumShowsARefusedTokenAsAnError) {
  Controller c(page_options());
  const std::string id = submit(c, spec("hidden"));
  ASSERT_FALSE(id.empty());
  gstest::TempDir tmp;
  Browser b = run_chromium(tmp, {"--dump-dom"}, url(c, "no-such-token-0000000"));
  ASSERT_FALSE(b.timed_out) << b.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string& dom = b.out;
  EXPECT_NE(dom.find("data-status=\"error\""), std::string::npos) << dom;
  const std::string err = element(dom, "<div id=\"error\"", "</div>");
  EXPECT_NE(err.find("HTTP 401"), std::string::npos) << err;
  EXPECT_EQ(err.find("hidden"), std::string::npos) << err;  // visible
  EXPECT_EQ(dom.find("data-job-id=\"" + id + "\""), std::string::npos) << dom;
  // The form to enter another token is shown.
  const std::string form = element(dom, "<form id=\"token-form\"", ">");
  ASSERT_FALSE(form.empty()) << dom;
  EXPECT_EQ(form.find("hidden"), std::string::npos) << form;
}
