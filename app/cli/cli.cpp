#include "cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <locale>
#include <memory>
#include <ostream>
#include <utility>

#include <locale.h>  // newlocale, uselocale, freelocale (POSIX)
#include <sys/stat.h>

#include "cli/commands.hpp"
#include "cli/completion.hpp"
#include "cli/parse_errors.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/version.hpp"
#include "output/error_json.hpp"
#include "output/output.hpp"

namespace mlaplan::cli {

namespace {

constexpr const char* kDescription =
    "mla-plan: plans and validates attention layouts for DeepSeek's sparse-MLA models\n"
    "(V4.1, V4.0, V3.2): layer topology, KV-cache layouts and FlashMLA decode schedules.\n"
    "`mla-plan CONFIG` is `mla-plan plan CONFIG`; `mla-plan vllm serve MODEL [vLLM flags]` plans what that\n"
    "vLLM command starts; `mla-plan sglang serve MODEL [SGLang flags]` (or `mla-plan python -m\n"
    "sglang.launch_server ...`) what that SGLang command starts. Exit codes: 0 ok, 1 usage,\n"
    "2 invalid config, 3 unsupported on the target, 4 does not fit, 5 GPU verification failed,\n"
    "6 no usable GPU, 7 output could not be written, 70 internal error (docs/cli.md).";

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

/// True when nothing is at `path`: not even a dangling symbolic link (lstat() fails with ENOENT).
/// Opens nothing.
bool names_no_file(const std::string& path) {
  struct stat st {};
  return path.find('\0') == std::string::npos && ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

/// A stream buffer that passes everything to another and keeps the last lines written (up to
/// 64 KiB): the error line a stage wrote, for the error document of --json.
class ErrLineCapture final : public std::streambuf {
 public:
  explicit ErrLineCapture(std::streambuf* target) : target_(target) {}
  const std::string& text() const { return text_; }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    keep(std::string(1, traits_type::to_char_type(ch)));
    return target_->sputc(traits_type::to_char_type(ch));
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    keep(std::string(s, static_cast<std::size_t>(n)));
    return target_->sputn(s, n);
  }
  int sync() override { return target_->pubsync(); }

 private:
  void keep(const std::string& s) {
    text_ += s;
    if (text_.size() > 65536) text_.erase(0, text_.size() - 65536);
  }
  std::streambuf* target_;
  std::string text_;
};

/// The error boundary of both stages: runs `stage` under the classic locale and turns every
/// exception into its message on `err` and an exit code. A usage error names its flag as typed
/// (`typed`: as_typed()). `threw`, when given, says whether the stage ended by an exception.
template <typename Stage>
int guarded(std::ostream& out, std::ostream& err, const std::vector<TypedFlag>& typed, Stage&& stage,
            bool* threw = nullptr) {
  const ClassicLocale classic(out, err);
  if (threw != nullptr) *threw = true;
  try {
    const int code = stage();
    if (threw != nullptr) *threw = false;
    return code;
  } catch (const Error& e) {
    // printable(): a message is one line whatever input text it quotes (docs/robustness.md)
    err << "mla-plan: error: " << printable(e.kind() == ErrorKind::usage ? as_typed(e.what(), typed) : e.what())
        << "\n";
    return exit_code(e.kind());
  } catch (const std::bad_alloc&) {
    err << "mla-plan: error: out of memory\n";
    return exit_code(ErrorKind::internal);
  } catch (const std::exception& e) {
    err << "mla-plan: internal error: " << printable(e.what()) << "\n";
    return exit_code(ErrorKind::internal);
  }
}

/// With --json: the error document of a stage that ended with `code` and wrote no document of
/// its own, on `out` (the message is the last error line of `err_text`).
void print_error_document(const ParsedCli& p, int code, const std::string& err_text, std::ostream& out) {
  if (!p.json_errors || code == 0) return;
  const ClassicLocale classic(out, out);
  try {
    out << error_json::render(p.command_name, error_json::facts_of(code, error_json::last_error_message(err_text)));
  } catch (const std::exception&) {
    // out of memory while rendering it: stderr has the message
  }
}

/// Output that could not be written is an error, whatever the command returned: flushes `out`
/// and, when the stream failed (a full disk, a closed pipe with SIGPIPE ignored), says why on
/// `err` and returns exit 7 (70 when the command itself ended with an internal error).
int checked_output(int code, std::ostream& out, std::ostream& err) {
  const int errno_before = errno;
  errno = 0;
  if (out.good()) out.flush();
  if (out.good()) {
    errno = errno_before;
    return code;
  }
  int cause = 0;
  if (const auto* source = dynamic_cast<const WriteErrorSource*>(out.rdbuf())) cause = source->write_errno();
  if (cause == 0) cause = errno;
  err << "mla-plan: error: cannot write the output to standard output: "
      << (cause != 0 ? std::string(std::strerror(cause)) : std::string("the stream failed"))
      << (code != 0 ? " (the command itself ended with exit " + std::to_string(code) + ")" : std::string()) << "\n";
  return combine_exit_codes(code, exit_code(ErrorKind::output));  // 70 (a bug) still wins
}

/// The index in command_table() of the subcommand the parse chose.
std::size_t parsed_command(const CLI::App& app) {
  const auto table = command_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (app.got_subcommand(std::string(table[i].name))) return i;
  }
  throw_internal("no subcommand ran");
}

/// The command line of every subcommand of the table, its options bound to `p`'s.
std::unique_ptr<CLI::App> make_app(ParsedCli& p) {
  auto app = std::make_unique<CLI::App>(kDescription, "mla-plan");
  app->set_version_flag("--version", std::string("mla-plan ") + kVersion);
  app->footer(
      "Examples:\n"
      "  mla-plan configs/deepseek-v4.1-flash.json              the layouts of one node of H200 searched, the best "
      "planned\n"
      "  mla-plan configs/deepseek-v4.1-flash.json --tp 8       one layout: does it fit, how many requests\n"
      "  mla-plan check configs/ --tp 8 --gpu h200,b200         a CI gate over a folder of configs (docs/ci.md)\n"
      "  mla-plan report configs/deepseek-v4.1-flash.json --tp 8 -o plan.html\n"
      "Each command's flags: mla-plan COMMAND --help. Add --json for one JSON document on stdout, errors included.");
  app->require_subcommand(1);
  const auto table = command_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i].setup(*app->add_subcommand(std::string(table[i].name), std::string(table[i].summary)), p.options[i].get());
  }
  return app;
}

