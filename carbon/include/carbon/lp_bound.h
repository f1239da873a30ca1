// Capacity-constrained LP lower bound on a trace's emissions.
//
// Given exactly what simulate() is given (the trace; the regions with their
// capacity in GPUs, PUE and hardware; each zone's actual hourly intensity),
// lp_bound() bounds from below the emissions of every schedule that finishes
// each job by its deadline within the regions' capacities, whatever the
// policy. The linear program, solved with CLP (GLPK as the tests' check):
//
//   variables  x[j][r][t] >= 0: hours that job j runs, at its full width of
//              gpus_j GPUs, in region r during UTC hour t
//              (r: an allowed region with capacity >= gpus_j and recorded
//              intensity in hour t; t: hours overlapping [submit_j, deadline_j))
//   minimize   sum  x[j][r][t] * gpus_j * g(r, t, utilization_j)
//   subject to sum_{r,t} x[j][r][t]          = duration_j (hours)    each job
//              sum_r x[j][r][t]              <= f[j][t]              each job, hour
//              sum_j gpus_j * x[j][r][t]     <= capacity_r           each region, hour
//
// f[j][t] is the part of hour t inside [submit_j, deadline_j) (1 for whole
// hours): a job never runs faster than its width.
//
// Elastic jobs (Job::elastic(): a width in [min_width, max_width] in steps
// of width_step on a scaling curve): x[j][r][t] is work (in hours at width
// gpus_j) done in hour t, split into segments along the lower convex hull
// of the origin and the points (speed(w), w) -- the GPUs a rate needs when
// the hour may be shared between widths: segment k does at most
// f[j][t] * rate_k of work at gpus_k GPU-hours per hour of work (gpus_k
// increasing in k); regions need capacity >= min_width. Any mix of widths
// within an hour lies on or above the hull, so this is still a relaxation.
// A fixed-width job is the one segment (rate 1, gpus_j). g is the grams of one
// GPU-hour by the simulator's own accounting: operational_grams() over the
// actual series for hardware.power_w(1, utilization) at the region's PUE,
// plus embodied_grams() of one GPU-hour.
//
// What it relaxes: integrality (a job may run any fraction of an hour),
// gangs and windows (a job may split across regions and hours freely:
// migration is free, resumes cost nothing), and the scheduling cycle (a job
// may start at its submit time). What it keeps: each region's capacity in
// every hour, each job's width, work and deadline. A schedule that misses a
// deadline (the simulator's fallback) is outside that set and not bounded.
//
// The bound reported is always the Lagrangian bound at the LP's capacity
// prices lambda[r][t] >= 0 (the duals of the capacity rows):
//   L(lambda) = sum_j min_{x_j} sum_{r,t} x[j][r][t] * gpus_j * (g(r,t) + lambda[r][t])
//               - sum_{r,t} lambda[r][t] * capacity_r,
// each job's minimum taken alone over its own window and width (its
// cheapest priced hours first, computed exactly here). By weak duality L is
// <= the LP optimum for *any* lambda >= 0, so the bound never depends on the
// solver's accuracy; with optimal duals it equals the optimum.
//
// Blocks (LpBoundOptions::block_hours > 0), for horizons too large for one
// LP: the horizon is cut into blocks of block_hours from the first job's
// first hour. Block b's LP holds every job whose window meets the block
// widened by block_margin_hours on both sides -- with its whole window, full
// work and the full capacity -- and its duals price the block's own hours.
// Jobs that span a boundary are thus in the LPs of every block they touch;
// nothing is clipped or split. Since the bound is L(lambda), any prices keep
// it valid; the margins only make the prices (hence the bound) tighter.
//
// Implementation: jobs with the same utilization and usable regions form a
// "kind" and share one balance row per hour, so regions are aggregated
// exactly (all jobs of a kind pay the same per GPU-hour). For the interior
// point solver the jobs of a kind are also grouped (10 per group, by first
// hour) with one partial-sum row per group and hour, which keeps every row
// short: GLPK's interior point forms A*D*A' row by row, and CLP's dual
// simplex is fastest so too.
//
// Merged classes (LpBoundOptions::merge_alike_jobs): jobs of the same kind,
// rate segments and hours share one job row whose work and per-hour limits
// are their sums. That LP relaxes the exact one (its optimum is a lower
// bound too), and its prices still feed L(lambda) over the single jobs, so
// the bound lies between the merged LP's optimum and the exact bound.
#pragma once

