// Input files: only regular files are read, every failure to open has its own cause, the whole file is JSON (no NUL), two spellings that disagree are an error.

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "special_files.hpp"
#include "unprivileged.hpp"
#include "report/report.hpp"

using namespace mlaplan;
namespace fs = std::filesystem;

using testing_files::UnixSocket;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("mlaplan-input-files-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path / "locked", fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string fifo(const std::string& name) const {
    const auto p = (path / name).string();
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    return p;
  }
};

/// A reader that blocks must not hang the test run: SIGALRM (default action) ends the process,
/// which fails the run, after `seconds`.
struct Deadline {
  explicit Deadline(unsigned seconds) { ::alarm(seconds); }
  ~Deadline() { ::alarm(0); }
};

/// A block device to stat (never opened): one of /dev, or none on this machine.
std::string find_block_device() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && S_ISBLK(st.st_mode)) return e.path().string();
  }
  return {};
}

std::string load_error(const std::string& path) {
  try {
    (void)load_config(path);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    return e.what();
  }
  FAIL("accepted " << path);
  return {};
}

std::string parse_error(const std::string& text, const std::string& source = "t.json") {
  try {
    (void)parse_config(text, source);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    return e.what();
  }
  FAIL("accepted: " << text);
  return {};
}

std::string result_error(const std::string& path, const std::string& flag = "--verify-json") {
  try {
    (void)cli::read_result_json(flag, "V", path);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    return e.what();
  }
  FAIL("accepted " << path);
  return {};
}

std::string result_text_error(const std::string& text, const std::string& flag = "--bench-json") {
  try {
    (void)cli::parse_result_json(text, flag, "B", "b.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    return e.what();
  }
  FAIL("accepted: " << text);
  return {};
}

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = cli::run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }

const std::string kConfigText = R"({"model_type": "deepseek_v41"})";

const InputFileRules kRules{"", ConfigLimits::max_file_bytes, "ConfigLimits::max_file_bytes", "a few KiB"};

}  // namespace

// ------------------------------------------------------------------ only regular files

TEST_CASE("input files: a FIFO, a socket or a device is refused before it is opened", "[input-files]") {
  TempDir dir;
  const Deadline deadline(30);
  const auto fifo = dir.fifo("fifo.json");
  CHECK(load_error(fifo) == "cannot read '" + fifo + "': it is a FIFO (named pipe); only a regular file is read");

  const auto sock_path = (dir.path / "sock.json").string();
  const UnixSocket sock(sock_path);
  CHECK(load_error(sock_path) == "cannot read '" + sock_path + "': it is a socket; only a regular file is read");

  CHECK(load_error("/dev/null") == "cannot read '/dev/null': it is a character device; only a regular file is read");
  CHECK(load_error("/dev/zero") == "cannot read '/dev/zero': it is a character device; only a regular file is read");

  const auto block = find_block_device();
  if (block.empty()) {
    WARN("no block device under /dev here; the block-device case is not checked");
  } else {
    CHECK(load_error(block) == "cannot read '" + block + "': it is a block device; only a regular file is read");
  }

  // Through a symbolic link: stat() follows it, the target is what counts.
  const auto link = (dir.path / "link.json").string();
  fs::create_symlink(fifo, link);
  CHECK(load_error(link) == "cannot read '" + link + "': it is a FIFO (named pipe); only a regular file is read");

  // DIR/config.json that is a FIFO.
  fs::create_directories(dir.path / "model");
  const auto inner = dir.fifo("model/config.json");
  CHECK(load_error((dir.path / "model").string()) ==
        "cannot read '" + inner + "': it is a FIFO (named pipe); only a regular file is read");

  // The same for report's result files.
  CHECK(result_error(fifo) ==
        "--verify-json: cannot read '" + fifo + "': it is a FIFO (named pipe); only a regular file is read");
  CHECK(result_error(sock_path, "--bench-json") ==
        "--bench-json: cannot read '" + sock_path + "': it is a socket; only a regular file is read");
  CHECK(result_error("/dev/zero", "--bench-json") ==
        "--bench-json: cannot read '/dev/zero': it is a character device; only a regular file is read");
}

