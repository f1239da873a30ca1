#include "carbon/lp_bound.h"

#include "carbon/accounting.h"
#include "carbon/error.h"

#include <ClpSimplex.hpp>
#include <ClpSolve.hpp>
#include <CoinPackedMatrix.hpp>
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
#include <tuple>
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

struct Solution {
  double objective = 0;
  long lo = 0, n = 0;                 // hours [lo, lo + n) of the model
  std::vector<double> lambda;         // [region * n + (h - lo)], >= 0
  int rows = 0, cols = 0;
  int lp_jobs = 0;                    // job rows (after merging alike jobs)
  bool fallback = false;              // glp_interior failed, glp_simplex used
  double seconds = 0;
};

constexpr size_t kGroupSize = 10;     // jobs per partial-sum row (not for glp_simplex)

// The time budget ran out before or while an LP was solved.
struct BudgetOut : CarbonError {
  using CarbonError::CarbonError;
};

// One LP in solver-neutral form: minimize obj . x subject to
// row_lo <= A x <= row_hi and col_lo <= x <= col_hi; A as (row, col, value)
// triplets, all indices from 0. Infinite bounds are +-infinity.
struct LpData {
  std::vector<double> row_lo, row_hi, col_lo, col_hi, obj;
  std::vector<int> ia, ja;
  std::vector<double> ar;
  int add_row(double lo, double hi) {
    row_lo.push_back(lo);
    row_hi.push_back(hi);
    return static_cast<int>(row_lo.size()) - 1;
  }
  int add_col(double lo, double hi, double cost = 0) {
    col_lo.push_back(lo);
    col_hi.push_back(hi);
    obj.push_back(cost);
    return static_cast<int>(col_lo.size()) - 1;
  }
  void entry(int row, int col, double v) {
    ia.push_back(row);
    ja.push_back(col);
    ar.push_back(v);
  }
  int rows() const { return static_cast<int>(row_lo.size()); }
  int cols() const { return static_cast<int>(col_lo.size()); }
};

constexpr double kInf = std::numeric_limits<double>::infinity();

// What a back end returns: on kOptimal the objective and the duals (row
// duals y and reduced costs d = obj - A'y, the signs of a minimization:
// a binding <= row or a column at its upper bound has a dual <= 0).
struct LpResult {
  enum class Status { kOptimal, kInfeasible, kTimeLimit, kFailed };
  Status status = Status::kFailed;
  double objective = 0;
  std::vector<double> row_dual, col_dual;
  std::string detail;                 // the solver's own status, for kFailed
};

// GLPK: glp_interior (no time limit in GLPK) or glp_simplex (presolve on,
// `left_s` as its tm_lim).
struct ProbDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

