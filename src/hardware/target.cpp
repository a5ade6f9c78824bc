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

// The GPUs people serve these models on. Compute capability and SM count: NVIDIA's product pages and
// datasheets (the project's backend-rules notes). Memory: the vendor's nominal figure (memory_gib,
// for people) and the total the CUDA runtime reports, which vLLM multiplies by
// gpu_memory_utilization (runtime_memory_bytes). The runtime totals come from public deviceQuery
// listings, torch device properties, vLLM's "Free memory on device (free/total GiB)" lines and
// PyTorch out-of-memory messages, gathered in docs/gpu-memory.md with one source per figure; where
// drivers, VMs or images report different totals for one part the smallest is taken (the budget
// must not promise memory the user's host lacks), and the source string names the spread.
// Where no runtime figure was found (H800) the nvidia-smi total stands in as an upper bound.
//
// gb10 (docs/layout-accounting.md, "Targets"): 6,144 CUDA cores / 128 per SM = 48 SMs, compute
// capability 12.1, 128 GB LPDDR5X shared with the CPU; CUDA reports the system's MemTotal.
//
// Columns: id, name, cc, family, SMs, nominal memory (GB read as GiB), unified memory, reference
// for --arch, note, runtime total (bytes), its source, its basis, memory note.
constexpr std::string_view kGh200Note =
    "the CUDA runtime reports the HBM only; Grace's LPDDR5X (reachable over NVLink-C2C) is host memory to vLLM: "
    "it serves --cpu-offload-gb and --kv-offloading-size, never the KV budget";
