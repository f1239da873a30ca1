// greenshard-sim as a process on a --data folder of 30-minute files: both
// engines run and plan 30-minute windows (the jobs CSV shows them), and a
// file with a row off its grid stops it naming the file and the line.
#include <gtest/gtest.h>

#include <carbon/time.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/spawn.h"
#include "half_hourly_data.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, ',');) out.push_back(f);
  return out;
}

TEST(SimCli, RunsOnThirtyMinuteDataWithBothEnginesAndPlansHalfHourWindows) {
  gstest::TempDir dir;
  const std::string data = gstest::write_half_hourly_data(dir.file("data"), {"GB", "DE", "CA-ON"}, 60, 0.3);
  const std::string jobs = dir.file("jobs.csv");
  auto r = gstest::run_process({SIM_BIN, "--data", data, "--capacity", "256", "--jobs-per-workday", "4", "--from",
                                "2023-01-09", "--to", "2023-01-17", "--policies",
                                "fifo,temporal,spatio-temporal", "--engine", "both", "--jobs-csv", jobs},
                               {}, std::chrono::seconds{240});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 zones: GB (30-minute), DE (30-minute), CA-ON (30-minute)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("spatio-temporal@service"), std::string::npos) << r.output;

  const std::string csv = read(jobs);
  std::stringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  ASSERT_EQ(line, "policy,job,region,start,end,windows,grams,expected_grams,delay_h,deadline_missed,fallback");
  std::map<std::string, int> rows, half_past;
  while (std::getline(lines, line)) {
    auto f = fields(line);
    ASSERT_EQ(f.size(), 11u) << line;
    carbon::Time start;
    ASSERT_TRUE(carbon::parse_time(f[3], &start)) << line;
    // Every run starts on the 30-minute grid ("...:00:00Z" or "...:30:00Z").
    EXPECT_EQ(carbon::floor_to_step(start, std::chrono::minutes{30}), start) << line;
    rows[f[0]]++;
    half_past[f[0]] += f[3].substr(13) == ":30:00Z" ? 1 : 0;
  }
  for (const char* p : {"fifo", "temporal", "spatio-temporal", "fifo@service", "temporal@service",
                        "spatio-temporal@service"}) {
    SCOPED_TRACE(p);
    EXPECT_GT(rows[p], 5);
    EXPECT_EQ(rows[p], rows["fifo"]);
    EXPECT_GT(half_past[p], 0) << "windows starting at half past";
  }
}

TEST(SimCli, AThirtyMinuteFileWithARowOffItsGridIsNamedWithItsLine) {
  gstest::TempDir dir;
  const std::string data = gstest::write_half_hourly_data(dir.file("data"), {"GB", "DE"}, 3, 0.0);
  // Line 6 (the header is line 1): 02:00 becomes 02:10.
  std::string text = read(data + "/2023/DE.csv");
  const auto at = text.find("2023-01-01T02:00:00Z");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 20, "2023-01-01T02:10:00Z");
  std::ofstream(data + "/2023/DE.csv") << text;
  auto r = gstest::run_process({SIM_BIN, "--data", data, "--jobs-per-workday", "1", "--from", "2023-01-02", "--to",
                                "2023-01-03"},
                               {}, std::chrono::seconds{60});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(data + "/2023/DE.csv:6:1: timestamp 2023-01-01T02:10:00Z not on the 30-minute grid"),
            std::string::npos)
      << r.output;
}

}  // namespace
