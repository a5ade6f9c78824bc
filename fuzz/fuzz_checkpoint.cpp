// Fuzz target fuzz_checkpoint: a model directory (or a Hugging Face cache tree) unpacked from the
// input, then read as `mla-plan DIR` reads it.
//
//   bytes -> files in a temporary directory -> resolve_model_dir -> read_checkpoint_files
//         -> weights_from_files (for each bundled few-layer config) -> make_plan (the fit)
//
// The input is a small archive: entries, each starting with a line "=== PATH[ KIND[ ARG]]" (at
// the start of the input or after a '\n'); the bytes up to the next such line are its content.
//   (no KIND)  a regular file holding the content
//   st N       a safetensors file: the content's length as 8 bytes little-endian, the content (the
//              header JSON), then N bytes of data (a hole: N up to 2^40 costs nothing)
//   link T     a symbolic link to T (the content is ignored)
//   dir        a directory
// PATH is relative: components not empty, not "." or "..", at most kMaxDepth of them, names of at
// most 255 bytes; at most kMaxEntries entries (more, or another PATH: the entry is skipped). An
// input without a config.json in the model directory gets one of the bundled few-layer configs
// (fuzz/data), chosen by the input's size.
//
// mlaplan::Error is the expected way to reject a checkpoint, except Error(internal), which is a
// bug; so is any other exception, a message that is not one line of printable UTF-8, a crash, a
// sanitizer report, a leak or a timeout. And what the reader promises: tensors sorted by name,
// each once, their bytes summed; a checkpoint with missing shards never used as the weights (the
// plan then exits 2 with checkpoint.incomplete and the config's weights); the files' bytes
// placed or said to be unplaceable, never lost.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "mlaplan/model/checkpoint_weights.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/model/safetensors.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/weights.hpp"

namespace {

using namespace mlaplan;
namespace fs = std::filesystem;

constexpr std::size_t kMaxEntries = 64;
constexpr std::size_t kMaxDepth = 8;
constexpr std::int64_t kMaxDataBytes = 1LL << 40;

constexpr std::string_view kConfigs[] = {"fuzz/data/v4-4layer.json", "fuzz/data/v41-6layer.json",
                                         "fuzz/data/v32-2layer.json"};

/// The temporary directory every input is unpacked into (emptied before each, removed at exit).
struct WorkRoot {
  fs::path path;
  WorkRoot() {
    std::string tmpl = (fs::temp_directory_path() / "mla-plan-fuzz-checkpoint-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) fuzz::fail("mkdtemp failed");
    path = tmpl;
  }
  ~WorkRoot() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const fs::path& work_root() {
  static const WorkRoot root;
  return root.path;
}

/// The bundled config `i` (kConfigs), parsed once.
const ModelConfig& bundled_config(std::size_t i) {
  static const std::vector<ModelConfig> configs = [] {
    std::vector<ModelConfig> v;
    for (auto rel : kConfigs) {
      const std::string path = std::string(MLAPLAN_SOURCE_DIR) + "/" + std::string(rel);
      v.push_back(load_config(path));
    }
    return v;
  }();
  return configs[i];
}

/// The weights config.json derives for the bundled config `i`, computed once: they depend on the
/// config alone, and computing them for every input was a third of a run's heap allocations.
const WeightsReport& bundled_weights(std::size_t i) {
  static const std::vector<WeightsReport> weights = [] {
    std::vector<WeightsReport> v;
    WeightsOptions wo;
    wo.list_tensors = false;
    for (std::size_t k = 0; k < std::size(kConfigs); ++k) v.push_back(compute_weights(bundled_config(k), wo));
    return v;
  }();
  return weights[i];
}

bool plain_path(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string_view::npos) return false;
  std::size_t depth = 0, start = 0;
  while (start <= path.size()) {
    const auto slash = std::min(path.find('/', start), path.size());
    const std::string_view name = path.substr(start, slash - start);
    if (name.empty() || name == "." || name == ".." || name.size() > 255 || ++depth > kMaxDepth) return false;
    start = slash + 1;
  }
  return true;
}

void write_file(const fs::path& path, std::string_view bytes, std::int64_t hole) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;  // a name the archive made a directory or a link before: skipped
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (hole > 0) (void)::ftruncate(fd, static_cast<off_t>(bytes.size()) + hole);
  ::close(fd);
}

/// Unpacks the archive into `root`.
void unpack(std::string_view in, const fs::path& root) {
  std::size_t pos = in.rfind("=== ", 0) == 0 ? 0 : in.find("\n=== ");
  if (pos != std::string_view::npos && pos > 0) ++pos;
  std::size_t entries = 0;
  while (pos != std::string_view::npos && pos < in.size() && entries < kMaxEntries) {
    const auto line_end = std::min(in.find('\n', pos), in.size());
    const std::string_view line = in.substr(pos + 4, line_end - pos - 4);
    const auto next = line_end < in.size() ? in.find("\n=== ", line_end) : std::string_view::npos;
    const std::size_t content_begin = std::min(line_end + 1, in.size());
    const std::size_t content_end = next == std::string_view::npos ? in.size() : next;
    const std::string_view content = in.substr(content_begin, content_end - content_begin);
    pos = next == std::string_view::npos ? next : next + 1;
    ++entries;

    const auto sp = line.find(' ');
    const std::string_view path = line.substr(0, sp);
    std::string_view kind, arg;
    if (sp != std::string_view::npos) {
      const std::string_view rest = line.substr(sp + 1);
      const auto sp2 = rest.find(' ');
      kind = rest.substr(0, sp2);
      if (sp2 != std::string_view::npos) arg = rest.substr(sp2 + 1);
    }
    if (!plain_path(path)) continue;
    const fs::path target = root / std::string(path);
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (kind == "dir") {
      fs::create_directories(target, ec);
    } else if (kind == "link") {
      if (arg.find('\0') == std::string_view::npos) fs::create_symlink(std::string(arg), target, ec);
    } else if (kind == "st") {
      std::int64_t data = 0;
      for (char c : arg) {
        if (c < '0' || c > '9' || data > kMaxDataBytes) break;
        data = data * 10 + (c - '0');
      }
      data = std::min(data, kMaxDataBytes);
      std::string bytes(8, '\0');
      std::uint64_t n = content.size();
      for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
      bytes.append(content);
      write_file(target, bytes, data);
    } else {
      write_file(target, content, 0);
    }
  }
}

/// An Error is an accepted outcome unless it is internal (exit 70) or not one printable line.
void expect_error(const Error& e, std::string_view stage) {
  if (e.kind() == ErrorKind::internal) fuzz::fail(std::string(stage) + ": internal error: " + e.what());
  if (!is_printable_line(e.what())) {
    fuzz::fail(std::string(stage) + ": the message is not one line of printable UTF-8: " + printable(e.what()));
  }
}

/// What read_checkpoint_files promises of what it returns.
void check_files(const CheckpointFiles& files) {
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < files.tensors.size(); ++i) {
    const auto& t = files.tensors[i];
    if (i > 0 && !(files.tensors[i - 1].name < t.name)) fuzz::fail("tensors not sorted or named twice: " + t.name);
    if (t.bytes < 0) fuzz::fail("negative bytes: " + t.name);
    if (__builtin_add_overflow(bytes, t.bytes, &bytes)) fuzz::fail("the tensors' bytes overflow");
    if (std::find(files.files.begin(), files.files.end(), t.file) == files.files.end()) {
      fuzz::fail("tensor " + t.name + " of a file not read: " + t.file);
    }
  }
  if (bytes != files.tensor_bytes) fuzz::fail("tensor_bytes is not the sum of the tensors' bytes");
  if (static_cast<std::int64_t>(files.tensors.size()) > CheckpointLimits::max_total_tensors) {
    fuzz::fail("more tensors than CheckpointLimits::max_total_tensors");
  }
  if (files.header_bytes > CheckpointLimits::max_total_header_bytes) {
    fuzz::fail("more header bytes than CheckpointLimits::max_total_header_bytes");
  }
  if (files.complete() != files.missing.empty()) fuzz::fail("complete() disagrees with the missing list");
  if (static_cast<std::int64_t>(files.missing.size()) >
      std::min(files.missing_count, CheckpointLimits::max_missing_listed)) {
    fuzz::fail("more missing shards listed than counted or allowed");
  }
  if (files.complete() != files.incomplete_reason().empty())
    fuzz::fail("incomplete_reason() disagrees with complete()");
  if (!is_printable_line(files.incomplete_reason())) fuzz::fail("incomplete_reason() is not printable");
}