TEST_CASE("input files: a descriptor that is not a regular file is refused after open", "[input-files]") {
  // The path swapped between stat() and open(): read_input_fd() checks the descriptor again.
  TempDir dir;
  const Deadline deadline(30);
  const auto fifo = dir.fifo("swapped.json");
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(fd >= 0);
  try {
    (void)read_input_fd(fd, "config.json", kRules);
    FAIL("a FIFO descriptor was read");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    CHECK(std::string(e.what()) == "cannot read 'config.json': it is a FIFO (named pipe); only a regular file is read");
  }
  ::close(fd);

  const int dev = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  REQUIRE(dev >= 0);
  CHECK_THROWS_WITH(read_input_fd(dev, "z", kRules),
                    "cannot read 'z': it is a character device; only a regular file is read");
  ::close(dev);

  // A read error has its cause: a descriptor open for writing only.
  const auto file = dir.write("w.json", kConfigText);
  const int wfd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(wfd >= 0);
  CHECK_THROWS_WITH(read_input_fd(wfd, "w.json", kRules),
                    "cannot read 'w.json': read failed: the file is not open for reading");
  ::close(wfd);

  // A regular file is read whole.
  const int rfd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(rfd >= 0);
  CHECK(read_input_fd(rfd, "w.json", kRules) == kConfigText);
  ::close(rfd);
}

TEST_CASE("input files: every failure to open names its cause", "[input-files]") {
  TempDir dir;
  const auto missing = (dir.path / "nope.json").string();
  CHECK(load_error(missing) == "cannot read '" + missing + "': no such file or directory");

  const auto a = (dir.path / "a.json").string(), b = (dir.path / "b.json").string();
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  CHECK(load_error(a) == "cannot read '" + a + "': too many levels of symbolic links (a symbolic-link loop)");

  const auto dangling = (dir.path / "dangling.json").string();
  fs::create_symlink(dir.path / "gone.json", dangling);
  CHECK(load_error(dangling) ==
        "cannot read '" + dangling + "': no such file or directory (a symbolic link to a missing file)");

  const auto file = dir.write("file.json", kConfigText);
  CHECK(load_error(file + "/config.json") ==
        "cannot read '" + file + "/config.json': a component of the path is not a directory");

  // A path of 5000 bytes: the message shows its first 1024 bytes, its length, and why.
  const std::string long_path = "/" + std::string(4999, 'x');
  const auto long_msg = load_error(long_path);
  CHECK(long_msg == "cannot read '/" + std::string(kQuotedPathMaxBytes - 1, 'x') +
                        "'... (5000 bytes): the path is too long (5000 bytes; at most 4095 are allowed)");
  // One name of 300 bytes in a short path.
  const auto long_name = (dir.path / std::string(300, 'n')).string();
  CHECK(load_error(long_name) ==
        "cannot read '" + long_name + "': a name in the path is too long (300 bytes; at most 255 are allowed)");

  {
    // As root (CI), read as the user nobody: mode 000 denies nothing to root.
    const auto locked = dir.write("locked", kConfigText);
    fs::permissions(locked, fs::perms::none);
    const auto message = unprivileged::call([&]() -> std::string {
      try {
        (void)load_config(locked);
        return "accepted";
      } catch (const Error& e) {
        return e.what();
      }
    });
    REQUIRE(message.has_value());
    CHECK(*message == "cannot read '" + locked + "': permission denied");
  }
  // A path with a NUL would be read only up to it, which names another file.
  CHECK(result_error(file + std::string("\0.bak", 5)) ==
        "--verify-json: cannot read '" + file + "\\x00.bak': the path holds a NUL byte");
  CHECK(result_error("") == "--verify-json: cannot read '': the path is empty");
  CHECK(file_error_cause(EACCES, "x") == "permission denied");
  CHECK(file_error_cause(EIO, "x") == "input/output error");
  CHECK(file_error_cause(EISDIR, "x") == "it is a directory");

  // Directories: a config directory without config.json, a directory as a config.json, a result
  // file that is a directory.
  CHECK(load_error(dir.path.string()) == "directory '" + dir.path.string() + "' holds no config.json");
  fs::create_directories(dir.path / "nested" / "config.json");
  CHECK(load_error((dir.path / "nested").string()) ==
        "cannot read '" + (dir.path / "nested" / "config.json").string() + "': it is a directory");
  CHECK(result_error(dir.path.string()) == "--verify-json: cannot read '" + dir.path.string() + "': it is a directory");
  CHECK(result_error(a) ==
        "--verify-json: cannot read '" + a + "': too many levels of symbolic links (a symbolic-link loop)");
  CHECK(result_error(missing) == "--verify-json: cannot read '" + missing + "': no such file or directory");
}

