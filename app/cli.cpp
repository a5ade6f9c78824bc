#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <locale>
#include <ostream>

#include <locale.h>  // newlocale, uselocale, freelocale (POSIX)

#include "commands.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan/version.hpp"

namespace mlaplan::cli {

namespace {

constexpr const char* kDescription =
    "mla-plan: plans and validates attention layouts for DeepSeek's sparse-MLA models\n"
    "(V4.1, V4.0, V3.2): layer topology, KV-cache layouts and FlashMLA decode schedules.\n"
    "`mla-plan CONFIG` is `mla-plan plan CONFIG`. Exit codes: 0 ok, 1 usage, 2 invalid config,\n"
    "3 unsupported on the target, 4 does not fit, 5 GPU verification failed, 6 no usable GPU,\n"
    "70 internal error (docs/cli.md).";

/// For the duration of one run: the "C" locale for this thread's C functions (number parsing of
/// flag values, printf) and the classic C++ locale on `out` and `err`, whatever the process's
/// locales are; restored afterwards. Output is then byte-identical under any locale.
class ClassicLocale {
 public:
  ClassicLocale(std::ostream& out, std::ostream& err)
      : out_(out), err_(err), out_loc_(out.imbue(std::locale::classic())), err_loc_(err.imbue(std::locale::classic())) {
    c_locale_ = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
    if (c_locale_ != static_cast<locale_t>(nullptr)) previous_ = uselocale(c_locale_);
  }
  ~ClassicLocale() {
    if (c_locale_ != static_cast<locale_t>(nullptr)) {
      uselocale(previous_);
      freelocale(c_locale_);
    }
    out_.imbue(out_loc_);
    err_.imbue(err_loc_);
  }
  ClassicLocale(const ClassicLocale&) = delete;
  ClassicLocale& operator=(const ClassicLocale&) = delete;

 private:
  std::ostream& out_;
  std::ostream& err_;
  std::locale out_loc_, err_loc_;
  locale_t c_locale_ = static_cast<locale_t>(nullptr);
  locale_t previous_ = static_cast<locale_t>(nullptr);
};

bool is_subcommand(CLI::App& app, const std::string& name) {
  for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) return true;
  }
  return false;
}

}  // namespace

int run_cli(const std::vector<std::string>& raw_args, std::ostream& out, std::ostream& err) {
  const ClassicLocale classic(out, err);
  try {
    CLI::App app{kDescription, "mla-plan"};
    app.set_version_flag("--version", std::string("mla-plan ") + kVersion);
    app.require_subcommand(1);

    PlanOptions plan_opt;
    setup_plan(app, plan_opt);
    ScheduleOptions schedule_opt;
    setup_schedule(app, schedule_opt);
    CheckOptions check_opt;
    setup_check(app, check_opt);
    VerifyCliOptions verify_opt;
    setup_verify(app, verify_opt);
    BenchCliOptions bench_opt;
    setup_bench(app, bench_opt);
    InfoOptions info_opt;
    setup_info(app, info_opt);
    ReportOptions report_opt;
    setup_report(app, report_opt);

    // `mla-plan CONFIG ...` means `mla-plan plan CONFIG ...`.
    std::vector<std::string> args = raw_args;
    if (!args.empty() && !is_subcommand(app, args.front()) && args.front() != "--help" &&
        args.front() != "-h" && args.front() != "--version") {
      args.insert(args.begin(), "plan");
    }
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e, out, err);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e, out, err);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e, out, err);
    } catch (const CLI::ParseError& e) {
      err << "mla-plan: error: " << e.what() << "\nRun 'mla-plan --help' for usage.\n";
      return exit_code(ErrorKind::usage);
    }

    if (app.got_subcommand("plan")) return run_plan(plan_opt, out, err);
    if (app.got_subcommand("schedule")) return run_schedule(schedule_opt, out, err);
    if (app.got_subcommand("check")) return run_check(check_opt, out, err);
    if (app.got_subcommand("verify")) return run_verify_cli(verify_opt, out, err);
    if (app.got_subcommand("bench")) return run_bench_cli(bench_opt, out, err);
    if (app.got_subcommand("gpus")) return run_gpus(info_opt, out);
    if (app.got_subcommand("formats")) return run_formats(info_opt, out);
    if (app.got_subcommand("report")) return run_report(report_opt, out, err);
    throw_internal("no subcommand ran");
  } catch (const Error& e) {
    err << "mla-plan: error: " << e.what() << "\n";
    return exit_code(e.kind());
  } catch (const std::bad_alloc&) {
    err << "mla-plan: error: out of memory\n";
    return exit_code(ErrorKind::internal);
  } catch (const std::exception& e) {
    err << "mla-plan: internal error: " << e.what() << "\n";
    return exit_code(ErrorKind::internal);
  }
}

}  // namespace mlaplan::cli