#include "carbon/job.h"
#include "carbon/simulator.h"

#include <string>
#include <vector>

namespace carbon {

enum class LpSolver {
  kClp,        // CLP's dual simplex after its presolve (coinor-libclp, EPL-2.0): default
  kInterior,   // GLPK's glp_interior (no presolve in GLPK): the independent check
  kSimplex,    // GLPK's glp_simplex, presolve on, primal: a basic optimum; slow on large LPs
};

// What a time budget overrun does: throw CarbonError, or leave the LPs not
// solved in time out (their hours priced at 0: L(lambda) is still a lower
// bound, a looser one) and list them in LpBound::over_budget.
enum class LpBudgetOut { kThrow, kPriceAtZero };

struct LpBoundOptions {
  LpSolver solver = LpSolver::kClp;
  // Wall-clock budget of the whole call, seconds. CLP and glp_simplex get
  // what is left as their limit; glp_interior has none in GLPK, so the
  // budget is also checked before each LP starts. Exceeding it: on_budget_out.
  double time_limit_s = 900;
  LpBudgetOut on_budget_out = LpBudgetOut::kThrow;
  // 0: one LP over the whole horizon. N > 0: blocks of N hours (see above).
  int block_hours = 0;
  // Context on either side of a block; only the tightness depends on it.
  int block_margin_hours = 0;
  // Blocks solved in parallel (each thread its own solver; GLPK's
  // environment is per thread).
  int threads = 1;
  // A job that cannot finish by its deadline even alone: its window, in
  // allowed regions with capacity >= its GPUs and recorded intensity, holds
  // fewer hours than its duration. false: CarbonError naming the jobs.
  // true: left out of the bound and listed in LpBound::infeasible_jobs (the
  // bound stays a lower bound on the others' emissions, hence on all).
  bool skip_infeasible_jobs = false;
  // One LP row per class of alike jobs (same kind, rate segments and hours)
  // instead of one per job: a relaxation of the LP, so its prices are
  // slightly less exact, and several times faster on generated traces.
  bool merge_alike_jobs = false;
  // The solver's own progress messages on stdout.
  bool solver_messages = false;
};

struct LpBound {
  double grams = 0;                  // the lower bound, L(lambda) (operational + embodied)
  // One LP over the whole horizon: its optimum as the solver reports it
  // (== grams up to solver tolerances). Blocks: NaN.
  double lp_grams = 0;
  int jobs = 0;                      // jobs in the bound
  std::vector<std::string> infeasible_jobs;   // left out (skip_infeasible_jobs)
  // kPriceAtZero: one line per LP the budget left unsolved (which jobs and
  // hours, and how the budget ran out); empty when every LP was solved.
  std::vector<std::string> over_budget;
  int lps = 0;                       // LPs solved
  int lp_job_rows = 0;               // job rows over all LPs (merge_alike_jobs: classes)
  int simplex_fallbacks = 0;         // glp_interior LPs re-solved by glp_simplex
  int max_rows = 0, max_cols = 0;    // size of the largest LP (before presolve)
  double solve_s = 0;                // solver time, all LPs (summed over threads)
  double total_s = 0;                // wall time of lp_bound()
};

// Throws CarbonError on the simulator's input errors (unknown region,
// missing series, capacity < 0, PUE < 1), on jobs infeasible alone (unless
// skipped), when no fractional schedule meets every deadline within the
// capacities (naming the LP's jobs and window, and an overloaded interval
// when one is found), when the time budget runs out (unless
// LpBudgetOut::kPriceAtZero), and on any other GLPK failure.
LpBound lp_bound(const std::vector<Job>& trace, const SimConfig& config, const LpBoundOptions& options = {});

}  // namespace carbon