TEST_CASE("input files: the kind of every file type is named", "[input-files]") {
  CHECK(file_type_name(S_IFREG | 0644) == "a regular file");
  CHECK(file_type_name(S_IFDIR | 0755) == "a directory");
  CHECK(file_type_name(S_IFIFO | 0600) == "a FIFO (named pipe)");
  CHECK(file_type_name(S_IFSOCK | 0600) == "a socket");
  CHECK(file_type_name(S_IFCHR | 0600) == "a character device");
  CHECK(file_type_name(S_IFBLK | 0600) == "a block device");
  CHECK(file_type_name(S_IFLNK | 0777) == "a symbolic link");
  CHECK(file_type_name(0) == "not a regular file");
}

TEST_CASE("input files: result files that cannot be read exit 2, a bad flag exits 1", "[input-files]") {
  TempDir dir;
  const Deadline deadline(60);
  const auto config = src("configs/deepseek-v4.1-flash.json");
  const auto out = (dir.path / "r.svg").string();
  const auto fifo = dir.fifo("v.json");
  auto f = run({"report", config, "-o", out, "--verify-json", fifo});
  CHECK(f.code == 2);
  CHECK(f.err == "mla-plan: error: --verify-json: cannot read '" + fifo +
                     "': it is a FIFO (named pipe); only a regular file is read\n");
  CHECK(f.out.empty());
  CHECK(!fs::exists(out));
  auto z = run({"report", config, "-o", out, "--bench-json", "/dev/zero"});
  CHECK(z.code == 2);
  CHECK_THAT(z.err, Catch::Contains("it is a character device"));
  const auto nul = dir.write("nul.json", std::string("{}\0{}", 5));
  auto n = run({"report", config, "-o", out, "--bench-json", nul});
  CHECK(n.code == 2);
  CHECK(n.err == "mla-plan: error: --bench-json: '" + nul +
                     "' holds a NUL byte at byte offset 2 (line 1); expected the output of mla-plan bench --json, "
                     "which is JSON text\n");
  auto bad_flag = run({"report", config, "-o", (dir.path / "r.pdf").string(), "--verify-json", fifo});
  CHECK(bad_flag.code == 1);
  // A config that is a FIFO, through the whole CLI.
  auto c = run({"plan", fifo});
  CHECK(c.code == 2);
  CHECK(c.err ==
        "mla-plan: error: cannot read '" + fifo + "': it is a FIFO (named pipe); only a regular file is read\n");
}

// ------------------------------------------------------------------ the whole file is JSON

TEST_CASE("input files: nlohmann's lexer takes a NUL for the end of the input", "[input-files]") {
  // Why a NUL needs its own check: the parser stops at it as at the end, so what follows is never
  // looked at. If this ever throws, the pre-scan is still right, only no longer needed.
  const std::string text = kConfigText + std::string("\0garbage", 8);
  CHECK_NOTHROW(nlohmann::json::parse(text.begin(), text.end()));
}

