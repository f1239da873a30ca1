#include "carbon/placement.h"

#include "carbon/expected_load.h"

#include "carbon/error.h"
#include "elastic_plan.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>

namespace carbon {

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kRunNowHome: return "fifo";
    case Policy::kTemporal: return "temporal";
    case Policy::kSpatial: return "spatial";
    case Policy::kSpatioTemporal: return "spatio-temporal";
  }
  return "?";
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-9;
// Capacity pricing: loads at which the marginal intensity is taken.
constexpr int kLoadPoints = 5;

// Fixed one-decimal formatting without printf (cheap: reasons are built for
// every failing region of every job in a pass).
std::string fmt1(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 1);
  return std::string(buf, r.ptr);
}

// Per-thread scratch buffers (no allocation per job and region).
struct Scratch {
  std::vector<int> next_bad, feas, pick;
  std::vector<char> chosen;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Slots (placement.h, "Slots"): the pass's time quantum `slot` is the finest
// forecast step among its regions (60 minutes when all are hourly). Slot k
// is [base + k*slot, base + (k+1)*slot), base = floor_to_step(now, slot); a
// run starting in slot 0 starts at `now`. Positions (x) are in slots from
// base; slot_h = slot in hours converts slot sums to hours.

// Offset of `now` into its slot, in slots.
double now_offset(Time now, Seconds slot) {
  return static_cast<double>((now - floor_to_step(now, slot)).count()) / static_cast<double>(slot.count());
}

// Slots a run of `slots` (fractional) occupies.
int slots_for(double slots) { return static_cast<int>(std::ceil(slots - 1e-9)); }

Time slot_time(Time now, int k, Seconds slot) { return k == 0 ? now : floor_to_step(now, slot) + slot * k; }

// Largest number of slots usable before the deadline starting from slot 0
// (slot k usable if its end <= deadline, treating slot 0 as starting at now).
int slots_before(Time now, Time deadline, int n, Seconds slot) {
  if (deadline == Time::max()) return n;
  if (deadline <= now) return 0;
  auto k = (deadline - floor_to_step(now, slot)) / slot;
  return static_cast<int>(std::min<long>(k, n));
}

// "48 h", "1.5 h": a length in hours for messages (whole hours as before).
std::string hours_str(Seconds s) {
  if (s % Hours{1} == Seconds{0}) return std::to_string(s / Hours{1}) + " h";
  return fmt1(static_cast<double>(s.count()) / 3600.0) + " h";
}

// One region prepared for a pass: slots from floor_to_step(now, slot).
struct Prepared {
  const Region* region = nullptr;
  Seconds slot{3600};             // the pass's slot (same for every region)
  double slot_h = 1.0;            // slot in hours
  std::string problem;            // non-empty: region unusable (reason)
  int forecast_slots = 0;         // slots backed by the real forecast
  std::vector<double> intensity;  // per slot (extended beyond forecast_slots)
  std::vector<double> prefix;     // prefix[k] = sum intensity[0..k)
  std::vector<double> score;      // per slot: what ranking uses (intensity + capacity price)
  std::vector<double> sprefix;    // prefix sums of score
  std::vector<int> capacity;      // per slot
  std::vector<int> used;          // per slot, from the ledger (updated by place_all)
  int max_capacity = 0;
};

Prepared prepare(const Region& r, Time now, int n, const CapacityLedger& ledger, Seconds slot) {
  Prepared p;
  p.region = &r;
  p.slot = slot;
  p.slot_h = static_cast<double>(slot.count()) / 3600.0;
  const Time base = floor_to_step(now, slot);
  const auto& f = r.forecast;
  if (f.empty()) {
    p.problem = "no forecast";
    return p;
  }
  if (!is_supported_step(f.step())) {
    const auto c = f.step().count();
    p.problem = "forecast step of " + (c % 60 == 0 ? std::to_string(c / 60) + " min" : std::to_string(c) + " s") +
                " is not supported (5, 15, 30 or 60 minutes)";
    return p;
  }
  if (f.start() != floor_to_step(f.start(), f.step())) {
    p.problem = "forecast starts at " + format_time(f.start()) + ", not on " +
                (f.step() == Hours{1} ? std::string("an hour") : "a " + step_name(f.step())) + " boundary";
    return p;
  }
  if (base < f.start() || base >= f.end()) {
    p.problem = "forecast [" + format_time(f.start()) + ", " + format_time(f.end()) + ") does not contain " +
                format_time(base);
    return p;
  }
  // A coarser forecast is expanded to the slot: each value repeated over the
  // slots of its step (exact: the steps nest).
  int avail = static_cast<int>(std::min<long>((f.end() - base) / slot, n));
  p.forecast_slots = avail;
  p.intensity.resize(static_cast<size_t>(n));
  for (int k = 0; k < avail; ++k) p.intensity[k] = f[static_cast<size_t>((base + slot * k - f.start()) / f.step())];
  int period = std::min(avail, static_cast<int>(Seconds{Hours{24}} / slot));
  for (int k = avail; k < n; ++k) p.intensity[k] = p.intensity[avail - period + ((k - avail) % period)];
  p.prefix.resize(static_cast<size_t>(n) + 1);
  p.prefix[0] = 0;
  for (int k = 0; k < n; ++k) p.prefix[k + 1] = p.prefix[k] + p.intensity[k];
  p.score = p.intensity;
  p.sprefix = p.prefix;
  // Capacity and the ledger are per UTC hour: every slot of an hour gets
  // that hour's capacity and planned usage.
  const Time h0 = floor_hour(now);
  auto hour_of = [&](int k) { return static_cast<int>((floor_hour(base + slot * k) - h0) / Hours{1}); };
  p.capacity.assign(static_cast<size_t>(n), r.capacity);
  for (int k = 0; k < n; ++k)
    if (int h = hour_of(k); h < static_cast<int>(r.capacity_by_hour.size())) p.capacity[k] = r.capacity_by_hour[h];
  p.max_capacity = n ? *std::max_element(p.capacity.begin(), p.capacity.end()) : 0;
  if (slot == Hours{1}) {
    ledger.usage(r.name, h0, n, p.used);
  } else {
    std::vector<int> hourly;
    ledger.usage(r.name, h0, n ? hour_of(n - 1) + 1 : 0, hourly);
    p.used.resize(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) p.used[k] = hourly[static_cast<size_t>(hour_of(k))];
  }
  if (r.pue < 1.0 || !std::isfinite(r.pue)) p.problem = "PUE " + std::to_string(r.pue) + " < 1";
  else if (r.hardware.resources_per_server <= 0 || r.hardware.lifetime_years <= 0)
    p.problem = "incomplete hardware profile '" + r.hardware.name + "'";
  return p;
}

// A candidate plan in one region, in slots.
struct Plan {
  bool ok = false;
  double op_g = 0, emb_g = 0;
  double score_g = 0;                     // op_g with capacity prices (ranking only)
  std::vector<std::pair<int, int>> runs;  // [first slot, last slot + 1)
  double last_frac = 1.0;                 // fraction of the last slot used
  double cost() const { return op_g + emb_g; }
  double rank() const { return score_g + emb_g; }
  int first() const { return runs.front().first; }
};

struct JobShape {
  double hours = 0;   // run time
  double len = 0;     // run time in slots
  double kw = 0;      // facility kW (power x PUE)
  double emb_per_h = 0;
};

JobShape shape(const Job& job, const Region& r, Seconds slot) {
  JobShape s;
  s.hours = static_cast<double>(job.duration.count()) / 3600.0;
  s.len = static_cast<double>(job.duration.count()) / static_cast<double>(slot.count());
  s.kw = r.hardware.power_w(job.gpus, job.utilization) / 1000.0 * r.pue;
  s.emb_per_h = r.hardware.embodied_g_per_resource_hour() * job.gpus;
  return s;
}

// Integral of intensity (x slots) between positions x0 <= x1, measured in
// slots from the pass's base; requires x1 <= n.
double integral_hours(const std::vector<double>& val, const std::vector<double>& prefix, double x0, double x1) {
  auto F = [&](double x) {
    size_t k = static_cast<size_t>(std::floor(x));
    double v = prefix[k];
    if (k < val.size()) v += (x - static_cast<double>(k)) * val[k];
    return v;
  };
  return F(x1) - F(x0);
}
// The same in (gCO2/kWh) x hours.
double intensity_hours(const Prepared& p, double x0, double x1) {
  return integral_hours(p.intensity, p.prefix, x0, x1) * p.slot_h;
}
double score_hours(const Prepared& p, double x0, double x1) { return integral_hours(p.score, p.sprefix, x0, x1) * p.slot_h; }

// Earliest / cheapest contiguous start in region p: the run ends before
// slot `horizon` (the job's, job_horizon) and by `deadline` (unless
// `earliest_only`: then the first feasible start is taken).
Plan best_contiguous(const Prepared& p, const Job& job, const JobShape& js, int first_slot, int horizon, Time now,
                     Time deadline, bool earliest_only, double tol) {
  Plan best;
  int n = std::min(horizon, static_cast<int>(p.intensity.size()));
  int L = slots_for(js.len);
  if (L <= 0 || L > n) return best;
  double off0 = now_offset(now, p.slot);
  // next_bad[k]: first slot >= k without enough free capacity.
  auto& next_bad = scratch().next_bad;
  next_bad.resize(static_cast<size_t>(n) + 1);
  next_bad[n] = n;
  for (int k = n - 1; k >= 0; --k) next_bad[k] = (p.capacity[k] - p.used[k] >= job.gpus) ? next_bad[k + 1] : k;
  for (int s = first_slot; s + L <= n; ++s) {
    double x0 = s == 0 ? off0 : s;
    int Ls = slots_for(x0 + js.len) - s;   // a start at `now` may straddle one more slot
    if (s + Ls > n) break;
    if (next_bad[s] < s + Ls) {
      s = next_bad[s];  // jump past the obstacle (loop ++ moves beyond it)
      continue;
    }
    Time start = slot_time(now, s, p.slot);
    if (!earliest_only && start + job.duration > deadline) break;
    double sc = js.kw * score_hours(p, x0, x0 + js.len);
    if (!best.ok || sc < best.score_g * (1 - tol) - kEps) {
      best.ok = true;
      best.score_g = sc;
      best.op_g = js.kw * intensity_hours(p, x0, x0 + js.len);
      best.runs = {{s, s + Ls}};
    }
    if (earliest_only) break;
  }
  if (best.ok) best.emb_g = js.emb_per_h * js.hours;
  return best;
}

// Interruptible: cheapest set of slots in [first_slot, end_slot) with free
// capacity, at most max_windows runs; each extra run adds resume overhead.
Plan best_windows(const Prepared& p, const Job& job, const JobShape& js, int first_slot, int end_slot,
                  int max_windows) {
  Plan best;
  auto& feas = scratch().feas;
  feas.clear();
  for (int k = first_slot; k < end_slot; ++k)
    if (p.capacity[k] - p.used[k] >= job.gpus) feas.push_back(k);
  // In slots: the overhead of a window and the run time.
  double ov_h = static_cast<double>(job.resume_overhead.count()) / static_cast<double>(p.slot.count());
  const auto& sv = p.score;   // ranking values (intensity + capacity price)
  auto cheaper = [&](int a, int b) { return sv[a] < sv[b] || (sv[a] == sv[b] && a < b); };
  auto& chosen = scratch().chosen;
  chosen.assign(static_cast<size_t>(end_slot), 0);
  double hours = js.len;
  int windows = 1;
  for (int iter = 0; iter < 6; ++iter) {
    int L = slots_for(hours);
    if (L > static_cast<int>(feas.size()) || L <= 0) return best;
    auto& pick = scratch().pick;
    pick.assign(feas.begin(), feas.end());
    std::nth_element(pick.begin(), pick.begin() + (L - 1), pick.end(), cheaper);
    std::fill(chosen.begin(), chosen.end(), 0);
    for (int i = 0; i < L; ++i) chosen[pick[i]] = 1;
    auto count_runs = [&] {
      int w = 0;
      for (int k = first_slot; k < end_slot; ++k)
        if (chosen[k] && (k == first_slot || !chosen[k - 1])) ++w;
      return w;
    };
    int w = count_runs();
    // Too many windows: fill the shortest fillable gap, then drop the most
    // expensive edge slots to keep L slots.
    while (w > max_windows) {
      int best_a = -1, best_b = -1;
      int k = first_slot;
      int prev_end = -1;
      while (k < end_slot) {
        if (chosen[k]) {
          int a = k;
          while (k < end_slot && chosen[k]) ++k;
          if (prev_end >= 0) {
            bool fillable = true;
            for (int g = prev_end; g < a; ++g)
              if (p.capacity[g] - p.used[g] < job.gpus) fillable = false;
            if (fillable && (best_a < 0 || a - prev_end < best_b - best_a)) best_a = prev_end, best_b = a;
          }
          prev_end = k;
        } else {
          ++k;
        }
      }
      if (best_a < 0) return best;  // cannot merge
      int added = best_b - best_a;
      for (int g = best_a; g < best_b; ++g) chosen[g] = 1;
      for (int d = 0; d < added; ++d) {
        int worst = -1;
        for (int e = first_slot; e < end_slot; ++e) {
          if (!chosen[e]) continue;
          bool edge = (e == first_slot || !chosen[e - 1]) || (e + 1 == end_slot || !chosen[e + 1]);
          if (edge && (worst < 0 || sv[e] > sv[worst])) worst = e;
        }
        chosen[worst] = 0;
      }
      w = count_runs();
    }
    double need = js.len + (w - 1) * ov_h;
    windows = w;
    if (slots_for(need) == L || iter == 5) {
      hours = need;
      if (slots_for(need) != L) return best;
      break;
    }
    hours = need;
  }
  // A last window that does no work -- the windows before it already do
  // all of it, so the part of it used is at most its resume overhead -- is
  // dropped when the others then hold exactly the run time of one window
  // fewer (else the plan stays as it is). It would restart the job for
  // nothing: the service's gang ends when its work is done and never runs
  // it. Sub-hourly slots meet this (a 10-minute overhead is a third of a
  // 30-minute slot); a plan without such a window is unchanged.
  if (windows >= 2) {
    int last_slot = end_slot - 1;
    while (last_slot >= first_slot && !chosen[last_slot]) --last_slot;
    int run_start = last_slot;
    while (run_start > first_slot && chosen[run_start - 1]) --run_start;
    const int L = slots_for(hours);
    const int run_len = last_slot - run_start + 1;
    const double work = (run_len - 1) + (hours - (L - 1)) - ov_h;
    const double fewer = js.len + (windows - 2) * ov_h;
    if (work <= 1e-9 && slots_for(fewer) == L - run_len) {
      for (int k = run_start; k <= last_slot; ++k) chosen[k] = 0;
      hours = fewer;
      --windows;
    }
  }
  best.ok = true;
  int last = -1;
  double sum = 0, ssum = 0;
  for (int k = first_slot; k < end_slot; ++k) {
    if (!chosen[k]) continue;
    sum += p.intensity[k];
    ssum += sv[k];
    last = k;
    if (best.runs.empty() || best.runs.back().second != k) best.runs.push_back({k, k + 1});
    else best.runs.back().second = k + 1;
  }
  int L = slots_for(hours);
  double frac = hours - (L - 1);
  best.last_frac = frac;
  sum -= (1.0 - frac) * p.intensity[last];
  ssum -= (1.0 - frac) * sv[last];
  best.op_g = js.kw * sum * p.slot_h;
  best.score_g = js.kw * ssum * p.slot_h;
  best.emb_g = js.emb_per_h * hours * p.slot_h;
  return best;
}

// A floor under the ranked grams of any plan of a job that needs `gpu_h`
// GPU-hours within slots [first, end) of a region (ranking values `score`,
// free GPUs capacity - used), at kw and emb_per_gpu_h a GPU, when a slot
// holds no more of it than max_gpus, and none unless min_gpus fit (a
// fixed-width job: both its GPUs; an elastic job: its widths, with
// gpu_h its work at its most efficient width). The cheapest way to
// reserve them fills the cheapest slots first, each with as many GPUs as
// are free (a fractional knapsack: the plan's own slots can do no better,
// and changes only add hours). +inf when the free GPUs cannot hold them:
// no plan fits. Plan::rank and ElasticResult::rank for fixed-width and
// elastic jobs. Slightly lowered against rounding. The cheapest slot alone
// bounds it first: only a region that this cheap floor does not rule out
// (>= `threshold`) is sorted.
double rank_floor(const std::vector<double>& score, const std::vector<int>& capacity, const std::vector<int>& used,
                  int first, int end, double kw, double emb_per_gpu_h, double gpu_h, int min_gpus, int max_gpus,
                  double slot_h, double threshold) {
  first = std::max(first, 0);
  double cheapest = kInf;
  for (int k = first; k < end; ++k) cheapest = std::min(cheapest, score[k]);
  const double cheap = (kw * cheapest + emb_per_gpu_h) * gpu_h * (1 - 1e-9);
  if (!std::isfinite(cheap) || !(cheap > 0)) return -kInf;
  if (cheap >= threshold) return cheap;
  thread_local std::vector<std::pair<double, int>> slots;   // (score, free GPUs it may take)
  slots.clear();
  double room = 0;
  for (int k = first; k < end; ++k) {
    const int free = capacity[k] - used[k];
    if (free < min_gpus) continue;
    slots.emplace_back(score[k], std::min(free, max_gpus));
    room += slots.back().second * slot_h;
  }
  if (room < gpu_h * (1 - 1e-9)) return kInf;
  std::sort(slots.begin(), slots.end());
  double left = gpu_h, op = 0;
  for (const auto& [sc, gpus] : slots) {
    const double take = std::min(left, gpus * slot_h);
    op += sc * take;
    left -= take;
    if (left <= 0) break;
  }
  const double g = (kw * op + emb_per_gpu_h * gpu_h) * (1 - 1e-9);
  return std::max(g, cheap);
}

std::string grams_str(double g) {
  if (std::isnan(g)) return "n/a";
  if (std::fabs(g) >= 1e6) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, g / 1e6, std::chars_format::fixed, 2);
    return std::string(buf, r.ptr) + " t";
  }
  if (std::fabs(g) >= 1e3) return fmt1(g / 1e3) + " kg";
  return fmt1(g) + " g";
}

