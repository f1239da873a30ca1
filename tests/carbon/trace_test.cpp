#include "carbon/error.h"
#include "carbon/trace.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <fstream>

namespace carbon {
namespace {

TraceOptions options() {
  TraceOptions o;
  o.seed = 42;
  o.from = parse_time("2023-03-06T00:00Z");
  o.to = parse_time("2023-04-03T00:00Z");
  o.regions = {"GB", "DE", "CA-ON"};
  o.jobs_per_workday = 10;
  return o;
}

TEST(Trace, GeneratorFollowsTheDocumentedRules) {
  auto jobs = generate_trace(options());
  ASSERT_GT(jobs.size(), 100u);
  for (const auto& j : jobs) {
    int wd = weekday(j.submit);
    EXPECT_TRUE(wd >= 1 && wd <= 5) << j.id;
    EXPECT_GE(hour_of_day(j.submit), 9);
    EXPECT_LT(hour_of_day(j.submit), 17);
    EXPECT_GE(j.duration, Hours{4});
    EXPECT_LE(j.duration, Hours{90});
    Time ef = j.submit + j.duration;
    EXPECT_GT(j.deadline, ef);
    EXPECT_EQ(hour_of_day(j.deadline), 9);
    EXPECT_TRUE(j.deadline == next_workday_9am_after(ef) || j.deadline == next_semi_weekly_9am_after(ef)) << j.id;
  }
  EXPECT_TRUE(std::is_sorted(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.submit < b.submit; }));
}

TEST(Trace, SameSeedSameTraceOtherSeedOtherTrace) {
  auto a = generate_trace(options());
  auto b = generate_trace(options());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].submit, b[i].submit);
    EXPECT_EQ(a[i].gpus, b[i].gpus);
    EXPECT_EQ(a[i].home_region, b[i].home_region);
  }
  auto o = options();
  o.seed = 43;
  auto c = generate_trace(o);
  bool differ = c.size() != a.size();
  for (size_t i = 0; !differ && i < a.size(); ++i) differ = a[i].submit != c[i].submit;
  EXPECT_TRUE(differ);
}

TEST(Trace, DeadlineHelpers) {
  // Friday 2023-03-10 18:00 -> next workday Monday 09:00; semi-weekly Monday 09:00.
  Time fri = parse_time("2023-03-10T18:00Z");
  EXPECT_EQ(next_workday_9am_after(fri), parse_time("2023-03-13T09:00Z"));
  EXPECT_EQ(next_semi_weekly_9am_after(fri), parse_time("2023-03-13T09:00Z"));
  // Monday 08:00 -> next workday Tuesday 09:00; semi-weekly the same Monday 09:00.
  Time mon = parse_time("2023-03-13T08:00Z");
  EXPECT_EQ(next_workday_9am_after(mon), parse_time("2023-03-14T09:00Z"));
  EXPECT_EQ(next_semi_weekly_9am_after(mon), parse_time("2023-03-13T09:00Z"));
  EXPECT_EQ(next_semi_weekly_9am_after(parse_time("2023-03-13T10:00Z")), parse_time("2023-03-16T09:00Z"));
}

TEST(Trace, CsvRoundTrip) {
  gstest::TempDir dir;
  auto jobs = generate_trace(options());
  jobs[0].allowed_regions = {"GB", "DE"};
  jobs[1].deadline = Time::max();
  write_trace_csv(dir.file("t.csv"), jobs);
  auto back = read_trace_csv(dir.file("t.csv"));
  ASSERT_EQ(back.size(), jobs.size());
  EXPECT_EQ(back[0].allowed_regions, jobs[0].allowed_regions);
  EXPECT_EQ(back[1].deadline, Time::max());
  EXPECT_EQ(back[5].duration, jobs[5].duration);
  EXPECT_EQ(back[5].interruptible, jobs[5].interruptible);
}