TEST_CASE("input files: a NUL byte anywhere in a config is invalid", "[input-files]") {
  const std::string tail = kConfigText + "\n" + std::string("\0{\"x\": garbage", 14);
  CHECK(parse_error(tail) ==
        "t.json: NUL byte at byte offset " + std::to_string(kConfigText.size() + 1) +
            " (line 2); a config.json is JSON text, which never holds a NUL byte (the whole file is read as JSON)");
  CHECK_THAT(parse_error(std::string("{\"model_type\": \"deep\0seek_v41\"}", 31)),
             Catch::StartsWith("t.json: NUL byte at byte offset 20 (line 1); "));
  CHECK_THAT(parse_error(std::string("\0", 1)), Catch::StartsWith("t.json: NUL byte at byte offset 0 (line 1); "));
  CHECK_THAT(parse_error(std::string("\n\n \0", 4)), Catch::StartsWith("t.json: NUL byte at byte offset 3 (line 3); "));

  // Nothing else ends the parse early: anything after the top value but whitespace is an error.
  CHECK_THAT(parse_error(kConfigText + " x"),
             Catch::Contains("not valid JSON: ") && Catch::Contains("expected end of input"));
  CHECK_THAT(parse_error(kConfigText + " {}"),
             Catch::Contains("not valid JSON: ") && Catch::Contains("expected end of input"));
  CHECK_THAT(parse_error(kConfigText + "\x1a"), Catch::Contains("not valid JSON: "));
  CHECK_THAT(parse_error(kConfigText + "\xff"), Catch::Contains("not valid JSON: "));
  CHECK_THAT(parse_error(kConfigText + "/* c */"), Catch::Contains("not valid JSON: "));
  CHECK(parse_config(kConfigText + " \t\r\n ", "t.json").family == Family::deepseek_v41);

  // From a file: the same, exit 2 through the CLI, nothing on stdout.
  TempDir dir;
  const auto file = dir.write("nul.json", tail);
  CHECK_THAT(load_error(file), Catch::StartsWith(file + ": NUL byte at byte offset 31 (line 2); "));
  const auto r = run({file});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::StartsWith("mla-plan: error: " + file + ": NUL byte at byte offset 31 (line 2)"));
}

TEST_CASE("input files: a NUL byte anywhere in a result file is invalid", "[input-files]") {
  CHECK(result_text_error(std::string("[{\"a\": 1}]\n\n\0tail", 17)) ==
        "--bench-json: 'b.json' holds a NUL byte at byte offset 12 (line 3); expected the output of mla-plan bench "
        "--json, which is JSON text");
  CHECK_THAT(result_text_error(std::string("{\"rows\": \"\0\"}", 13), "--verify-json"),
             Catch::StartsWith("--verify-json: 'b.json' holds a NUL byte at byte offset 10 (line 1); ") &&
                 Catch::EndsWith("mla-plan verify --json, which is JSON text"));
  CHECK_THAT(result_text_error("[] []"),
             Catch::StartsWith("--bench-json: 'b.json' is not JSON (") && Catch::Contains("expected end of input"));
  CHECK_THAT(result_text_error("{} x"), Catch::Contains("is not JSON ("));
  // A long file name is quoted whole, as every file name is up to kQuotedPathMaxBytes.
  const std::string long_name = std::string(200, 'r') + ".json";
  try {
    (void)cli::parse_result_json("[] []", "--bench-json", "B", long_name);
    FAIL("accepted two JSON values");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("--bench-json: '" + long_name + "' is not JSON ("));
  }
  CHECK(cli::parse_result_json("[{\"a\": 1}]  \n", "--bench-json", "B", "b.json").tables.size() == 1);
}

// ------------------------------------------------------------------ two spellings that disagree

