// What `check` reads from its CONFIG arguments (commands/check_inputs.hpp).

#include "commands/check_inputs.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include <glob.h>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/config.hpp"

namespace mlaplan::cli::check_inputs {

namespace detail {

namespace fs = std::filesystem;

/// A model config is a few levels deep: past this, the file is not parsed to be classified (it is
/// checked, and config.cpp says what is wrong).
constexpr int kClassifyMaxNesting = 64;

bool has_glob_char(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

bool names_nothing(const std::string& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() == fs::file_type::not_found;
}

/// A directory that `plan` reads as one model: it holds config.json (even a dangling link, which
/// then fails as plan's does), or it is a Hugging Face cache repository (refs/, models--ORG--NAME).
bool is_model_directory(const fs::path& dir) {
  std::error_code ec;
  if (fs::symlink_status(dir / "config.json", ec).type() != fs::file_type::not_found) return true;
  if (fs::is_directory(dir / "refs", ec)) return true;
  return dir.filename().string().rfind("models--", 0) == 0;
}

/// `path` joined for display as the user would write it ("ci" + "a.json" = "ci/a.json").
std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

class Expander {
 public:
  explicit Expander(bool recursive) : recursive_(recursive) {}

  void argument(const std::string& arg) {
    if (has_glob_char(arg) && names_nothing(arg)) {
      const std::vector<std::string> matches = glob_matches(arg);
      if (matches.empty()) {
        add({arg, "no file matches the pattern " + mlaplan::quoted(arg, kQuotedPathMaxBytes) +
                      " (a quoted glob; the shell passed it as it is)"});
      }
      for (const auto& m : matches) path(m);
      return;
    }
    path(arg);
  }

  Inputs take() { return std::move(out_); }

 private:
  void add(Input in) {
    if (static_cast<std::int64_t>(out_.inputs.size()) >= CheckLimits::max_configs) {
      throw_usage("CONFIG: more than " + std::to_string(CheckLimits::max_configs) +
                  " configs in the files, patterns and directories given; allowed 1.." +
                  std::to_string(CheckLimits::max_configs) + " in one run (split them over several runs)");
    }
    out_.inputs.push_back(std::move(in));
  }

  /// A path given (or matched): a file, a model directory, or a folder of configs.
  void path(const std::string& p) {
    std::error_code ec;
    if (!fs::is_directory(p, ec) || is_model_directory(p)) {
      add({p, {}});
      return;
    }
    const std::size_t before = out_.inputs.size();
    std::size_t json_files = 0;
    folder(p, json_files);
    if (out_.inputs.size() == before) {
      add({p, "directory " + mlaplan::quoted(p, kQuotedPathMaxBytes) +
                  " holds no config.json and no model config among its " + std::to_string(json_files) + " *.json file" +
                  (json_files == 1 ? "" : "s") +
                  (recursive_ ? std::string(" (subdirectories searched)")
                              : std::string(" (--recursive searches its subdirectories too)"))});
    }
  }

  /// The *.json files of a folder of configs, in name order; its subdirectories with --recursive.
  void folder(const std::string& dir, std::size_t& json_files) {
    std::vector<fs::directory_entry> entries;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
    if (ec) {
      add({dir, "cannot list the directory " + mlaplan::quoted(dir, kQuotedPathMaxBytes) + ": " + ec.message()});
      return;
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
    for (const auto& e : entries) {
      const std::string name = e.path().filename().string();
      const std::string shown = join(dir, name);
      std::error_code sec;
      const bool link = e.is_symlink(sec);
      if (e.is_directory(sec)) {
        const bool hidden = !name.empty() && name.front() == '.';
        if (!recursive_) {
          // (a hidden one, .git, is not even worth a line)
          if (!hidden) out_.skipped.push_back({shown + "/", "a subdirectory: --recursive searches it"});
        } else if (link) {
          out_.skipped.push_back({shown + "/", "a symbolic link to a directory: not followed"});
        } else if (hidden) {
          out_.skipped.push_back({shown + "/", "a hidden directory: not searched"});
        } else if (is_model_directory(e.path())) {
          add({shown, {}});
        } else {
          folder(shown, json_files);
        }
        continue;
      }
      if (name.size() < 5 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
      ++json_files;
      if (const std::string why = not_a_config(shown); why.empty()) {
        add({shown, {}});
      } else {
        out_.skipped.push_back({shown, why});
      }
    }
  }

  /// Why the *.json `file` of a folder is not a model config, or "" when it is (or may be).
  static std::string not_a_config(const std::string& file) {
    std::string text;
    try {
      text = read_input_file(file, config_file_rules());
    } catch (const std::exception&) {
      return {};  // checked: the check says why it cannot be read
    }
    return looks_like_model_config(text)
               ? std::string()
               : std::string(
                     "not a model config: no model_type, architectures, num_hidden_layers or text_config "
                     "at its top level");
  }

  static std::vector<std::string> glob_matches(const std::string& pattern) {
    std::vector<std::string> out;
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    return out;  // glob() sorts them
  }

  bool recursive_;
  Inputs out_;
};

}  // namespace detail

bool looks_like_model_config(const std::string& text) {
  if (find_nul_byte(text) || find_nesting_past(text, detail::kClassifyMaxNesting)) return true;
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return true;  // not JSON: checked, so that it fails
  if (!doc.is_object()) return false;
  static constexpr const char* kKeys[] = {"model_type", "architectures", "num_hidden_layers", "text_config"};
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&doc](const char* key) { return doc.contains(key); });
}

Inputs expand(const std::vector<std::string>& args, bool recursive) {
  detail::Expander x(recursive);
  for (const auto& a : args) x.argument(a);
  return x.take();
}

}  // namespace mlaplan::cli::check_inputs
