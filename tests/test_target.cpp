// Targets (src/hardware/target.cpp, docs/layout-accounting.md "Targets"): the architecture family of every
// preset and capability, the unified-memory mark, the GB10 preset by --gpu and by --arch, and what
// `mla-plan gpus` prints of them. Ids, figures and flag errors of the other presets:
// tests/test_layout.cpp.

#include <catch2/catch.hpp>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "mlaplan/hardware/target.hpp"

using namespace mlaplan;

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

Target gpu(const std::string& id) {
  TargetRequest r;
  r.gpu = id;
  return resolve_target(r);
}

Target arch(const std::string& a) {
  TargetRequest r;
  r.arch = a;
  return resolve_target(r);
}

}  // namespace

TEST_CASE("targets: the family of every preset", "[target]") {
  struct Case {
    const char* id;
    ArchFamily family;
  };
  const Case cases[] = {
      {"h100", ArchFamily::hopper},
      {"h100-pcie", ArchFamily::hopper},
      {"h100-nvl", ArchFamily::hopper},
      {"h200", ArchFamily::hopper},
      {"h200-nvl", ArchFamily::hopper},
      {"h20", ArchFamily::hopper},
      {"h20-3e", ArchFamily::hopper},
      {"h800", ArchFamily::hopper},
      {"a100", ArchFamily::ampere},
      {"a100-pcie", ArchFamily::ampere},
      {"l20", ArchFamily::ada},
      {"l40s", ArchFamily::ada},
      {"rtx4090", ArchFamily::ada},
      {"rtx5090", ArchFamily::blackwell_rtx},
      {"rtx-pro-6000", ArchFamily::blackwell_rtx},
      {"b200", ArchFamily::blackwell_datacentre},
      {"b300", ArchFamily::blackwell_datacentre},
      {"gb200", ArchFamily::blackwell_datacentre},
      {"gb300", ArchFamily::blackwell_datacentre},
      {"gh200", ArchFamily::hopper},
      {"gh200-144", ArchFamily::hopper},
      {"gb10", ArchFamily::blackwell_gb10},
  };
  REQUIRE(gpu_presets().size() == std::size(cases));
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const GpuPreset& p = gpu_presets()[i];
    INFO(p.id);
    CHECK(p.id == cases[i].id);
    CHECK(p.family == cases[i].family);
    CHECK(p.family == arch_family_of(p.cc));
    const Target t = gpu(cases[i].id);
    CHECK(t.family == cases[i].family);
    CHECK(t.unified_memory == p.unified_memory);
  }
  // The default target carries its family too.
  CHECK(resolve_target({}).family == ArchFamily::hopper);
}

TEST_CASE("targets: family names are stable snake_case, titles are for people", "[target]") {
  struct Case {
    ArchFamily f;
    const char* name;
    const char* title;
  };
  const Case cases[] = {
      {ArchFamily::ampere, "ampere", "Ampere"},
      {ArchFamily::ada, "ada", "Ada Lovelace"},
      {ArchFamily::hopper, "hopper", "Hopper"},
      {ArchFamily::blackwell_datacentre, "blackwell_datacentre", "Blackwell datacentre"},
      {ArchFamily::blackwell_rtx, "blackwell_rtx", "Blackwell RTX"},
      {ArchFamily::blackwell_gb10, "blackwell_gb10", "Blackwell GB10"},
      {ArchFamily::other, "other", "other"},
  };
  for (const auto& c : cases) {
    CHECK(to_string(c.f) == c.name);
    CHECK(arch_family_title(c.f) == c.title);
  }
}

