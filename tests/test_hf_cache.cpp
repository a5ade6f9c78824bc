// Hugging Face repo ids resolved through a local hub cache built here in a temporary directory:
// the cache directory from the environment, refs/<revision> and commit hashes to a snapshot, and
// a one-line error for each thing that is not there. Nothing is ever downloaded.

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/model/hf_cache.hpp"
#include "mlaplan/model/safetensors.hpp"
#include "temp_dir.hpp"

using namespace mlaplan;
namespace fs = std::filesystem;
using testing_files::TempDir;

namespace {

const std::string kRepo = "deepseek-ai/DeepSeek-V3.2";
const std::string kMain = "0123456789abcdef0123456789abcdef01234567";
const std::string kBranch = "89abcdef0123456789abcdef0123456789abcdef";
const std::string kPr = "fedcba9876543210fedcba9876543210fedcba98";

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }
std::string q(const std::string& path) { return quoted(path, kQuotedPathMaxBytes); }

/// The message of the Error `f` throws (fails the test when none, or one of another kind).
std::string error_of(const std::function<void()>& f, ErrorKind kind = ErrorKind::invalid_config) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    CHECK(is_printable_line(e.what()));
    return e.what();
  }
  FAIL("no error was thrown");
  return "";
}

/// A hub cache holding models--deepseek-ai--DeepSeek-V3.2 as huggingface_hub lays it out: a
/// snapshot per commit (config.json a link into blobs/, when `with_config`) and refs/NAME files.
struct Cache {
  TempDir dir;
  fs::path hub = dir.path / "hub";
  fs::path repo = hub / "models--deepseek-ai--DeepSeek-V3.2";

  HfEnv env() const {
    HfEnv e;
    e.hf_hub_cache = hub.string();
    return e;
  }
  std::string snapshot(const std::string& commit) const { return (repo / "snapshots" / commit).string(); }
  void add_snapshot(const std::string& commit, bool with_config = true) const {
    fs::create_directories(repo / "snapshots" / commit);
    if (!with_config) return;
    fs::create_directories(repo / "blobs");
    fs::copy_file(src("configs/deepseek-v3.2.json"), repo / "blobs" / commit, fs::copy_options::overwrite_existing);
    fs::create_symlink("../../blobs/" + commit, repo / "snapshots" / commit / "config.json");
  }
  void add_ref(const std::string& name, const std::string& text) const {
    fs::create_directories((repo / "refs" / name).parent_path());
    std::ofstream(repo / "refs" / name) << text;  // huggingface_hub writes no newline
  }
  /// refs/main, refs/v2 and refs/pr/1, each with its snapshot.
  void add_standard() const {
    add_snapshot(kMain);
    add_snapshot(kBranch);
    add_snapshot(kPr);
    add_ref("main", kMain);
    add_ref("v2", kBranch);
    add_ref("pr/1", kPr);
  }
};

HfSnapshot resolve(const Cache& c, const std::optional<std::string>& revision) {
  return resolve_hf_repo(kRepo, revision, c.env(), std::nullopt);
}

