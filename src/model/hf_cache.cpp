// A Hugging Face repo id resolved through the local Hugging Face cache, offline
// (include/mlaplan/model/hf_cache.hpp).
//
// The rules follow huggingface_hub (src/huggingface_hub/):
//   constants.py       HF_HOME = $HF_HOME or ${XDG_CACHE_HOME:-~/.cache}/huggingface;
//                      HUGGINGFACE_HUB_CACHE = $HUGGINGFACE_HUB_CACHE or $HF_HOME/hub;
//                      HF_HUB_CACHE = $HF_HUB_CACHE or HUGGINGFACE_HUB_CACHE (each expanduser'd);
//                      REPO_ID_SEPARATOR = "--", DEFAULT_REVISION = "main"
//   file_download.py   REGEX_COMMIT_HASH = ^[0-9a-f]{40}$; offline, a revision is a commit hash
//                      or refs/<revision> holds one; the file is snapshots/<commit>/<name>
//                      (try_to_load_from_cache: <cache>/models--ORG--NAME/{refs,snapshots})
//   utils/_validators.py  validate_repo_id: [\w.-] (ASCII), name 1..96, starts and ends with a
//                      word character, no "--" or "..", not ending in ".git"

#include "mlaplan/model/hf_cache.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kDefaultRevision = "main";
constexpr std::size_t kMaxRepoPartChars = 96;
constexpr std::size_t kRefsListed = 5;

std::string qpath(std::string_view path) { return mlaplan::quoted(path, kQuotedPathMaxBytes); }