LpResult solve_glpk(const LpData& d, bool interior, double left_s, bool messages) {
  std::unique_ptr<glp_prob, ProbDeleter> P(glp_create_prob());
  glp_prob* lp = P.get();
  glp_set_obj_dir(lp, GLP_MIN);
  auto bounds_type = [](double lo, double hi) {
    if (lo == hi) return GLP_FX;
    if (std::isinf(lo) && std::isinf(hi)) return GLP_FR;
    if (std::isinf(hi)) return GLP_LO;
    if (std::isinf(lo)) return GLP_UP;
    return GLP_DB;
  };
  if (d.rows() > 0) glp_add_rows(lp, d.rows());
  for (int i = 0; i < d.rows(); ++i)
    glp_set_row_bnds(lp, i + 1, bounds_type(d.row_lo[i], d.row_hi[i]), std::isinf(d.row_lo[i]) ? 0 : d.row_lo[i],
                     std::isinf(d.row_hi[i]) ? 0 : d.row_hi[i]);
  if (d.cols() > 0) glp_add_cols(lp, d.cols());
  for (int j = 0; j < d.cols(); ++j) {
    glp_set_col_bnds(lp, j + 1, bounds_type(d.col_lo[j], d.col_hi[j]), std::isinf(d.col_lo[j]) ? 0 : d.col_lo[j],
                     std::isinf(d.col_hi[j]) ? 0 : d.col_hi[j]);
    glp_set_obj_coef(lp, j + 1, d.obj[j]);
  }
  {
    std::vector<int> ia{0}, ja{0};
    std::vector<double> ar{0};
    ia.reserve(d.ia.size() + 1);
    ja.reserve(d.ja.size() + 1);
    ar.reserve(d.ar.size() + 1);
    for (size_t k = 0; k < d.ia.size(); ++k) {
      ia.push_back(d.ia[k] + 1);
      ja.push_back(d.ja[k] + 1);
      ar.push_back(d.ar[k]);
    }
    glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  }
  LpResult r;
  if (interior) {
    glp_iptcp parm;
    glp_init_iptcp(&parm);
    parm.msg_lev = messages ? GLP_MSG_ALL : GLP_MSG_OFF;
    const int rc = glp_interior(lp, &parm);
    if (rc != 0 || glp_ipt_status(lp) != GLP_OPT) {
      r.detail = "glp_interior returned " + std::to_string(rc) + ", status " + std::to_string(glp_ipt_status(lp));
      return r;
    }
    r.objective = glp_ipt_obj_val(lp);
  } else {
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = messages ? GLP_MSG_ALL : GLP_MSG_OFF;
    parm.presolve = GLP_ON;
    parm.tm_lim = static_cast<int>(std::clamp(left_s * 1000.0, 1.0, 2.0e9));
    const int rc = glp_simplex(lp, &parm);
    if (rc == GLP_ENOPFS || (rc == 0 && glp_get_status(lp) == GLP_NOFEAS)) {
      r.status = LpResult::Status::kInfeasible;
      return r;
    }
    if (rc == GLP_ETMLIM) {
      r.status = LpResult::Status::kTimeLimit;
      return r;
    }
    if (rc != 0 || glp_get_status(lp) != GLP_OPT) {
      r.detail = "glp_simplex returned " + std::to_string(rc) + ", status " + std::to_string(glp_get_status(lp));
      return r;
    }
    r.objective = glp_get_obj_val(lp);
  }
  r.status = LpResult::Status::kOptimal;
  r.row_dual.resize(static_cast<size_t>(d.rows()));
  r.col_dual.resize(static_cast<size_t>(d.cols()));
  for (int i = 0; i < d.rows(); ++i) r.row_dual[i] = interior ? glp_ipt_row_dual(lp, i + 1) : glp_get_row_dual(lp, i + 1);
  for (int j = 0; j < d.cols(); ++j) r.col_dual[j] = interior ? glp_ipt_col_dual(lp, j + 1) : glp_get_col_dual(lp, j + 1);
  return r;
}

// CLP: the dual simplex after CLP's presolve, `left_s` as its wall-clock limit.
LpResult solve_clp(const LpData& d, double left_s, bool messages) {
  ClpSimplex model;
  model.setLogLevel(messages ? 1 : 0);
  {
    CoinPackedMatrix a(true, d.ia.data(), d.ja.data(), d.ar.data(), static_cast<CoinBigIndex>(d.ar.size()));
    // Columns or rows with no entry at the end: the matrix's own size stops
    // at the last entry.
    a.setDimensions(d.rows(), d.cols());
    auto clip = [](std::vector<double> v) {
      for (double& x : v)
        if (std::isinf(x)) x = x > 0 ? COIN_DBL_MAX : -COIN_DBL_MAX;
      return v;
    };
    const auto cl = clip(d.col_lo), cu = clip(d.col_hi), rl = clip(d.row_lo), ru = clip(d.row_hi);
    model.loadProblem(a, cl.data(), cu.data(), d.obj.data(), rl.data(), ru.data());
  }
  model.setMaximumWallSeconds(std::max(left_s, 1e-3));
  // Perturbed costs: the bound's LPs are highly degenerate (most columns
  // cost 0), and CLP's automatic choice leaves them unperturbed, which
  // stalls its dual simplex (measured: over 60 s against 6 s on two weeks).
  model.setPerturbation(50);
  ClpSolve how;
  how.setSolveType(ClpSolve::useDual);
  how.setPresolveType(ClpSolve::presolveOn);
  model.initialSolve(how);
  LpResult r;
  switch (model.status()) {
    case 0: break;
    case 1: r.status = LpResult::Status::kInfeasible; return r;
    case 3: r.status = LpResult::Status::kTimeLimit; return r;
    default:
      r.detail = "ClpSimplex status " + std::to_string(model.status()) + ", secondary " +
                 std::to_string(model.secondaryStatus());
      return r;
  }
  r.status = LpResult::Status::kOptimal;
  r.objective = model.objectiveValue();
  r.row_dual.assign(model.dualRowSolution(), model.dualRowSolution() + d.rows());
  r.col_dual.assign(model.dualColumnSolution(), model.dualColumnSolution() + d.cols());
  return r;
}