struct PassContext {
  std::vector<Prepared> prepared;
  Time now;
  int n = 0;            // slots prepared: at least every placed job's horizon (job_horizon)
  int lookahead = 0;    // PlacementOptions::max_lookahead in slots
  Seconds slot{3600};   // the finest forecast step among the regions
  double slot_h = 1.0;
  Time base{};          // floor_to_step(now, slot): start of slot 0
  // Capacity pricing (PlacementOptions::expected_load_by_hour_of_week).
  bool priced = false;
  double price_weight = 1.0;
  std::vector<double> expected;          // per slot: expected busy GPUs over all usable regions
  std::vector<std::vector<int>> order;   // per slot: usable regions, cleanest first
  // The loads' factors, ascending: 1 + s x {-1, -1/2, 0, 1/2, 1}, s =
  // PlacementOptions::capacity_price_load_spread (in [0, 1]).
  std::array<double, kLoadPoints> load_factor{};
  // Per slot: the marginal intensity at each of kLoadPoints loads.
  std::vector<std::array<double, kLoadPoints>> theta;
};

// Hour of the week of slot k (0 = Monday 00:00 UTC).
int hour_of_week(const PassContext& ctx, int k) { return ExpectedLoad::hour_of_week(ctx.base + ctx.slot * k); }