TEST_CASE("targets: the family of every known capability, custom targets take it", "[target]") {
  struct Case {
    ComputeCapability cc;
    ArchFamily family;
  };
  const Case cases[] = {
      {{7, 0}, ArchFamily::other},
      {{7, 2}, ArchFamily::other},
      {{7, 5}, ArchFamily::other},
      {{8, 0}, ArchFamily::ampere},
      {{8, 6}, ArchFamily::ampere},
      {{8, 7}, ArchFamily::ampere},
      {{8, 9}, ArchFamily::ada},
      {{9, 0}, ArchFamily::hopper},
      {{10, 0}, ArchFamily::blackwell_datacentre},
      {{10, 1}, ArchFamily::blackwell_datacentre},
      {{10, 3}, ArchFamily::blackwell_datacentre},
      {{11, 0}, ArchFamily::other},
      {{12, 0}, ArchFamily::blackwell_rtx},
      {{12, 1}, ArchFamily::blackwell_gb10},
  };
  REQUIRE(known_archs().size() == std::size(cases));
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const auto& c = cases[i];
    INFO(c.cc.sm());
    CHECK(known_archs()[i] == c.cc);
    CHECK(arch_family_of(c.cc) == c.family);
    // A custom target of that capability (both flags given: every capability resolves).
    TargetRequest r;
    r.arch = c.cc.sm();
    r.num_sms = 64;
    r.memory_gib = 24;
    const Target t = resolve_target(r);
    CHECK(t.source == TargetSource::custom);
    CHECK(t.family == c.family);
  }
  // Capabilities outside the table are "other" (arch_family_of is also a plain function).
  CHECK(arch_family_of({9, 5}) == ArchFamily::hopper);
  CHECK(arch_family_of({12, 2}) == ArchFamily::other);
  CHECK(arch_family_of({8, 5}) == ArchFamily::other);
  CHECK(arch_family_of({6, 1}) == ArchFamily::other);

  // Filled from a reference preset: the family is still the capability's.
  CHECK(arch("sm90").family == ArchFamily::hopper);
  CHECK(arch("sm100").family == ArchFamily::blackwell_datacentre);
  CHECK(arch("sm103").family == ArchFamily::blackwell_datacentre);
  CHECK(arch("sm120").family == ArchFamily::blackwell_rtx);
  CHECK(arch("sm80").family == ArchFamily::ampere);
  CHECK(arch("sm89").family == ArchFamily::ada);

  // An --arch override of a preset moves the family with the capability.
  TargetRequest o;
  o.gpu = "b200";
  o.arch = "sm90";
  const Target t = resolve_target(o);
  CHECK(t.arch_overridden);
  CHECK(t.family == ArchFamily::hopper);
  // Detected devices: from their capability.
  CHECK(detected_target("NVIDIA H200", {9, 0}, 132, 140 * kGiB).family == ArchFamily::hopper);
  CHECK(detected_target("NVIDIA B200", {10, 0}, 148, 178 * kGiB).family == ArchFamily::blackwell_datacentre);
}

