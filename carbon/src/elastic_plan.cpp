#include "elastic_plan.h"

#include "carbon/error.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <limits>
#include <queue>

namespace carbon {

double checkpoint_gb(const Job& job, const ElasticCosts& costs) {
  return job.checkpoint_gb > 0 ? job.checkpoint_gb : costs.checkpoint_gb_per_gpu * job.gpus;
}

Seconds change_overhead(const Job& job, const ElasticCosts& costs, bool move) {
  double s = static_cast<double>(job.resume_overhead.count());
  if (move && costs.network_gb_per_s > 0) s += checkpoint_gb(job, costs) / costs.network_gb_per_s;
  return Seconds{static_cast<long>(std::ceil(s))};
}

double move_network_grams(const Job& job, const ElasticCosts& costs, double from_gco2_per_kwh, double to_gco2_per_kwh) {
  return checkpoint_gb(job, costs) * costs.network_kwh_per_gb * 0.5 * (from_gco2_per_kwh + to_gco2_per_kwh);
}

namespace detail {

namespace {

constexpr double kEps = 1e-9;

struct Block {
  int first = 0, last = 0;   // slots [first, last)
};

// A width increment offered by a block; the queue pops the lowest
// cost per unit of work first (ties: the earlier block).
struct Increment {
  double ratio = 0;
  int block = 0;
  int width_after = 0;
  bool operator<(const Increment& o) const {
    return ratio > o.ratio || (ratio == o.ratio && block > o.block);
  }
};

}  // namespace

ElasticResult plan_elastic(const Job& job, const std::vector<ElasticRegionView>& views, int first_slot, int end_slot,
                           double slot_h, const ElasticCosts& costs) {
  ElasticResult res;
  const int wmin = job.min_width(), wmax = job.max_width();
  if (wmin < 1 || wmax < wmin) {
    res.reason = "elastic width [" + std::to_string(wmin) + ", " + std::to_string(wmax) + "] is empty";
    return res;
  }
  if (!(slot_h > 0)) throw CarbonError("plan_elastic: slot length must be > 0");
  const int step = std::max(1, job.width_step);
  const int B = std::max(1, static_cast<int>(std::lround(static_cast<double>(costs.min_hold.count()) / slot_h)));
  std::vector<Block> blocks;
  for (int a = first_slot; a < end_slot; a += B) blocks.push_back({a, std::min(a + B, end_slot)});
  const size_t nb = blocks.size(), nv = views.size();
  if (nb == 0 || nv == 0) {
    res.reason = nb == 0 ? "no whole block of time before the deadline" : "no candidate region";
    return res;
  }
  auto len_h = [&](size_t b) { return (blocks[b].last - blocks[b].first) * slot_h; };

  // Per view and block: free capacity in every slot, ranked grams of one
  // GPU for the whole block, mean forecast intensity.
  // (One array each, view-major: [v][b] is [v * nb + b].)
  std::vector<int> freecap_(nv * nb);
  std::vector<double> per_gpu_(nv * nb), mean_i_(nv * nb);
  auto freecap = [&](size_t v, size_t b) -> int& { return freecap_[v * nb + b]; };
  auto per_gpu = [&](size_t v, size_t b) -> double& { return per_gpu_[v * nb + b]; };
  auto mean_i = [&](size_t v, size_t b) -> double& { return mean_i_[v * nb + b]; };
  for (size_t v = 0; v < nv; ++v) {
    const auto& V = views[v];
    for (size_t b = 0; b < nb; ++b) {
      int fc = wmax;
      double ss = 0, si = 0;
      for (int k = blocks[b].first; k < blocks[b].last; ++k) {
        fc = std::min(fc, (*V.capacity)[k] - (*V.used)[k]);
        ss += (*V.score)[k];
        si += (*V.intensity)[k];
      }
      freecap(v, b) = fc;
      per_gpu(v, b) = V.kw_per_gpu * ss * slot_h + V.emb_per_gpu_h * len_h(b);
      mean_i(v, b) = si / (blocks[b].last - blocks[b].first);
    }
  }

  // Speed at each width a block may take: 0, then min_width up by
  // width_step to max_width (next_width below).
  std::vector<double> sp(static_cast<size_t>(wmax) + 1, 0.0);
  for (int w = wmin;; w = std::min(wmax, w + step)) {
    sp[w] = job.speed(w);
    if (w == wmax) break;
  }
  // The widest width a block of view v can take (0: not even min_width).
  auto widest = [&](size_t v, size_t b) {
    const int cap = std::min(wmax, freecap(v, b));
    if (cap < wmin) return 0;
    return cap >= wmax ? wmax : wmin + (cap - wmin) / step * step;
  };
  // Ranked grams per hour of work in block b of view v at its widest.
  auto per_work = [&](size_t v, size_t b) {
    const int w = widest(v, b);
    return per_gpu(v, b) * w / (sp[w] * len_h(b));
  };

  // Run time a change costs, hours: in place, and with a move.
  const double stay_h = static_cast<double>(change_overhead(job, costs, false).count()) / 3600.0;
  const double move_h = static_cast<double>(change_overhead(job, costs, true).count()) / 3600.0;
  auto overhead_h = [&](bool move) { return move ? move_h : stay_h; };

  // 2. The region of each block: the lowest ranked grams per unit of work
  //    at the widest width it has room for, with hysteresis against moves.
  std::vector<int> reg(nb, -1);
  int prev = -1;
  for (size_t b = 0; b < nb; ++b) {
    int best = -1;
    for (size_t v = 0; v < nv; ++v)
      if (widest(v, b) > 0 && (best < 0 || per_work(v, b) < per_work(best, b) - kEps)) best = static_cast<int>(v);
    if (best < 0) continue;
    if (prev >= 0 && prev != best && widest(prev, b) > 0) {
      double gain = (per_work(prev, b) - per_work(best, b)) * len_h(b);
      double move = move_h / len_h(b) * per_gpu(best, b) * job.gpus +
                    move_network_grams(job, costs, mean_i(prev, b), mean_i(best, b));
      if (gain <= move) best = prev;
    }
    reg[b] = best;
    prev = best;
  }

  // 3. Increments, cheapest work first.
  std::vector<int> width(nb, 0);
  // The blocks that run (width > 0), as bits: widths only grow, so a block
  // joins once. The nearest running block on either side of a block is a
  // word scan, not a walk over the idle blocks between them.
  std::vector<std::uint64_t> running((nb + 63) / 64, 0);
  constexpr long kNone = -1;
  auto set_running = [&](size_t b) { running[b / 64] |= std::uint64_t{1} << (b % 64); };
  // The last running block before x (kNone: none).
  auto prev_running = [&](size_t x) -> long {
    if (x == 0) return kNone;
    size_t i = x - 1, word = i / 64;
    std::uint64_t bits = running[word] & (~std::uint64_t{0} >> (63 - i % 64));
    for (;;) {
      if (bits) return static_cast<long>(word * 64 + 63 - static_cast<size_t>(__builtin_clzll(bits)));
      if (word == 0) return kNone;
      bits = running[--word];
    }
  };
  // The first running block after x (nb: none).
  auto next_running = [&](size_t x) -> size_t {
    size_t i = x + 1;
    if (i >= nb) return nb;
    size_t word = i / 64;
    std::uint64_t bits = running[word] & (~std::uint64_t{0} << (i % 64));
    for (;;) {
      if (bits) return std::min(nb, word * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
      if (++word == running.size()) return nb;
      bits = running[word];
    }
  };
  // The change that starts block x when block ob is at width ow (every
  // other block at its current width): its ranked grams and the work it
  // loses; 0 when x does not run, continues the block before it, or is the
  // first to run.
  auto change_at = [&](size_t x, size_t ob, int ow, double& lost_work) {
    lost_work = 0;
    auto wd = [&](size_t i) { return i == ob ? ow : width[i]; };
    const int wx = wd(x);
    if (wx == 0) return 0.0;
    if (x > 0 && wd(x - 1) == wx && reg[x - 1] == reg[x]) return 0.0;
    long p = prev_running(x);
    if (p == static_cast<long>(ob) && ow == 0) p = prev_running(ob);
    if (ob < x && ow > 0 && static_cast<long>(ob) > p) p = static_cast<long>(ob);
    if (p == kNone) return 0.0;
    const double ov = overhead_h(reg[static_cast<size_t>(p)] != reg[x]);
    lost_work = ov * sp[wx];
    return ov / len_h(x) * per_gpu(reg[x], x) * wx;
  };
  // Ranked grams and lost work of the changes at b and at the next block
  // that runs after it, with b at width w.
  auto local_changes = [&](size_t b, int w, double& lost_work) {
    const size_t c = next_running(b);
    double l1 = 0, l2 = 0;
    double g = change_at(b, b, w, l1) + (c < nb ? change_at(c, b, w, l2) : 0.0);
    lost_work = l1 + l2;
    return g;
  };
  // Cost per unit of work of raising block b to its next width level, its
  // changes included (+inf when it gains nothing after them).
  constexpr double kNever = std::numeric_limits<double>::infinity();
  auto next_width = [&](size_t b) {
    const int v = reg[b];
    if (v < 0) return 0;
    const int cap = std::min(wmax, freecap(v, b));
    const int w = width[b];
    const int next = w < wmin ? wmin : std::min(wmax, w + step);
    return next > cap || next == w ? 0 : next;
  };
  auto ratio = [&](size_t b, int next) {
    const int w = width[b];
    double lost_now = 0, lost_next = 0;
    const double g_now = local_changes(b, w, lost_now);
    const double g_next = local_changes(b, next, lost_next);
    const double gain = (sp[next] - sp[w]) * len_h(b) - (lost_next - lost_now);
    if (gain <= kEps) return kNever;
    return (per_gpu(reg[b], b) * (next - w) + g_next - g_now) / gain;
  };
  std::priority_queue<Increment> queue;
  auto offer_next = [&](size_t b) {
    if (int next = next_width(b); next > 0) queue.push({ratio(b, next), static_cast<int>(b), next});
  };
  for (size_t b = 0; b < nb; ++b) offer_next(b);

  // 4. Windows of the chosen blocks, and the work their changes lose.
  auto build = [&](double& lost) {
    std::vector<ElasticWindow> ws;
    lost = 0;
    for (size_t b = 0; b < nb; ++b) {
      if (width[b] == 0) continue;
      if (!ws.empty() && ws.back().last == blocks[b].first && ws.back().view == reg[b] && ws.back().gpus == width[b]) {
        ws.back().last = blocks[b].last;
        continue;
      }
      ElasticWindow w;
      w.view = reg[b];
      w.first = blocks[b].first;
      w.last = blocks[b].last;
      w.gpus = width[b];
      if (!ws.empty()) {
        w.overhead_h = overhead_h(ws.back().view != w.view);
        lost += w.overhead_h * sp[w.gpus];
      }
      ws.push_back(w);
    }
    return ws;
  };
  const double need = static_cast<double>(job.duration.count()) / 3600.0;   // work, in hours at width gpus
  double work = 0, lost = 0;
  std::vector<ElasticWindow> ws;
  for (;;) {
    while (work < need + lost - kEps && !queue.empty()) {
      Increment it = queue.top();
      queue.pop();
      size_t b = static_cast<size_t>(it.block);
      if (it.width_after != next_width(b)) continue;   // stale
      // Neighbours may have changed since it was offered: re-price lazily.
      const double r = ratio(b, it.width_after);
      if (r > it.ratio * (1 + 1e-12) + kEps && !queue.empty() && r > queue.top().ratio) {
        it.ratio = r;
        queue.push(it);
        continue;
      }
      work += (sp[it.width_after] - sp[width[b]]) * len_h(b);
      width[b] = it.width_after;
      set_running(b);
      offer_next(b);
      // The next running blocks on either side now see other changes (and
      // the blocks right beside it, running or not).
      if (b > 0) {
        offer_next(b - 1);
        if (width[b - 1] == 0)
          if (long p = prev_running(b - 1); p != kNone) offer_next(static_cast<size_t>(p));
      }
      if (b + 1 < nb) {
        offer_next(b + 1);
        if (width[b + 1] == 0)
          if (size_t c = next_running(b + 1); c < nb) offer_next(c);
      }
    }
    ws = build(lost);
    if (work >= need + lost - kEps) break;
    if (queue.empty()) {
      res.reason = "not enough free capacity for " + std::to_string(wmin) + ".." + std::to_string(wmax) +
                   " GPUs before the deadline";
      return res;
    }
  }
  // No window may be shorter than the change that starts it.
  for (const auto& w : ws)
    if (w.overhead_h >= (w.last - w.first) * slot_h - kEps) {
      res.reason = "a window is shorter than its change overhead";
      return res;
    }

  // 5. The last window ends when the work is done.
  {
    auto& w = ws.back();
    double surplus = work - need - lost;
    double L = (w.last - w.first) * slot_h;
    double keep = std::max(L - surplus / sp[w.gpus], w.overhead_h + kEps);
    int slots = std::max(1, static_cast<int>(std::ceil(keep / slot_h - kEps)));
    w.last = w.first + slots;
    w.last_frac = std::clamp((keep - (slots - 1) * slot_h) / slot_h, 0.0, 1.0);
  }

  // Grams and changes.
  for (size_t i = 0; i < ws.size(); ++i) {
    const auto& w = ws[i];
    const auto& V = views[static_cast<size_t>(w.view)];
    double si = 0, ss = 0, h = 0;
    for (int k = w.first; k < w.last; ++k) {
      double f = (k == w.last - 1 ? w.last_frac : 1.0) * slot_h;
      si += (*V.intensity)[k] * f;
      ss += (*V.score)[k] * f;
      h += f;
    }
    res.op_g += V.kw_per_gpu * w.gpus * si;
    res.score_g += V.kw_per_gpu * w.gpus * ss;
    res.emb_g += V.emb_per_gpu_h * w.gpus * h;
    if (i == 0) continue;
    const auto& p = ws[i - 1];
    const auto& P = views[static_cast<size_t>(p.view)];
    ElasticChange c;
    c.window = i;
    double net = 0;
    if (p.view != w.view) net = move_network_grams(job, costs, (*P.intensity)[w.first], (*V.intensity)[w.first]);
    res.network_g += net;
    double mean_new = si / h;
    c.cost_grams = w.overhead_h * w.gpus * (V.kw_per_gpu * mean_new + V.emb_per_gpu_h) + net;
    // The same work at the previous region and width over this window's slots.
    double pi = 0;
    for (int k = w.first; k < w.last; ++k) pi += (*P.intensity)[k] * (k == w.last - 1 ? w.last_frac : 1.0) * slot_h;
    double mean_prev = pi / h;
    double work_w = (h - w.overhead_h) * sp[w.gpus];
    double per_work_new = w.gpus * (V.kw_per_gpu * mean_new + V.emb_per_gpu_h) / sp[w.gpus];
    double per_work_prev = p.gpus * (P.kw_per_gpu * mean_prev + P.emb_per_gpu_h) / sp[p.gpus];
    c.saved_grams = work_w * (per_work_prev - per_work_new) - c.cost_grams;
    c.mean_from = mean_prev;
    c.mean_to = mean_new;
    res.changes.push_back(std::move(c));
  }
  res.windows = std::move(ws);
  res.ok = true;
  return res;
}

}  // namespace detail
}  // namespace carbon
