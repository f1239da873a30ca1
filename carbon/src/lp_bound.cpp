#include "carbon/lp_bound.h"

#include "carbon/accounting.h"
#include "carbon/error.h"

#include <glpk.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <thread>
#include <utility>

namespace carbon {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

long long unix_hour(Time t) { return to_unix(floor_hour(t)) / 3600; }
Time hour_time(long long h) { return from_unix(h * 3600); }

// Jobs with the same utilization and usable regions: the same grams per
// GPU-hour in every region and hour.
struct Kind {
  int utilization = 0;            // index into Model::cost_by_utilization
  std::vector<int> regions;       // indices into SimConfig::regions
};

struct LpJob {
  size_t trace_index = 0;
  int kind = 0;
  // GPU-hours per hour of work, by segment of the job's rate in an hour
  // (cheapest first), and each segment's share of the hour's usable part:
  // a fixed-width job has one, {gpus, 1}; an elastic job one per edge of
  // the lower convex hull of its (speed(w), w) points and the origin.
  struct Segment {
    double gpus_per_work = 0;
    double rate = 0;              // work per hour of this segment at most
  };
  std::vector<Segment> segments;
  double min_gpus_per_work() const { return segments.front().gpus_per_work; }
  double hours = 0;               // work at full width
  long first = 0;                 // hour index (from Model::h0) of frac[0]
  std::vector<double> frac;       // f[j][t]: usable part of each hour
  long end() const { return first + static_cast<long>(frac.size()); }
};

struct Model {
  long long h0 = 0;               // unix hour of hour index 0
  long H = 0;
  std::vector<Kind> kinds;
  std::vector<LpJob> jobs;
  std::vector<double> capacity;   // per region
  std::vector<std::string> zones;
  // Grams per GPU-hour [region * H + hour] for each utilization; NaN: no data.
  std::vector<std::vector<double>> cost_by_utilization;
  double cost(int k, size_t local_r, long h) const {
    const Kind& kd = kinds[static_cast<size_t>(k)];
    const size_t r = static_cast<size_t>(kd.regions[local_r]), hours = static_cast<size_t>(H);
    return cost_by_utilization[static_cast<size_t>(kd.utilization)][r * hours + static_cast<size_t>(h)];
  }
};

const IntensitySeries& series_of(const SimConfig& c, const std::string& zone) {
  auto it = c.actual.find(zone);
  if (it == c.actual.end()) throw CarbonError("lp_bound: no intensity series for zone '" + zone + "'");
  return it->second;
}

int region_index(const SimConfig& c, const std::string& zone, const std::string& job) {
  for (size_t i = 0; i < c.regions.size(); ++i)
    if (c.regions[i].zone == zone) return static_cast<int>(i);
  throw CarbonError("lp_bound: job " + job + " names region '" + zone + "', which is not configured");
}

std::string hours_str(double h) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", h);
  return b;
}

// Builds the model; jobs infeasible alone go to `infeasible` with a reason.
// The segments of a job's GPU-hours per hour of work as its rate grows:
// the lower convex hull of the origin and (speed(w), w) for every width it
// may run at. Running a fraction of an hour at each width reaches any point
// above the hull and nothing below it, so the hull is the tightest convex
// relaxation of its widths.
//
// Between two points of the scaling curve, and beyond its ends, speed is
// linear in the width, so (speed(w), w) lies on the segment between its
// neighbours: the hull of min_width, max_width and the curve's points in
// between is the hull of every width (and a few segments, not one per
// width, keep the LP small).
std::vector<LpJob::Segment> rate_segments(const Job& j) {
  std::vector<std::pair<double, double>> pts{{0.0, 0.0}};   // (rate, GPUs)
  std::vector<int> widths{j.min_width(), j.max_width()};
  for (const auto& p : j.scaling)
    if (p.gpus > j.min_width() && p.gpus < j.max_width()) widths.push_back(p.gpus);
  std::sort(widths.begin(), widths.end());
  widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
  for (int w : widths) {
    const double r = j.speed(w);
    if (r > pts.back().first + 1e-12) {
      while (pts.size() >= 2) {
        const auto& a = pts[pts.size() - 2];
        const auto& b = pts.back();
        // b lies on or above the chord from a to (r, w): not on the lower hull.
        if ((b.second - a.second) * (r - a.first) >= (w - a.second) * (b.first - a.first)) pts.pop_back();
        else break;
      }
      pts.emplace_back(r, w);
    }
  }
  std::vector<LpJob::Segment> out;
  for (size_t i = 1; i < pts.size(); ++i)
    out.push_back({(pts[i].second - pts[i - 1].second) / (pts[i].first - pts[i - 1].first), pts[i].first - pts[i - 1].first});
  return out;
}