void run(std::string_view input) {
  const fs::path& root = work_root();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) fs::remove_all(e.path(), ec);
  unpack(input, root);

  std::string dir;
  try {
    dir = resolve_model_dir(root.string());
  } catch (const Error& e) {
    expect_error(e, "resolve_model_dir");
    return;
  }
  const std::size_t which = input.size() % std::size(kConfigs);
  {
    struct stat st {};
    if (::lstat((dir + "/config.json").c_str(), &st) != 0) {
      fs::copy_file(std::string(MLAPLAN_SOURCE_DIR) + "/" + std::string(kConfigs[which]), dir + "/config.json", ec);
    }
  }

  if (has_checkpoint_files(dir)) {
    try {
      const CheckpointFiles files = read_checkpoint_files(dir);
      check_files(files);
      for (std::size_t i = 0; i < std::size(kConfigs); ++i) {
        const ModelConfig& cfg = bundled_config(i);
        const WeightsReport& derived = bundled_weights(i);
        try {
          const FileWeights fw = weights_from_files(cfg, files, derived);
          std::int64_t placed = fw.report.total_bytes(), all = 0;
          if (__builtin_add_overflow(placed, fw.unplaceable_bytes, &all) || all != files.tensor_bytes) {
            fuzz::fail("the files' bytes are neither placed nor unplaceable: " + std::to_string(placed) + " + " +
                       std::to_string(fw.unplaceable_bytes) + " of " + std::to_string(files.tensor_bytes));
          }
        } catch (const Error& e) {
          expect_error(e, "weights_from_files");
        }
      }
    } catch (const Error& e) {
      expect_error(e, "read_checkpoint_files");
    }
  }

  try {
    PlanRequest req;
    req.schedules = false;
    req.suggestions = false;
    const Plan plan = make_plan(root.string(), req);
    if (plan.fit && plan.fit->incomplete_checkpoint) {
      if (plan.exit_code != exit_code(ErrorKind::invalid_config)) {
        fuzz::fail("an incomplete checkpoint exits " + std::to_string(plan.exit_code) + ", not 2");
      }
      if (plan.fit->weights_source != WeightsSource::config) fuzz::fail("an incomplete checkpoint's files are used");
      const bool said = std::any_of(plan.findings.begin(), plan.findings.end(), [](const Finding& f) {
        return f.id == "checkpoint.incomplete" && f.severity == Severity::error;
      });
      if (!said) fuzz::fail("an incomplete checkpoint without the finding checkpoint.incomplete");
    }
    for (const auto& f : plan.findings) {
      if (!is_printable_line(f.message)) fuzz::fail("finding " + f.id + " is not printable: " + printable(f.message));
    }
  } catch (const Error& e) {
    expect_error(e, "make_plan");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    run(input);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("exception other than mlaplan::Error: ") + e.what());
  } catch (...) {
    fuzz::fail("exception of an unknown type");
  }
  return 0;
}
