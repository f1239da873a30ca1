#include "worker/reporter.h"

#include "carbon/accounting.h"
#include "carbon/hardware.h"
#include "shard/host_memory.h"
#include "worker/energy.h"
#include "worker/exporter.h"
#include "worker/status.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

namespace greenshard {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "-";
  const auto t = static_cast<long long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// The intensity in force: the configured constant, or polled from a URL
// every carbon.intensity_poll_s (with the status token as bearer).
class Intensity {
 public:
  Intensity(const JobConfig::Carbon& c, std::string token)
      : value_(c.gco2_per_kwh), url_(c.intensity_url), token_(std::move(token)), period_s_(c.intensity_poll_s) {}
  double now(bool* stale) {
    if (url_.empty()) return value_;
    if (!last_poll_ || seconds_since(*last_poll_) >= period_s_) {
      last_poll_ = Clock::now();
      if (auto got = fetch_intensity(url_, token_)) {
        value_ = *got;
        stale_ = false;
      } else {
        stale_ = true;  // keep the last value; the log says so
      }
    }
    if (stale) *stale = stale_;
    return value_;
  }

 private:
  double value_;
  std::string url_, token_;
  double period_s_;
  std::optional<Clock::time_point> last_poll_;
  bool stale_ = false;
};

EnergyMeterOptions meter_options(const JobConfig& cfg, const ReporterContext& ctx) {
  EnergyMeterOptions eo;
  eo.gpu_index = ctx.nvml_index;
  eo.cpu_tdp_watts = cfg.carbon.cpu_tdp_watts;
  eo.local_world_size = ctx.local_world_size;
  return eo;
}

}  // namespace

struct Reporter::Impl {
  Impl(const JobConfig& c, ReporterContext x, StatusPusher* p, std::optional<StatusPush>& s)
      : cfg(c),
        ctx(std::move(x)),
        lead(ctx.rank == 0),
        tty(lead && isatty(STDOUT_FILENO) && c.log.format == "text"),
        pusher(p),
        last_status(s),
        meter(meter_options(c, ctx)),
        mine(c.carbon.pue, carbon::hardware_profile(ctx.hardware), c.carbon.resources),
        intensity(c.carbon, c.status.token) {}

  const JobConfig& cfg;
  ReporterContext ctx;
  bool lead, tty;
  StatusPusher* pusher;
  std::optional<StatusPush>& last_status;
  std::unique_ptr<Exporter> exporter;
  EnergyMeter meter;
  carbon::EmissionsAccumulator mine;   // this rank, this run
  Intensity intensity;
  RunState base;                       // totals before this run
  Clock::time_point t_start = Clock::now(), last_meter = Clock::now(), window_start = Clock::now();
  double last_energy_j = 0, intensity_now = 0;
  double loss = NAN, tps = 0, mfu = 0, eta = 0;
  int64_t steps_this_run = 0;
  std::optional<Clock::time_point> last_push;

  void say(const std::string& line) const {
    if (lead) std::cout << line << std::endl;
  }

  StatusPush status(RunPhase state, const RunState& st) const {
    auto known = [](double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; };
    StatusPush s;
    s.state = state;
    s.step = st.step;
    s.total_steps = cfg.schedule.steps;
    s.tokens = static_cast<int64_t>(st.tokens);
    s.loss = known(loss);
    s.val_loss = known(st.last_val);
    s.tokens_per_s = tps;
    s.mfu = mfu;
    s.eta_s = state == RunPhase::kRunning ? eta : 0.0;
    s.energy_joules = st.energy_j;
    s.operational_grams = st.operational_g;
    s.embodied_grams = st.embodied_g;
    return s;
  }