std::string join(const std::string& dir, std::string_view name) {
  if (!dir.empty() && dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

/// Python's os.path.expanduser() for the one case a variable uses: a leading "~" or "~/".
std::string expand_user(const std::string& value, const HfEnv& env) {
  if (!env.home || value.empty() || value[0] != '~') return value;
  if (value.size() == 1) return *env.home;
  if (value[1] != '/') return value;  // ~user: left as it is
  return join(*env.home, value.substr(2));
}

bool is_word(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

/// One part of a repo id: 1..96 of [A-Za-z0-9._-], a word character at each end.
bool valid_repo_part(std::string_view p) {
  if (p.empty() || p.size() > kMaxRepoPartChars) return false;
  for (char c : p) {
    if (!is_word(c) && c != '.' && c != '-') return false;
  }
  return is_word(p.front()) && is_word(p.back());
}

/// Lowercase hex digits only (file_download.py's REGEX_COMMIT_HASH is ^[0-9a-f]{40}$).
bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_commit_hash(std::string_view s) { return s.size() == 40 && is_lower_hex(s); }

/// A short commit id (constants.py's REGEX_COMMIT_OID takes 5..40 hex digits): not looked up here.
bool is_short_commit(std::string_view s) { return s.size() >= 5 && s.size() < 40 && is_lower_hex(s); }

/// "ORG--NAME" of "ORG/NAME" (REPO_ID_SEPARATOR).
std::string repo_folder_name(std::string_view repo_id) {
  std::string out = "models--";
  for (char c : repo_id) {
    if (c == '/') {
      out += "--";
    } else {
      out += c;
    }
  }
  return out;
}

/// The kind of what `path` names (lstat follows nothing; stat follows links).
enum class Kind { none, directory, regular, other };
Kind kind_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Kind::none;
  if (S_ISDIR(st.st_mode)) return Kind::directory;
  if (S_ISREG(st.st_mode)) return Kind::regular;
  return Kind::other;
}

/// The refs of a cache repository (refs/main, refs/pr/1 as "main", "pr/1"), sorted; at most
/// CheckpointLimits::max_refs_walked entries are looked at. `more`: whether the walk stopped early.
std::vector<std::string> list_refs(const std::string& repo_dir, bool& more) {
  std::vector<std::string> refs;
  more = false;
  const fs::path top = fs::path(repo_dir) / "refs";
  std::error_code ec;
  fs::recursive_directory_iterator it(top, fs::directory_options::none, ec), end;
  std::int64_t walked = 0;
  for (; !ec && it != end; it.increment(ec)) {
    if (++walked > CheckpointLimits::max_refs_walked) {
      more = true;
      break;
    }
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    refs.push_back(it->path().lexically_relative(top).generic_string());
  }
  std::sort(refs.begin(), refs.end());
  return refs;
}

/// "refs there: 'main', 'pr/1'" (at most kRefsListed named), or "no refs there".
std::string describe_refs(const std::string& repo_dir) {
  bool more = false;
  const std::vector<std::string> refs = list_refs(repo_dir, more);
  if (refs.empty()) return more ? "refs/ holds too many entries to list" : "no refs there";
  std::string out = "refs there: ";
  for (std::size_t i = 0; i < refs.size() && i < kRefsListed; ++i) {
    if (i > 0) out += ", ";
    out += mlaplan::quoted(refs[i]);
  }
  if (refs.size() > kRefsListed || more) {
    out += " (" + std::to_string(refs.size()) + (more ? " or more" : "") + " in all)";
  }
  return out;
}

/// How a message names the repository: "model 'ORG/NAME' (Hugging Face cache 'DIR')" or
/// "Hugging Face cache 'DIR'".
std::string who(const std::string& repo_id, const std::string& repo_dir) {
  if (repo_id.empty()) return "Hugging Face cache " + qpath(repo_dir);
  return "model " + mlaplan::quoted(repo_id) + " (Hugging Face cache " + qpath(repo_dir) + ")";
}

/// "`hf download ORG/NAME --revision R`", or "" for a cache directory named without an id.
std::string download_hint(const std::string& repo_id, const std::string& revision) {
  if (repo_id.empty()) return "";
  std::string cmd = "hf download " + repo_id;
  if (revision != kDefaultRevision) cmd += " --revision " + printable(revision, 256);
  return "; fetch it with `" + cmd + "`";
}

HfSnapshot resolve_in_repo_dir(const std::string& repo_id, const std::string& repo_dir,
                               const std::optional<std::string>& revision) {
  HfSnapshot snap;
  snap.repo_id = repo_id;
  snap.repo_dir = repo_dir;
  snap.revision = revision ? *revision : std::string(kDefaultRevision);
  check_hf_revision(snap.revision);
  const std::string& rev = snap.revision;
  const std::string ref_name = "refs/" + rev;
  const std::string ref_path = join(repo_dir, ref_name);
  std::string how;  // how the snapshot was found, for messages
  if (kind_of(ref_path) == Kind::regular) {
    snap.commit = read_hf_ref(ref_path, rev);
    how = ref_name + " names snapshot " + mlaplan::quoted(snap.commit);
  } else if (is_commit_hash(rev)) {
    snap.commit = rev;
    if (kind_of(join(repo_dir, "snapshots/" + rev)) == Kind::none) {
      throw_config(who(repo_id, repo_dir) + ": no revision " + mlaplan::quoted(rev) + ": no " + ref_name +
                   " and no snapshots/" + rev + "; " + describe_refs(repo_dir) + download_hint(repo_id, rev));
    }
    how = "the commit " + rev;
  } else {
    // Something is there that is not a ref file: name it (a folder, a FIFO, a link that loops or
    // leads nowhere) rather than say that the ref is missing.
    struct stat lst {};
    if (::lstat(ref_path.c_str(), &lst) == 0) {
      struct stat st {};
      const std::string what = ::stat(ref_path.c_str(), &st) != 0
                                   ? "a link that cannot be followed: " + file_error_cause(errno, ref_path)
                                   : std::string(file_type_name(st.st_mode));
      throw_config(who(repo_id, repo_dir) + ": revision " + mlaplan::quoted(rev) + ": " + qpath(ref_path) + " is " +
                   what + "; expected a file holding the snapshot's commit hash");
    }
    throw_config(who(repo_id, repo_dir) + ": no revision " + mlaplan::quoted(rev) + ": no " + qpath(ref_path) +
                 (is_short_commit(rev) ? " (a commit is named by its full 40-digit hash)" : "") + "; " +
                 describe_refs(repo_dir) + download_hint(repo_id, rev));
  }
  snap.snapshot_dir = join(repo_dir, "snapshots/" + snap.commit);
  struct stat st {};
  if (::stat(snap.snapshot_dir.c_str(), &st) != 0) {
    throw_config(who(repo_id, repo_dir) + ": " + how + ", but " + qpath(snap.snapshot_dir) +
                 " cannot be read: " + file_error_cause(errno, snap.snapshot_dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw_config(who(repo_id, repo_dir) + ": " + how + ", but " + qpath(snap.snapshot_dir) + " is " +
                 std::string(file_type_name(st.st_mode)) + "; expected a snapshot directory");
  }
  // Absent: not even a dangling link. Anything else there is read_input_file's to judge.
  std::error_code ec;
  if (fs::symlink_status(join(snap.snapshot_dir, "config.json"), ec).type() == fs::file_type::not_found) {
    throw_config(who(repo_id, repo_dir) + ": snapshot " + qpath(snap.snapshot_dir) + " (" + how +
                 ") holds no config.json; the download may be partial" + download_hint(repo_id, rev));
  }
  return snap;
}

}  // namespace

HfEnv hf_env_from_process() {
  HfEnv env;
  env.hf_hub_cache = env_value("HF_HUB_CACHE");
  env.huggingface_hub_cache = env_value("HUGGINGFACE_HUB_CACHE");
  env.hf_home = env_value("HF_HOME");
  env.xdg_cache_home = env_value("XDG_CACHE_HOME");
  env.home = env_value("HOME");
  return env;
}

HfCacheDir hf_hub_cache_dir(const HfEnv& env) {
  // huggingface_hub/constants.py: HF_HUB_CACHE, else the legacy HUGGINGFACE_HUB_CACHE, else
  // $HF_HOME/hub, else ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub.
  if (env.hf_hub_cache) return {expand_user(*env.hf_hub_cache, env), "HF_HUB_CACHE"};
  if (env.huggingface_hub_cache) return {expand_user(*env.huggingface_hub_cache, env), "HUGGINGFACE_HUB_CACHE"};
  if (env.hf_home) return {join(expand_user(*env.hf_home, env), "hub"), "HF_HOME/hub"};
  if (env.xdg_cache_home) {
    return {join(expand_user(*env.xdg_cache_home, env), "huggingface/hub"), "XDG_CACHE_HOME/huggingface/hub"};
  }
  if (env.home) return {join(*env.home, ".cache/huggingface/hub"), "the default ~/.cache/huggingface/hub"};
  throw_config(
      "cannot place the Hugging Face cache: none of HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, "
      "XDG_CACHE_HOME and HOME is set; set HF_HUB_CACHE to the cache directory");
}

bool looks_like_repo_id(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos || s.find('/', slash + 1) != std::string_view::npos) return false;
  if (!valid_repo_part(s.substr(0, slash)) || !valid_repo_part(s.substr(slash + 1))) return false;
  if (s.find("--") != std::string_view::npos || s.find("..") != std::string_view::npos) return false;
  return !(s.size() >= 4 && s.substr(s.size() - 4) == ".git");
}

std::string read_hf_ref(const std::string& ref_path, std::string_view ref_name) {
  const InputFileRules rules{"", CheckpointLimits::max_ref_bytes, "CheckpointLimits::max_ref_bytes",
                             "refs/" + std::string(ref_name) + " holds one commit hash"};
  std::string ref = read_input_file(ref_path, rules);
  while (!ref.empty() && (ref.back() == '\n' || ref.back() == '\r')) ref.pop_back();
  const std::string where = qpath(ref_path) + ": ";
  if (ref.empty()) throw_config(where + "the file is empty; expected a commit hash");
  if (static_cast<std::int64_t>(ref.size()) > CheckpointLimits::max_ref_hex_digits) {
    throw_config(where + "the ref " + mlaplan::quoted(ref) + " is " + std::to_string(ref.size()) +
                 " bytes; a commit hash is at most " + std::to_string(CheckpointLimits::max_ref_hex_digits) +
                 " hex digits (CheckpointLimits::max_ref_hex_digits)");
  }
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const char c = ref[i];
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) {
      throw_config(where + "the ref " + mlaplan::quoted(ref) + " is not a commit hash (byte " + std::to_string(i) +
                   " is " + mlaplan::quoted(std::string_view(&ref[i], 1)) + "; expected hex digits only)");
    }
  }
  return ref;
}

