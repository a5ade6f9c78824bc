#pragma once
// What running 8 or 16 query heads per rank unpadded saves against padding them to 64, as
// measured on a GPU: `mla-plan bench` times mla-plan's small-head kernel (the heads unpadded, as
// vLLM 0.31's TRITON_MLA_SPARSE_DSV41 runs them) beside the 64-head kernel on the same shape. The
// rows are data (src/rules/head_padding.cpp); the kernel.head_padding finding quotes the rows of
// the plan's GPU and, without one, says that nothing was measured there: never an estimate.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/config.hpp"

namespace mlaplan {

/// One measured shape: the same decode step timed with the heads unpadded and padded to 64.
struct HeadPaddingMeasurement {
  std::string_view gpu;                  ///< the --gpu preset the numbers hold for: "h200"
  std::string_view device_name;          ///< the device as bench names it: "NVIDIA H200"
  Family family = Family::deepseek_v41;  ///< the model family of the config timed
  std::string_view layer_type;           ///< the layer type timed: "c1a"
  std::int64_t heads = 0;                ///< query heads per rank: 8 or 16
  std::int64_t b = 0;                    ///< decode tokens of the step
  double padded_us = 0;                  ///< bench's us/call with the heads padded to 64
  double unpadded_us = 0;                ///< bench's us/call with the heads unpadded
  std::string_view date;                 ///< when: "2026-12-06"
  std::string_view command;              ///< the command that measured it
};

/// The measured rows (src/rules/head_padding.cpp), or the rows a ScopedHeadPaddingMeasurements
/// puts in their place.
std::span<const HeadPaddingMeasurement> head_padding_measurements();

/// Replaces the measured rows while it lives (a test seam: tests do not depend on the table's
/// content). Not for concurrent use with a plan being made on another thread.
class ScopedHeadPaddingMeasurements {
 public:
  explicit ScopedHeadPaddingMeasurements(std::vector<HeadPaddingMeasurement> rows);
  ~ScopedHeadPaddingMeasurements();
  ScopedHeadPaddingMeasurements(const ScopedHeadPaddingMeasurements&) = delete;
  ScopedHeadPaddingMeasurements& operator=(const ScopedHeadPaddingMeasurements&) = delete;

 private:
  std::vector<HeadPaddingMeasurement> rows_;
  const std::vector<HeadPaddingMeasurement>* previous_;
};

/// Whether a row holds for `target`: its preset id, or for a device read at run time its name.
bool head_padding_row_matches(const HeadPaddingMeasurement& row, const Target& target);

/// What the finding says of running `local_heads` (8 or 16) heads unpadded on `target` for a
/// `family` model at `tensor_parallel_size`, from `rows`: "measured on NVIDIA H200 (2026-12-06):
/// the unpadded 8-head kernel takes 0.45 of the padded time at b 1 (c1a: 9.1 us against 20.2 us),
/// ..." (the matching rows, by b); without one "not measured on NVIDIA H200 SXM 141GB: run
/// `mla-plan bench CONFIG --tp 8` there" (bench times the unpadded kernel beside the padded one).
std::string head_padding_measured_text(const Target& target, Family family, std::int64_t local_heads,
                                       std::int64_t tensor_parallel_size, std::span<const HeadPaddingMeasurement> rows);

}  // namespace mlaplan
