// `mla-plan schedule`: the decode tile-scheduler plan for explicit per-request lengths, for
// engine developers who already have topk_length / extra_topk_length per decode token.

#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

void setup_schedule(CLI::App& app, ScheduleOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option("--kernel", opt.kernel, "sm90-sparse | sm100-head64 | sm100-head128 | sm90-dense")->required();
  add_int_option(*sub, "--num-sms", opt.num_sms, "number of SMs of the GPU (H100/H200/H800: 132, B200: 148)",
                 IntRange{1, ScheduleLimits::max_num_sms, {}})
      ->required();
  add_int_option(*sub, "--h-q", opt.h_q, "query heads per rank (sparse kernels: 64 or 128)",
                 IntRange{1, ScheduleLimits::max_heads, {}})
      ->required();
  add_int_option(*sub, "--s-q", opt.s_q, "query tokens per request row (default 1)",
                 IntRange{1, ScheduleLimits::max_s_q, {}});
  add_int_option(*sub, "--h-k", opt.h_k, "KV heads (dense kernel only, default 1)",
                 IntRange{1, ScheduleLimits::max_heads, {}});
  const IntRange length{0, ScheduleLimits::max_length, {}};
  add_int_list_option(*sub, "--lengths", opt.lengths,
                      "per-request main lengths: topk_length (sparse) or sequence length (dense), comma-separated",
                      length)
      ->required();
  add_int_list_option(*sub, "--extra-lengths", opt.extra_lengths,
                      "per-request extra_topk_length; giving it means an extra (compressed) cache is present", length);
  sub->add_flag("--json", opt.json, "Print {\"schema\", \"schedules\": [...]} (docs/cli.md)");
  sub->add_flag("--show-records", opt.show_records, "Print every partition's record in the text output");
}

namespace {

std::int32_t to_i32(std::int64_t v, const std::string& flag, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi) {
    throw_usage(flag + ": '" + std::to_string(v) + "' is out of range; allowed " + std::to_string(lo) + ".." +
                std::to_string(hi));
  }
  return static_cast<std::int32_t>(v);
}

std::vector<std::int32_t> to_i32_list(const std::vector<std::int64_t>& v, const std::string& flag) {
  std::vector<std::int32_t> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(to_i32(v[i], flag + "[" + std::to_string(i) + "]", 0, ScheduleLimits::max_length));
  }
  return out;
}

}  // namespace

SchedInput schedule_input(const ScheduleOptions& opt) {
  SchedInput in;
  const auto k = parse_sched_kernel(opt.kernel);
  if (!k) {
    throw_usage("--kernel: " + mlaplan::quoted(opt.kernel) +
                " is not a known decode kernel; allowed: sm90-sparse, "
                "sm100-head64, sm100-head128, sm90-dense");
  }
  in.kernel = *k;
  in.num_sms = to_i32(opt.num_sms, "--num-sms", 1, ScheduleLimits::max_num_sms);
  in.h_q = to_i32(opt.h_q, "--h-q", 1, ScheduleLimits::max_heads);
  in.s_q = to_i32(opt.s_q, "--s-q", 1, ScheduleLimits::max_s_q);
  in.h_k = to_i32(opt.h_k, "--h-k", 1, ScheduleLimits::max_heads);
  if (opt.lengths.empty()) throw_usage("--lengths needs at least one request");
  if (static_cast<std::int64_t>(opt.lengths.size()) > ScheduleLimits::max_cli_requests) {
    throw_usage("--lengths has " + std::to_string(opt.lengths.size()) + " requests; allowed 1.." +
                std::to_string(ScheduleLimits::max_cli_requests));
  }
  in.lengths = to_i32_list(opt.lengths, "--lengths");
  if (!opt.extra_lengths.empty()) {
    if (in.kernel == SchedKernel::sm90_dense) {
      throw_usage("--extra-lengths: the sm90-dense kernel has no extra cache");
    }
    if (opt.extra_lengths.size() != opt.lengths.size()) {
      throw_usage("--extra-lengths has " + std::to_string(opt.extra_lengths.size()) + " entries but --lengths has " +
                  std::to_string(opt.lengths.size()) + "; give one per request");
    }
    in.has_extra = true;
    in.extra_lengths = to_i32_list(opt.extra_lengths, "--extra-lengths");
  }
  return in;
}

int run_schedule(const ScheduleOptions& opt, const SchedInput& in, std::ostream& out) {
  ScheduleEntry e;
  e.input = in;
  try {
    e.plan = plan_schedule(e.input);
  } catch (const Error& err) {
    // The scheduler names h_q as the library does; here it came from --h-q.
    const std::string what = err.what();
    const std::string hq = "h_q = " + std::to_string(in.h_q) + ": ";
    if (err.kind() == ErrorKind::usage && what.rfind(hq, 0) == 0) {
      throw_usage("--h-q: '" + std::to_string(in.h_q) + "': " + what.substr(hq.size()));
    }
    throw;
  }
  out << (opt.json ? render_schedules_json({e}) : render_schedules_text({e}, opt.show_records));
  return 0;
}

namespace {

void check_schedule(ScheduleOptions& opt) { opt.input = schedule_input(opt); }

int run_schedule_command(const ScheduleOptions& opt, std::ostream& out, std::ostream&) {
  return run_schedule(opt, opt.input, out);
}

}  // namespace

const CommandRow& schedule_command() {
  static const CommandRow row = command_row<ScheduleOptions, setup_schedule, run_schedule_command, check_schedule>(
      "schedule", "Compute FlashMLA's decode tile-scheduler plan for explicit per-request lengths");
  return row;
}

}  // namespace mlaplan::cli