// The slots a job's plan may use, from slot 0: the look-ahead, or, for a
// job that cannot run within it, the longest it can run -- at its narrowest
// width when elastic, plus the overhead of max_windows windows -- and the
// slot a start at `now` may straddle (such a job starts at once or waits
// for a later pass). A function of the job alone, never of the other jobs
// in a pass: a job's decision does not depend on what it is placed with.
int job_horizon(const Job& job, int lookahead_slots, Seconds slot, const PlacementOptions& opt) {
  double run_s = static_cast<double>(job.duration.count());
  if (job.elastic() && job.min_width() >= 1) {
    double v = 0;
    try {
      v = job.speed(job.min_width());
    } catch (const CarbonError&) {
      v = 0;   // an invalid curve is refused where the job is planned
    }
    if (v > 0 && std::isfinite(v)) run_s = std::max(run_s, run_s / v);
  }
  run_s += static_cast<double>(job.resume_overhead.count()) * std::max(0, opt.max_windows);
  const double slots = std::min(run_s / static_cast<double>(slot.count()), 1e6);   // 1e6 slots: > 9 years of 5-minute slots
  return std::max(lookahead_slots, slots_for(slots) + 1);
}

// Marginal intensities of slot k at each of kLoadPoints load factors: fill
// max(expected x load_factor, planned) GPUs cleanest region first; theta is
// the intensity of the region where the fill ends. The factors ascend
// (make_context), so the loads do, and one walk serves them all; each
// theta is what a walk of its own finds.
std::array<double, kLoadPoints> marginal_intensities(const PassContext& ctx, int k,
                                                     const std::array<double, kLoadPoints>& load_factor) {
  std::array<double, kLoadPoints> t{};
  const auto& ord = ctx.order[k];
  if (ord.empty()) return t;
  double booked = 0;
  for (int ri : ord) booked += ctx.prepared[ri].used[k];
  size_t i = 0;                                     // the walk's region (ord[i])
  double cum = ctx.prepared[ord[0]].capacity[k];    // capacity of ord[0..i]
  for (int q = 0; q < kLoadPoints; ++q) {
    const double load = std::max(ctx.expected[k] * load_factor[q], booked);
    while (cum < load && i + 1 < ord.size()) cum += ctx.prepared[ord[++i]].capacity[k];
    if (cum >= load) t[q] = load > 0 ? ctx.prepared[ord[i]].intensity[k] : ctx.prepared[ord.front()].intensity[k];
    else t[q] = ctx.prepared[ord.back()].intensity[k];
  }
  return t;
}