TEST_CASE("targets: the gb10 preset (NVIDIA GB10, DGX Spark) by --gpu", "[target]") {
  const GpuPreset& p = find_gpu_preset("gb10");
  CHECK(p.name == "NVIDIA GB10 (DGX Spark)");
  CHECK(p.cc == ComputeCapability{12, 1});
  CHECK(p.num_sms == 48);  // 6,144 CUDA cores / 128 per SM
  CHECK(p.memory_gib == 128);
  CHECK(p.unified_memory);
  CHECK(p.reference_for_arch);
  // CUDA reports the system's MemTotal (121.69 GiB on DGX OS); the note says what vLLM does with it.
  CHECK(p.runtime_memory_bytes == 130'663'006'208);
  CHECK(p.runtime_basis == MemoryBasis::runtime_bytes);
  CHECK(std::string(p.memory_note).find("refuses to start") != std::string::npos);
  CHECK(find_gpu_preset("GB10").id == "gb10");

  const Target t = gpu("gb10");
  CHECK(t.id == "gb10");
  CHECK(t.source == TargetSource::preset);
  CHECK(t.cc.sm() == "sm121");
  CHECK(t.family == ArchFamily::blackwell_gb10);
  CHECK(t.num_sms == 48);
  CHECK(t.memory_bytes == 128 * kGiB);
  CHECK(t.unified_memory);
  CHECK(t.runtime_memory_bytes == 130'663'006'208);
  CHECK(t.overridden_fields().empty());
  CHECK(t.note == "128 GB LPDDR5X shared with the CPU");
  CHECK(t.memory_note == p.memory_note);

  // The user's own figure: memory overridden, still unified.
  TargetRequest r;
  r.gpu = "gb10";
  r.memory_gib = 119.5;
  const Target own = resolve_target(r);
  CHECK(own.memory_overridden);
  CHECK(own.memory_bytes == static_cast<std::int64_t>(119.5 * static_cast<double>(kGiB)));
  CHECK(own.unified_memory);
  CHECK(own.family == ArchFamily::blackwell_gb10);
}

TEST_CASE("targets: --arch sm121 alone resolves from the gb10 preset", "[target]") {
  for (const char* spelling : {"sm121", "sm_121", "12.1", "SM121a"}) {
    INFO(spelling);
    const Target t = arch(spelling);
    CHECK(t.source == TargetSource::custom);
    CHECK(t.id == "custom");
    CHECK(t.name == "custom sm121 GPU");
    CHECK(t.cc == ComputeCapability{12, 1});
    CHECK(t.family == ArchFamily::blackwell_gb10);
    CHECK(t.filled_from == "gb10");
    CHECK(t.num_sms == 48);
    CHECK(t.memory_bytes == 128 * kGiB);
    CHECK(t.unified_memory);
    CHECK(t.runtime_memory_bytes == 130'663'006'208);
    CHECK(t.note ==
          "num_sms 48 and memory 128 GiB taken from the gb10 preset (--arch without --gpu); 128 GB LPDDR5X shared "
          "with the CPU");
  }
  // With the user's memory figure only the SMs are filled in.
  TargetRequest r;
  r.arch = "sm121";
  r.memory_gib = 115;
  const Target t = resolve_target(r);
  CHECK(t.memory_bytes == 115 * kGiB);
  CHECK(t.num_sms == 48);
  CHECK(t.unified_memory);
  CHECK(t.note.rfind("num_sms 48 taken from the gb10 preset (--arch without --gpu); 128 GB LPDDR5X shared", 0) == 0);
  // Both flags: nothing filled, still an SM12.1 device with unified memory.
  r.num_sms = 40;
  const Target both = resolve_target(r);
  CHECK(both.filled_from.empty());
  CHECK(both.note.empty());
  CHECK(both.unified_memory);
}

TEST_CASE("targets: unified memory is GB10's mark", "[target]") {
  for (const auto& p : gpu_presets()) {
    INFO(p.id);
    CHECK(p.unified_memory == (p.id == "gb10"));
  }
  // Custom targets take the mark of their capability's reference preset (none: not unified).
  CHECK_FALSE(arch("sm100").unified_memory);
  CHECK_FALSE(arch("sm120").unified_memory);
  TargetRequest sm86;
  sm86.arch = "sm86";
  sm86.num_sms = 84;
  sm86.memory_gib = 24;
  CHECK_FALSE(resolve_target(sm86).unified_memory);
  // A preset keeps its own mark when --arch changes its capability.
  TargetRequest h200;
  h200.gpu = "h200";
  h200.arch = "sm121";
  const Target t = resolve_target(h200);
  CHECK(t.family == ArchFamily::blackwell_gb10);
  CHECK_FALSE(t.unified_memory);
  TargetRequest gb10;
  gb10.gpu = "gb10";
  gb10.arch = "sm120";
  const Target g = resolve_target(gb10);
  CHECK(g.family == ArchFamily::blackwell_rtx);
  CHECK(g.unified_memory);
  // Detected devices: an SM12.1 device is a GB10.
  CHECK(detected_target("NVIDIA GB10", {12, 1}, 48, 121 * kGiB).unified_memory);
  CHECK_FALSE(detected_target("NVIDIA H200", {9, 0}, 132, 140 * kGiB).unified_memory);
}

TEST_CASE("targets: mla-plan gpus prints the family and the unified-memory mark", "[target][cli]") {
  const auto text = testing_cli::run({"gpus"});
  REQUIRE(text.code == 0);
  CHECK(text.err.empty());
  CHECK_THAT(text.out, Catch::StartsWith("id             name                                   arch   family      "
                                         "           SMs   nominal     runtime  note\n"));
  CHECK_THAT(text.out, Catch::Contains("\nh200 *         NVIDIA H200 SXM 141GB                  sm90   Hopper      "
                                       "           132   141 GB    139.80 GiB  in a pass-through VM"));
  CHECK_THAT(text.out, Catch::Contains("\nb200           NVIDIA B200 180GB                      sm100  Blackwell "
                                       "datacentre   148   180 GB    178.35 GiB  180 GB usable of 192 GB nominal "
                                       "HBM3e\n"));
  CHECK_THAT(text.out, Catch::Contains("\ngb10           NVIDIA GB10 (DGX Spark)                sm121  Blackwell "
                                       "GB10          48   128 GB u  121.69 GiB  128 GB LPDDR5X shared with the "
                                       "CPU; unified memory: "));
  // nvidia-smi's figure only: marked as an upper bound.
  CHECK_THAT(text.out, Catch::Contains("\nh800           NVIDIA H800 80GB                       sm90   Hopper      "
                                       "           132    80 GB    <79.65 GiB  \n"));
  CHECK_THAT(text.out, Catch::Contains("\n* the default target. u unified memory, shared with the CPU. runtime: "));
  // Every preset on one line, the marks only where they belong.
  std::size_t lines = 0, unified = 0;
  for (std::size_t at = 0; (at = text.out.find('\n', at)) != std::string::npos; ++at) ++lines;
  for (std::size_t at = 0; (at = text.out.find(" GB u  ", at)) != std::string::npos; ++at) ++unified;
  CHECK(lines == 1 + gpu_presets().size() + 2);
  CHECK(unified == 1);

  const auto json = testing_cli::run({"gpus", "--json"});
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  const auto& gpus = j.at("gpus");
  REQUIRE(gpus.size() == gpu_presets().size());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuPreset& p = gpu_presets()[i];
    INFO(p.id);
    CHECK(gpus[i].at("id") == p.id);
    CHECK(gpus[i].at("family") == to_string(p.family));
    CHECK(gpus[i].at("family_title") == arch_family_title(p.family));
    CHECK(gpus[i].at("unified_memory") == p.unified_memory);
    CHECK(gpus[i].at("runtime_memory_bytes") == p.runtime_memory_bytes);
    CHECK(gpus[i].at("runtime_memory_basis") == to_string(p.runtime_basis));
    CHECK(gpus[i].at("runtime_memory_upper_bound") == is_upper_bound(p.runtime_basis));
    CHECK(gpus[i].at("runtime_memory_source") == p.runtime_memory_source);
  }
  CHECK(gpus.back().at("id") == "gb10");
  CHECK(gpus.back().at("arch") == "sm121");
  CHECK(gpus.back().at("family") == "blackwell_gb10");
  CHECK(gpus.back().at("num_sms") == 48);
  CHECK(gpus.back().at("memory_bytes") == 128 * kGiB);
  CHECK(gpus.back().at("unified_memory") == true);
}
