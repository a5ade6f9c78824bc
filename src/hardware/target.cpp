#include "mlaplan/hardware/target.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {
namespace {

// The GPUs users ask about. Sources: NVIDIA's product pages and datasheets for compute capability,
// SM count and memory (collected in the project's backend-rules notes). Memory is the vendor's
// nominal "GB" figure read as GiB: HBM and GDDR parts are built from binary-sized stacks and
// devices, and the total a driver reports sits within a few percent of figure x 2^30 (slightly
// below it), much closer than figure x 10^9. Override with --gpu-memory-gib when it matters.
//
// gb10 (docs/layout-accounting.md, "Targets"): NVIDIA's DGX Spark page gives 6,144 CUDA cores and
// 128 GB of LPDDR5X unified (coherent) memory; a Blackwell SM has 128 CUDA cores, so 48 SMs; the
// CUDA runtime reports compute capability 12.1. The memory is the system's: the OS and host
// processes take part of it and CUDA reports a total below 128 GiB (about 121.7 GiB on DGX OS),
// hence the note, no measured runtime figure, and --gpu-memory-gib for the user's own figure.
//
// Columns: id, name, cc, family, SMs, memory (GiB), unified memory, reference for --arch, note,
// runtime total (bytes), where that was measured.
constexpr std::array<GpuPreset, 12> kPresets{{
    {"h100",
     "NVIDIA H100 SXM",
     {9, 0},
     ArchFamily::hopper,
     132,
     80,
     false,
     false,
     "SXM part; the H100 PCIe has 114 SMs (--num-sms 114)",
     0,
     ""},
    {"h200",
     "NVIDIA H200 SXM",
     {9, 0},
     ArchFamily::hopper,
     132,
     141,
     false,
     true,
     "",
     150'109'880'320,
     "cudaMemGetInfo total on an H200 SXM, CUDA 13.0, 2026-12-01 (139.80 GiB; nvidia-smi: 143,771 MiB, 616 MiB "
     "reserved)"},
    {"h800", "NVIDIA H800 SXM", {9, 0}, ArchFamily::hopper, 132, 80, false, false, "", 0, ""},
    {"h20",
     "NVIDIA H20",
     {9, 0},
     ArchFamily::hopper,
     78,
     96,
     false,
     false,
     "a 141 GB variant exists (--gpu-memory-gib 141)",
     0,
     ""},
    {"b200",
     "NVIDIA B200",
     {10, 0},
     ArchFamily::blackwell_datacentre,
     148,
     180,
     false,
     true,
     "180 GB usable of 192 GB nominal HBM3e",
     0,
     ""},
    {"b300",
     "NVIDIA B300",
     {10, 3},
     ArchFamily::blackwell_datacentre,
     148,
     288,
     false,
     true,
     "SM count unconfirmed: 148 (B200's) assumed; pass --num-sms when you know it",
     0,
     ""},
    {"gb200",
     "NVIDIA GB200 (one Blackwell GPU)",
     {10, 0},
     ArchFamily::blackwell_datacentre,
     148,
     186,
     false,
     false,
     "",
     0,
     ""},
    {"a100",
     "NVIDIA A100 SXM 80GB",
     {8, 0},
     ArchFamily::ampere,
     108,
     80,
     false,
     true,
     "80 GB part; a 40 GB variant exists (--gpu-memory-gib 40)",
     0,
     ""},
    {"l40s", "NVIDIA L40S", {8, 9}, ArchFamily::ada, 142, 48, false, true, "", 0, ""},
    {"rtx-pro-6000",
     "NVIDIA RTX PRO 6000 Blackwell",
     {12, 0},
     ArchFamily::blackwell_rtx,
     188,
     96,
     false,
     true,
     "",
     0,
     ""},
    {"rtx5090", "NVIDIA GeForce RTX 5090", {12, 0}, ArchFamily::blackwell_rtx, 170, 32, false, false, "", 0, ""},
    {"gb10",
     "NVIDIA GB10 (DGX Spark)",
     {12, 1},
     ArchFamily::blackwell_gb10,
     48,
     128,
     true,
     true,
     "128 GB LPDDR5X shared with the CPU: the OS and host processes use part of it and the CUDA runtime reports "
     "less than 128 GiB; pass --gpu-memory-gib with your figure",
     0,
     ""},
}};

// Every preset's family is its capability's; at most one reference preset per capability.
static_assert(
    [] {
      for (const auto& p : kPresets) {
        if (p.family != arch_family_of(p.cc)) return false;
      }
      return true;
    }(),
    "a preset's family must be arch_family_of(its compute capability)");
static_assert(
    [] {
      for (std::size_t i = 0; i < kPresets.size(); ++i) {
        for (std::size_t j = i + 1; j < kPresets.size(); ++j) {
          if (kPresets[i].reference_for_arch && kPresets[j].reference_for_arch && kPresets[i].cc == kPresets[j].cc) {
            return false;
          }
        }
      }
      return true;
    }(),
    "two reference presets for one compute capability");

constexpr std::array<ComputeCapability, 14> kKnownArchs{{
    {7, 0},
    {7, 2},
    {7, 5},
    {8, 0},
    {8, 6},
    {8, 7},
    {8, 9},
    {9, 0},
    {10, 0},
    {10, 1},
    {10, 3},
    {11, 0},
    {12, 0},
    {12, 1},
}};

std::string lower_dashed(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '_' || c == ' ') {
      out.push_back('-');
    } else {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

std::string preset_id_list() {
  std::string s;
  for (const auto& p : kPresets) {
    if (!s.empty()) s += ", ";
    s += p.id;
  }
  return s;
}

std::string arch_list() {
  std::string s;
  for (const auto& cc : kKnownArchs) {
    if (!s.empty()) s += ", ";
    s += cc.sm();
  }
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whole numbers in full ("1048576"), others as %g ("79.5", "1e+30", "nan").
std::string format_gib(double gib) {
  if (std::isfinite(gib) && gib == std::floor(gib) && std::fabs(gib) < 1e15) return format_fixed(gib, 0);
  return format_general(gib);
}

void check_num_sms(std::int64_t sms, std::string_view flag) {
  if (sms < 1 || sms > TargetLimits::max_num_sms) {
    throw_usage(std::string(flag) + ": '" + std::to_string(sms) + "' is out of range; allowed 1.." +
                std::to_string(TargetLimits::max_num_sms));
  }
}

const GpuPreset* reference_preset(const ComputeCapability& cc) {
  for (const auto& p : kPresets) {
    if (p.reference_for_arch && p.cc == cc) return &p;
  }
  return nullptr;
}

Target from_preset(const GpuPreset& p) {
  Target t;
  t.id = std::string(p.id);
  t.name = std::string(p.name);
  t.cc = p.cc;
  t.family = p.family;
  t.num_sms = p.num_sms;
  t.memory_bytes = p.memory_bytes();
  t.unified_memory = p.unified_memory;
  t.runtime_memory_bytes = p.runtime_memory_bytes;
  t.runtime_memory_source = std::string(p.runtime_memory_source);
  t.source = TargetSource::preset;
  t.note = std::string(p.note);
  return t;
}

void append_note(std::string& note, const std::string& more) {
  if (more.empty()) return;
  if (!note.empty()) note += "; ";
  note += more;
}

}  // namespace

std::string ComputeCapability::str() const { return std::to_string(major) + "." + std::to_string(minor); }
std::string ComputeCapability::sm() const { return "sm" + std::to_string(major) + std::to_string(minor); }

std::span<const GpuPreset> gpu_presets() { return kPresets; }
std::span<const ComputeCapability> known_archs() { return kKnownArchs; }

std::string_view to_string(ArchFamily f) {
  switch (f) {
    case ArchFamily::ampere: return "ampere";
    case ArchFamily::ada: return "ada";
    case ArchFamily::hopper: return "hopper";
    case ArchFamily::blackwell_datacentre: return "blackwell_datacentre";
    case ArchFamily::blackwell_rtx: return "blackwell_rtx";
    case ArchFamily::blackwell_gb10: return "blackwell_gb10";
    case ArchFamily::other: return "other";
  }
  return "?";
}

std::string_view arch_family_title(ArchFamily f) {
  switch (f) {
    case ArchFamily::ampere: return "Ampere";
    case ArchFamily::ada: return "Ada Lovelace";
    case ArchFamily::hopper: return "Hopper";
    case ArchFamily::blackwell_datacentre: return "Blackwell datacentre";
    case ArchFamily::blackwell_rtx: return "Blackwell RTX";
    case ArchFamily::blackwell_gb10: return "Blackwell GB10";
    case ArchFamily::other: return "other";
  }
  return "?";
}

std::string_view to_string(TargetSource s) {
  switch (s) {
    case TargetSource::preset: return "preset";
    case TargetSource::custom: return "custom";
    case TargetSource::detected: return "detected";
  }
  return "?";
}

std::int64_t gpus_per_node(const Target& target) {
  if (target.source == TargetSource::preset) {
    if (target.id == "gb200") return 4;
    if (target.id == "gb10" || target.id == "rtx5090") return 1;
  }
  return 8;
}

const GpuPreset& find_gpu_preset(std::string_view id) {
  const std::string key = lower_dashed(id);
  for (const auto& p : kPresets) {
    if (p.id == key) return p;
  }
  std::vector<std::string> ids;
  for (const auto& p : kPresets) ids.emplace_back(p.id);
  const std::string near = did_you_mean(suggest(key, ids));
  std::string msg = "--gpu: unknown GPU " + mlaplan::quoted(id) + (near.empty() ? "." : "; " + near);
  msg += " Known ids: " + preset_id_list() + " (or describe the GPU with --arch, --num-sms and --gpu-memory-gib)";
  throw_usage(msg);
}

ComputeCapability parse_arch(std::string_view text) {
  auto fail = [&]() -> ComputeCapability {
    throw_usage("--arch: " + mlaplan::quoted(text) + " is not a known GPU architecture; allowed: " + arch_list() +
                " (also written as 9.0, sm_90 or sm90a)");
  };
  std::string s = lower_dashed(text);
  ComputeCapability cc;
  const auto dot = s.find('.');
  if (dot != std::string::npos) {
    const std::string maj = s.substr(0, dot);
    const std::string min = s.substr(dot + 1);
    if (!all_digits(maj) || min.size() != 1 || !all_digits(min) || maj.size() > 2) return fail();
    cc.major = std::stoi(maj);
    cc.minor = min[0] - '0';
  } else {
    if (s.rfind("sm-", 0) == 0) {
      s = s.substr(3);
    } else if (s.rfind("sm", 0) == 0) {
      s = s.substr(2);
    } else {
      return fail();
    }
    if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) s.pop_back();
    if (!all_digits(s) || s.size() < 2 || s.size() > 3) return fail();
    cc.major = std::stoi(s.substr(0, s.size() - 1));
    cc.minor = s.back() - '0';
  }
  if (std::find(kKnownArchs.begin(), kKnownArchs.end(), cc) == kKnownArchs.end()) return fail();
  return cc;
}

std::vector<std::string> Target::overridden_fields() const {
  std::vector<std::string> f;
  if (arch_overridden) f.emplace_back("compute_capability");
  if (num_sms_overridden) f.emplace_back("num_sms");
  if (memory_overridden) f.emplace_back("memory_bytes");
  return f;
}

std::int64_t gib_to_bytes(double gib, std::string_view flag, double max_gib, bool allow_zero) {
  // Without zero, at least one byte: a positive value that rounds to 0 bytes is below the range.
  const bool low = allow_zero ? !(gib >= 0.0) : !(gib * 1073741824.0 >= 1.0);  // also catches NaN
  if (low || !std::isfinite(gib) || gib > max_gib) {
    throw_usage(std::string(flag) + ": '" + format_gib(gib) + "' is out of range; allowed " +
                (allow_zero ? "0" : "2^-30 (1 byte)") + " up to " + format_gib(max_gib) + " GiB");
  }
  return static_cast<std::int64_t>(std::llround(gib * 1073741824.0));
}

Target resolve_target(const TargetRequest& request) {
  if (request.num_sms) check_num_sms(*request.num_sms, "--num-sms");
  std::optional<std::int64_t> memory;
  if (request.memory_gib) memory = gib_to_bytes(*request.memory_gib, "--gpu-memory-gib");
  std::optional<ComputeCapability> arch;
  if (request.arch) arch = parse_arch(*request.arch);

  Target t;
  if (request.gpu) {
    t = from_preset(find_gpu_preset(*request.gpu));
    if (arch && *arch != t.cc) {
      t.cc = *arch;
      t.family = arch_family_of(*arch);
      t.arch_overridden = true;
    }
  } else if (arch) {
    const GpuPreset* ref = reference_preset(*arch);
    if (ref == nullptr && (!request.num_sms || !memory)) {
      throw_usage("--arch " + arch->sm() +
                  " without --gpu needs --num-sms and --gpu-memory-gib: no preset has "
                  "compute capability " +
                  arch->str() + " (presets: " + preset_id_list() + ")");
    }
    t.id = "custom";
    t.name = "custom " + arch->sm() + " GPU";
    t.cc = *arch;
    t.family = arch_family_of(*arch);
    t.unified_memory = ref != nullptr && ref->unified_memory;
    t.source = TargetSource::custom;
    t.num_sms = request.num_sms ? *request.num_sms : ref->num_sms;
    t.memory_bytes = memory ? *memory : ref->memory_bytes();
    t.memory_given = memory.has_value();
    if (!memory && ref != nullptr && ref->runtime_memory_bytes > 0) {
      t.runtime_memory_bytes = ref->runtime_memory_bytes;
      t.runtime_memory_source = std::string(ref->runtime_memory_source) + " (from preset " + std::string(ref->id) + ")";
    }
    if (ref != nullptr && (!request.num_sms || !memory)) {
      t.filled_from = std::string(ref->id);
      std::string what;
      if (!request.num_sms) what = "num_sms " + std::to_string(ref->num_sms);
      if (!memory)
        what += (what.empty() ? "" : " and ") + std::string("memory ") + std::to_string(ref->memory_gib) + " GiB";
      append_note(t.note, what + " taken from the " + std::string(ref->id) + " preset (--arch without --gpu)");
      append_note(t.note, std::string(ref->note));
    }
    return t;
  } else {
    t = from_preset(find_gpu_preset(kDefaultGpuId));
    t.default_used = true;
  }
  if (request.num_sms && *request.num_sms != t.num_sms) {
    t.num_sms = *request.num_sms;
    t.num_sms_overridden = true;
  }
  if (memory) {
    // The user's figure stands for the total, even where it equals the preset's vendor figure.
    t.memory_given = true;
    t.memory_overridden = *memory != t.memory_bytes;
    t.memory_bytes = *memory;
    t.runtime_memory_bytes = 0;
    t.runtime_memory_source.clear();
  }
  return t;
}

Target detected_target(std::string name, ComputeCapability cc, std::int64_t num_sms, std::int64_t memory_bytes) {
  check_num_sms(num_sms, "detected device SM count");
  if (memory_bytes <= 0) {
    throw_usage("detected device memory: " + std::to_string(memory_bytes) + " bytes; expected a positive size");
  }
  Target t;
  t.id = "detected";
  t.name = std::move(name);
  t.cc = cc;
  t.family = arch_family_of(cc);
  t.num_sms = num_sms;
  t.memory_bytes = memory_bytes;
  t.unified_memory = t.family == ArchFamily::blackwell_gb10;
  t.runtime_memory_bytes = memory_bytes;
  t.runtime_memory_source = "read from the device";
  t.source = TargetSource::detected;
  return t;
}

}  // namespace mlaplan
