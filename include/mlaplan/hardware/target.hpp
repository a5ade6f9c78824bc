#pragma once
// The GPU a plan is made for: compute capability, SM count and memory. Presets for the GPUs users
// ask about live in one table (src/hardware/target.cpp); --arch, --num-sms and --gpu-memory-gib describe any
// other GPU or override a preset. docs/layout-accounting.md, "Targets", says where the figures come
// from and how memory sizes are read.

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/base/limits.hpp"  // TargetLimits

namespace mlaplan {

/// A CUDA compute capability, e.g. 9.0 (Hopper), 10.0 (Blackwell datacentre), 12.0 (RTX Blackwell).
struct ComputeCapability {
  int major = 0;
  int minor = 0;

  /// "9.0"
  std::string str() const;
  /// "sm90", "sm100", "sm103"
  std::string sm() const;
  auto operator<=>(const ComputeCapability&) const = default;
};

/// The architecture family of a compute capability, for people and for backend rules: the
/// kernels a backend ships differ by family (SM12.0 and SM12.1 are both "Blackwell" but neither is
/// the datacentre part's sm100).
enum class ArchFamily {
  ampere,                ///< 8.0, 8.6, 8.7 (A100, RTX 30, Orin)
  ada,                   ///< 8.9 (L40S, RTX 40)
  hopper,                ///< 9.x (H100, H200, H800, H20)
  blackwell_datacentre,  ///< 10.x (B200, B300, GB200)
  blackwell_rtx,         ///< 12.0 (RTX PRO 6000 Blackwell, GeForce RTX 50)
  blackwell_gb10,        ///< 12.1 (GB10: DGX Spark)
  other,                 ///< any other capability (7.x, 11.0)
};
/// Stable snake_case name: "hopper", "blackwell_datacentre", "blackwell_gb10", "other".
std::string_view to_string(ArchFamily f);
/// For people: "Hopper", "Blackwell datacentre", "Blackwell GB10", "Ada Lovelace".
std::string_view arch_family_title(ArchFamily f);
/// The family of a compute capability: 9.x hopper, 10.x blackwell_datacentre, 12.0 blackwell_rtx,
/// 12.1 blackwell_gb10, 8.0 / 8.6 / 8.7 ampere, 8.9 ada, anything else other.
constexpr ArchFamily arch_family_of(const ComputeCapability& cc) {
  if (cc.major == 9) return ArchFamily::hopper;
  if (cc.major == 10) return ArchFamily::blackwell_datacentre;
  if (cc.major == 12 && cc.minor == 0) return ArchFamily::blackwell_rtx;
  if (cc.major == 12 && cc.minor == 1) return ArchFamily::blackwell_gb10;
  if (cc.major == 8 && (cc.minor == 0 || cc.minor == 6 || cc.minor == 7)) return ArchFamily::ampere;
  if (cc.major == 8 && cc.minor == 9) return ArchFamily::ada;
  return ArchFamily::other;
}

/// What a preset's runtime memory figure is (docs/layout-accounting.md, "Targets"; the figures
/// and their sources: the preset table in src/hardware/target.cpp).
enum class MemoryBasis {
  runtime_bytes,      ///< exact bytes cudaMemGetInfo / deviceQuery / torch reported
  runtime_mib_floor,  ///< torch's total_memory "MB" (bytes / 2^20, floored): exact to 1 MiB
  runtime_gib,        ///< GiB to two decimals as vLLM and PyTorch print it: exact to 0.005 GiB
  fixture,            ///< exact bytes from a test fixture that copies a host, not confirmed on a device
  nvidia_smi,         ///< only nvidia-smi's total is known: the runtime reports less (an upper bound)
  vendor,             ///< only the vendor's figure is known (an upper bound)
};
/// "runtime_bytes", "runtime_mib_floor", "runtime_gib", "fixture", "nvidia_smi", "vendor"
std::string_view to_string(MemoryBasis b);
/// The figure is above what the CUDA runtime reports (nvidia-smi's or the vendor's total).
constexpr bool is_upper_bound(MemoryBasis b) { return b == MemoryBasis::nvidia_smi || b == MemoryBasis::vendor; }

/// One GPU preset: the vendor's nominal memory (memory_gib) and the total the CUDA runtime
/// reports (runtime_memory_bytes), which is what vLLM's gpu_memory_utilization multiplies.
struct GpuPreset {
  std::string_view id;    ///< --gpu value: "h200"
  std::string_view name;  ///< for people: "NVIDIA H200 SXM"
  ComputeCapability cc;
  ArchFamily family;  ///< arch_family_of(cc) (checked when the table is compiled)
  std::int64_t num_sms;
  std::int64_t memory_gib;  ///< vendor figure ("141 GB"), taken as GiB
  /// The memory is the system's, shared with the CPU (GB10): the OS and host processes hold part of
  /// it, so less than memory_gib is there for the GPU.
  bool unified_memory;
  bool reference_for_arch;  ///< fills num_sms / memory for `--arch` given without `--gpu`
  std::string_view note;    ///< variants, unconfirmed figures; "" if none
  /// The total the CUDA runtime reports (cudaMemGetInfo, torch's total_memory), which vLLM's
  /// gpu_memory_utilization multiplies: the smallest figure seen for the part (drivers, VMs and
  /// images differ by up to 0.5 GiB); with an upper-bound basis, the figure that bounds it.
  std::int64_t runtime_memory_bytes;
  std::string_view runtime_memory_source;  ///< where that figure was read, with the spread seen
  MemoryBasis runtime_basis;
  /// Where this GPU's memory works differently (unified memory, what vLLM does with it); "" if not.
  std::string_view memory_note;