// The LP's jobs: each of `ids`, or with `merge` one per class of alike
// jobs -- the same kind, rate segments and hours -- whose work and usable
// hour parts add up. A merged class keeps only the sum of its jobs' per-hour
// limits, so its LP relaxes theirs; the bound stays L(lambda) over the
// single jobs, valid for any prices.
std::vector<LpJob> lp_jobs(const Model& m, const std::vector<int>& ids, bool merge) {
  std::vector<LpJob> out;
  out.reserve(ids.size());
  using Key = std::tuple<int, long, size_t, std::vector<std::pair<double, double>>>;
  std::map<Key, size_t> class_of;
  for (int i : ids) {
    const LpJob& j = m.jobs[static_cast<size_t>(i)];
    if (merge) {
      std::vector<std::pair<double, double>> sg;
      for (const auto& s : j.segments) sg.emplace_back(s.gpus_per_work, s.rate);
      auto [it, fresh] = class_of.try_emplace(Key{j.kind, j.first, j.frac.size(), std::move(sg)}, out.size());
      if (!fresh) {
        LpJob& c = out[it->second];
        c.hours += j.hours;
        for (size_t t = 0; t < j.frac.size(); ++t) c.frac[t] += j.frac[t];
        continue;
      }
    }
    out.push_back(j);
  }
  return out;
}