// Recomputes theta and the scores of slots [a, b); prefix sums from a.
void reprice(PassContext& ctx, int a, int b, bool force) {
  int first_changed = -1;
  for (int k = a; k < b; ++k) {
    // The loads: expected x ctx.load_factor.
    const std::array<double, kLoadPoints> t = marginal_intensities(ctx, k, ctx.load_factor);
    if (!force && t == ctx.theta[k]) continue;
    ctx.theta[k] = t;
    if (first_changed < 0) first_changed = k;
    for (int ri : ctx.order[k]) {
      auto& p = ctx.prepared[ri];
      double price = 0;
      for (double tq : t) price += std::max(0.0, tq - p.intensity[k]);
      p.score[k] = p.intensity[k] + ctx.price_weight * price / kLoadPoints;
    }
  }
  if (first_changed < 0) return;
  for (auto& p : ctx.prepared) {
    if (!p.problem.empty()) continue;
    for (int k = first_changed; k < ctx.n; ++k) p.sprefix[k + 1] = p.sprefix[k] + p.score[k];
  }
}

int find_region(const PassContext& ctx, const std::string& name) {
  for (size_t i = 0; i < ctx.prepared.size(); ++i)
    if (ctx.prepared[i].region->name == name) return static_cast<int>(i);
  return -1;
}

// The fewest GPU-hours an elastic job spends per hour of its work (at
// width gpus): min over the widths it may run at of w / speed(w). 0 when
// its curve is invalid (plan_elastic refuses it).
double elastic_gpu_hours_per_work(const Job& job) {
  const int wmin = job.min_width(), wmax = job.max_width(), step = std::max(1, job.width_step);
  if (wmin < 1 || wmax < wmin) return 0;
  double eff = kInf;
  try {
    for (int w = wmin;; w = std::min(wmax, w + step)) {
      const double v = job.speed(w);
      if (!(v > 0) || !std::isfinite(v)) return 0;
      eff = std::min(eff, w / v);
      if (w == wmax) break;
    }
  } catch (const CarbonError&) {
    return 0;
  }
  return eff;
}

