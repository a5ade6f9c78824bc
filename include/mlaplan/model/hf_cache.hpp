#pragma once
// A Hugging Face repo id (ORG/NAME) resolved through the local Hugging Face cache, offline, the way
// huggingface_hub finds a file it already downloaded: the cache directory from the environment
// (huggingface_hub/constants.py), the repository folder models--ORG--NAME, a revision through
// refs/<revision> or a commit hash, and the snapshot snapshots/<commit> (file_download.py,
// try_to_load_from_cache). Nothing is ever downloaded. docs/config.md, "Hugging Face repo ids".

#include <optional>
#include <string>
#include <string_view>

namespace mlaplan {

/// The environment variables that place the Hugging Face cache. An empty value counts as unset.
struct HfEnv {
  std::optional<std::string> hf_hub_cache;           ///< HF_HUB_CACHE
  std::optional<std::string> huggingface_hub_cache;  ///< HUGGINGFACE_HUB_CACHE (legacy)
  std::optional<std::string> hf_home;                ///< HF_HOME
  std::optional<std::string> xdg_cache_home;         ///< XDG_CACHE_HOME
  std::optional<std::string> home;                   ///< HOME
};

/// HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME of this process.
HfEnv hf_env_from_process();

/// The hub cache directory and where it came from.
struct HfCacheDir {
  std::string path;
  /// "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME/hub", "XDG_CACHE_HOME/huggingface/hub" or
  /// "the default ~/.cache/huggingface/hub" (also "--download-dir" from resolve_hf_repo()).
  std::string how;
};

/// huggingface_hub's hub cache directory: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else
/// $HF_HOME/hub, else ${XDG_CACHE_HOME:-$HOME/.cache}/huggingface/hub. A leading "~" of a value
/// is $HOME, as Python's os.path.expanduser() makes it. Throws Error(invalid_config) when no
/// variable places it (not even HOME).
HfCacheDir hf_hub_cache_dir(const HfEnv& env);

/// Whether `s` reads as a Hugging Face model repo id "ORG/NAME" (huggingface_hub's
/// validate_repo_id() with a namespace required): exactly one '/', each part 1..96 characters of
/// [A-Za-z0-9._-] starting and ending with a letter, digit or '_', no "--" or "..", not ending
/// with ".git".
bool looks_like_repo_id(std::string_view s);

/// A snapshot of the cache: what was asked for and what was found.
struct HfSnapshot {
  std::string repo_id;       ///< "ORG/NAME" ("" when a cache directory was named, not an id)
  std::string repo_dir;      ///< <cache>/models--ORG--NAME
  std::string snapshot_dir;  ///< <repo_dir>/snapshots/<commit>
  std::string revision;      ///< as asked ("main" when none was)
  std::string commit;        ///< the snapshot's name: what refs/<revision> holds, or the revision itself
  std::string cache_how;     ///< HfCacheDir::how of the cache searched ("" for a named directory)
};

/// The commit a ref file of a cache repository holds (refs/main, refs/pr/1): 1 to
/// CheckpointLimits::max_ref_hex_digits hex digits, a trailing newline allowed; the file at most
/// CheckpointLimits::max_ref_bytes. Throws Error(invalid_config) naming `ref_path` and the fault.
std::string read_hf_ref(const std::string& ref_path, std::string_view ref_name);

/// Throws Error(usage) naming --revision when `revision` cannot name a ref or a commit: empty,
/// longer than 256 bytes, holding a control character or a backslash, starting with '/', or with
/// an empty, "." or ".." component.
void check_hf_revision(std::string_view revision);

/// The snapshot of the cache repository directory `repo_dir` (models--ORG--NAME) for `revision`
/// ("main" when unset): refs/<revision> (a file holding a commit hash; a revision may hold '/',
/// as refs/pr/1 does), else, for a 40-hex-digit commit hash, snapshots/<revision> itself. The
/// snapshot must be a directory holding config.json. Throws Error(usage) for a bad revision text
/// and Error(invalid_config) naming what was looked for and where.
HfSnapshot resolve_hf_repo_dir(const std::string& repo_dir, const std::optional<std::string>& revision);

/// The snapshot of the model `repo_id` (ORG/NAME) at `revision` ("main" when unset) in the hub
/// cache of `env` (hf_hub_cache_dir()), or in `cache_dir_override` when given (vLLM's
/// --download-dir: the cache folder itself, as huggingface_hub's cache_dir). As
/// resolve_hf_repo_dir() over <cache>/models--ORG--NAME; a repository absent from the cache is
/// Error(invalid_config) saying that nothing is downloaded and how to fetch it.
HfSnapshot resolve_hf_repo(std::string_view repo_id, const std::optional<std::string>& revision, const HfEnv& env,
                           const std::optional<std::string>& cache_dir_override);

/// "ORG/NAME" of a cache repository folder named models--ORG--NAME (the last component of
/// `dir`, trailing slashes ignored), or "" when the name is not one.
std::string hf_repo_id_of_dir(std::string_view dir);

}  // namespace mlaplan