namespace {

const std::string kV4 = R"({"model_type": "deepseek_v4", "num_hidden_layers": 4, "num_nextn_predict_layers": 1, )";

std::string v4(const std::string& fields) { return kV4 + fields + "}"; }

}  // namespace

TEST_CASE("layer_types: V4 compress_ratios and layer_types must agree", "[input-files][config]") {
  SECTION("agreeing: accepted (0 and 1 are both sliding_attention)") {
    const auto c = parse_config(
        v4(R"("compress_ratios": [1, 4, 128, 4, 0], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention"])"),
        "t.json");
    CHECK(c.compress_ratios == std::vector<int>{1, 4, 128, 4, 0});
    const auto r = parse_config(
        v4(R"("compress_rates": [0, 4, 128, 4], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"])"),
        "t.json");
    CHECK(r.compress_ratios == std::vector<int>{0, 4, 128, 4, 0});
  }
  SECTION("disagreeing: both pointers, the index, both values, what would agree") {
    CHECK(
        parse_error(v4(
            R"("compress_ratios": [0, 4, 128, 4, 0], "layer_types": ["sliding_attention", "heavily_compressed_attention", "heavily_compressed_attention", "compressed_sparse_attention"])")) ==
        "t.json: /layer_types/1: layer_types[1] = 'heavily_compressed_attention' (ratio 128) disagrees with "
        "compress_ratios[1] = 4 (/compress_ratios/1); they are two spellings of one schedule: "
        "'compressed_sparse_attention' would agree with compress_ratios[1] = 4");
    CHECK(
        parse_error(v4(
            R"("compress_rates": [4, 4, 128, 4, 0], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"])")) ==
        "t.json: /layer_types/0: layer_types[0] = 'sliding_attention' (ratio 0) disagrees with compress_rates[0] = 4 "
        "(/compress_rates/0); they are two spellings of one schedule: 'compressed_sparse_attention' would agree "
        "with compress_rates[0] = 4");
  }
  SECTION("unknown type names and wrong types, also next to compress_ratios") {
    CHECK(parse_error(
              v4(R"("compress_ratios": [0, 4, 128, 4, 0], "layer_types": ["sliding_attention", "full_attention"])")) ==
          "t.json: /layer_types/1: layer_types[1] = the string \"full_attention\" is not a V4 layer type; allowed: "
          "sliding_attention, compressed_sparse_attention, heavily_compressed_attention");
    CHECK(parse_error(v4(R"("compress_ratios": [0, 4, 128, 4, 0], "layer_types": "sliding_attention")")) ==
          "t.json: /layer_types: layer_types must be a list of strings, got the string \"sliding_attention\"");
    CHECK(parse_error(v4(R"("compress_ratios": [0, 4, 128, 4, 0], "layer_types": [0, 4])")) ==
          "t.json: /layer_types/0: layer_types[0] must be a string, got 0");
  }
  SECTION("lengths that differ") {
    // layer_types for the backbone only, compress_ratios with the MTP layer: accepted.
    CHECK(
        parse_config(
            v4(R"("compress_ratios": [0, 4, 128, 4, 0], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"])"),
            "t.json")
            .compress_ratios == std::vector<int>{0, 4, 128, 4, 0});
    // layer_types shorter than the backbone.
    CHECK(
        parse_error(v4(
            R"("compress_ratios": [0, 4, 128, 4, 0], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"])")) ==
        "t.json: /layer_types: layer_types has 3 entries and compress_ratios has 5; both need one per layer, at "
        "least num_hidden_layers = 4 (layer 3 has compress_ratios[3] = 4 and no layer_types entry)");
    // compress_ratios compresses a layer that layer_types leaves out (window only).
    CHECK(
        parse_error(v4(
            R"("compress_ratios": [0, 4, 128, 4, 4], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"])")) ==
        "t.json: /compress_ratios/4: compress_ratios[4] = 4 has no layer_types entry (/layer_types has 4 entries; "
        "one missing past num_hidden_layers = 4 means 'sliding_attention', ratio 0): give layer_types[4] = "
        "'compressed_sparse_attention' or compress_ratios[4] = 0");
    // ... and the other way round.
    CHECK(
        parse_error(v4(
            R"("compress_ratios": [0, 4, 128, 4], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention"])")) ==
        "t.json: /layer_types/4: layer_types[4] = 'heavily_compressed_attention' has no compress_ratios entry "
        "(/compress_ratios has 4 entries; one missing past num_hidden_layers = 4 means ratio 0, "
        "'sliding_attention'): give compress_ratios[4] = 128 or layer_types[4] = 'sliding_attention'");
    // compress_ratios shorter than the backbone: its own message.
    CHECK(
        parse_error(v4(
            R"("compress_ratios": [0, 4, 128], "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"])")) ==
        "t.json: /compress_ratios: compress_ratios has 3 entries; it needs one per layer, at least "
        "num_hidden_layers = 4");
  }
}