/// Sets an environment variable for the life of the object, then restores it.
struct EnvVar {
  std::string name;
  std::optional<std::string> old;
  EnvVar(std::string n, const std::optional<std::string>& value) : name(std::move(n)) {
    if (const char* v = ::getenv(name.c_str())) old = v;
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  ~EnvVar() {
    if (old) {
      ::setenv(name.c_str(), old->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;
};

}  // namespace

TEST_CASE("hf_cache: the hub cache directory follows huggingface_hub's precedence", "[hf_cache]") {
  HfEnv env;
  env.hf_hub_cache = "/a/hub-cache";
  env.huggingface_hub_cache = "/b/legacy";
  env.hf_home = "/c/hf-home";
  env.xdg_cache_home = "/d/xdg";
  env.home = "/e/home";
  HfCacheDir d = hf_hub_cache_dir(env);
  CHECK(d.path == "/a/hub-cache");
  CHECK(d.how == "HF_HUB_CACHE");
  env.hf_hub_cache.reset();
  d = hf_hub_cache_dir(env);
  CHECK(d.path == "/b/legacy");
  CHECK(d.how == "HUGGINGFACE_HUB_CACHE");
  env.huggingface_hub_cache.reset();
  d = hf_hub_cache_dir(env);
  CHECK(d.path == "/c/hf-home/hub");
  CHECK(d.how == "HF_HOME/hub");
  env.hf_home.reset();
  d = hf_hub_cache_dir(env);
  CHECK(d.path == "/d/xdg/huggingface/hub");
  CHECK(d.how == "XDG_CACHE_HOME/huggingface/hub");
  env.xdg_cache_home.reset();
  d = hf_hub_cache_dir(env);
  CHECK(d.path == "/e/home/.cache/huggingface/hub");
  CHECK(d.how == "the default ~/.cache/huggingface/hub");
  env.home.reset();
  CHECK_THAT(error_of([&] { hf_hub_cache_dir(env); }),
             Catch::StartsWith("cannot place the Hugging Face cache: none of HF_HUB_CACHE"));

  // A leading ~ is $HOME (os.path.expanduser); ~user is left as written.
  HfEnv tilde;
  tilde.home = "/e/home";
  tilde.hf_home = "~/hf";
  CHECK(hf_hub_cache_dir(tilde).path == "/e/home/hf/hub");
  tilde.hf_hub_cache = "~";
  CHECK(hf_hub_cache_dir(tilde).path == "/e/home");
  tilde.hf_hub_cache = "~other/hub";
  CHECK(hf_hub_cache_dir(tilde).path == "~other/hub");
}

TEST_CASE("hf_cache: the process environment is read and an empty value counts as unset", "[hf_cache]") {
  EnvVar a("HF_HUB_CACHE", std::string());
  EnvVar b("HUGGINGFACE_HUB_CACHE", std::nullopt);
  EnvVar c("HF_HOME", std::string("/x/hf"));
  EnvVar d("XDG_CACHE_HOME", std::string("/x/xdg"));
  EnvVar e("HOME", std::string("/x/home"));
  const HfEnv env = hf_env_from_process();
  CHECK_FALSE(env.hf_hub_cache.has_value());
  CHECK_FALSE(env.huggingface_hub_cache.has_value());
  CHECK(env.hf_home == std::optional<std::string>("/x/hf"));
  CHECK(env.xdg_cache_home == std::optional<std::string>("/x/xdg"));
  CHECK(env.home == std::optional<std::string>("/x/home"));
  const HfCacheDir dir = hf_hub_cache_dir(env);
  CHECK(dir.path == "/x/hf/hub");
  CHECK(dir.how == "HF_HOME/hub");
}

TEST_CASE("hf_cache: repo ids follow huggingface_hub's validate_repo_id with a namespace", "[hf_cache]") {
  CHECK(looks_like_repo_id("deepseek-ai/DeepSeek-V3.2"));
  CHECK(looks_like_repo_id("a/b"));
  CHECK(looks_like_repo_id("Org_1/Name.with-dots_2"));
  CHECK(looks_like_repo_id("o/" + std::string(96, 'n')));
  CHECK_FALSE(looks_like_repo_id("o/" + std::string(97, 'n')));
  CHECK_FALSE(looks_like_repo_id(std::string(97, 'o') + "/n"));
  CHECK_FALSE(looks_like_repo_id("DeepSeek-V3.2"));      // no namespace: could be any relative path
  CHECK_FALSE(looks_like_repo_id("datasets/org/name"));  // two '/'
  CHECK_FALSE(looks_like_repo_id("/org/name"));
  CHECK_FALSE(looks_like_repo_id("org/"));
  CHECK_FALSE(looks_like_repo_id("/name"));
  CHECK_FALSE(looks_like_repo_id(""));
  CHECK_FALSE(looks_like_repo_id("org/na..me"));
  CHECK_FALSE(looks_like_repo_id("org/na--me"));  // the cache's separator
  CHECK_FALSE(looks_like_repo_id("./name"));
  CHECK_FALSE(looks_like_repo_id("../name"));
  CHECK_FALSE(looks_like_repo_id(".org/name"));
  CHECK_FALSE(looks_like_repo_id("org/name."));
  CHECK_FALSE(looks_like_repo_id("org/-name"));
  CHECK_FALSE(looks_like_repo_id("org/name.git"));
  CHECK_FALSE(looks_like_repo_id("org/na me"));
  CHECK_FALSE(looks_like_repo_id("org/caf\xc3\xa9"));
  CHECK_FALSE(looks_like_repo_id(std::string("org/n\0m", 7)));

  CHECK(hf_repo_id_of_dir("/c/hub/models--deepseek-ai--DeepSeek-V3.2") == kRepo);
  CHECK(hf_repo_id_of_dir("/c/hub/models--deepseek-ai--DeepSeek-V3.2//") == kRepo);
  CHECK(hf_repo_id_of_dir("models--a--b") == "a/b");
  CHECK(hf_repo_id_of_dir("/c/hub/models--gpt2").empty());
  CHECK(hf_repo_id_of_dir("/c/hub/datasets--a--b").empty());
  CHECK(hf_repo_id_of_dir("/c/hub/snapshots").empty());
}

TEST_CASE("hf_cache: a repo id resolves through refs/main by default", "[hf_cache]") {
  Cache c;
  c.add_standard();
  const HfSnapshot s = resolve(c, std::nullopt);
  CHECK(s.repo_id == kRepo);
  CHECK(s.repo_dir == c.repo.string());
  CHECK(s.revision == "main");
  CHECK(s.commit == kMain);
  CHECK(s.snapshot_dir == c.snapshot(kMain));
  CHECK(s.cache_how == "HF_HUB_CACHE");
  // A trailing newline in the ref is accepted, as before.
  c.add_ref("main", kMain + "\n");
  CHECK(resolve(c, std::string("main")).snapshot_dir == c.snapshot(kMain));

  // The same cache through HF_HOME, and through vLLM's --download-dir.
  HfEnv home;
  home.hf_home = c.dir.path.string();
  const HfSnapshot h = resolve_hf_repo(kRepo, std::nullopt, home, std::nullopt);
  CHECK(h.snapshot_dir == c.snapshot(kMain));
  CHECK(h.cache_how == "HF_HOME/hub");
  HfEnv elsewhere;
  elsewhere.hf_hub_cache = (c.dir.path / "empty").string();
  const HfSnapshot o = resolve_hf_repo(kRepo, std::nullopt, elsewhere, c.hub.string());
  CHECK(o.snapshot_dir == c.snapshot(kMain));
  CHECK(o.cache_how == "--download-dir");
}

TEST_CASE("hf_cache: a revision picks a branch ref a pull-request ref or a commit", "[hf_cache]") {
  Cache c;
  c.add_standard();
  const HfSnapshot branch = resolve(c, std::string("v2"));
  CHECK(branch.revision == "v2");
  CHECK(branch.commit == kBranch);
  CHECK(branch.snapshot_dir == c.snapshot(kBranch));

  const HfSnapshot pr = resolve(c, std::string("pr/1"));
  CHECK(pr.revision == "pr/1");
  CHECK(pr.commit == kPr);
  CHECK(pr.snapshot_dir == c.snapshot(kPr));

  // A commit hash names its snapshot directly, with or without a ref pointing at it.
  const std::string lone = "aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd";
  c.add_snapshot(lone);
  const HfSnapshot commit = resolve(c, lone);
  CHECK(commit.revision == lone);
  CHECK(commit.commit == lone);
  CHECK(commit.snapshot_dir == c.snapshot(lone));
  CHECK(resolve(c, kBranch).snapshot_dir == c.snapshot(kBranch));

  // The repository folder named directly resolves the same way.
  const HfSnapshot dir = resolve_hf_repo_dir(c.repo.string(), std::string("pr/1"));
  CHECK(dir.repo_id == kRepo);
  CHECK(dir.snapshot_dir == c.snapshot(kPr));
  CHECK(dir.cache_how.empty());
}

TEST_CASE("hf_cache: a model not in the cache names the cache and says how to fetch it", "[hf_cache]") {
  Cache c;
  fs::create_directories(c.hub);
  const std::string repo = (c.hub / "models--deepseek-ai--DeepSeek-V3.2").string();
  CHECK(error_of([&] { resolve(c, std::nullopt); }) ==
        "model 'deepseek-ai/DeepSeek-V3.2' is not in the Hugging Face cache " + q(c.hub.string()) +
            " (HF_HUB_CACHE): no " + q(repo) +
            "; nothing is downloaded: fetch it first with `hf download deepseek-ai/DeepSeek-V3.2` (or point "
            "HF_HUB_CACHE / HF_HOME at the cache that has it)");

  // No cache at all: said too.
  HfEnv none;
  none.home = (c.dir.path / "nohome").string();
  const std::string msg = error_of([&] { resolve_hf_repo(kRepo, std::nullopt, none, std::nullopt); });
  CHECK_THAT(msg, Catch::Contains("(the default ~/.cache/huggingface/hub)"));
  CHECK_THAT(msg, Catch::Contains("(the cache directory itself does not exist)"));
  CHECK_THAT(msg, Catch::Contains("`hf download deepseek-ai/DeepSeek-V3.2`"));

  // Not a repo id at all: a usage error.
  CHECK_THAT(error_of([&] { resolve_hf_repo("a/b/c", std::nullopt, c.env(), std::nullopt); }, ErrorKind::usage),
             Catch::StartsWith("'a/b/c' is not a Hugging Face repo id"));
}

TEST_CASE("hf_cache: a revision not in the cache lists the refs there", "[hf_cache]") {
  Cache c;
  c.add_standard();
  const std::string ref = (c.repo / "refs" / "v3").string();
  CHECK(error_of([&] { resolve(c, std::string("v3")); }) ==
        "model 'deepseek-ai/DeepSeek-V3.2' (Hugging Face cache " + q(c.repo.string()) + "): no revision 'v3': no " +
            q(ref) +
            "; refs there: 'main', 'pr/1', 'v2'; fetch it with `hf download deepseek-ai/DeepSeek-V3.2 "
            "--revision v3`");
  // A commit hash without a snapshot.
  const std::string missing = "1111111111111111111111111111111111111111";
  CHECK_THAT(error_of([&] { resolve(c, missing); }),
             Catch::Contains(": no revision '" + missing + "': no refs/" + missing + " and no snapshots/" + missing +
                             "; refs there: 'main', 'pr/1', 'v2'"));
  // A short hash is not looked up: said so.
  CHECK_THAT(error_of([&] { resolve(c, std::string("0123456")); }),
             Catch::Contains("(a commit is named by its full 40-digit hash)"));
  // Many refs: a few are named, and the count.
  for (int i = 0; i < 6; ++i) c.add_ref("b" + std::to_string(i), kMain);
  CHECK_THAT(error_of([&] { resolve(c, std::string("v3")); }),
             Catch::Contains("refs there: 'b0', 'b1', 'b2', 'b3', 'b4' (9 in all)"));
  // No refs at all.
  fs::remove_all(c.repo / "refs");
  CHECK_THAT(error_of([&] { resolve(c, std::nullopt); }), Catch::Contains("no revision 'main'"));
  CHECK_THAT(error_of([&] { resolve(c, std::nullopt); }), Catch::Contains("; no refs there;"));
  // Something at refs/main that is not a ref file is named, not called missing.
  fs::create_directories(c.repo / "refs" / "main");
  CHECK_THAT(error_of([&] { resolve(c, std::nullopt); }),
             Catch::Contains("revision 'main': " + q((c.repo / "refs" / "main").string()) +
                             " is a directory; expected a file holding the snapshot's commit hash"));
  fs::remove_all(c.repo / "refs" / "main");
  fs::create_symlink("main", c.repo / "refs" / "main");  // a link to itself
  CHECK_THAT(error_of([&] { resolve(c, std::nullopt); }), Catch::Contains("is a link that cannot be followed: "));
  fs::remove(c.repo / "refs" / "main");
  fs::create_symlink("/dev/zero", c.repo / "refs" / "main");
  CHECK_THAT(error_of([&] { resolve(c, std::nullopt); }), Catch::Contains("is a character device; expected a file"));
}

TEST_CASE("hf_cache: a snapshot without config.json is an error naming the snapshot", "[hf_cache]") {
  Cache c;
  c.add_snapshot(kMain, /*with_config=*/false);
  c.add_ref("main", kMain);
  CHECK(error_of([&] { resolve(c, std::nullopt); }) ==
        "model 'deepseek-ai/DeepSeek-V3.2' (Hugging Face cache " + q(c.repo.string()) + "): snapshot " +
            q(c.snapshot(kMain)) + " (refs/main names snapshot '" + kMain +
            "') holds no config.json; the download may be partial; fetch it with `hf download "
            "deepseek-ai/DeepSeek-V3.2`");
  // A ref naming a snapshot that is not there.
  c.add_ref("v2", kBranch);
  CHECK(error_of([&] { resolve(c, std::string("v2")); }) ==
        "model 'deepseek-ai/DeepSeek-V3.2' (Hugging Face cache " + q(c.repo.string()) + "): refs/v2 names snapshot '" +
            kBranch + "', but " + q(c.snapshot(kBranch)) + " cannot be read: no such file or directory");
}

TEST_CASE("hf_cache: a malformed ref is an error naming the ref file", "[hf_cache]") {
  Cache c;
  c.add_standard();
  const std::string ref = q((c.repo / "refs" / "v2").string()) + ": ";
  c.add_ref("v2", "../../../etc");
  CHECK(error_of([&] { resolve(c, std::string("v2")); }) ==
        ref + "the ref '../../../etc' is not a commit hash (byte 0 is '.'; expected hex digits only)");
  c.add_ref("v2", "");
  CHECK(error_of([&] { resolve(c, std::string("v2")); }) == ref + "the file is empty; expected a commit hash");
  c.add_ref("v2", std::string(65, 'a'));
  CHECK_THAT(
      error_of([&] { resolve(c, std::string("v2")); }),
      Catch::EndsWith("is 65 bytes; a commit hash is at most 64 hex digits (CheckpointLimits::max_ref_hex_digits)"));
  c.add_ref("v2", std::string(300, 'a'));
  CHECK_THAT(error_of([&] { resolve(c, std::string("v2")); }),
             Catch::Contains("(CheckpointLimits::max_ref_bytes); refs/v2 holds one commit hash"));
  // resolve_model_dir reads refs/main with the same checks.
  c.add_ref("main", "abc/def");
  CHECK(error_of([&] { resolve_model_dir(c.repo.string()); }) ==
        q((c.repo / "refs" / "main").string()) +
            ": the ref 'abc/def' is not a commit hash (byte 3 is '/'; expected hex digits only)");
}

TEST_CASE("hf_cache: a revision that cannot name a ref is a usage error naming --revision", "[hf_cache]") {
  Cache c;
  c.add_standard();
  const auto usage = [&](const std::string& rev) { return error_of([&] { resolve(c, rev); }, ErrorKind::usage); };
  CHECK_THAT(usage(""), Catch::StartsWith("--revision '': the revision is empty; a revision is a branch"));
  CHECK_THAT(usage("../main"), Catch::StartsWith("--revision '../main': a path component is '..'"));
  CHECK_THAT(usage("pr/../../x"), Catch::StartsWith("--revision 'pr/../../x': a path component is '..'"));
  CHECK_THAT(usage("/etc/passwd"), Catch::StartsWith("--revision '/etc/passwd': an absolute path"));
  CHECK_THAT(usage("pr//1"), Catch::StartsWith("--revision 'pr//1': an empty path component"));
  CHECK_THAT(usage("main/"), Catch::StartsWith("--revision 'main/': an empty path component"));
  CHECK_THAT(usage("ma\nin"), Catch::StartsWith("--revision 'ma\\nin': byte 2 is a control character"));
  CHECK_THAT(usage("a\\b"), Catch::Contains(": byte 1 is a backslash"));
  CHECK_THAT(usage(std::string(257, 'a')), Catch::Contains("(CheckpointLimits::max_revision_bytes)"));
  // The same check for a cache directory named with a revision.
  CHECK_THAT(error_of([&] { resolve_hf_repo_dir(c.repo.string(), std::string("..")); }, ErrorKind::usage),
             Catch::StartsWith("--revision '..'"));
}

TEST_CASE("hf_cache: load_config reads a repo id from the cache", "[hf_cache]") {
  Cache c;
  c.add_standard();
  ModelSourceOptions opts;
  opts.env = c.env();
  const ModelConfig cfg = load_config(kRepo, opts);
  const ModelConfig direct = load_config(src("configs/deepseek-v3.2.json"));
  CHECK(cfg.family == Family::deepseek_v32);
  CHECK(cfg.num_hidden_layers == direct.num_hidden_layers);
  CHECK(cfg.index_topk == direct.index_topk);
  CHECK(cfg.source == kRepo);
  CHECK(cfg.model_dir == c.snapshot(kMain));
  CHECK(cfg.file == c.snapshot(kMain) + "/config.json");
  CHECK(cfg.hf_repo_id == kRepo);
  CHECK(cfg.hf_revision == "main");
  CHECK(cfg.hf_commit == kMain);
  CHECK(direct.hf_repo_id.empty());
  CHECK(direct.hf_commit.empty());

  opts.revision = "pr/1";
  const ModelConfig pr = load_config(kRepo, opts);
  CHECK(pr.model_dir == c.snapshot(kPr));
  CHECK(pr.hf_revision == "pr/1");
  CHECK(pr.hf_commit == kPr);

  // --download-dir replaces the environment's cache.
  ModelSourceOptions dl;
  HfEnv elsewhere;
  elsewhere.hf_hub_cache = (c.dir.path / "empty").string();
  dl.env = elsewhere;
  CHECK_THAT(error_of([&] { load_config(kRepo, dl); }), Catch::StartsWith("model 'deepseek-ai/DeepSeek-V3.2' is not"));
  dl.download_dir = c.hub.string();
  CHECK(load_config(kRepo, dl).model_dir == c.snapshot(kMain));

  // A path that does not exist and is no repo id (or ends in .json) keeps the "cannot read" error.
  CHECK_THAT(error_of([&] { load_config("no-such-org/config.json", opts); }), Catch::Contains("cannot read"));
  CHECK_THAT(error_of([&] { load_config("no-such-config", opts); }), Catch::Contains("cannot read"));
}

TEST_CASE("hf_cache: load_config of a cache folder follows --revision and records the repo id", "[hf_cache]") {
  Cache c;
  c.add_standard();
  const ModelConfig main = load_config(c.repo.string());
  CHECK(main.model_dir == c.snapshot(kMain));
  CHECK(main.hf_repo_id == kRepo);
  CHECK(main.hf_revision == "main");
  CHECK(main.hf_commit == kMain);

  ModelSourceOptions opts;
  opts.revision = "v2";
  const ModelConfig v2 = load_config(c.repo.string(), opts);
  CHECK(v2.model_dir == c.snapshot(kBranch));
  CHECK(v2.hf_repo_id == kRepo);
  CHECK(v2.hf_revision == "v2");
  CHECK(v2.hf_commit == kBranch);

  // A snapshot named directly: its repo id and commit, no revision.
  const ModelConfig snap = load_config(c.snapshot(kPr));
  CHECK(snap.model_dir == c.snapshot(kPr));
  CHECK(snap.hf_repo_id == kRepo);
  CHECK(snap.hf_commit == kPr);
  CHECK(snap.hf_revision.empty());

  // --revision with anything but a repo id or a cache folder is a usage error.
  const std::string plain = c.snapshot(kMain);
  CHECK(error_of([&] { load_config(plain, opts); }, ErrorKind::usage) ==
        "--revision applies to a Hugging Face repo id or cache directory (models--ORG--NAME); " + q(plain) +
            " is neither");
  const std::string file = src("configs/deepseek-v3.2.json");
  CHECK(error_of([&] { load_config(file, opts); }, ErrorKind::usage) ==
        "--revision applies to a Hugging Face repo id or cache directory (models--ORG--NAME); " + q(file) +
            " is not a directory");
}