/// plan's own flags, for a command line of an engine (vllm serve, sglang serve) that mixes them
/// in; "did you mean" names those of plan's not among `engine_names`.
OwnFlags own_flags(CLI::App& plan, const std::vector<std::string>& engine_names) {
  OwnFlags own;
  CLI::App* app = &plan;
  own.is_flag = [app](std::string_view name) {
    return name.rfind("-", 0) == 0 && app->get_option_no_throw(std::string(name)) != nullptr;
  };
  own.takes_value = [app](std::string_view name) {
    const CLI::Option* o = app->get_option_no_throw(std::string(name));
    return o != nullptr && o->get_items_expected_max() > 0;
  };
  own.getenv = [](const char* name) { return std::getenv(name); };
  for (const CLI::Option* o : plan.get_options()) {
    for (const auto& n : o->get_lnames()) {
      const std::string name = "--" + n;
      if (std::find(engine_names.begin(), engine_names.end(), name) == engine_names.end()) own.names.push_back(name);
    }
  }
  return own;
}

/// What parse_into() returns when a command is ready to run (exit codes are never negative).
constexpr int kParsed = -1;

/// CommandLine::parse() inside the error boundary: the exit code of a run that ends here, or
/// kParsed with `p.command` set.
int parse_into(CLI::App& app, const std::vector<std::string>& raw_args, ParsedCli& p, std::ostream& out,
               std::ostream& err) {
  // `mla-plan --completions bash|zsh`, `mla-plan --man`: the files an install puts in place,
  // generated from this command line (completion.hpp).
  if (!raw_args.empty() && is_generated_file_request(raw_args.front())) {
    return write_generated_file(app, raw_args, out, err);
  }
  // `mla-plan CONFIG ...` means `mla-plan plan CONFIG ...`.
  std::vector<std::string> args = raw_args;
  // `mla-plan vllm serve MODEL [vLLM flags]` is plan with the flags vLLM's parser reads.
  if (!args.empty() && args.front() == "vllm") {
    if (args.size() < 2 || args[1] != "serve") {
      err << "mla-plan: error: mla-plan vllm: only `vllm serve MODEL [vLLM flags]` is understood"
          << (args.size() >= 2 ? ", not " + printable(mlaplan::quoted(args[1])) : std::string()) << "\n";
      return exit_code(ErrorKind::usage);
    }
    CLI::App* plan = app.get_subcommand("plan");
    if (std::any_of(args.begin() + 2, args.end(), [](const std::string& a) { return a == "-h" || a == "--help"; })) {
      out << "Usage: mla-plan vllm serve MODEL [vLLM flags] [mla-plan plan flags]\n"
             "Plans what `vllm serve MODEL ...` starts: vLLM's flags as vLLM reads them (docs/launch.md lists what "
             "each becomes),\nmixed with the flags of mla-plan plan below.\n\n"
          << plan->help();
      return 0;
    }
    p.vllm = translate_vllm_serve(std::vector<std::string>(args.begin() + 2, args.end()),
                                  own_flags(*plan, vllm_flag_names()));
    args = p.vllm->plan_args;
    args.insert(args.begin(), "plan");
  } else if (!args.empty() && (args.front() == "sglang" || args.front() == "python" || args.front() == "python3")) {
    // `mla-plan sglang serve [MODEL] [SGLang flags]` and `mla-plan python -m sglang.launch_server
    // [SGLang flags]`: plan --engine sglang with the flags SGLang's argparse reads.
    const bool serve = args.front() == "sglang";
    if (serve && (args.size() < 2 || args[1] != "serve")) {
      err << "mla-plan: error: mla-plan sglang: only `sglang serve [MODEL] [SGLang flags]` is understood"
          << (args.size() >= 2 ? ", not " + printable(mlaplan::quoted(args[1])) : std::string()) << "\n";
      return exit_code(ErrorKind::usage);
    }
    if (!serve && (args.size() < 3 || args[1] != "-m" || args[2] != "sglang.launch_server")) {
      std::string got;
      for (std::size_t k = 1; k < args.size() && k < 3; ++k) got += (got.empty() ? "" : " ") + args[k];
      err << "mla-plan: error: mla-plan " << args.front() << ": only `" << args.front()
          << " -m sglang.launch_server [SGLang flags]` is understood"
          << (got.empty() ? std::string() : ", not " + printable(mlaplan::quoted(got))) << "\n";
      return exit_code(ErrorKind::usage);
    }
    const std::size_t first = serve ? 2 : 3;
    CLI::App* plan = app.get_subcommand("plan");
    if (std::any_of(args.begin() + static_cast<std::ptrdiff_t>(first), args.end(),
                    [](const std::string& a) { return a == "-h" || a == "--help"; })) {
      out << "Usage: mla-plan sglang serve [MODEL] [SGLang flags] [mla-plan plan flags]\n"
             "   or: mla-plan python -m sglang.launch_server --model-path MODEL [SGLang flags] [mla-plan plan flags]\n"
             "Plans what that SGLang command starts (plan --engine sglang): SGLang's flags as its argparse reads them\n"
             "(docs/launch.md lists what each becomes), mixed with the flags of mla-plan plan below.\n\n"
          << plan->help();
      return 0;
    }
    p.sglang_serve = translate_sglang_serve(
        std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(first), args.end()),
        own_flags(*plan, sglang_flag_names()), serve ? SglangForm::serve : SglangForm::launch_server);
    args = p.sglang_serve->plan_args;
    args.insert(args.begin(), "plan");
  }
  const bool implicit_plan = !args.empty() && !is_subcommand(app, args.front()) && args.front() != "--help" &&
                             args.front() != "-h" && args.front() != "--version";
  if (implicit_plan && names_no_file(args.front())) {
    // A typo of a command (`mla-plan plna CONFIG`) rather than a config that does not exist.
    if (const std::string msg = unknown_command_message(args.front()); !msg.empty()) {
      err << "mla-plan: error: " << msg << "\n";
      return exit_code(ErrorKind::usage);
    }
  }
  if (implicit_plan) {
    // `mla-plan --verison`: near mla-plan's own flags, and not one of plan's.
    if (const std::string msg = unknown_first_flag_message(app, args.front()); !msg.empty()) {
      err << "mla-plan: error: " << msg << "\n";
      return exit_code(ErrorKind::usage);
    }
    args.insert(args.begin(), "plan");
  }
  // The flags as typed, for the messages of both stages (the subcommand is the first word).
  if (!args.empty()) {
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->check_name(args.front())) p.typed_flags = typed_flags(*sub, args);
    }
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
    // One line: what is wrong and what is allowed (parse_errors.hpp).
    err << "mla-plan: error: " << as_typed(parse_error_message(app, e), p.typed_flags) << "\n";
    return exit_code(ErrorKind::usage);
  }

  // The flag values each subcommand checks before it opens a file.
  const std::size_t i = parsed_command(app);
  const CommandRow& row = command_table()[i];
  if (p.vllm && row.name == "plan") static_cast<PlanOptions*>(p.options[i].get())->vllm = p.vllm;
  if (p.sglang_serve && row.name == "plan")
    static_cast<PlanOptions*>(p.options[i].get())->sglang_serve = p.sglang_serve;
  if (row.check != nullptr) row.check(p.options[i].get());
  p.command = &row;
  return kParsed;
}

}  // namespace