Model build(const std::vector<Job>& trace, const SimConfig& c, std::vector<std::string>& infeasible_ids,
            std::vector<std::string>& reasons) {
  if (c.regions.empty()) throw CarbonError("lp_bound: no regions");
  Model m;
  for (const auto& r : c.regions) {
    if (r.capacity < 0 || !(r.pue >= 1))
      throw CarbonError("lp_bound: region " + r.zone + " needs capacity >= 0 and PUE >= 1");
    series_of(c, r.zone);
    m.capacity.push_back(r.capacity);
    m.zones.push_back(r.zone);
  }
  if (trace.empty()) return m;

  // Usable regions and window of every job; the horizon.
  struct Pre {
    std::vector<int> regions;
    Time from, to;
  };
  std::vector<Pre> pre(trace.size());
  long long lo = std::numeric_limits<long long>::max(), hi = std::numeric_limits<long long>::min();
  for (size_t i = 0; i < trace.size(); ++i) {
    const Job& j = trace[i];
    if (j.gpus < 1) throw CarbonError("lp_bound: job " + j.id + " needs gpus >= 1");
    if (j.duration.count() <= 0) throw CarbonError("lp_bound: job " + j.id + " needs a duration > 0");
    region_index(c, j.home_region, j.id);
    std::vector<int> allowed;
    if (j.allowed_regions.empty()) {
      allowed.resize(c.regions.size());
      std::iota(allowed.begin(), allowed.end(), 0);
    } else {
      for (const auto& z : j.allowed_regions) allowed.push_back(region_index(c, z, j.id));
      std::sort(allowed.begin(), allowed.end());
      allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    }
    Pre& p = pre[i];
    Time data_end{};
    for (int r : allowed)
      if (c.regions[r].capacity >= j.min_width()) {
        p.regions.push_back(r);
        data_end = std::max(data_end, series_of(c, c.regions[r].zone).end());
      }
    p.from = j.submit;
    p.to = std::min(j.deadline, data_end);
    if (p.regions.empty() || p.to <= p.from) continue;
    lo = std::min(lo, unix_hour(p.from));
    hi = std::max(hi, unix_hour(p.to - Seconds{1}) + 1);
  }
  if (lo > hi) lo = hi = 0;
  m.h0 = lo;
  m.H = static_cast<long>(hi - lo);

  std::map<double, int> utilization_of;
  auto utilization_index = [&](double u) {
    auto [it, fresh] = utilization_of.try_emplace(u, static_cast<int>(m.cost_by_utilization.size()));
    if (!fresh) return it->second;
    const size_t H = static_cast<size_t>(m.H);
    std::vector<double> cost(c.regions.size() * H, kNaN);
    for (size_t r = 0; r < c.regions.size(); ++r) {
      const SimRegion& reg = c.regions[r];
      const IntensitySeries& s = series_of(c, reg.zone);
      // Grams of one GPU-hour, by the simulator's own accounting.
      double watts = reg.hardware.power_w(1.0, u);
      double embodied = embodied_grams(reg.hardware, Hours{1}, 1.0);
      for (size_t h = 0; h < H; ++h) {
        Time t = hour_time(m.h0 + static_cast<long long>(h));
        if (s.covers(t, t + Hours{1}))
          cost[r * H + h] = operational_grams(s, t, t + Hours{1}, watts, reg.pue) + embodied;
      }
    }
    m.cost_by_utilization.push_back(std::move(cost));
    return it->second;
  };
  std::map<std::pair<double, std::vector<int>>, int> kind_of;
  for (size_t i = 0; i < trace.size(); ++i) {
    const Job& j = trace[i];
    const Pre& p = pre[i];
    double need = static_cast<double>(j.duration.count()) / 3600.0;
    if (p.regions.empty()) {
      infeasible_ids.push_back(j.id);
      reasons.push_back("job " + j.id + " needs " + std::to_string(j.gpus) +
                        " GPUs at once, more than any of its allowed regions has");
      continue;
    }
    auto key = std::make_pair(j.utilization, p.regions);
    auto [it, fresh] = kind_of.try_emplace(key, static_cast<int>(m.kinds.size()));
    if (fresh) m.kinds.push_back({utilization_index(j.utilization), p.regions});
    LpJob lj;
    lj.trace_index = i;
    lj.kind = it->second;
    lj.segments = rate_segments(j);
    double rate = 0;
    for (const auto& sg : lj.segments) rate += sg.rate;
    lj.hours = need;
    double have = 0;
    if (p.to > p.from) {
      lj.first = static_cast<long>(unix_hour(p.from) - m.h0);
      long last = static_cast<long>(unix_hour(p.to - Seconds{1}) - m.h0);
      const Kind& k = m.kinds[lj.kind];
      for (long h = lj.first; h <= last; ++h) {
        Time t = hour_time(m.h0 + h);
        double f = static_cast<double>((std::min(p.to, t + Hours{1}) - std::max(p.from, t)).count()) / 3600.0;
        bool data = false;
        for (size_t lr = 0; lr < k.regions.size() && !data; ++lr) data = !std::isnan(m.cost(lj.kind, lr, h));
        lj.frac.push_back(data ? f : 0.0);
        have += data ? f * rate : 0.0;
      }
    }
    if (have < need - 1e-9) {
      infeasible_ids.push_back(j.id);
      reasons.push_back("job " + j.id + " needs " + hours_str(need) + " h between its submit " + format_time(j.submit) +
                        " and its deadline " + (j.deadline == Time::max() ? "(none)" : format_time(j.deadline)) +
                        " but only " + hours_str(have) +
                        " h lie there (in allowed regions with its GPUs of capacity and recorded intensity)");
      continue;
    }
    m.jobs.push_back(std::move(lj));
  }
  return m;
}