  void log_line(const StepResult& r, const RunState& st) {
    if (cfg.log.format == "json") {
      json j{{"step", st.step}, {"steps", cfg.schedule.steps}, {"loss", r.loss}, {"lr", r.lr},
             {"grad_norm", finite_or_null(r.grad_norm)}, {"ms", r.seconds * 1000}, {"tokens_per_s", tps},
             {"mfu", mfu}, {"eta_s", eta}, {"energy_joules", st.energy_j},
             {"operational_grams", st.operational_g}, {"embodied_grams", st.embodied_g}};
      if (std::isfinite(st.last_val)) j["val_loss"] = st.last_val;
      std::cout << j.dump() << std::endl;
      return;
    }
    char line[320];
    std::snprintf(line, sizeof line,
                  "step %5lld/%lld | loss %.4f | lr %.2e | norm %6.3f | %8.1f ms | %9.0f tok/s | MFU %5.2f%% | "
                  "%.3f gCO2e | ETA %s",
                  static_cast<long long>(st.step), static_cast<long long>(cfg.schedule.steps), r.loss, r.lr,
                  r.grad_norm, r.seconds * 1000, tps, 100 * mfu, st.operational_g + st.embodied_g, hms(eta).c_str());
    if (tty) {
      const int width = 20, done = static_cast<int>(width * st.step / cfg.schedule.steps);
      std::cout << "\r" << line << " [" << std::string(done, '#') << std::string(width - done, '.') << "]"
                << (st.step == cfg.schedule.steps ? "\n" : "") << std::flush;
      return;
    }
    const bool val_now = std::isfinite(st.last_val) && st.step % std::max<int64_t>(1, cfg.schedule.eval_interval) == 0;
    std::cout << line << (val_now ? " | val " + std::to_string(st.last_val).substr(0, 6) : "") << std::endl;
  }

  void write_summary(RunEnd end, const RunState& st, int64_t resumed_from) const {
    const double sci = st.tokens > 0 ? (st.operational_g + st.embodied_g) / (st.tokens / 1000.0) : NAN;
    // What the controller reads (worker/run_summary.h), then the rest.
    RunSummary rs;
    rs.state = end;
    rs.steps = st.step;
    rs.tokens = static_cast<int64_t>(st.tokens);
    if (std::isfinite(st.last_val)) rs.final_val_loss = st.last_val;
    rs.energy_joules = st.energy_j;
    rs.operational_grams = st.operational_g;
    rs.embodied_grams = st.embodied_g;
    json summary = to_json(rs);
    summary.update(json{{"job_id", cfg.job_id},
                        {"total_steps", cfg.schedule.steps},
                        {"world_size", ctx.world},
                        {"final_loss", finite_or_null(loss)},
                        {"best_val_loss", finite_or_null(st.best_val)},
                        {"wall_s", st.wall_s},
                        {"tokens_per_s", tps},
                        {"mfu", mfu},
                        {"sci_per_1k_tokens", finite_or_null(sci)},
                        {"region", cfg.carbon.region},
                        {"grid_intensity_gco2_per_kwh", intensity_now},
                        {"resumed_from_step", resumed_from >= 0 ? json(resumed_from) : json(nullptr)}});
    if (!cfg.summary_path.empty()) {
      const std::string tmp = cfg.summary_path + ".tmp";
      std::ofstream(tmp) << summary.dump(2) << "\n";
      std::filesystem::rename(tmp, cfg.summary_path);
    }
    if (!cfg.termination_log.empty()) {
      // Kubernetes keeps at most 4096 bytes of it: the fields the controller reads.
      std::ofstream(cfg.termination_log, std::ios::trunc) << to_json(rs).dump() << "\n";
    }
  }
};

Reporter::Reporter(const JobConfig& cfg, ReporterContext ctx, StatusPusher* pusher,
                   std::optional<StatusPush>& last_status)
    : impl_(std::make_unique<Impl>(cfg, std::move(ctx), pusher, last_status)) {
  auto& I = *impl_;
  if (cfg.metrics.port > 0) {
    const int port = static_cast<int>(cfg.metrics.port) + I.ctx.rank;
    I.exporter = std::make_unique<Exporter>(cfg.metrics.bind + ":" + std::to_string(port), cfg.job_id, I.ctx.rank,
                                            cfg.carbon.region);
    I.say("metrics: http://" + cfg.metrics.bind + ":" + std::to_string(port) + "/metrics (rank r: port + r)");
  }
  I.intensity_now = I.intensity.now(nullptr);
}

Reporter::~Reporter() = default;

void Reporter::say(const std::string& line) const { impl_->say(line); }

void Reporter::begin(const RunState& base) {
  impl_->base = base;
  impl_->t_start = impl_->window_start = impl_->last_meter = Clock::now();
}

double Reporter::wall_s() const { return impl_->base.wall_s + seconds_since(impl_->t_start); }