// Elastic and migratable jobs (elastic_plan.h): the cheapest ranked plan
// over every candidate region alone and, when migratable, over all of them
// together. Returned (feasible) only when its rank is below `rank_to_beat`
// (the best plan at the job's own width; NaN: none); within `horizon` slots
// (job_horizon).
Decision place_elastic(const Job& job, const PassContext& ctx, const PlacementOptions& opt, const std::vector<int>& cands,
                       int first_slot, int horizon, double rank_to_beat) {
  Decision d;
  d.job_id = job.id;
  const Time now = ctx.now;
  const int wfirst = std::max(first_slot, now_offset(now, ctx.slot) > 0 ? 1 : 0);
  const int end_slot = slots_before(now, job.deadline, horizon, ctx.slot);
  std::vector<detail::ElasticRegionView> all;
  for (int ri : cands) {
    const auto& p = ctx.prepared[ri];
    if (!p.problem.empty() || p.max_capacity < job.min_width()) continue;
    detail::ElasticRegionView v;
    v.index = ri;
    v.intensity = &p.intensity;
    v.score = &p.score;
    v.capacity = &p.capacity;
    v.used = &p.used;
    v.kw_per_gpu = p.region->hardware.power_w(1, job.utilization) / 1000.0 * p.region->pue;
    v.emb_per_gpu_h = p.region->hardware.embodied_g_per_resource_hour();
    all.push_back(v);
  }
  if (all.empty() || end_slot <= wfirst) return d;
  detail::ElasticResult best;
  std::vector<detail::ElasticRegionView> chosen;
  auto consider = [&](std::vector<detail::ElasticRegionView> views, detail::ElasticResult r) {
    if (r.ok && (!best.ok || r.rank() < best.rank() - kEps)) best = std::move(r), chosen = std::move(views);
  };
  auto plan = [&](const std::vector<detail::ElasticRegionView>& views) {
    return detail::plan_elastic(job, views, wfirst, end_slot, ctx.slot_h, opt.elastic);
  };
  // Candidates in order: each region alone, then (migratable) all of them;
  // the first strictly cheaper plan wins. A region whose plan cannot beat
  // the plan to beat is not planned (rank_floor): not the one in
  // hand, nor, by more than a microgram, the fixed-width one or the plan
  // over all regions (planned first when there is one, as a yardstick).
  const bool moves = job.migratable && all.size() > 1;
  std::optional<detail::ElasticResult> over_all;
  if (moves) over_all = plan(all);
  double yardstick = std::isnan(rank_to_beat) ? kInf : rank_to_beat;
  if (over_all && over_all->ok) yardstick = std::min(yardstick, over_all->rank());
  const double limit = yardstick + 1e-6;
  // Its work takes at least this many GPU-hours (changes only add to them).
  const double gpu_h = static_cast<double>(job.duration.count()) / 3600.0 * elastic_gpu_hours_per_work(job);
  auto floor_of = [&](size_t i, double threshold) {
    const auto& v = all[i];
    return rank_floor(*v.score, *v.capacity, *v.used, wfirst, end_slot, v.kw_per_gpu, v.emb_per_gpu_h, gpu_h,
                      job.min_width(), job.max_width(), ctx.slot_h, threshold);
  };
  // The regions are planned cheapest slot first, each unless its floor is
  // above the cheapest plan so far (by more than a tie: the rule below
  // breaks ties by candidate order); then the plans made are taken in
  // candidate order, as if each region had been planned in turn.
  std::vector<double> floor_g(all.size());
  std::vector<size_t> by_floor;
  for (size_t i = 0; i < all.size(); ++i) {
    floor_g[i] = floor_of(i, -kInf);   // the cheapest slot's
    if (floor_g[i] < limit) by_floor.push_back(i);
  }
  std::stable_sort(by_floor.begin(), by_floor.end(), [&](size_t a, size_t b) { return floor_g[a] < floor_g[b]; });
  std::vector<std::optional<detail::ElasticResult>> single(all.size());
  double lowest = kInf;
  for (size_t i : by_floor) {
    const double beat = std::min(limit, lowest + 2 * kEps);
    if (floor_g[i] >= beat) break;
    floor_g[i] = floor_of(i, beat);
    if (floor_g[i] >= beat) continue;
    single[i] = plan({all[i]});
    if (single[i]->ok) lowest = std::min(lowest, single[i]->rank());
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (!single[i] || floor_g[i] >= std::min(limit, best.ok ? best.rank() - kEps : kInf)) continue;
    consider({all[i]}, std::move(*single[i]));
  }
  if (over_all) consider(all, std::move(*over_all));
  if (!best.ok || (!std::isnan(rank_to_beat) && best.rank() >= rank_to_beat - kEps)) return d;

  d.feasible = true;
  for (const auto& w : best.windows) {
    const auto& name = ctx.prepared[chosen[static_cast<size_t>(w.view)].index].region->name;
    // The last slot's used part, rounded up to the second: the work is done.
    Time end = ctx.base + ctx.slot * w.last;
    if (w.last_frac < 1.0)
      end = ctx.base + ctx.slot * (w.last - 1) +
            Seconds{static_cast<long>(std::ceil(w.last_frac * static_cast<double>(ctx.slot.count()) - 1e-6))};
    d.windows.emplace_back(slot_time(now, w.first, ctx.slot), end, name, w.gpus);
    d.forecast_extended = d.forecast_extended || w.last > ctx.prepared[chosen[static_cast<size_t>(w.view)].index].forecast_slots;
  }
  d.region = d.windows.front().region;
  d.start = d.windows.front().start;
  d.end = d.windows.back().end;
  d.deadline_met = d.end <= job.deadline;
  d.expected_operational_grams = best.op_g + best.network_g;
  d.expected_embodied_grams = best.emb_g;
  d.expected_grams = best.cost();
  for (const auto& c : best.changes) {
    const auto& a = d.windows[c.window - 1];
    const auto& b = d.windows[c.window];
    PlanChange pc;
    pc.at = b.start;
    pc.from_region = a.region;
    pc.to_region = b.region;
    pc.from_gpus = a.gpus;
    pc.to_gpus = b.gpus;
    pc.cost_grams = c.cost_grams;
    pc.saved_grams = c.saved_grams;
    std::string what;
    if (pc.move()) what = "move " + a.region + " -> " + b.region;
    if (pc.resize()) what += (what.empty() ? "" : ", ") + std::string(b.gpus < a.gpus ? "shrink " : "grow ") +
                             std::to_string(a.gpus) + " -> " + std::to_string(b.gpus) + " GPUs";
    if (what.empty()) what = "resume after a pause";
    pc.why = format_time(pc.at) + ": " + what + " (forecast " + fmt1(c.mean_from) + " g/kWh in " + a.region +
             (pc.move() ? " vs " + fmt1(c.mean_to) + " g/kWh in " + b.region : std::string()) + " over the window): " +
             (pc.move() || pc.resize() ? "saves " + grams_str(c.saved_grams) + " against keeping " +
                                             std::to_string(a.gpus) + " GPUs in " + a.region + ", after its own " +
                                             grams_str(c.cost_grams)
                                       : "costs " + grams_str(c.cost_grams) + " (checkpoint and restore)") +
             ".";
    d.changes.push_back(std::move(pc));
  }
  return d;
}