// The subcommands, each defined with its options, setup and run in its own file of app/commands/.
const CommandRow& plan_command();
const CommandRow& check_command();
const CommandRow& schedule_command();
const CommandRow& verify_command();
const CommandRow& bench_command();
const CommandRow& report_command();
const CommandRow& gpus_command();
const CommandRow& formats_command();

std::span<const CommandRow> command_table() {
  // One row per subcommand: the help, the suggestions for a mistyped one, the checks before any
  // file is opened and the dispatch all come from here, in this order.
  static const CommandRow kTable[] = {plan_command(),  check_command(),  schedule_command(), verify_command(),
                                      bench_command(), report_command(), gpus_command(),     formats_command()};
  return kTable;
}

const void* ParsedCli::options_of(std::string_view name, const std::type_info& type) const {
  const auto table = command_table();
  for (std::size_t i = 0; i < table.size() && i < options.size(); ++i) {
    if (table[i].name != name) continue;
    if (*table[i].options_type != type)
      throw_internal("ParsedCli::get: the options of " + std::string(name) + " are another type");
    return options[i].get();
  }
  throw_internal("ParsedCli::get: no options for " + std::string(name));
}

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const auto& row : command_table()) names.emplace_back(row.name);
  return names;
}

CommandLine::CommandLine() = default;
CommandLine::~CommandLine() = default;