// A hint for an infeasible LP: a time interval whose jobs (windows inside
// it) need more GPU-hours than all their usable regions offer there.
std::string overload_hint(const Model& m, const std::vector<int>& ids, const std::vector<Job>& trace) {
  if (ids.size() > 400) return "";
  std::vector<long> starts, ends;
  for (int i : ids) {
    starts.push_back(m.jobs[i].first);
    ends.push_back(m.jobs[i].end());
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  for (long a : starts)
    for (long b : ends) {
      if (b <= a) continue;
      double need = 0;
      std::vector<bool> usable(m.capacity.size(), false);
      std::vector<int> inside;
      for (int i : ids) {
        const LpJob& j = m.jobs[i];
        if (j.first < a || j.end() > b) continue;
        need += j.min_gpus_per_work() * j.hours;
        inside.push_back(i);
        for (int r : m.kinds[j.kind].regions) usable[r] = true;
      }
      double offer = 0;
      for (size_t r = 0; r < usable.size(); ++r)
        if (usable[r]) offer += m.capacity[r] * static_cast<double>(b - a);
      if (need > offer * (1 + 1e-9)) {
        std::string s = "; e.g. within " + format_time(hour_time(m.h0 + a)) + " .. " +
                        format_time(hour_time(m.h0 + b)) + " jobs ";
        for (size_t k = 0; k < inside.size() && k < 8; ++k)
          s += (k ? ", " : "") + trace[m.jobs[inside[k]].trace_index].id;
        if (inside.size() > 8) s += ", ...";
        return s + " need " + hours_str(need) + " GPU-hours, their regions offer " + hours_str(offer);
      }
    }
  return "";
}

struct ProbDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

struct Solution {
  double objective = 0;
  long lo = 0, n = 0;                 // hours [lo, lo + n) of the model
  std::vector<double> lambda;         // [region * n + (h - lo)], >= 0
  int rows = 0, cols = 0;
  bool fallback = false;              // interior point failed, simplex used
  double seconds = 0;
};

constexpr size_t kGroupSize = 10;     // jobs per partial-sum row (interior point)

// The time budget ran out before or while an LP was solved.
struct BudgetOut : CarbonError {
  using CarbonError::CarbonError;
};

// Solves the LP of jobs `ids` (indices into m.jobs) over their windows with
// `solver`; an interior point failure is re-solved with glp_simplex (which
// also tells an infeasible LP apart).
Solution solve(const Model& m, const std::vector<int>& ids, const std::vector<Job>& trace, const LpBoundOptions& o,
               LpSolver solver, SteadyClock::time_point deadline) {
  Solution sol;
  sol.lo = std::numeric_limits<long>::max();
  long hi = 0;
  for (int i : ids) {
    sol.lo = std::min(sol.lo, m.jobs[i].first);
    hi = std::max(hi, m.jobs[i].end());
  }
  sol.n = hi - sol.lo;
  const size_t R = m.capacity.size(), K = m.kinds.size(), n = static_cast<size_t>(sol.n);
  const bool ipm = solver == LpSolver::kInterior;
  const std::string what = std::to_string(ids.size()) + " jobs with windows in " +
                           format_time(hour_time(m.h0 + sol.lo)) + " .. " + format_time(hour_time(m.h0 + hi));
  double left_s = std::chrono::duration<double>(deadline - SteadyClock::now()).count();
  if (left_s <= 0)
    throw BudgetOut("lp_bound: the time limit of " + hours_str(o.time_limit_s) + " s ran out before the LP of the " +
                    what + "; raise LpBoundOptions::time_limit_s");

  // Which kinds run in which hours; how many kinds share a region-hour.
  std::vector<char> active(K * n, 0);
  for (int i : ids) {
    const LpJob& j = m.jobs[i];
    for (size_t t = 0; t < j.frac.size(); ++t)
      if (j.frac[t] > 0) active[j.kind * n + (j.first + t - sol.lo)] = 1;
  }
  std::vector<int> sharing(R * n, 0);
  for (size_t k = 0; k < K; ++k)
    for (size_t h = 0; h < n; ++h)
      if (active[k * n + h])
        for (size_t lr = 0; lr < m.kinds[k].regions.size(); ++lr)
          if (!std::isnan(m.cost(static_cast<int>(k), lr, sol.lo + static_cast<long>(h))))
            ++sharing[m.kinds[k].regions[lr] * n + h];

  std::unique_ptr<glp_prob, ProbDeleter> P(glp_create_prob());
  glp_prob* lp = P.get();
  glp_set_obj_dir(lp, GLP_MIN);
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  auto entry = [&](int row, int col, double v) {
    ia.push_back(row);
    ja.push_back(col);
    ar.push_back(v);
  };
  // Rows: work per job; balance per active kind-hour (sum of the kind's
  // GPU-hours = sum over regions); capacity per region-hour shared by kinds
  // (otherwise a bound on the one z column).
  int job_row0 = glp_add_rows(lp, static_cast<int>(ids.size()));
  for (size_t a = 0; a < ids.size(); ++a) {
    double w = m.jobs[ids[a]].hours;
    glp_set_row_bnds(lp, job_row0 + static_cast<int>(a), GLP_FX, w, w);
  }
  std::vector<int> balance_row(K * n, 0), cap_row(R * n, 0);
  for (size_t x = 0; x < K * n; ++x)
    if (active[x]) {
      balance_row[x] = glp_add_rows(lp, 1);
      glp_set_row_bnds(lp, balance_row[x], GLP_FX, 0, 0);
    }
  for (size_t x = 0; x < R * n; ++x)
    if (sharing[x] > 1) {
      cap_row[x] = glp_add_rows(lp, 1);
      glp_set_row_bnds(lp, cap_row[x], GLP_UP, 0, m.capacity[x / n]);
    }
  // y columns (x summed over regions): hours of job j in hour t, 0 <= y <= f.
  // Interior point: into a group's partial-sum row, whose sum column u
  // enters the balance row.
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const LpJob& x = m.jobs[ids[a]];
    const LpJob& y = m.jobs[ids[b]];
    return std::make_pair(x.kind, x.first) < std::make_pair(y.kind, y.first);
  });
  std::map<std::pair<size_t, size_t>, int> group_row;   // (group, kind-hour) -> row
  for (size_t oi = 0; oi < order.size(); ++oi) {
    size_t a = order[oi];
    const LpJob& j = m.jobs[ids[a]];
    for (size_t t = 0; t < j.frac.size(); ++t) {
      if (j.frac[t] <= 0) continue;
      size_t kh = j.kind * n + (j.first + t - sol.lo);
      for (const auto& sg : j.segments) {
        int col = glp_add_cols(lp, 1);
        glp_set_col_bnds(lp, col, GLP_DB, 0, j.frac[t] * sg.rate);
        entry(job_row0 + static_cast<int>(a), col, 1.0);
        if (!ipm) {
          entry(balance_row[kh], col, sg.gpus_per_work);
          continue;
        }
        auto [it, fresh] = group_row.try_emplace({oi / kGroupSize, kh}, 0);
        if (fresh) {
          it->second = glp_add_rows(lp, 1);
          glp_set_row_bnds(lp, it->second, GLP_FX, 0, 0);
          int u = glp_add_cols(lp, 1);
          glp_set_col_bnds(lp, u, GLP_LO, 0, 0);
          entry(it->second, u, -1.0);
          entry(balance_row[kh], u, 1.0);
        }
        entry(it->second, col, sg.gpus_per_work);
      }
    }
  }
  // z columns: GPU-hours of a kind in a region-hour, at its grams per GPU-hour.
  struct ZCol {
    int col;
    size_t region, hour;
  };
  std::vector<ZCol> zcols;
  for (size_t k = 0; k < K; ++k)
    for (size_t h = 0; h < n; ++h) {
      if (!active[k * n + h]) continue;
      for (size_t lr = 0; lr < m.kinds[k].regions.size(); ++lr) {
        double g = m.cost(static_cast<int>(k), lr, sol.lo + static_cast<long>(h));
        size_t r = static_cast<size_t>(m.kinds[k].regions[lr]);
        if (std::isnan(g) || m.capacity[r] <= 0) continue;
        int col = glp_add_cols(lp, 1);
        glp_set_obj_coef(lp, col, g);
        if (cap_row[r * n + h]) {
          glp_set_col_bnds(lp, col, GLP_LO, 0, 0);
          entry(cap_row[r * n + h], col, 1.0);
        } else {
          glp_set_col_bnds(lp, col, GLP_DB, 0, m.capacity[r]);
        }
        entry(balance_row[k * n + h], col, -1.0);
        zcols.push_back({col, r, h});
      }
    }
  sol.rows = glp_get_num_rows(lp);
  sol.cols = glp_get_num_cols(lp);
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  std::vector<int>().swap(ia);
  std::vector<int>().swap(ja);
  std::vector<double>().swap(ar);

  auto t0 = SteadyClock::now();
  int rc = 0;
  if (ipm) {
    glp_iptcp parm;
    glp_init_iptcp(&parm);
    parm.msg_lev = o.glpk_messages ? GLP_MSG_ALL : GLP_MSG_OFF;
    rc = glp_interior(lp, &parm);
    sol.seconds = seconds_since(t0);
    if (rc != 0 || glp_ipt_status(lp) != GLP_OPT) {
      P.reset();
      Solution s = solve(m, ids, trace, o, LpSolver::kSimplex, deadline);
      s.fallback = true;
      s.seconds += sol.seconds;
      return s;
    }
    sol.objective = glp_ipt_obj_val(lp);
  } else {
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = o.glpk_messages ? GLP_MSG_ALL : GLP_MSG_OFF;
    parm.presolve = GLP_ON;
    parm.tm_lim = static_cast<int>(std::clamp(left_s * 1000.0, 1.0, 2.0e9));
    rc = glp_simplex(lp, &parm);
    sol.seconds = seconds_since(t0);
    if (rc == GLP_ENOPFS || (rc == 0 && glp_get_status(lp) == GLP_NOFEAS))
      throw CarbonError("lp_bound: no fractional schedule of the " + what +
                        " finishes every job by its deadline within the regions' capacity" +
                        overload_hint(m, ids, trace));
    if (rc == GLP_ETMLIM)
      throw BudgetOut("lp_bound: GLPK reached the time limit of " + hours_str(o.time_limit_s) +
                        " s on the LP of the " + what + " (" + std::to_string(sol.rows) + " rows, " +
                        std::to_string(sol.cols) + " columns); raise LpBoundOptions::time_limit_s or use blocks");
    if (rc != 0 || glp_get_status(lp) != GLP_OPT)
      throw CarbonError("lp_bound: GLPK simplex failed on the LP of the " + what + " (glp_simplex returned " +
                        std::to_string(rc) + ", status " + std::to_string(glp_get_status(lp)) + ")");
    sol.objective = glp_get_obj_val(lp);
  }
  // Capacity prices: minus the dual of the capacity row, or of z's upper bound.
  auto row_dual = [&](int i) { return ipm ? glp_ipt_row_dual(lp, i) : glp_get_row_dual(lp, i); };
  auto col_dual = [&](int j) { return ipm ? glp_ipt_col_dual(lp, j) : glp_get_col_dual(lp, j); };
  sol.lambda.assign(R * n, 0.0);
  for (size_t x = 0; x < R * n; ++x)
    if (cap_row[x]) sol.lambda[x] = std::max(0.0, -row_dual(cap_row[x]));
  for (const auto& z : zcols)
    if (!cap_row[z.region * n + z.hour]) sol.lambda[z.region * n + z.hour] = std::max(0.0, -col_dual(z.col));
  return sol;
}