void Reporter::account(RunState& st) {
  auto& I = *impl_;
  auto r = I.meter.read();
  const double e = r.total_joules();
  // The interval's energy at the intensity in force during it (the value
  // polled before it began); then the value for the next interval.
  I.mine.add_seconds(e - I.last_energy_j, seconds_since(I.last_meter), I.intensity_now);
  bool stale = false;
  I.intensity_now = I.intensity.now(&stale);
  I.last_energy_j = e;
  I.last_meter = Clock::now();
  auto tot = I.ctx.sum_over_ranks({I.mine.energy_joules(), I.mine.operational_grams(), I.mine.embodied_grams()});
  st.energy_j = I.base.energy_j + tot[0];
  st.operational_g = I.base.operational_g + tot[1];
  st.embodied_g = I.base.embodied_g + tot[2];
  st.wall_s = wall_s();
  if (I.exporter) {
    I.exporter->on_energy(r, e);
    I.exporter->on_emissions(I.intensity_now, I.mine.operational_grams(), I.mine.embodied_grams(),
                             I.mine.sci_per_1k_tokens());
    auto hm = shard::host_memory();
    I.exporter->on_memory(static_cast<double>(hm.rss_bytes), static_cast<double>(hm.peak_rss_bytes),
                          I.ctx.unsharded_peak_bytes ? I.ctx.unsharded_peak_bytes() : 0.0);
  }
  if (stale)
    I.say("warning: carbon.intensity_url unreachable; using the last value " + std::to_string(I.intensity_now) +
          " gCO2e/kWh (stale)");
}

void Reporter::on_step(const StepResult& r, RunState& st) {
  auto& I = *impl_;
  ++I.steps_this_run;
  I.loss = r.loss;
  const double tokens_per_step = I.ctx.tokens_per_rank_step * I.ctx.world;
  I.tps = tokens_per_step / r.seconds;
  I.mfu = I.ctx.peak_flops > 0 ? I.ctx.flops_per_token * (I.tps / I.ctx.world) / I.ctx.peak_flops : 0.0;
  I.eta = seconds_since(I.window_start) / static_cast<double>(I.steps_this_run) *
          static_cast<double>(I.cfg.schedule.steps - st.step);
  I.mine.add_tokens(I.ctx.tokens_per_rank_step);
  const bool log_now = st.step % I.cfg.log.every == 0 || st.step == I.cfg.schedule.steps || r.preempt;
  if (log_now) account(st);
  if (I.exporter) {
    StepMetrics sm;
    sm.step_seconds = r.seconds;
    sm.tokens = I.ctx.tokens_per_rank_step;
    sm.loss = r.loss;
    sm.tokens_per_second = I.tps;
    sm.mfu = I.mfu;
    sm.model_flops = I.ctx.flops_per_token * I.ctx.tokens_per_rank_step;
    sm.progress = static_cast<double>(st.step) / static_cast<double>(I.cfg.schedule.steps);
    sm.eta_seconds = I.eta;
    sm.collective_seconds = r.collective_seconds;
    I.exporter->on_step(sm);
  }
  if (log_now && I.lead) I.log_line(r, st);
  if (r.preempt) I.say("preempted (SIGTERM or SIGINT on some rank): saving and stopping");
  // Status every status.interval_s seconds (the first after the first step);
  // only rank 0 pushes.
  if (I.lead) {
    I.last_status = I.status(RunPhase::kRunning, st);
    if (I.pusher && (!I.last_push || seconds_since(*I.last_push) >= I.cfg.status.interval_s)) {
      I.pusher->push(*I.last_status);
      I.last_push = Clock::now();
    }
  }
}

void Reporter::on_validation(double val_loss, RunState& st) {
  st.last_val = val_loss;
  if (!std::isfinite(val_loss)) return;
  st.best_val = std::min(st.best_val, val_loss);
  if (impl_->exporter) impl_->exporter->on_validation(val_loss);
}

void Reporter::finish(RunEnd end, RunState& st, int64_t resumed_from) {
  auto& I = *impl_;
  if (!I.lead) return;
  I.write_summary(end, st, resumed_from);
  const std::string final_state(to_string(end));
  I.say("done: " + final_state + ", " + std::to_string(st.step) + " steps, loss " + std::to_string(I.loss) +
        ", energy " + std::to_string(st.energy_j / 3600.0) + " Wh, " + std::to_string(st.operational_g) +
        " g operational + " + std::to_string(st.embodied_g) + " g embodied CO2e");
  I.last_status = I.status(phase_of(end), st);
  if (I.pusher) {
    I.pusher->push(*I.last_status);
    I.pusher->flush(std::chrono::seconds(5));
  }
}

StatusPush failed_status(const std::optional<StatusPush>& last_status, int64_t total_steps,
                         const std::string& message) {
  StatusPush s = last_status.value_or(StatusPush{});
  s.total_steps = total_steps;
  s.state = RunPhase::kFailed;
  s.eta_s = 0;
  s.message = message.substr(0, kStatusMessageMaxBytes);
  return s;
}

}  // namespace greenshard