namespace {

std::string v41_6(const std::string& fields) {
  return R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 6, "num_nextn_predict_layers": 0, )" + fields +
         "}";
}

}  // namespace

TEST_CASE("layer_types: V4.1 layer_types must agree with the KV sources", "[input-files][config]") {
  // 6 layers: ratios [0, 0, 2, 2, 1, 1], KV sources [2, 4] (the defaults).
  const std::string agree =
      R"(["sliding_attention", "sliding_attention", "shared_compressed_attention", "sliding_attention", "shared_compressed_attention", "sliding_attention"])";
  SECTION("agreeing: accepted") {
    const auto c = parse_config(v41_6(R"("layer_types": )" + agree), "t.json");
    CHECK(c.kv_source_layer_ids == std::vector<std::int64_t>{2, 4});
    const auto e = parse_config(v41_6(R"("kv_source_layer_ids": [2, 4], "layer_types": )" + agree), "t.json");
    CHECK(e.kv_source_layer_ids == std::vector<std::int64_t>{2, 4});
    const auto composite = parse_config(
        R"({"model_type": "deepseek_v41", "text_config": {"num_hidden_layers": 6, "num_nextn_predict_layers": 1, "layer_types": )" +
            agree + "}}",
        "t.json");
    CHECK(composite.composite);
  }
  SECTION("disagreeing") {
    CHECK(
        parse_error(v41_6(
            R"("layer_types": ["sliding_attention", "sliding_attention", "shared_compressed_attention", "shared_compressed_attention", "shared_compressed_attention", "sliding_attention"])")) ==
        "t.json: /layer_types/3: layer_types[3] = 'shared_compressed_attention' disagrees with kv_source_layer_ids "
        "= [2, 4] (/kv_source_layer_ids): layer 3 (compress_ratio 2) is not a KV source; 'sliding_attention' would "
        "agree (shared_compressed_attention at each KV source, sliding_attention elsewhere)");
    CHECK(
        parse_error(v41_6(
            R"("kv_source_layers": [2, 4], "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "shared_compressed_attention", "sliding_attention"])")) ==
        "t.json: /layer_types/2: layer_types[2] = 'sliding_attention' disagrees with kv_source_layers = [2, 4] "
        "(/kv_source_layers): layer 2 (compress_ratio 2) is a KV source; 'shared_compressed_attention' would "
        "agree (shared_compressed_attention at each KV source, sliding_attention elsewhere)");
  }
  SECTION("unknown names, wrong lengths") {
    CHECK(
        parse_error(v41_6(
            R"("layer_types": ["sliding_attention", "sliding_attention", "compressed_sparse_attention", "sliding_attention", "shared_compressed_attention", "sliding_attention"])")) ==
        "t.json: /layer_types/2: layer_types[2] = the string \"compressed_sparse_attention\" is not a V4.1 layer "
        "type; allowed: shared_compressed_attention (a KV source), sliding_attention (every other layer)");
    CHECK(
        parse_error(v41_6(
            R"("layer_types": ["sliding_attention", "sliding_attention", "shared_compressed_attention", "sliding_attention", "shared_compressed_attention"])")) ==
        "t.json: /layer_types: layer_types has 5 entries; it needs one per layer: num_hidden_layers = 6");
    CHECK(
        parse_error(
            R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 6, "num_nextn_predict_layers": 1, "layer_types": )" +
            agree.substr(0, agree.size() - 1) + R"(, "sliding_attention", "sliding_attention"]})") ==
        "t.json: /layer_types: layer_types has 8 entries; it needs one per layer: num_hidden_layers = 6 (or up to 7 "
        "with the draft layers)");
    // A draft layer is window only.
    CHECK(
        parse_error(
            R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 6, "num_nextn_predict_layers": 1, "layer_types": )" +
            agree.substr(0, agree.size() - 1) + R"(, "shared_compressed_attention"]})") ==
        "t.json: /layer_types/6: layer_types[6] = 'shared_compressed_attention' disagrees with kv_source_layer_ids "
        "= [2, 4] (/kv_source_layer_ids): layer 6 (a draft layer, compress_ratio 0) is not a KV source; "
        "'sliding_attention' would agree (shared_compressed_attention at each KV source, sliding_attention "
        "elsewhere)");
    CHECK(parse_error(v41_6(R"("layer_types": {})")) ==
          "t.json: /layer_types: layer_types must be a list of strings, got an object");
  }
}