// Lagrangian bound at prices lambda[region * H + hour] >= 0 (weak duality):
// each job alone over its window at priced costs, minus the prices of all
// capacity.
double lagrangian(const Model& m, const std::vector<double>& lambda) {
  const size_t H = static_cast<size_t>(m.H);
  double total = 0;
  std::vector<std::pair<double, double>> hours;   // (price per job-hour, usable part)
  for (const auto& j : m.jobs) {
    const Kind& k = m.kinds[j.kind];
    hours.clear();
    for (size_t t = 0; t < j.frac.size(); ++t) {
      if (j.frac[t] <= 0) continue;
      size_t h = static_cast<size_t>(j.first) + t;
      double best = std::numeric_limits<double>::infinity();
      for (size_t lr = 0; lr < k.regions.size(); ++lr) {
        double g = m.cost(j.kind, lr, static_cast<long>(h));
        if (!std::isnan(g)) best = std::min(best, g + lambda[static_cast<size_t>(k.regions[lr]) * H + h]);
      }
      for (const auto& sg : j.segments) hours.emplace_back(best * sg.gpus_per_work, j.frac[t] * sg.rate);
    }
    std::sort(hours.begin(), hours.end());
    double left = j.hours;
    for (const auto& [price, f] : hours) {
      if (left <= 0) break;
      double x = std::min(f, left);
      total += x * price;
      left -= x;
    }
  }
  for (size_t r = 0; r < m.capacity.size(); ++r)
    for (size_t h = 0; h < H; ++h) total -= lambda[r * H + h] * m.capacity[r];
  return total;
}

}  // namespace