const ParsedCli& CommandLine::parse(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Every option back to its default; the app stays bound to the same objects.
  parsed_.command = nullptr;
  parsed_.exit_code = 0;
  parsed_.typed_flags.clear();
  parsed_.vllm.reset();
  parsed_.sglang_serve.reset();
  parsed_.json_errors = error_json::json_requested(args);
  parsed_.command_name = error_json::command_of(args, command_names());
  ErrLineCapture capture(err.rdbuf());
  std::ostream captured_err(&capture);
  const int code = guarded(out, captured_err, parsed_.typed_flags, [&] {
    const auto table = command_table();
    if (app_) {
      for (std::size_t i = 0; i < table.size(); ++i) table[i].reset_options(parsed_.options[i].get());
      app_->clear();
    } else {
      parsed_.options.clear();
      for (const auto& row : table) parsed_.options.push_back(row.make_options());
      app_ = make_app(parsed_);
    }
    return parse_into(*app_, args, parsed_, out, captured_err);
  });
  captured_err.flush();
  if (code == kParsed) {
    parsed_.exit_code = 0;
  } else {
    parsed_.command = nullptr;
    parsed_.exit_code = code;
    print_error_document(parsed_, code, capture.text(), out);
  }
  return parsed_;
}

int execute_cli(const ParsedCli& p, std::ostream& out, std::ostream& err) {
  ErrLineCapture capture(err.rdbuf());
  std::ostream captured_err(&capture);
  bool threw = false;
  const int code = guarded(
      out, captured_err, p.typed_flags,
      [&]() -> int {
        if (p.command == nullptr) return p.exit_code;
        const auto table = command_table();
        for (std::size_t i = 0; i < table.size() && i < p.options.size(); ++i) {
          if (&table[i] == p.command) return table[i].run(p.options[i].get(), out, captured_err);
        }
        throw_internal("unknown command");
      },
      &threw);
  captured_err.flush();
  // A command that ends by an error writes nothing on stdout before it (each writes its document
  // once it is made): with --json, the error's document takes its place.
  if (threw && p.command != nullptr && out.good()) print_error_document(p, code, capture.text(), out);
  return checked_output(code, out, err);
}

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CommandLine command_line;
  return execute_cli(command_line.parse(args, out, err), out, err);
}

}  // namespace mlaplan::cli