// Solves the LP of jobs `ids` (indices into m.jobs) over their windows with
// `solver`; a glp_interior failure is re-solved with glp_simplex (which also
// tells an infeasible LP apart).
Solution solve(const Model& m, const std::vector<int>& ids, const std::vector<Job>& trace, const LpBoundOptions& o,
               LpSolver solver, SteadyClock::time_point deadline) {
  Solution sol;
  const std::vector<LpJob> js = lp_jobs(m, ids, o.merge_alike_jobs);
  sol.lp_jobs = static_cast<int>(js.size());
  sol.lo = std::numeric_limits<long>::max();
  long hi = 0;
  for (const LpJob& j : js) {
    sol.lo = std::min(sol.lo, j.first);
    hi = std::max(hi, j.end());
  }
  sol.n = hi - sol.lo;
  const size_t R = m.capacity.size(), K = m.kinds.size(), n = static_cast<size_t>(sol.n);
  // Partial-sum rows keep every row short: what GLPK's interior point (it
  // forms A*D*A' row by row) and CLP's dual simplex solve fastest.
  const bool grouped = solver != LpSolver::kSimplex;
  const std::string what = std::to_string(ids.size()) + " jobs with windows in " +
                           format_time(hour_time(m.h0 + sol.lo)) + " .. " + format_time(hour_time(m.h0 + hi));
  double left_s = std::chrono::duration<double>(deadline - SteadyClock::now()).count();
  if (left_s <= 0)
    throw BudgetOut("lp_bound: the time limit of " + hours_str(o.time_limit_s) + " s ran out before the LP of the " +
                    what + "; raise LpBoundOptions::time_limit_s");

  // Which kinds run in which hours; how many kinds share a region-hour.
  std::vector<char> active(K * n, 0);
  for (const LpJob& j : js) {
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

  LpData lp;
  // Rows: work per job; balance per active kind-hour (sum of the kind's
  // GPU-hours = sum over regions); capacity per region-hour shared by kinds
  // (otherwise a bound on the one z column). -1: no row.
  const int job_row0 = lp.rows();
  for (const LpJob& j : js) lp.add_row(j.hours, j.hours);
  std::vector<int> balance_row(K * n, -1), cap_row(R * n, -1);
  for (size_t x = 0; x < K * n; ++x)
    if (active[x]) balance_row[x] = lp.add_row(0, 0);
  for (size_t x = 0; x < R * n; ++x)
    if (sharing[x] > 1) cap_row[x] = lp.add_row(-kInf, m.capacity[x / n]);
  // y columns (x summed over regions): hours of job j in hour t, 0 <= y <= f.
  // Grouped: into a group's partial-sum row, whose sum column u enters the
  // balance row.
  std::vector<size_t> order(js.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(js[a].kind, js[a].first) < std::make_pair(js[b].kind, js[b].first);
  });
  std::map<std::pair<size_t, size_t>, int> group_row;   // (group, kind-hour) -> row
  for (size_t oi = 0; oi < order.size(); ++oi) {
    const size_t a = order[oi];
    const LpJob& j = js[a];
    for (size_t t = 0; t < j.frac.size(); ++t) {
      if (j.frac[t] <= 0) continue;
      const size_t kh = j.kind * n + (j.first + t - sol.lo);
      for (const auto& sg : j.segments) {
        const int col = lp.add_col(0, j.frac[t] * sg.rate);
        lp.entry(job_row0 + static_cast<int>(a), col, 1.0);
        if (!grouped) {
          lp.entry(balance_row[kh], col, sg.gpus_per_work);
          continue;
        }
        auto [it, fresh] = group_row.try_emplace({oi / kGroupSize, kh}, 0);
        if (fresh) {
          it->second = lp.add_row(0, 0);
          const int u = lp.add_col(0, kInf);
          lp.entry(it->second, u, -1.0);
          lp.entry(balance_row[kh], u, 1.0);
        }
        lp.entry(it->second, col, sg.gpus_per_work);
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
        const double g = m.cost(static_cast<int>(k), lr, sol.lo + static_cast<long>(h));
        const size_t r = static_cast<size_t>(m.kinds[k].regions[lr]);
        if (std::isnan(g) || m.capacity[r] <= 0) continue;
        const bool shared = cap_row[r * n + h] >= 0;
        const int col = lp.add_col(0, shared ? kInf : m.capacity[r], g);
        if (shared) lp.entry(cap_row[r * n + h], col, 1.0);
        lp.entry(balance_row[k * n + h], col, -1.0);
        zcols.push_back({col, r, h});
      }
    }
  sol.rows = lp.rows();
  sol.cols = lp.cols();

  auto t0 = SteadyClock::now();
  const LpResult res = solver == LpSolver::kClp ? solve_clp(lp, left_s, o.solver_messages)
                                                : solve_glpk(lp, solver == LpSolver::kInterior, left_s, o.solver_messages);
  sol.seconds = seconds_since(t0);
  if (solver == LpSolver::kInterior && res.status != LpResult::Status::kOptimal) {
    Solution s = solve(m, ids, trace, o, LpSolver::kSimplex, deadline);
    s.fallback = true;
    s.seconds += sol.seconds;
    return s;
  }
  const std::string size = " (" + std::to_string(sol.rows) + " rows, " + std::to_string(sol.cols) + " columns)";
  switch (res.status) {
    case LpResult::Status::kOptimal: break;
    case LpResult::Status::kInfeasible:
      throw CarbonError("lp_bound: no fractional schedule of the " + what +
                        " finishes every job by its deadline within the regions' capacity" +
                        overload_hint(m, ids, trace));
    case LpResult::Status::kTimeLimit:
      throw BudgetOut("lp_bound: the solver reached the time limit of " + hours_str(o.time_limit_s) +
                      " s on the LP of the " + what + size + "; raise LpBoundOptions::time_limit_s or use blocks");
    case LpResult::Status::kFailed:
      throw CarbonError("lp_bound: the solver failed on the LP of the " + what + size + ": " + res.detail);
  }
  sol.objective = res.objective;
  // Capacity prices: minus the dual of the capacity row, or of z's upper bound.
  sol.lambda.assign(R * n, 0.0);
  for (size_t x = 0; x < R * n; ++x)
    if (cap_row[x] >= 0) sol.lambda[x] = std::max(0.0, -res.row_dual[static_cast<size_t>(cap_row[x])]);
  for (const auto& z : zcols)
    if (cap_row[z.region * n + z.hour] < 0)
      sol.lambda[z.region * n + z.hour] = std::max(0.0, -res.col_dual[static_cast<size_t>(z.col)]);
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
    out.lp_job_rows += s.lp_jobs;
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
