#pragma once
// What `mla-plan verify` prints (docs/verify.md): the text matrix and the --json document, for
// one device as always or for several (--device all | 0,1 | 0,0), one section per device in the
// order listed. Plain data in, so the tests render runs of fake devices without CUDA.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "mlaplan/gpu_check/verify.hpp"

namespace mlaplan::cli {

/// A device as verify describes it (kernels::DeviceInfo and its target, in plain fields).
struct VerifyGpuInfo {
  int index = 0;
  std::string name;
  std::string sm;                  ///< "sm_90"
  std::string compute_capability;  ///< "9.0"
  std::int64_t num_sms = 0;
  std::int64_t memory_bytes = 0;
  int driver_version = 0;
  int runtime_version = 0;
};

/// The text output: `gpus[i]` describes `report.devices[i]`. One device: the header line, the
/// findings, the batch, the matrix and the tolerances, as before. Several: a header naming them,
/// then per device its line (label, name, exit, cells, seconds), findings, batch and matrix.
void write_verify_text(std::ostream& out, const std::string& config, const std::vector<VerifyGpuInfo>& gpus,
                       const VerifyMultiReport& report, const std::string& decode_mode);

/// The --json document. One device: {"schema", "config", "decode_mode", "device", "findings",
/// "batch", "matrix", "seconds", "exit_code"}. Several: {"schema", "config", "decode_mode",
/// "devices": [{"label", "device", "findings", "batch", "matrix", "seconds", "error"?,
/// "exit_code", "exit_message"}], "exit_code", "exit_message"}.
std::string verify_json(const std::string& config, const std::vector<VerifyGpuInfo>& gpus,
                        const VerifyMultiReport& report, const std::string& decode_mode);

/// The matrix's launch columns of a cell: "37x1x1", "4x1x1" ("-" for no cluster), "yes" / "-".
std::string verify_grid_text(const VerifyLaunch& l);
std::string verify_cluster_text(const VerifyLaunch& l);

}  // namespace mlaplan::cli