void check_hf_revision(std::string_view revision) {
  const auto bad = [&](const std::string& why) {
    throw_usage("--revision " + mlaplan::quoted(revision) + ": " + why +
                "; a revision is a branch, a tag, pr/N or a 40-digit commit hash (looked up as refs/<revision> "
                "of the cache)");
  };
  if (revision.empty()) bad("the revision is empty");
  if (static_cast<std::int64_t>(revision.size()) > CheckpointLimits::max_revision_bytes) {
    bad("longer than " + std::to_string(CheckpointLimits::max_revision_bytes) +
        " bytes (CheckpointLimits::max_revision_bytes)");
  }
  for (std::size_t i = 0; i < revision.size(); ++i) {
    const auto c = static_cast<unsigned char>(revision[i]);
    if (c < 0x20 || c == 0x7f) bad("byte " + std::to_string(i) + " is a control character");
    if (c == '\\') bad("byte " + std::to_string(i) + " is a backslash");
  }
  if (revision.front() == '/') bad("an absolute path");
  std::size_t start = 0;
  while (start <= revision.size()) {
    const auto end = std::min(revision.find('/', start), revision.size());
    const std::string_view part = revision.substr(start, end - start);
    if (part.empty()) bad("an empty path component");
    if (part == "." || part == "..") bad("a path component is " + mlaplan::quoted(part));
    start = end + 1;
  }
}