constexpr std::array<GpuPreset, 22> kPresets{{
    {"h100",
     "NVIDIA H100 SXM 80GB",
     {9, 0},
     ArchFamily::hopper,
     132,
     80,
     false,
     false,
     "SXM part; see h100-pcie and h100-nvl for the others",
     85'020'639'232,
     "torch total_memory 81,082 MB (torch 2.0.1+cu118), the smallest seen; deviceQuery 85,045,477,376 B (79.20 GiB, "
     "driver 565.57.01), vLLM 79.19-79.22 GiB elsewhere",
     MemoryBasis::runtime_mib_floor,
     ""},
    {"h100-pcie",
     "NVIDIA H100 PCIe 80GB",
     {9, 0},
     ArchFamily::hopper,
     114,
     80,
     false,
     false,
     "",
     84'943'044'608,
     "torch total_memory 81,008 MB (NVIDIA H100 PCIe, 114 SMs)",
     MemoryBasis::runtime_mib_floor,
     ""},
    {"h100-nvl",
     "NVIDIA H100 NVL 94GB",
     {9, 0},
     ArchFamily::hopper,
     132,
     94,
     false,
     false,
     "",
     99'861'594'112,
     "deviceQuery 99,861,594,112 B (93.00 GiB; driver 550.54.14, nvidia-smi 95,830 MiB with 594 reserved); PyTorch "
     "out-of-memory totals 93.09-93.11 GiB on other drivers",
     MemoryBasis::runtime_bytes,
     ""},
    {"h200",
     "NVIDIA H200 SXM 141GB",
     {9, 0},
     ArchFamily::hopper,
     132,
     141,
     false,
     true,
     "in a pass-through VM the runtime reports 139.72 GiB (--gpu-memory-gib 139.72)",
     150'109'880'320,
     "cudaMemGetInfo total on an H200 SXM, CUDA 13.0, 2026-12-01 (139.80 GiB; nvidia-smi: 143,771 MiB, 616 MiB "
     "reserved); 139.81 GiB on driver 570.124.06",
     MemoryBasis::runtime_bytes,
     ""},
    {"h200-nvl",
     "NVIDIA H200 NVL 141GB",
     {9, 0},
     ArchFamily::hopper,
     132,
     141,
     false,
     false,
     "",
     150'109'880'320,
     "deviceQuery 150,109,880,320 B (139.80 GiB), as the H200 SXM",
     MemoryBasis::runtime_bytes,
     ""},
    {"h20",
     "NVIDIA H20 96GB",
     {9, 0},
     ArchFamily::hopper,
     78,
     96,
     false,
     false,
     "96 GB part; the 141 GB H20-3e is h20-3e",
     102'010'716'160,
     "torch total_memory 97,285 MB (NVIDIA H20, 78 SMs; nvidia-smi 97,871 MiB)",
     MemoryBasis::runtime_mib_floor,
     ""},
    {"h20-3e",
     "NVIDIA H20-3e 141GB",
     {9, 0},
     ArchFamily::hopper,
     78,
     141,
     false,
     false,
     "",
     150'109'880'320,
     "torch total_memory_bytes 150,109,880,320 (NVIDIA H20-3e, torch 2.10.0+cu130; nvidia-smi 143,771 MiB)",
     MemoryBasis::runtime_bytes,
     ""},
    {"h800",
     "NVIDIA H800 80GB",
     {9, 0},
     ArchFamily::hopper,
     132,
     80,
     false,
     false,
     "",
     85'520'809'984,
     "no runtime figure found: nvidia-smi's 81,559 MiB (SXM and PCIe) stands in; the runtime reports about 0.45 GiB "
     "less (the H100's reserve); pass --gpu-memory-gib with what torch.cuda.mem_get_info() reports",
     MemoryBasis::nvidia_smi,
     ""},
    {"a100",
     "NVIDIA A100 SXM4 80GB",
     {8, 0},
     ArchFamily::ampere,
     108,
     80,
     false,
     true,
     "80 GB part; a 40 GB variant exists (--gpu-memory-gib 39.39)",
     84'987'740'160,
     "deviceQuery 84,987,740,160 B (79.15 GiB, CUDA 12.2), the smallest seen; 85,100,068,864 B (79.26 GiB, driver "
     "555.42.02) and vLLM 79.32 GiB elsewhere",
     MemoryBasis::runtime_bytes,
     ""},
    {"a100-pcie",
     "NVIDIA A100 80GB PCIe",
     {8, 0},
     ArchFamily::ampere,
     108,
     80,
     false,
     false,
     "",
     84'974'239'744,
     "deviceQuery 84,974,239,744 B (79.14 GiB, CUDA 12.4)",
     MemoryBasis::runtime_bytes,
     ""},
    {"l20",
     "NVIDIA L20 48GB",
     {8, 9},
     ArchFamily::ada,
     92,
     48,
     false,
     false,
     "",
     47'803'596'800,
     "vLLM total_gpu_memory 44.52056884765625 GiB = 47,803,596,800 B (driver 550.54.15; nvidia-smi 46,068 MiB)",
     MemoryBasis::runtime_bytes,
     ""},
    {"l40s",
     "NVIDIA L40S 48GB",
     {8, 9},
     ArchFamily::ada,
     142,
     48,
     false,
     true,
     "",
     47'803'596'800,
     "deviceQuery 47,803,596,800 B (44.52 GiB; driver 550.127.05, nvidia-smi 46,068 MiB with 479 reserved)",
     MemoryBasis::runtime_bytes,
     ""},
    {"rtx4090",
     "NVIDIA GeForce RTX 4090 24GB",
     {8, 9},
     ArchFamily::ada,
     128,
     24,
     false,
     false,
     "",
     25'254'407'700,
     "PyTorch 23.52 GiB total (driver R580, torch 2.11.0+cu130), the smallest seen; deviceQuery 25,386,352,640 B "
     "(23.64 GiB) on driver 550.127.05",
     MemoryBasis::runtime_gib,
     ""},
    {"rtx5090",
     "NVIDIA GeForce RTX 5090 32GB",
     {12, 0},
     ArchFamily::blackwell_rtx,
     170,
     32,
     false,
     false,
     "",
     33'672'543'601,
     "PyTorch out-of-memory total 31.36 GiB on Linux, the smallest seen (vLLM 31.37 GiB); under WSL2 the runtime "
     "reports 31.84 GiB but WSL hides its own use",
     MemoryBasis::runtime_gib,
     ""},
    {"rtx-pro-6000",
     "NVIDIA RTX PRO 6000 Blackwell 96GB",
     {12, 0},
     ArchFamily::blackwell_rtx,
     188,
     96,
     false,
     true,
     "Server and Workstation editions",
     101'974'016'000,
     "torch total_memory 97,250 MB (94.97 GiB, Server Edition, torch 2.7.1+cu128), the smallest seen; vLLM 95.01 GiB "
     "(driver 610.43.02, Server Edition and Max-Q), 95.59 GiB under WSL2",
     MemoryBasis::runtime_mib_floor,
     ""},
    {"b200",
     "NVIDIA B200 180GB",
     {10, 0},
     ArchFamily::blackwell_datacentre,
     148,
     180,
     false,
     true,
     "180 GB usable of 192 GB nominal HBM3e",
     191'502'483'456,
     "torch total_memory 182,631 MB (178.35 GiB, as cudaGetDeviceProperties prints it with ECC on); 182,642 MB "
     "elsewhere",
     MemoryBasis::runtime_mib_floor,
     ""},
    {"b300",
     "NVIDIA B300 288GB",
     {10, 3},
     ArchFamily::blackwell_datacentre,
     148,
     288,
     false,
     true,
     "SM count unconfirmed: 148 (B200's) assumed; pass --num-sms when you know it",
     287'429'948'867,
     "vLLM \"Free memory on device (264.8/267.69 GiB)\" and PyTorch totals of 267.69 GiB (B300 SXM6 AC, driver "
     "580.95.05; nvidia-smi 275,040 MiB)",
     MemoryBasis::runtime_gib,
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
     197'901'355'581,
     "vLLM \"Free memory on device (181.84/184.31 GiB)\" (v0.26.0) and a DeepSeek V4 out-of-memory total of 184.31 "
     "GiB (nvidia-smi 189,471 MiB)",
     MemoryBasis::runtime_gib,
     ""},
    {"gb300",
     "NVIDIA GB300 (one Blackwell Ultra GPU)",
     {10, 3},
     ArchFamily::blackwell_datacentre,
     148,
     288,
     false,
     false,
     "SM count unconfirmed: 148 (B200's) assumed; pass --num-sms when you know it",
     296'889'614'336,
     "PyTorch out-of-memory totals of 276.50 GiB (a 64-GPU GB300 cluster, a DGX Station GB300; nvidia-smi 284,208 "
     "MiB)",
     MemoryBasis::runtime_gib,
     ""},
    {"gh200",
     "NVIDIA GH200 96GB HBM3 (GH200 480GB)",
     {9, 0},
     ArchFamily::hopper,
     132,
     96,
     false,
     false,
     "the 144 GB HBM3e part is gh200-144",
     101'468'602'368,
     "deviceQuery 101,468,602,368 B (94.50 GiB) on a 4-GPU GH200 120GB node and in a VM, the smallest seen; "
     "102,005,473,280 B (95.00 GiB) bare metal",
     MemoryBasis::runtime_bytes,
     kGh200Note},
    {"gh200-144",
     "NVIDIA GH200 144GB HBM3e",
     {9, 0},
     ArchFamily::hopper,
     132,
     144,
     false,
     false,
     "",
     153'008'209'920,
     "153,008,209,920 B (142.50 GiB) in a fake-device test fixture that copies a host (driver 580.173.02, "
     "nvidia-smi 146,831 MiB); not confirmed on a device",
     MemoryBasis::fixture,
     kGh200Note},
    {"gb10",
     "NVIDIA GB10 (DGX Spark)",
     {12, 1},
     ArchFamily::blackwell_gb10,
     48,
     128,
     true,
     true,
     "128 GB LPDDR5X shared with the CPU",
     130'663'006'208,
     "torch total_memory = mem_get_info()[1] = /proc/meminfo MemTotal: 130,663,006,208 and 130,663,231,488 B "
     "(121.69 GiB, DGX OS, kernel 6.17); older images report about 119.7 GiB",
     MemoryBasis::runtime_bytes,
     "unified memory: the CUDA total is the system's MemTotal and the free figure is the host RAM available, which "
     "the OS, the page cache and other processes share (vLLM has seen 101-114 GiB free of 121.69); vLLM refuses to "
     "start when utilization x total exceeds that free figure"},
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
      for (const auto& p : kPresets) {
        if (p.runtime_memory_bytes <= 0 || p.runtime_memory_bytes > (p.memory_gib << 30)) return false;
      }
      return true;
    }(),
    "every preset has a runtime total, at most its nominal memory");
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
  t.runtime_basis = p.runtime_basis;
  t.memory_note = std::string(p.memory_note);
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

std::string_view to_string(MemoryBasis b) {
  switch (b) {
    case MemoryBasis::runtime_bytes: return "runtime_bytes";
    case MemoryBasis::runtime_mib_floor: return "runtime_mib_floor";
    case MemoryBasis::runtime_gib: return "runtime_gib";
    case MemoryBasis::fixture: return "fixture";
    case MemoryBasis::nvidia_smi: return "nvidia_smi";
    case MemoryBasis::vendor: return "vendor";
  }
  return "?";
}

std::int64_t gpus_per_node(const Target& target) {
  if (target.source == TargetSource::preset) {
    // A Grace-Blackwell compute tray holds two superchips (4 GPUs); a GH200 server, a DGX Spark
    // and the GeForce desktop cards are one GPU to a host.
    if (target.id == "gb200" || target.id == "gb300") return 4;
    if (target.id == "gb10" || target.id == "rtx5090" || target.id == "rtx4090" || target.id == "gh200" ||
        target.id == "gh200-144") {
      return 1;
    }
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
      t.runtime_basis = ref->runtime_basis;
      t.memory_note = std::string(ref->memory_note);
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