TEST(Trace, ElasticColumnsRoundTripAndStayOutOfPlainTraces) {
  gstest::TempDir dir;
  auto jobs = generate_trace(options());
  write_trace_csv(dir.file("plain.csv"), jobs);
  std::ifstream plain(dir.file("plain.csv"));
  std::string header;
  std::getline(plain, header);
  EXPECT_EQ(header, "id,submit,duration_h,gpus,deadline,home_region,interruptible,allowed_regions");
  jobs[2].min_gpus = 1;
  jobs[2].max_gpus = jobs[2].gpus * 2;
  jobs[3].migratable = true;
  write_trace_csv(dir.file("t.csv"), jobs);
  auto back = read_trace_csv(dir.file("t.csv"));
  ASSERT_EQ(back.size(), jobs.size());
  EXPECT_EQ(back[2].min_gpus, 1);
  EXPECT_EQ(back[2].max_gpus, jobs[2].gpus * 2);
  EXPECT_FALSE(back[2].migratable);
  EXPECT_TRUE(back[3].migratable);
  EXPECT_EQ(back[3].min_width(), jobs[3].gpus);
  EXPECT_FALSE(back[4].elastic());
}

TEST(Trace, MakeElasticGoesFromHalfToTwiceInWholeSteps) {
  Job a, b;
  a.gpus = 8;
  b.gpus = 32;
  make_elastic(a, 8);
  make_elastic(b, 8);
  EXPECT_EQ(a.min_width(), 8);   // half of one server rounds up to one server
  EXPECT_EQ(a.max_width(), 16);
  EXPECT_EQ(b.min_width(), 16);
  EXPECT_EQ(b.max_width(), 64);
  EXPECT_EQ(b.width_step, 8);
  EXPECT_DOUBLE_EQ(b.speed(64), 1.85);
  EXPECT_DOUBLE_EQ(b.speed(16), 0.54);
  EXPECT_EQ(scaling_problem(a.scaling), "");
}

TEST(Trace, BadCsvNamesLineAndColumn) {
  const std::string e = "id,submit,duration_h,gpus,deadline,home_region,interruptible,allowed_regions,min_gpus,max_gpus,migratable\n";
  const std::string h = "id,submit,duration_h,gpus,deadline,home_region,interruptible\n";
  struct Case {
    std::string text, where, what;
  } cases[] = {
      {"id,submit\n", "t.csv:1:", "missing column 'duration_h'"},
      {h + "a,2023-01-02T10:00Z,5,8,2023-01-04T09:00Z,GB,maybe\n", "t.csv:2:7:", "interruptible must be"},
      {h + "a,soon,5,8,2023-01-04T09:00Z,GB,true\n", "t.csv:2:2:", "unparseable timestamp"},
      {h + "a,2023-01-02T10:00Z,-5,8,2023-01-04T09:00Z,GB,true\n", "t.csv:2:3:", "duration_h"},
      {h + "a,2023-01-02T10:00Z,5,2.5,2023-01-04T09:00Z,GB,true\n", "t.csv:2:4:", "gpus"},
      {h + "a,2023-01-02T10:00Z,5,8,2023-01-01T09:00Z,GB,true\n", "t.csv:2:5:", "not after submit"},
      {h + "a,2023-01-02T10:00Z,5,8,,GB,true\na,2023-01-02T10:00Z,5,8,,GB,true\n", "t.csv:3:1:", "duplicate id"},
      {e + "a,2023-01-02T10:00Z,5,8,,GB,true,,12,16,false\n", "t.csv:2:9:", "min_gpus 12 is above gpus 8"},
      {e + "a,2023-01-02T10:00Z,5,8,,GB,true,,4,6,false\n", "t.csv:2:10:", "max_gpus 6 is below gpus 8"},
      {e + "a,2023-01-02T10:00Z,5,8,,GB,true,,0.5,16,false\n", "t.csv:2:9:", "min_gpus must be an integer >= 1"},
      {e + "a,2023-01-02T10:00Z,5,8,,GB,true,,4,16,often\n", "t.csv:2:11:", "migratable must be true or false"},
  };
  for (const auto& c : cases) {
    try {
      parse_trace_csv(c.text, "t.csv");
      ADD_FAILURE() << "no error for " << c.text;
    } catch (const InputError& e) {
      std::string w = e.what();
      EXPECT_EQ(w.rfind(c.where, 0), 0u) << w;
      EXPECT_NE(w.find(c.what), std::string::npos) << w;
    }
  }
}

}  // namespace
}  // namespace carbon