// Savings and the explanation of an elastic decision.
void finish_elastic(const Job& job, const PlacementOptions& opt, Decision& d) {
  if (!std::isnan(d.run_now_home_grams)) {
    d.saving_grams = d.run_now_home_grams - d.expected_grams;
    d.saving_pct = d.run_now_home_grams > 0 ? 100.0 * d.saving_grams / d.run_now_home_grams : 0.0;
  } else {
    d.saving_grams = d.saving_pct = kNaN;
  }
  int resizes = 0, moves = 0;
  for (const auto& c : d.changes) resizes += c.resize() ? 1 : 0, moves += c.move() ? 1 : 0;
  std::string e = "Job " + job.id + " (elastic " + std::to_string(job.min_width()) + ".." +
                  std::to_string(job.max_width()) + " GPUs, " + std::to_string(job.gpus) + " GPUs for " +
                  fmt1(static_cast<double>(job.duration.count()) / 3600.0) + " h of work" +
                  (job.migratable ? ", migratable" : "") + "): " + std::to_string(d.windows.size()) +
                  (d.windows.size() == 1 ? " window" : " windows") + " between " + format_time(d.start) + " and " +
                  format_time(d.end) + ", starting in " + d.region + " on " + std::to_string(d.windows.front().gpus) +
                  " GPUs, " + std::to_string(resizes) + " resize(s), " + std::to_string(moves) + " move(s) [" +
                  policy_name(opt.policy) + "]. Expected " + grams_str(d.expected_grams) + " CO2e";
  if (!std::isnan(d.run_now_home_grams))
    e += " vs " + grams_str(d.run_now_home_grams) + " if run now in " + job.home_region + ": saves " +
         grams_str(d.saving_grams) + " (" + fmt1(d.saving_pct) + "%)";
  e += ".";
  for (const auto& c : d.changes) e += " " + c.why;
  if (d.forecast_extended) e += " The plan extends beyond the forecast, which was extended by repeating its last 24 h.";
  if (!d.deadline_met) e += " It misses the deadline " + format_time(job.deadline) + ".";
  d.explanation = std::move(e);
}