LpBound lp_bound(const std::vector<Job>& trace, const SimConfig& config, const LpBoundOptions& options) {
  const auto t_start = SteadyClock::now();
  if (options.block_hours < 0 || options.block_margin_hours < 0)
    throw CarbonError("lp_bound: block_hours and block_margin_hours must be >= 0");
  if (!(options.time_limit_s > 0)) throw CarbonError("lp_bound: time_limit_s must be > 0");
  const auto deadline = t_start + std::chrono::duration_cast<SteadyClock::duration>(
                                      std::chrono::duration<double>(std::min(options.time_limit_s, 1e9)));
  LpBound out;
  std::vector<std::string> reasons;
  Model m = build(trace, config, out.infeasible_jobs, reasons);
  if (!reasons.empty() && !options.skip_infeasible_jobs) {
    std::string msg = "lp_bound: " + std::to_string(reasons.size()) + " job" + (reasons.size() > 1 ? "s" : "") +
                      " cannot finish by the deadline even alone: ";
    for (size_t i = 0; i < reasons.size() && i < 5; ++i) msg += (i ? "; " : "") + reasons[i];
    if (reasons.size() > 5) msg += "; ...";
    throw CarbonError(msg + " (LpBoundOptions::skip_infeasible_jobs leaves them out)");
  }
  out.jobs = static_cast<int>(m.jobs.size());
  out.lp_grams = options.block_hours > 0 ? kNaN : 0.0;

  // The LPs: one, or one per block (its core hours, its jobs).
  struct Block {
    long from, to;
    std::vector<int> ids;
  };
  std::vector<Block> blocks;
  const long B = options.block_hours > 0 ? options.block_hours : std::max(1L, m.H);
  const long M = options.block_hours > 0 ? options.block_margin_hours : 0;
  for (long b0 = 0; b0 < m.H; b0 += B) {
    Block b{b0, std::min(m.H, b0 + B), {}};
    for (size_t i = 0; i < m.jobs.size(); ++i)
      if (m.jobs[i].first < b.to + M && m.jobs[i].end() > b.from - M) b.ids.push_back(static_cast<int>(i));
    if (!b.ids.empty()) blocks.push_back(std::move(b));
  }
  std::vector<Solution> solved(blocks.size());
  std::vector<std::exception_ptr> errors(blocks.size());
  std::vector<std::string> over(blocks.size());   // the block's budget overrun, when priced at zero
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const bool price_at_zero = options.on_budget_out == LpBudgetOut::kPriceAtZero;
  auto work = [&] {
    for (size_t b; !failed && (b = next++) < blocks.size();) {
      try {
        solved[b] = solve(m, blocks[b].ids, trace, options, options.solver, deadline);
      } catch (const BudgetOut& e) {
        if (!price_at_zero) {
          errors[b] = std::current_exception();
          failed = true;
        } else {
          over[b] = e.what();
        }
      } catch (...) {
        errors[b] = std::current_exception();
        failed = true;
      }
    }
  };
  const int threads = std::clamp(options.threads, 1, std::max(1, static_cast<int>(blocks.size())));
  if (threads == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i)
      pool.emplace_back([&] {
        work();
        glp_free_env();   // this thread's GLPK environment
      });
    for (auto& t : pool) t.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  const size_t R = m.capacity.size(), H = static_cast<size_t>(m.H);
  std::vector<double> lambda(R * H, 0.0);
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (!over[b].empty()) {   // its hours keep price 0: L(lambda) stays a bound, a looser one
      out.over_budget.push_back(over[b]);
      continue;
    }
    const Solution& s = solved[b];
    ++out.lps;
    out.simplex_fallbacks += s.fallback ? 1 : 0;
    out.max_rows = std::max(out.max_rows, s.rows);
    out.max_cols = std::max(out.max_cols, s.cols);
    out.solve_s += s.seconds;
    if (options.block_hours == 0) out.lp_grams = s.objective;
    for (size_t r = 0; r < R; ++r)
      for (long h = std::max(blocks[b].from, s.lo); h < std::min(blocks[b].to, s.lo + s.n); ++h)
        lambda[r * H + static_cast<size_t>(h)] =
            s.lambda[r * static_cast<size_t>(s.n) + static_cast<size_t>(h - s.lo)];
  }
  out.grams = lagrangian(m, lambda);
  out.total_s = seconds_since(t_start);
  return out;
}

}  // namespace carbon