  std::int64_t memory_bytes() const { return memory_gib << 30; }
};

/// The preset table, in display order (`mla-plan gpus` prints it).
std::span<const GpuPreset> gpu_presets();
/// The id of the default target (used when neither --gpu nor --arch is given).
inline constexpr std::string_view kDefaultGpuId = "h200";

/// The preset with id `id` (case-insensitive; '_' and ' ' read as '-'). Error(usage) naming --gpu,
/// the value, the closest id ("did you mean") and every known id.
const GpuPreset& find_gpu_preset(std::string_view id);

/// Parses --arch: "sm90", "sm_90", "sm90a", "sm100f", "SM103", "9.0", "10.3". Error(usage) naming
/// --arch, the value and the known architectures when it is malformed or not a known capability.
ComputeCapability parse_arch(std::string_view text);
/// The compute capabilities parse_arch accepts, ascending.
std::span<const ComputeCapability> known_archs();

/// Where a target's figures come from.
enum class TargetSource {
  preset,    ///< a --gpu preset (possibly with overrides)
  custom,    ///< --arch without --gpu
  detected,  ///< read from a device at run time
};
std::string_view to_string(TargetSource s);

/// The resolved target.
struct Target {
  std::string id;    ///< preset id, or "custom" / "detected"
  std::string name;  ///< for people
  ComputeCapability cc;
  /// arch_family_of(cc): follows an --arch override of a preset's capability.
  ArchFamily family = ArchFamily::other;
  std::int64_t num_sms = 0;
  std::int64_t memory_bytes = 0;
  /// Memory shared with the CPU (GB10): a preset's mark; custom targets take the mark of their
  /// capability's reference preset, detected devices that of their family (blackwell_gb10).
  bool unified_memory = false;
  /// What the CUDA runtime reports as the total (the preset's figure, or the detected device's);
  /// 0 when --gpu-memory-gib was given (the user's total is memory_bytes).
  std::int64_t runtime_memory_bytes = 0;
  std::string runtime_memory_source;
  MemoryBasis runtime_basis = MemoryBasis::runtime_bytes;
  std::string memory_note;  ///< the preset's memory_note
  /// The total the budget uses is above what the runtime reports (a preset with only nvidia-smi's
  /// or the vendor's figure, not overridden): a fit is an upper bound.
  bool memory_upper_bound() const { return !memory_given && runtime_memory_bytes > 0 && is_upper_bound(runtime_basis); }
  TargetSource source = TargetSource::preset;
  bool default_used = false;     ///< neither --gpu nor --arch was given: the default (H200) was used
  bool arch_overridden = false;  ///< --arch changed a preset's compute capability
  bool num_sms_overridden = false;
  bool memory_overridden = false;
  /// --gpu-memory-gib was passed (on a preset, equal to its figure or not, or on a custom
  /// target): the total is the user's, labelled "given" in the budget.
  bool memory_given = false;
  std::string filled_from;  ///< custom targets: the preset whose SMs / memory filled what was not given
  std::string note;         ///< the preset's note, plus what was filled in

  /// Names of the overridden fields: "compute_capability", "num_sms", "memory_bytes".
  std::vector<std::string> overridden_fields() const;
};

/// What the user asked for (flags already read as values).
struct TargetRequest {
  std::optional<std::string> gpu;       ///< --gpu
  std::optional<std::string> arch;      ///< --arch
  std::optional<std::int64_t> num_sms;  ///< --num-sms
  std::optional<double> memory_gib;     ///< --gpu-memory-gib
};

/// Resolves a target:
/// - --gpu: that preset; --arch / --num-sms / --gpu-memory-gib override its fields.
/// - --arch without --gpu: a custom target. --num-sms and --gpu-memory-gib fill it; what is not
///   given comes from the reference preset of that compute capability (h200 for 9.0, b200 for 10.0,
///   b300 for 10.3, a100 for 8.0, l40s for 8.9, rtx-pro-6000 for 12.0, gb10 for 12.1), and
///   `filled_from` / `note` say so. With no preset of that capability both flags are required
///   (Error usage). The family is the capability's; unified_memory is the reference preset's.
/// - neither: the default preset (h200), `default_used` set; --num-sms / --gpu-memory-gib override it.
/// Every bad value is Error(usage) naming the flag, the value and what is allowed.
Target resolve_target(const TargetRequest& request);

/// A target read from a device (the CLI's GPU detection). Validates like user input, Error(usage).
Target detected_target(std::string name, ComputeCapability cc, std::int64_t num_sms, std::int64_t memory_bytes);

/// Bytes of `gib` GiB after checking it is finite and in (0, max_gib]; Error(usage) naming `flag`.
std::int64_t gib_to_bytes(double gib, std::string_view flag, double max_gib = TargetLimits::max_memory_gib,
                          bool allow_zero = false);

/// The GPUs one node of `target` holds, for the search of `mla-plan CONFIG` without a layout: 8
/// for the data-centre boards (HGX / DGX: H100, H200, B200, B300, A100 ...) and the 8-GPU
/// servers of L40S and RTX PRO 6000, 4 for a GB200 compute tray (two Grace-Blackwell
/// superchips), 1 for GB10 (DGX Spark) and the GeForce RTX 5090 (a desktop card); 8 for a
/// custom or detected target.
std::int64_t gpus_per_node(const Target& target);

}  // namespace mlaplan
