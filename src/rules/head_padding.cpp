#include "mlaplan/rules/head_padding.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace mlaplan {
namespace {

// Measured rows. Each one comes from `mla-plan bench CONFIG --tp N --json` run on the GPU it
// names (N = the TP that leaves 8 or 16 query heads per rank, e.g. --tp 8 for V4.1-Flash): bench
// times every layer type's decode step with the heads as the backend runs them and at the other
// head count (its rows' "heads_comparison": unpadded_us, padded_us), and one row here is one
// (layer type, b) of that output, with the date of the run and the command as it was typed. No
// row is derived or estimated: a GPU without rows gets "not measured" in the finding. A row looks
// like this:
//   {"h200", "NVIDIA H200", Family::deepseek_v41, "c1a", 8, 64, 48.1, 20.2, "2026-12-06",
//    "mla-plan bench configs/deepseek-v4.1-flash.json --tp 8 --batch 1,8,64 --json"},
// H100 rows: mla-plan's own kernels (unpadded: the small-head kernels as dispatched on compute
// capability 9.0, i.e. the row-split small_heads_lean for split_kv at b 1 and 8 and the
// warp-specialised small_heads_sm90 elsewhere; padded: the warp-specialised 64-head kernel in its
// planned mode), us/call with the scheduler, on a lent H100 80GB HBM3 (no H200 could be started
// that day), 2026-12-07 16:16, binaries of this source as of the row-split kernel with Q copied by
// cp.async (docs/perf-history.md "v22"). The same command with the previous source (the
// warp-specialised kernel at every b) gave 17.7 / 21.6 us unpadded at b 1 / 8 and within 0.5 us of
// these rows elsewhere, padded and unpadded (15:52); runs of one source differ by up to 1.5 us
// ("v20", "v21"). Not re-measured since the row-split kernel got two stages ("v23": 10-12% faster
// at b 1 / 8 in the kernel benchmark), so the b 1 / 8 unpadded rows are this source's upper bound.
constexpr std::string_view kH100Command =
    "mla-plan bench configs/deepseek-v4.1-flash.json --tp 8 --attention-backend TRITON_MLA_SPARSE_DSV41 --json";
const std::vector<HeadPaddingMeasurement> kMeasured = {
    {"h100", "NVIDIA H100 80GB HBM3", Family::deepseek_v41, "c1a", 8, 1, 19.1, 16.2, "2026-12-07", kH100Command},
    {"h100", "NVIDIA H100 80GB HBM3", Family::deepseek_v41, "c1a", 8, 8, 28.4, 21.9, "2026-12-07", kH100Command},
    {"h100", "NVIDIA H100 80GB HBM3", Family::deepseek_v41, "c1a", 8, 32, 36.5, 29.5, "2026-12-07", kH100Command},
    {"h100", "NVIDIA H100 80GB HBM3", Family::deepseek_v41, "c1a", 8, 64, 32.7, 38.3, "2026-12-07", kH100Command},
    {"h100", "NVIDIA H100 80GB HBM3", Family::deepseek_v41, "c1a", 8, 128, 44.4, 37.7, "2026-12-07", kH100Command},
    {"h100", "NVIDIA H100 80GB HBM3", Family::deepseek_v41, "c1a", 8, 256, 77.9, 65.9, "2026-12-07", kH100Command},
};

std::atomic<const std::vector<HeadPaddingMeasurement>*> g_override{nullptr};

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// Rows quoted in one message; the rest are counted.
constexpr std::size_t kMaxQuoted = 4;

}  // namespace

std::span<const HeadPaddingMeasurement> head_padding_measurements() {
  const auto* o = g_override.load();
  return o != nullptr ? std::span<const HeadPaddingMeasurement>(*o)
                      : std::span<const HeadPaddingMeasurement>(kMeasured);
}

ScopedHeadPaddingMeasurements::ScopedHeadPaddingMeasurements(std::vector<HeadPaddingMeasurement> rows)
    : rows_(std::move(rows)), previous_(g_override.exchange(&rows_)) {}

ScopedHeadPaddingMeasurements::~ScopedHeadPaddingMeasurements() { g_override.store(previous_); }

bool head_padding_row_matches(const HeadPaddingMeasurement& row, const Target& target) {
  if (target.source == TargetSource::detected) return !row.device_name.empty() && row.device_name == target.name;
  return !row.gpu.empty() && row.gpu == target.id;
}

std::string head_padding_measured_text(const Target& target, Family family, std::int64_t local_heads,
                                       std::int64_t tensor_parallel_size,
                                       std::span<const HeadPaddingMeasurement> rows) {
  std::vector<const HeadPaddingMeasurement*> mine;
  for (const auto& r : rows) {
    if (r.family == family && r.heads == local_heads && r.padded_us > 0 && r.unpadded_us > 0 &&
        head_padding_row_matches(r, target)) {
      mine.push_back(&r);
    }
  }
  const std::string heads = std::to_string(local_heads);
  if (mine.empty()) {
    return "not measured on " + target.name + ": run `mla-plan bench CONFIG --tp " +
           std::to_string(tensor_parallel_size) + "` there";
  }
  std::stable_sort(mine.begin(), mine.end(), [](const auto* a, const auto* b) { return a->b < b->b; });
  std::vector<std::string_view> dates;
  for (const auto* r : mine) {
    if (std::find(dates.begin(), dates.end(), r->date) == dates.end()) dates.push_back(r->date);
  }
  std::string when;
  for (auto d : dates) when += (when.empty() ? "" : ", ") + std::string(d);
  const std::string_view device =
      mine.front()->device_name.empty() ? std::string_view(target.name) : mine.front()->device_name;
  std::string s = "measured on " + std::string(device) + (when.empty() ? "" : " (" + when + ")") +
                  ": mla-plan's unpadded " + heads + "-head kernel takes ";
  for (std::size_t i = 0; i < mine.size() && i < kMaxQuoted; ++i) {
    const auto& r = *mine[i];
    s += (i ? ", " : "") + fixed(r.unpadded_us / r.padded_us, 2) + (i ? "" : " of its padded 64-head kernel's time") +
         " at b " + std::to_string(r.b) + " (" + (r.layer_type.empty() ? "" : std::string(r.layer_type) + ": ") +
         fixed(r.unpadded_us, 1) + " us against " + fixed(r.padded_us, 1) + " us)";
  }
  if (mine.size() > kMaxQuoted) s += ", and " + std::to_string(mine.size() - kMaxQuoted) + " more rows";
  return s;
}

}  // namespace mlaplan
