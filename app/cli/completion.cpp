// The bash and zsh completions and the man page, generated from the command line itself
// (completion.hpp). Every subcommand and flag comes from the CLI11 App that make_app() builds from
// command_table(); the values of a flag come from its one_of() check, or, for the flags checked
// later against the library's own tables, from those tables (known_values()).

#include "cli/completion.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <ostream>
#include <sstream>
#include <utility>

#include "cli/sglang_args.hpp"
#include "cli/vllm_args.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan/engine/sglang/sglang.hpp"
#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/rules/backends.hpp"
#include "mlaplan/rules/request.hpp"
#include "mlaplan/version.hpp"

namespace mlaplan::cli {

// A named namespace: app/ is compiled as unity sources, where the anonymous namespaces of
// several files share one translation unit.
namespace completion_detail {

template <class Span, class Field>
std::vector<std::string> strings_of(const Span& items, Field field) {
  std::vector<std::string> out;
  for (const auto& item : items) out.emplace_back(field(item));
  return out;
}

/// The values of the flags that take a name from one of the library's tables, which the library
/// checks once the command line is read (with its own messages and case rules), not a one_of().
std::vector<std::string> known_values(const std::string& long_name) {
  if (long_name == "--kv-cache-dtype") {
    return strings_of(kv_cache_dtype_values(), [](std::string_view v) { return v; });
  }
  if (long_name == "--attention-backend") {
    return strings_of(attention_backend_values(), [](std::string_view v) { return v; });
  }
  if (long_name == "--gpu") return strings_of(gpu_presets(), [](const GpuPreset& p) { return p.id; });
  if (long_name == "--indexer-cache-dtype") {
    return {std::string(to_string(IndexerCacheDtype::fp8)), std::string(to_string(IndexerCacheDtype::fp4))};
  }
  if (long_name == "--vllm-version") {
    return strings_of(vllm_releases(), [](const VllmRelease& r) { return r.version; });
  }
  if (long_name == "--sglang-version") {
    return strings_of(sglang_generations(), [](const SglangGeneration& g) { return g.id; });
  }
  if (long_name == "--kernel") {
    std::vector<std::string> out;
    for (const SchedKernel k :
         {SchedKernel::sm90_sparse, SchedKernel::sm100_head64, SchedKernel::sm100_head128, SchedKernel::sm90_dense}) {
      out.emplace_back(to_string(k));
    }
    return out;
  }
  return {};
}

/// The flags whose value is a path.
ValueKind path_kind(const std::string& long_name) {
  if (long_name == "--from-log" || long_name == "--output" || long_name == "--verify-json" ||
      long_name == "--bench-json") {
    return ValueKind::file;
  }
  if (long_name == "--download-dir") return ValueKind::directory;
  return ValueKind::word;
}

/// The set of a one_of() check ("{text,json,markdown}": validator "one_of"), or none.
std::vector<std::string> one_of_values(CLI::Option& o) {
  std::string set;
  try {
    set = o.get_validator("one_of")->get_description();
  } catch (const CLI::OptionNotFound&) {
    return {};
  }
  if (set.size() < 2 || set.front() != '{' || set.back() != '}') return {};
  std::vector<std::string> out;
  std::string item;
  for (const char c : set.substr(1, set.size() - 2)) {
    if (c == ',') {
      out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  out.push_back(item);
  return out;
}

FlagDoc flag_doc(CLI::Option& o) {
  FlagDoc f;
  f.help = o.get_description();
  f.group = o.get_group();
  f.required = o.get_required();
  if (!o.nonpositional()) {
    f.names.push_back(o.get_name());
    f.value_name = o.get_name();
    f.kind = ValueKind::file;  // CONFIG: a config.json or a directory holding one
    f.many = o.get_items_expected_max() > 1;
    return f;
  }
  for (const auto& s : o.get_snames()) f.names.push_back("-" + s);
  for (const auto& l : o.get_lnames()) f.names.push_back("--" + l);
  if (o.get_items_expected_max() <= 0) return f;  // a flag without a value
  f.value_name = o.get_type_name();
  if (const auto colon = f.value_name.find(':'); colon != std::string::npos) f.value_name.resize(colon);
  const std::string long_name = o.get_lnames().empty() ? std::string() : "--" + o.get_lnames().front();
  f.values = one_of_values(o);
  if (f.values.empty()) f.values = known_values(long_name);
  f.kind = f.values.empty() ? path_kind(long_name) : ValueKind::word;
  return f;
}

/// Every flag of `app` (in the order of its help: -h/--help first) and its positionals.
void flags_of(CLI::App& app, std::vector<FlagDoc>& flags, std::vector<FlagDoc>* positionals) {
  for (CLI::Option* o : app.get_options()) {
    if (o->nonpositional() && o->get_group().empty()) continue;  // hidden
    FlagDoc f = flag_doc(*o);
    if (!o->nonpositional()) {
      if (positionals != nullptr) positionals->push_back(std::move(f));
    } else {
      flags.push_back(std::move(f));
    }
  }
}

/// The words of `flags` (every name), space-separated.
std::string names_of(const std::vector<FlagDoc>& flags) {
  std::string out;
  for (const auto& f : flags) {
    for (const auto& n : f.names) out += (out.empty() ? "" : " ") + n;
  }
  return out;
}

std::string joined(const std::vector<std::string>& words, std::string_view sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : std::string(sep)) + w;
  return out;
}

/// `text` inside a shell's double quotes.
std::string double_quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// `text` inside a shell's single quotes (a quote closes, is escaped and reopens).
std::string single_quoted_body(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out;
}

/// A help text inside the brackets of a zsh _arguments spec ([, ] and \ escaped).
std::string zsh_description(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return single_quoted_body(out);
}

/// A zsh _describe item: "name:description" with the description's colons escaped.
std::string zsh_item(const std::string& name, const std::string& text) {
  std::string out = name + ":";
  for (const char c : text) {
    if (c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return single_quoted_body(out);
}

/// A shell function name for a command ("plan" -> "_mla_plan_plan").
std::string bash_function(const std::string& command) {
  std::string out = "_mla_plan_";
  for (const char c : command) out += (c == '-' ? '_' : c);
  return out;
}

void bash_command(std::ostream& s, const CommandDoc& c) {
  s << bash_function(c.name) << "() {\n";
  s << "  case \"$prev\" in\n";
  std::vector<std::string> plain;  // flags with a value of their own and no known set
  for (const auto& f : c.flags) {
    if (f.kind == ValueKind::none) continue;
    const std::string pattern = joined(f.names, "|");
    switch (f.kind) {
      case ValueKind::word:
        if (f.values.empty()) {
          plain.push_back(pattern);
        } else {
          s << "    " << pattern << ") _mla_plan_words " << double_quoted(joined(f.values, " ")) << "; return ;;\n";
        }
        break;
      case ValueKind::file: s << "    " << pattern << ") _mla_plan_files; return ;;\n"; break;
      case ValueKind::directory: s << "    " << pattern << ") _mla_plan_dirs; return ;;\n"; break;
      case ValueKind::none: break;
    }
  }
  if (!plain.empty()) {
    s << "    " << joined(plain, "|") << ")\n";
    s << "      return ;;  # a number or a name: nothing to offer\n";
  }
  s << "  esac\n";
  const std::string words = double_quoted(names_of(c.flags) + " ") + "\"$1\"";
  if (c.positionals.empty()) {
    s << "  _mla_plan_words " << words << "\n";
  } else {
    s << "  if [[ $cur == -* ]]; then\n";
    s << "    _mla_plan_words " << words << "\n";
    s << "  else\n";
    s << "    _mla_plan_files  # " << c.positionals.front().names.front() << "\n";
    s << "  fi\n";
  }
  s << "}\n\n";
}

std::string zsh_action(const FlagDoc& f) {
  switch (f.kind) {
    case ValueKind::file: return "_files";
    case ValueKind::directory: return "_files -/";
    case ValueKind::word: return f.values.empty() ? std::string(" ") : "(" + joined(f.values, " ") + ")";
    case ValueKind::none: break;
  }
  return {};
}

/// The _arguments specs of `flags`, one line each (backslash-continued).
/// `alone`: each flag excludes every other word (mla-plan's own --help and --version); otherwise
/// each is given once, and --help excludes everything.
void zsh_specs(std::ostream& s, const std::vector<FlagDoc>& flags, bool alone = false) {
  for (const auto& f : flags) {
    const bool help = std::find(f.names.begin(), f.names.end(), "--help") != f.names.end();
    const std::string exclude = help || alone ? "(- *)" : "(" + joined(f.names, " ") + ")";
    for (const auto& n : f.names) {
      s << "    '" << exclude << n;
      if (f.kind != ValueKind::none) s << (n.rfind("--", 0) == 0 ? "=" : "+");
      s << "[" << zsh_description(f.help) << "]";
      if (f.kind != ValueKind::none) {
        s << ":" << single_quoted_body(f.value_name) << ":" << single_quoted_body(zsh_action(f));
      }
      s << "' \\\n";
    }
  }
}

/// roff text: backslashes, minus signs and a leading '.' or '\'' escaped.
std::string roff(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

void man_flag(std::ostream& s, const FlagDoc& f) {
  s << ".TP\n";
  std::string names;
  for (const auto& n : f.names) names += (names.empty() ? "" : ", ") + ("\\fB" + roff(n) + "\\fR");
  s << names;
  if (f.kind != ValueKind::none) s << " \\fI" << roff(f.value_name) << "\\fR";
  s << "\n" << roff(f.help) << "\n";
  if (!f.values.empty()) s << ".br\nValues: " << roff(joined(f.values, ", ")) << ".\n";
  if (f.required) s << ".br\nRequired.\n";
}

std::string positional_synopsis(const CommandDoc& c) {
  std::string out;
  for (const auto& p : c.positionals) {
    out += "\\fI" + roff(p.names.front()) + "\\fR" + (p.many ? "... " : " ");
  }
  return out;
}

}  // namespace completion_detail

namespace cd = completion_detail;

CliDoc describe_cli(CLI::App& app) {
  CliDoc doc;
  doc.description = app.get_description();
  cd::flags_of(app, doc.flags, nullptr);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    CommandDoc c;
    c.name = sub->get_name();
    c.summary = sub->get_description();
    cd::flags_of(*sub, c.flags, &c.positionals);
    doc.commands.push_back(std::move(c));
  }
  // The engines' own flags beyond plan's (which mix in: `mla-plan vllm serve MODEL --tp 8 --gpu b200`).
  std::vector<std::string> plan_names;
  for (const auto& c : doc.commands) {
    if (c.name != "plan") continue;
    for (const auto& f : c.flags) plan_names.insert(plan_names.end(), f.names.begin(), f.names.end());
  }
  const auto beyond_plan = [&plan_names](std::vector<std::string> names) {
    std::vector<std::string> out;
    for (auto& n : names) {
      if (std::find(plan_names.begin(), plan_names.end(), n) == plan_names.end() &&
          std::find(out.begin(), out.end(), n) == out.end()) {
        out.push_back(std::move(n));
      }
    }
    return out;
  };
  doc.vllm_flags = beyond_plan(vllm_flag_names());
  doc.sglang_flags = beyond_plan(sglang_flag_names());
  return doc;
}

std::string bash_completion(const CliDoc& doc) {
  std::ostringstream s;
  s << "# bash completion for mla-plan                             -*- shell-script -*-\n"
       "# Generated by `mla-plan --completions bash` (mla-plan "
    << kVersion
    << ") from its subcommands and flags.\n\n"
       "_mla_plan_words() {\n"
       "  local IFS=$' \\t\\n'\n"
       "  COMPREPLY+=($(compgen -W \"$1\" -- \"$cur\"))\n"
       "}\n\n"
       "_mla_plan_files() {\n"
       "  compopt -o filenames 2>/dev/null\n"
       "  local IFS=$'\\n'\n"
       "  COMPREPLY+=($(compgen -f -- \"$cur\"))\n"
       "}\n\n"
       "_mla_plan_dirs() {\n"
       "  compopt -o filenames 2>/dev/null\n"
       "  local IFS=$'\\n'\n"
       "  COMPREPLY+=($(compgen -d -- \"$cur\"))\n"
       "}\n\n";
  for (const auto& c : doc.commands) cd::bash_command(s, c);
  std::vector<std::string> command_names;
  for (const auto& c : doc.commands) command_names.push_back(c.name);
  s << "_mla_plan() {\n"
       "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\" cmd=\"\" engine=\"\" i=1\n"
       "  COMPREPLY=()\n"
       "  if ((COMP_CWORD > 0)); then prev=\"${COMP_WORDS[COMP_CWORD - 1]}\"; fi\n"
       "  # --flag=VALUE: COMP_WORDBREAKS splits it at the '='\n"
       "  if [[ $cur == \"=\" ]]; then\n"
       "    cur=\"\"\n"
       "  elif [[ $prev == \"=\" ]] && ((COMP_CWORD > 1)); then\n"
       "    prev=\"${COMP_WORDS[COMP_CWORD - 2]}\"\n"
       "  fi\n"
       "  while ((i < COMP_CWORD)); do\n"
       "    case \"${COMP_WORDS[i]}\" in\n"
       "      "
    << cd::joined(command_names, "|")
    << ") cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
       "      vllm|sglang|python|python3) engine=\"${COMP_WORDS[i]}\"; break ;;\n"
       "      -*) ;;\n"
       "      *) cmd=plan; break ;;  # mla-plan CONFIG: plan\n"
       "    esac\n"
       "    i=$((i + 1))\n"
       "  done\n"
       "  case \"$engine\" in\n"
       "    vllm)\n"
       "      if ((COMP_CWORD == i + 1)); then _mla_plan_words serve; else _mla_plan_plan "
    << cd::double_quoted(cd::joined(doc.vllm_flags, " "))
    << "; fi\n"
       "      return ;;\n"
       "    sglang)\n"
       "      if ((COMP_CWORD == i + 1)); then _mla_plan_words serve; else _mla_plan_plan "
    << cd::double_quoted(cd::joined(doc.sglang_flags, " "))
    << "; fi\n"
       "      return ;;\n"
       "    python|python3)\n"
       "      if ((COMP_CWORD == i + 1)); then\n"
       "        _mla_plan_words -m\n"
       "      elif ((COMP_CWORD == i + 2)); then\n"
       "        _mla_plan_words sglang.launch_server\n"
       "      else\n"
       "        _mla_plan_plan "
    << cd::double_quoted(cd::joined(doc.sglang_flags, " "))
    << "\n"
       "      fi\n"
       "      return ;;\n"
       "  esac\n"
       "  case \"$cmd\" in\n";
  for (const auto& c : doc.commands) s << "    " << c.name << ") " << cd::bash_function(c.name) << " \"\" ;;\n";
  s << "    *)\n"
       "      if [[ $prev == --completions ]]; then\n"
       "        _mla_plan_words \"bash zsh\"\n"
       "      elif [[ $cur == -* ]]; then\n"
       "        _mla_plan_words "
    << cd::double_quoted(cd::names_of(doc.flags) + " --completions --man")
    << "\n"
       "      else\n"
       "        _mla_plan_words "
    << cd::double_quoted(cd::joined(command_names, " ") + " vllm sglang")
    << "\n"
       "        _mla_plan_files  # mla-plan CONFIG: plan\n"
       "      fi ;;\n"
       "  esac\n"
       "}\n\n"
       "complete -F _mla_plan mla-plan mla-plan-cuda\n";
  return s.str();
}

std::string zsh_completion(const CliDoc& doc) {
  std::ostringstream s;
  s << "#compdef mla-plan mla-plan-cuda\n"
       "# zsh completion for mla-plan. Generated by `mla-plan --completions zsh` (mla-plan "
    << kVersion << ") from its subcommands and flags.\n\n";
  for (const auto& c : doc.commands) {
    s << "_mla-plan_" << c.name << "() {\n  _arguments -S : \\\n";
    cd::zsh_specs(s, c.flags);
    for (const auto& p : c.positionals) {
      s << "    '" << (p.many ? "*" : "1") << ":" << cd::single_quoted_body(p.names.front()) << ":_files' \\\n";
    }
    s << "    \"$@\"\n}\n\n";
  }
  const auto engine_specs = [&s](const std::vector<std::string>& names, const char* whose) {
    for (const auto& n : names) s << "'*" << n << "[" << whose << "]' ";
  };
  s << "_mla-plan() {\n"
       "  local curcontext=\"$curcontext\" state state_descr line ret=1\n"
       "  typeset -A opt_args\n"
       "  _arguments -C -S : \\\n";
  cd::zsh_specs(s, doc.flags, true);
  s << "    '(- *)--completions[print the completion script of a shell]:shell:(bash zsh)' \\\n"
       "    '(- *)--man[print the man page]' \\\n"
       "    '1: :->command' \\\n"
       "    '*:: :->args' && ret=0\n"
       "  case $state in\n"
       "    command)\n"
       "      local -a commands=(\n";
  for (const auto& c : doc.commands) s << "        '" << cd::zsh_item(c.name, c.summary) << "'\n";
  s << "        'vllm:plan what a vllm serve command line starts'\n"
       "        'sglang:plan what an sglang serve command line starts'\n"
       "      )\n"
       "      _describe -t commands 'mla-plan command' commands && ret=0\n"
       "      _files && ret=0  # mla-plan CONFIG: plan\n"
       "      ;;\n"
       "    args)\n"
       "      curcontext=\"${curcontext%:*:*}:mla-plan-$words[1]:\"\n"
       "      case $words[1] in\n";
  for (const auto& c : doc.commands) s << "        " << c.name << ") _mla-plan_" << c.name << " && ret=0 ;;\n";
  s << "        vllm)\n"
       "          if ((CURRENT == 2)); then\n"
       "            compadd serve && ret=0\n"
       "          else\n"
       "            shift words; ((CURRENT--))  # serve: the command name of plan's specs\n"
       "            _mla-plan_plan ";
  engine_specs(doc.vllm_flags, "a flag of vllm serve");
  s << "&& ret=0\n"
       "          fi ;;\n"
       "        sglang|python|python3)\n"
       "          if [[ $words[1] == sglang ]] && ((CURRENT == 2)); then\n"
       "            compadd serve && ret=0\n"
       "          elif [[ $words[1] != sglang ]] && ((CURRENT <= 3)); then\n"
       "            if ((CURRENT == 2)); then compadd -- -m && ret=0; else compadd sglang.launch_server && ret=0; fi\n"
       "          else\n"
       "            if [[ $words[1] != sglang ]]; then shift words; ((CURRENT--)); fi\n"
       "            shift words; ((CURRENT--))  # serve, sglang.launch_server: the command name of plan's specs\n"
       "            _mla-plan_plan ";
  engine_specs(doc.sglang_flags, "a flag of SGLang");
  s << "&& ret=0\n"
       "          fi ;;\n"
       "        *)  # mla-plan CONFIG ...: plan\n"
       "          words=(plan \"${words[@]}\"); ((CURRENT++))\n"
       "          _mla-plan_plan && ret=0 ;;\n"
       "      esac\n"
       "      ;;\n"
       "  esac\n"
       "  return ret\n"
       "}\n\n"
       "_mla-plan \"$@\"\n";
  return s.str();
}

std::string man_page(const CliDoc& doc) {
  std::ostringstream s;
  const std::string version = cd::roff(std::string("mla-plan ") + kVersion);
  s << ".\\\" The manual page of mla-plan, generated by `mla-plan --man` from its subcommands and flags.\n"
    << ".TH MLA\\-PLAN 1 \"\" \"" << version << "\" \"User Commands\"\n"
    << ".SH NAME\nmla\\-plan \\- plan and validate attention layouts and KV caches of DeepSeek's sparse\\-MLA models\n"
    << ".SH SYNOPSIS\n"
    << ".B mla\\-plan\n\\fICONFIG\\fR [\\fIOPTIONS\\fR]\n.br\n"
    << ".B mla\\-plan\n\\fICOMMAND\\fR [\\fIARGUMENTS\\fR] [\\fIOPTIONS\\fR]\n.br\n"
    << ".B mla\\-plan vllm serve\n\\fIMODEL\\fR [\\fIvLLM flags\\fR] [\\fIplan options\\fR]\n.br\n"
    << ".B mla\\-plan sglang serve\n[\\fIMODEL\\fR] [\\fISGLang flags\\fR] [\\fIplan options\\fR]\n.br\n"
    << ".B mla\\-plan\n\\fB\\-\\-completions\\fR \\fBbash\\fR|\\fBzsh\\fR\n.br\n"
    << ".B mla\\-plan\n\\fB\\-\\-man\\fR\n"
    << ".SH DESCRIPTION\n";
  // The description as its lines say it, one paragraph.
  std::string line;
  std::istringstream lines(doc.description);
  while (std::getline(lines, line)) s << cd::roff(line) << "\n";
  s << ".SH COMMANDS\n";
  for (const auto& c : doc.commands) s << ".TP\n.B " << cd::roff(c.name) << "\n" << cd::roff(c.summary) << "\n";
  s << ".SH OPTIONS\n";
  for (const auto& f : doc.flags) cd::man_flag(s, f);
  s << ".TP\n\\fB\\-\\-completions\\fR \\fIbash\\fR|\\fIzsh\\fR\n"
       "Print the completion script of that shell, generated from the commands and flags, as this page is.\n"
       ".TP\n\\fB\\-\\-man\\fR\nPrint this manual page.\n";
  for (const auto& c : doc.commands) {
    s << ".SH \"" << cd::roff("mla-plan " + c.name) << "\"\n";
    s << ".B " << cd::roff("mla-plan " + c.name) << "\n"
      << cd::positional_synopsis(c) << "[\\fIOPTIONS\\fR]\n.PP\n"
      << cd::roff(c.summary) << ".\n";
    for (const auto& p : c.positionals) {
      s << ".TP\n\\fI" << cd::roff(p.names.front()) << "\\fR" << (p.many ? "..." : "") << "\n"
        << cd::roff(p.help) << "\n";
    }
    std::string group = "\x01";
    for (const auto& f : c.flags) {
      if (f.group != group) {
        group = f.group;
        s << ".SS " << cd::roff(group.empty() ? std::string("Options") : group) << "\n";
      }
      cd::man_flag(s, f);
    }
  }
  s << ".SH \"EXIT STATUS\"\n";
  const std::pair<int, const char*> codes[] = {
      {0, "success: every config planned, checked or verified, and it fits"},
      {exit_code(ErrorKind::usage), "usage: an unknown command or flag, or a bad flag value"},
      {exit_code(ErrorKind::invalid_config), "an invalid config, or a file that cannot be read"},
      {exit_code(ErrorKind::unsupported), "the config is valid but the backend cannot run it on the target"},
      {exit_code(ErrorKind::does_not_fit), "it does not fit (or a guard of check failed)"},
      {exit_code(ErrorKind::verify_failed), "GPU verification ran and failed"},
      {exit_code(ErrorKind::no_gpu), "no usable GPU (or built without CUDA) for verify and bench"},
      {exit_code(ErrorKind::output), "the output could not be written"},
      {exit_code(ErrorKind::internal), "an internal error (a bug in mla-plan)"},
  };
  for (const auto& [code, what] : codes) s << ".TP\n.B " << code << "\n" << cd::roff(what) << "\n";
  s << ".SH FILES\n"
       ".TP\n.I /usr/share/mla\\-plan/schemas/\n"
       "The JSON Schemas of every \\fB\\-\\-json\\fR output (plan, check, schedule, verify, bench, gpus, formats).\n"
       ".TP\n.I /usr/share/mla\\-plan/configs/\n"
       "The bundled model configs: DeepSeek V4.1\\-Flash, V4\\-Flash and V3.2, and small test configs.\n"
       ".SH \"SEE ALSO\"\n"
       "The documents of the project: README.md, docs/cli.md (every command and flag), docs/ci.md (check in CI),\n"
       "docs/install.md (installing, the completions and this page).\n";
  return s.str();
}

bool is_generated_file_request(std::string_view word) {
  return word == "--completions" || word.rfind("--completions=", 0) == 0 || word == "--man";
}

int write_generated_file(CLI::App& app, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> words = args;
  if (!words.empty() && words.front().rfind("--completions=", 0) == 0) {
    const std::string value = words.front().substr(std::string("--completions=").size());
    words.front() = "--completions";
    words.insert(words.begin() + 1, value);
  }
  const auto usage = [&err](const std::string& message) {
    err << "mla-plan: error: " << printable(message) << "\n";
    return exit_code(ErrorKind::usage);
  };
  if (words.front() == "--man") {
    if (words.size() > 1) return usage("--man takes nothing more: " + mlaplan::quoted(words[1]) + " is one too many");
    out << man_page(describe_cli(app));
    return 0;
  }
  if (words.size() < 2) return usage("--completions needs a value (bash or zsh)");
  if (words.size() > 2) {
    return usage("--completions takes one value: " + mlaplan::quoted(words[2]) + " is one too many");
  }
  if (words[1] == "bash") {
    out << bash_completion(describe_cli(app));
  } else if (words[1] == "zsh") {
    out << zsh_completion(describe_cli(app));
  } else {
    return usage("--completions: " + mlaplan::quoted(words[1]) + " is not allowed; allowed: bash, zsh" +
                 did_you_mean_suffix(words[1], {"bash", "zsh"}));
  }
  return 0;
}

}  // namespace mlaplan::cli