Decision place_prepared(const Job& job, const PassContext& ctx, const PlacementOptions& opt) {
  Decision d;
  d.job_id = job.id;
  const Time now = ctx.now;
  auto fail = [&](std::string why) {
    d.feasible = false;
    d.reason = std::move(why);
    d.explanation = "Job " + job.id + " cannot be placed: " + d.reason;
    return d;
  };
  if (job.gpus < 1) return fail("job asks for " + std::to_string(job.gpus) + " GPUs (must be >= 1)");
  if (job.duration.count() <= 0) return fail("job has no positive duration");
  if (job.utilization < 0 || job.utilization > 1 || !std::isfinite(job.utilization))
    return fail("utilization must be in [0, 1]");

  bool deadline_bound = opt.policy == Policy::kTemporal || opt.policy == Policy::kSpatioTemporal;
  bool home_only = opt.policy == Policy::kTemporal || opt.policy == Policy::kRunNowHome;
  const int horizon = job_horizon(job, ctx.lookahead, ctx.slot, opt);
  if (horizon > ctx.n) throw CarbonError("placement: a pass of " + std::to_string(ctx.n) + " slots for job " + job.id +
                                         " that needs " + std::to_string(horizon));   // make_context sizes it
  // "within the 48 h look-ahead" / "within the 83 h its run needs".
  const std::string within =
      "within the " + hours_str(ctx.slot * horizon) + (horizon > ctx.lookahead ? " its run needs" : " look-ahead");
  Time earliest = std::max(now, job.submit);
  int first_slot = static_cast<int>((floor_to_step(earliest, ctx.slot) - ctx.base) / ctx.slot);
  if (earliest > now && earliest != floor_to_step(earliest, ctx.slot)) first_slot += 1;  // start at the next slot boundary

  // Counterfactual: run now (earliest) at home, ignoring capacity.
  int home = find_region(ctx, job.home_region);
  d.run_now_home_grams = kNaN;
  if (home >= 0 && ctx.prepared[home].problem.empty()) {
    const auto& hp = ctx.prepared[home];
    auto js = shape(job, *hp.region, ctx.slot);
    if (first_slot + slots_for(js.len) + 1 <= horizon)
      d.run_now_home_grams =
          js.kw * intensity_hours(hp, first_slot == 0 ? now_offset(now, ctx.slot) : first_slot,
                                  (first_slot == 0 ? now_offset(now, ctx.slot) : first_slot) + js.len) +
          js.emb_per_h * js.hours;
  }

  if (deadline_bound && earliest + job.duration > job.deadline)
    return fail("deadline " + format_time(job.deadline) + " is before the earliest possible finish " +
                format_time(earliest + job.duration));

  // Candidate regions.
  std::vector<int> cands;
  std::string reasons;
  auto note = [&](const std::string& r) { reasons += (reasons.empty() ? "" : "; ") + r; };
  if (home_only) {
    if (home < 0) return fail("home region '" + job.home_region + "' is not a known region");
    cands.push_back(home);
  } else if (job.allowed_regions.empty()) {
    for (size_t i = 0; i < ctx.prepared.size(); ++i) cands.push_back(static_cast<int>(i));
  } else {
    for (const auto& a : job.allowed_regions) {
      int i = find_region(ctx, a);
      if (i < 0) note(a + ": unknown region");
      else cands.push_back(i);
    }
  }
  if (cands.empty()) return fail("no candidate region" + (reasons.empty() ? std::string() : " (" + reasons + ")"));

  int best_r = -1;
  Plan best;
  for (int ri : cands) {
    const auto& p = ctx.prepared[ri];
    const std::string& name = p.region->name;
    if (!p.problem.empty()) {
      note(name + ": " + p.problem);
      continue;
    }
    if (p.max_capacity < job.gpus) {
      note(name + ": capacity " + std::to_string(p.max_capacity) + " < " + std::to_string(job.gpus) + " GPUs");
      continue;
    }
    auto js = shape(job, *p.region, ctx.slot);
    // (Its plans cost about what sorting its slots would: the cheapest
    // slot's floor only.)
    if (deadline_bound && best_r >= 0 &&
        rank_floor(p.score, p.capacity, p.used, first_slot, std::min(horizon, static_cast<int>(p.score.size())),
                   js.kw / job.gpus, js.emb_per_h / job.gpus, js.hours * job.gpus, job.gpus, job.gpus, ctx.slot_h,
                   -kInf) > best.rank() * (1 + opt.prefer_earlier_within) + kEps)
      continue;   // no plan here can be `better` (below) than the one in hand
    Plan plan;
    if (!deadline_bound) {
      plan = best_contiguous(p, job, js, first_slot, horizon, now, job.deadline, /*earliest_only=*/true, 0.0);
      if (!plan.ok) note(name + ": no free capacity " + within);
    } else {
      int end_slot = slots_before(now, job.deadline, horizon, ctx.slot);
      plan = best_contiguous(p, job, js, first_slot, horizon, now, job.deadline, false, opt.prefer_earlier_within);
      if (job.interruptible && opt.max_windows > 1 && end_slot > first_slot) {
        // Windows use whole slots: skip the partial slot of `now`.
        int wfirst = std::max(first_slot, now_offset(now, ctx.slot) > 0 ? 1 : 0);
        Plan w = best_windows(p, job, js, wfirst, end_slot, opt.max_windows);
        if (w.ok && (!plan.ok || w.rank() < plan.rank() * (1 - (w.first() > plan.first() ? opt.prefer_earlier_within : 0)) - kEps))
          plan = w;
      }
      if (!plan.ok) {
        if (end_slot >= horizon && ctx.base + ctx.slot * horizon < job.deadline)
          note(name + ": not enough free capacity " + within);
        else
          note(name + ": not enough free capacity (" + std::to_string(job.gpus) + " GPUs for " +
               fmt1(js.hours) + " h) before the deadline");
      }
    }
    if (!plan.ok) continue;
    const double tol = opt.prefer_earlier_within;
    bool better = best_r < 0 ||
                  (plan.first() > best.first() ? plan.rank() < best.rank() * (1 - tol) - kEps
                   : plan.first() < best.first() ? plan.rank() <= best.rank() * (1 + tol) + kEps
                                                 : plan.rank() < best.rank() - kEps);
    if (!deadline_bound && best_r >= 0) {
      // Latency-first baselines: earliest start wins, then grams.
      better = plan.first() < best.first() || (plan.first() == best.first() && plan.cost() < best.cost() - kEps);
    }
    if (better) best = plan, best_r = ri;
  }
  if (job.elastic() && deadline_bound && opt.policy == Policy::kSpatioTemporal) {
    if (auto e = place_elastic(job, ctx, opt, cands, first_slot, horizon, best_r < 0 ? kNaN : best.rank()); e.feasible) {
      e.run_now_home_grams = d.run_now_home_grams;
      finish_elastic(job, opt, e);
      return e;
    }
  }
  if (best_r < 0) return fail("no feasible placement" +
                              (deadline_bound && job.deadline != Time::max()
                                   ? " finishing by " + format_time(job.deadline)
                                   : std::string()) +
                              ": " + reasons);

  const auto& p = ctx.prepared[best_r];
  d.feasible = true;
  d.region = p.region->name;
  for (size_t i = 0; i < best.runs.size(); ++i) {
    auto [a, b] = best.runs[i];
    Window w{slot_time(now, a, ctx.slot), ctx.base + ctx.slot * b};
    if (i + 1 == best.runs.size() && best.last_frac < 1.0)
      w.end -= Seconds{static_cast<long>(std::lround((1.0 - best.last_frac) * static_cast<double>(ctx.slot.count())))};
    if (best.runs.size() == 1) w.end = w.start + job.duration;
    d.windows.push_back(w);
  }
  d.start = d.windows.front().start;
  d.end = d.windows.back().end;
  d.deadline_met = d.end <= job.deadline;
  d.expected_operational_grams = best.op_g;
  d.expected_embodied_grams = best.emb_g;
  d.expected_grams = best.cost();
  d.forecast_extended = best.runs.back().second > p.forecast_slots;
  if (!std::isnan(d.run_now_home_grams)) {
    d.saving_grams = d.run_now_home_grams - d.expected_grams;
    d.saving_pct = d.run_now_home_grams > 0 ? 100.0 * d.saving_grams / d.run_now_home_grams : 0.0;
  } else {
    d.saving_grams = d.saving_pct = kNaN;
  }
  // Explanation.
  std::string e = "Job " + job.id + " (" + std::to_string(job.gpus) + (job.gpus == 1 ? " GPU, " : " GPUs, ");
  e += fmt1(static_cast<double>(job.duration.count()) / 3600.0) + " h";
  e += std::string(job.interruptible ? ", interruptible" : "") + "): run in " + d.region + " ";
  if (d.windows.size() == 1) {
    e += "from " + format_time(d.start) + " to " + format_time(d.end);
  } else {
    e += "in " + std::to_string(d.windows.size()) + " windows (checkpoint and resume) between " + format_time(d.start) +
         " and " + format_time(d.end);
  }
  e += " [" + std::string(policy_name(opt.policy)) + "]. Expected " + grams_str(d.expected_grams) + " CO2e (operational " +
       grams_str(d.expected_operational_grams) + ", embodied " + grams_str(d.expected_embodied_grams) + ")";
  if (!std::isnan(d.run_now_home_grams)) {
    e += " vs " + grams_str(d.run_now_home_grams) + " if run now in " + job.home_region + ": saves " +
         grams_str(d.saving_grams) + " (" + fmt1(d.saving_pct) + "%)";
  } else {
    e += "; home region '" + job.home_region + "' unknown, no run-now comparison";
  }
  e += ".";
  if (d.start > std::max(now, job.submit)) {
    e += " Waits " + fmt1(static_cast<double>((d.start - std::max(now, job.submit)).count()) / 3600.0) + " h";
    e += job.deadline != Time::max() ? " (deadline " + format_time(job.deadline) + ")." : ".";
  }
  if (d.forecast_extended)
    e += " The plan extends beyond the " + hours_str(ctx.slot * p.forecast_slots) +
         " forecast, which was extended by repeating its last 24 h.";
  if (!d.deadline_met) e += " It misses the deadline " + format_time(job.deadline) + ".";
  d.explanation = std::move(e);
  return d;
}