// ------------------------------------------------------------------ messages are one printable line

TEST_CASE("input files: text from the config is printed inert", "[input-files][text]") {
  // JSON escapes of NUL, ESC, a newline and a fake CI annotation, a right-to-left override, and
  // raw bytes that are not UTF-8.
  const std::string evil = R"(\u0000\u001b[31m\n::error::\u202e)";
  const std::string raw = "\xff\xfe\xc3(";
  const std::string evil_key = "\"" + evil + "\": 1, ";
  std::vector<std::string> messages;

  // model_type: a string value printed by the "not a supported family" message.
  messages.push_back(parse_error("{" + evil_key + R"("model_type": ")" + evil + "\"}"));
  CHECK_THAT(messages.back(), Catch::Contains("\\u0000") && Catch::Contains("\\u{202e}"));
  // A layer type name.
  messages.push_back(parse_error(R"({"model_type": "deepseek_v4", "num_hidden_layers": 1, )" + evil_key +
                                 R"("layer_types": [")" + evil + "\"]}"));
  CHECK_THAT(messages.back(), Catch::Contains("is not a V4 layer type"));
  // text_config/model_type.
  messages.push_back(parse_error(R"({"model_type": "deepseek_v41", "text_config": {"model_type": ")" + evil + "\"}}"));
  // Raw invalid UTF-8 in a string and after the top value: the parser quotes the bytes it read.
  messages.push_back(parse_error(R"({"model_type": ")" + raw + "\"}"));
  CHECK_THAT(messages.back(), Catch::Contains("not valid JSON") && Catch::Contains("\\xff"));
  messages.push_back(parse_error(kConfigText + raw));
  CHECK_THAT(messages.back(), Catch::Contains("last read: '\"deepseek_v41\"}\\xff'"));
  messages.push_back(parse_error(std::string("{\"a\": \x1b[31m}")));
  // A file name with the same bytes.
  const std::string name = "dir/\x1b[31m\n::error::\xff.json";
  messages.push_back(parse_error(R"({"model_type": 3})", name));
  CHECK_THAT(messages.back(), Catch::StartsWith("dir/\\x1b[31m\\n::error::\\xff.json: /model_type: "));
  messages.push_back(parse_error(std::string("{}\0", 3), name));
  messages.push_back(parse_error(std::string(200, '['), name));
  messages.push_back(load_error(name));
  CHECK(messages.back() == "cannot read 'dir/\\x1b[31m\\n::error::\\xff.json': no such file or directory");

  TempDir dir;
  const auto file = dir.write("\x1b[31m\n::error::\xff.json", "{" + evil_key + R"("model_type": "x)" + evil + "\"}");
  messages.push_back(load_error(file));
  CHECK_THAT(messages.back(), Catch::Contains("\\x1b[31m\\n::error::\\xff.json: /model_type: "));
  fs::create_directories(dir.path / "d\n");
  messages.push_back(load_error((dir.path / "d\n").string()));
  CHECK_THAT(messages.back(), Catch::EndsWith("/d\\n' holds no config.json"));
  const auto bad_result = dir.write("r\x1b[31m\n.json", "{" + evil_key + raw);
  messages.push_back(result_error(bad_result));
  CHECK_THAT(messages.back(), Catch::Contains("r\\x1b[31m\\n.json' is not JSON ("));
  messages.push_back(result_text_error("{" + evil_key + "\x1b[31m" + raw));
  for (const auto& m : messages) {
    INFO(m);
    CHECK(is_printable_line(m));
  }
}