HfSnapshot resolve_hf_repo_dir(const std::string& repo_dir, const std::optional<std::string>& revision) {
  std::string id = hf_repo_id_of_dir(repo_dir);
  return resolve_in_repo_dir(id, repo_dir, revision);
}

HfSnapshot resolve_hf_repo(std::string_view repo_id, const std::optional<std::string>& revision, const HfEnv& env,
                           const std::optional<std::string>& cache_dir_override) {
  const std::string id(repo_id);
  if (!looks_like_repo_id(repo_id)) {
    throw_usage(mlaplan::quoted(repo_id) +
                " is not a Hugging Face repo id (ORG/NAME: letters, digits, '.', '_' and '-', at most 96 each, "
                "no '--' or '..')");
  }
  if (revision) check_hf_revision(*revision);
  const HfCacheDir cache = cache_dir_override && !cache_dir_override->empty()
                               ? HfCacheDir{*cache_dir_override, "--download-dir"}
                               : hf_hub_cache_dir(env);
  const std::string repo_dir = join(cache.path, repo_folder_name(id));
  struct stat st {};
  if (::stat(repo_dir.c_str(), &st) != 0) {
    const int err = errno;
    std::string why =
        err == ENOENT ? "no " + qpath(repo_dir) : qpath(repo_dir) + ": " + file_error_cause(err, repo_dir);
    if (err == ENOENT && kind_of(cache.path) == Kind::none) why += " (the cache directory itself does not exist)";
    throw_config("model " + mlaplan::quoted(id) + " is not in the Hugging Face cache " + qpath(cache.path) + " (" +
                 cache.how + "): " + why + "; nothing is downloaded: fetch it first with `hf download " + id +
                 "` (or point HF_HUB_CACHE / HF_HOME at the cache that has it)");
  }
  if (!S_ISDIR(st.st_mode)) {
    throw_config("model " + mlaplan::quoted(id) + ": " + qpath(repo_dir) + " in the Hugging Face cache (" + cache.how +
                 ") is " + std::string(file_type_name(st.st_mode)) + "; expected a directory");
  }
  HfSnapshot snap = resolve_in_repo_dir(id, repo_dir, revision);
  snap.cache_how = cache.how;
  return snap;
}

std::string hf_repo_id_of_dir(std::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  const auto slash = dir.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? dir : dir.substr(slash + 1);
  constexpr std::string_view kPrefix = "models--";
  if (name.substr(0, kPrefix.size()) != kPrefix) return "";
  const std::string_view rest = name.substr(kPrefix.size());
  const auto sep = rest.find("--");
  if (sep == std::string_view::npos) return "";
  std::string id = std::string(rest.substr(0, sep)) + "/" + std::string(rest.substr(sep + 2));
  return looks_like_repo_id(id) ? id : "";
}

}  // namespace mlaplan