// The context of a pass that places `jobs`: slots enough for the longest
// horizon among them.
PassContext make_context(const std::vector<Region>& regions, const CapacityLedger& planned, Time now,
                         const PlacementOptions& opt, const std::vector<Job>& jobs) {
  PassContext ctx;
  ctx.now = now;
  // The slot: the finest supported forecast step (regions with another step
  // are refused by prepare(), naming it).
  ctx.slot = Hours{1};
  for (const auto& r : regions)
    if (!r.forecast.empty() && is_supported_step(r.forecast.step()) && r.forecast.step() < ctx.slot)
      ctx.slot = r.forecast.step();
  ctx.slot_h = static_cast<double>(ctx.slot.count()) / 3600.0;
  ctx.base = floor_to_step(now, ctx.slot);
  ctx.lookahead = static_cast<int>(std::max<long>(1, Seconds{opt.max_lookahead} / ctx.slot));
  ctx.n = ctx.lookahead;
  for (const auto& j : jobs) ctx.n = std::max(ctx.n, job_horizon(j, ctx.lookahead, ctx.slot, opt));
  ctx.prepared.reserve(regions.size());
  for (const auto& r : regions) ctx.prepared.push_back(prepare(r, now, ctx.n, planned, ctx.slot));
  const auto& prof = opt.expected_load_by_hour_of_week;
  bool deadline_bound = opt.policy == Policy::kTemporal || opt.policy == Policy::kSpatioTemporal;
  if (prof.empty() || !deadline_bound) return ctx;
  if (prof.size() != 168)
    throw CarbonError("placement: expected_load_by_hour_of_week has " + std::to_string(prof.size()) +
                      " entries (need 168)");
  if (!(opt.capacity_price_weight >= 0) || !std::isfinite(opt.capacity_price_weight))
    throw CarbonError("placement: capacity_price_weight must be a finite number >= 0");
  if (!(opt.capacity_price_load_spread >= 0 && opt.capacity_price_load_spread <= 1))
    throw CarbonError("placement: capacity_price_load_spread must be in [0, 1]");
  ctx.priced = true;
  ctx.price_weight = opt.capacity_price_weight;
  ctx.expected.assign(static_cast<size_t>(ctx.n), 0);
  ctx.order.assign(static_cast<size_t>(ctx.n), {});
  const double spread = opt.capacity_price_load_spread;
  for (int q = 0; q < kLoadPoints; ++q)
    ctx.load_factor[q] = spread == 0 ? 1.0 : 1.0 + spread * (2.0 * q / (kLoadPoints - 1) - 1.0);
  std::array<double, kLoadPoints> unset;
  unset.fill(std::numeric_limits<double>::quiet_NaN());
  ctx.theta.assign(static_cast<size_t>(ctx.n), unset);
  for (int k = 0; k < ctx.n; ++k) {
    double total = 0;
    auto& ord = ctx.order[k];
    for (size_t i = 0; i < ctx.prepared.size(); ++i) {
      if (!ctx.prepared[i].problem.empty()) continue;
      ord.push_back(static_cast<int>(i));
      total += ctx.prepared[i].capacity[k];
    }
    std::sort(ord.begin(), ord.end(), [&](int a, int b) {
      return ctx.prepared[a].intensity[k] < ctx.prepared[b].intensity[k] ||
             (ctx.prepared[a].intensity[k] == ctx.prepared[b].intensity[k] && a < b);
    });
    double f = prof[static_cast<size_t>(hour_of_week(ctx, k))];
    ctx.expected[k] = std::clamp(std::isfinite(f) ? f : 0.0, 0.0, 1.0) * total;
  }
  reprice(ctx, 0, ctx.n, /*force=*/true);
  return ctx;
}

// Reserves d's windows (sign -1: releases them) in the ledger and in the
// pass's view of it.
void commit(PassContext& ctx, CapacityLedger& planned, const Job& job, const Decision& d, int sign = 1) {
  // The ledger is per UTC hour: a window reserves every hour it overlaps,
  // so every slot of those hours is marked used here as well.
  planned.reserve(d.region, d.windows, sign * job.gpus);
  int lo = ctx.n, hi = 0;
  for (const auto& w : d.windows) {
    int ri = find_region(ctx, w.region.empty() ? d.region : w.region);
    if (ri < 0) continue;
    auto& p = ctx.prepared[ri];
    const int amount = sign * (w.gpus > 0 ? w.gpus : job.gpus);
    int a = static_cast<int>((floor_hour(w.start) - ctx.base) / ctx.slot);
    int b = static_cast<int>((ceil_hour(w.end) - ctx.base) / ctx.slot);
    for (int k = std::max(a, 0); k < std::min(b, ctx.n); ++k) p.used[k] += amount;
    lo = std::min(lo, std::max(a, 0));
    hi = std::max(hi, std::min(b, ctx.n));
  }
  if (ctx.priced && lo < hi) reprice(ctx, lo, hi, /*force=*/false);
}

}  // namespace

Decision place(const Job& job, const std::vector<Region>& regions, const CapacityLedger& planned, Time now,
               const PlacementOptions& options) {
  auto ctx = make_context(regions, planned, now, options, {job});
  return place_prepared(job, ctx, options);
}

std::vector<Decision> place_all(const std::vector<Job>& jobs, const std::vector<Region>& regions,
                                CapacityLedger& planned, Time now, const PlacementOptions& options) {
  return place_all(jobs, regions, planned, now, options, {}, nullptr);
}

std::vector<Decision> place_all(const std::vector<Job>& jobs, const std::vector<Region>& regions,
                                CapacityLedger& planned, Time now, const PlacementOptions& options,
                                const std::vector<const Decision*>& held, std::vector<bool>* kept) {
  if (!held.empty() && held.size() != jobs.size()) throw CarbonError("place_all: held plans must be empty or one per job");
  if (kept) kept->assign(jobs.size(), false);
  auto ctx = make_context(regions, planned, now, options, jobs);
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Job& x = jobs[a];
    const Job& y = jobs[b];
    if (x.deadline != y.deadline) return x.deadline < y.deadline;
    double gx = x.gpus * static_cast<double>(x.duration.count()), gy = y.gpus * static_cast<double>(y.duration.count());
    if (gx != gy) return gx > gy;
    if (x.seq != y.seq) return x.seq < y.seq;
    return x.id < y.id;
  });
  std::vector<Decision> out(jobs.size());
  for (size_t i : order) {
    const Decision* h = held.empty() ? nullptr : held[i];
    if (h) commit(ctx, planned, jobs[i], *h, -1);   // its own capacity is free to it, and only to it
    out[i] = place_prepared(jobs[i], ctx, options);
    if (out[i].feasible) {
      commit(ctx, planned, jobs[i], out[i]);
    } else if (h) {
      commit(ctx, planned, jobs[i], *h);              // nobody took it meanwhile: it still fits
      out[i] = *h;
      if (kept) (*kept)[i] = true;
    }
  }
  return out;
}

}  // namespace carbon