TEST_CASE("find_nesting_past: the first bracket past the limit, outside strings", "[input_files]") {
  CHECK_FALSE(find_nesting_past("[[1]]", 2));
  const auto past = find_nesting_past("{\n \"a\": [\n  [1]]}", 2);
  REQUIRE(past);
  CHECK(past->offset == 12);
  CHECK(past->line == 3);
  // brackets inside strings, escaped quotes included, do not count
  CHECK_FALSE(find_nesting_past(R"({"a": "[[[{{\"[[["})", 1));
  CHECK(find_nesting_past(R"({"a": "\\", "b": [1]})", 1));
  const std::string deep(100000, '[');
  REQUIRE(find_nesting_past(deep, 64));
  CHECK(find_nesting_past(deep, 64)->offset == 64);
}

TEST_CASE("input files: a file name is cut only past 1024 bytes, a small size limit prints in bytes", "[input-files]") {
  TempDir dir;
  // A name of 200 bytes (under NAME_MAX) in a message: whole, not cut at 80 bytes.
  const auto deep = dir.path / std::string(200, 'd');
  fs::create_directories(deep);
  const auto missing = (deep / "x.json").string();
  REQUIRE(missing.size() > kQuotedMaxBytes);
  REQUIRE(missing.size() < kQuotedPathMaxBytes);
  try {
    (void)read_input_file(missing, kRules);
    FAIL("read a missing file");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "cannot read '" + missing + "': no such file or directory");
  }
  // The same name as a directory without config.json.
  try {
    (void)load_config(deep.string());
    FAIL("loaded a directory without config.json");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "directory '" + deep.string() + "' holds no config.json");
  }
  // refs/main is limited to 256 bytes: "larger than 256 bytes", never "larger than 0 MiB".
  const auto big = dir.write("main", std::string(300, 'a'));
  const InputFileRules small{"", CheckpointLimits::max_ref_bytes, "CheckpointLimits::max_ref_bytes",
                             "refs/main holds one commit hash"};
  try {
    (void)read_input_file(big, small);
    FAIL("read past the limit");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "'" + big +
                                       "' is larger than 256 bytes (CheckpointLimits::max_ref_bytes); refs/main holds "
                                       "one commit hash");
  }
  // A limit of whole MiB keeps its two spellings.
  const auto cfg = dir.write("c.json", std::string(static_cast<std::size_t>(ConfigLimits::max_file_bytes) + 1, ' '));
  try {
    (void)read_input_file(cfg, kRules);
    FAIL("read past the limit");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "'" + cfg + "' is larger than 1 MiB (1048576 bytes, ConfigLimits::max_file_bytes); a few KiB");
  }
}
