// Fuzz target fuzz_config: config bytes through the whole planning pipeline of `mla-plan plan`.
//
//   bytes -> parse_config -> build_topology -> compute_weights, shard_kinds
//         -> (per target) evaluate_rules -> plan_layout (lenient)
//         -> plan_fit (placement, shared by the targets through a PlacementMemo; budget, vLLM KV) -> make_decode_batch (4 requests) -> plan_decode_schedules
//         -> plan_layout (strict)
//
// Two targets per input: h200 (sm90, fp8 caches) and b200 (sm100, nvfp4 + fp4 caches), so both
// decode-kernel families and both cache dtypes are planned. mlaplan::Error is the expected way to
// reject input, except Error(internal), which is a bug; so is any other exception, a crash, a
// sanitizer report or a leak. parse_config must reject with Error(invalid_config) naming the file,
// in one line of printable UTF-8 (is_printable_line) whatever bytes the input held.
//
// The same entry point runs under libFuzzer (MLAPLAN_FUZZ=ON) and under the replay driver of the
// normal build (fuzz/replay_main.cpp), which feeds it the committed corpus as a CTest test.

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "mlaplan/engine/vllm/placement.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/decode.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/topology.hpp"

namespace {

using namespace mlaplan;

constexpr std::string_view kSource = "fuzz.json";

/// An Error is an accepted outcome unless it is internal (exit 70: a bug).
void expect_error(const Error& e, std::string_view stage) {
  if (e.kind() == ErrorKind::internal) fuzz::fail(std::string(stage) + ": internal error: " + e.what());
}

struct Variant {
  const char* gpu;
  const char* kv_cache_dtype;
  const char* indexer_cache_dtype;
};

/// One target: the rules, the lenient layout, the fit, a 4-request decode step, the strict layout.
/// `weights`: the checkpoint's weights from config.json, the same for every target (null when
/// computing them was refused: no fit is planned).
void plan_on(const ModelConfig& cfg, const Topology& topo, const std::shared_ptr<const WeightsReport>& weights,
             const std::shared_ptr<const std::vector<ShardKind>>& kinds,
             const std::shared_ptr<PlacementMemo>& placements, const Variant& v) {
  TargetRequest request;
  request.gpu = v.gpu;
  const Target target = resolve_target(request);

  LayoutOptions options;
  options.kv_cache_dtype = v.kv_cache_dtype;
  options.indexer_cache_dtype = v.indexer_cache_dtype;

  const auto rules = evaluate_rules(cfg, topo, target, RuleOptions{std::nullopt, options});
  for (const auto& r : rules) {
    // `plan` stops at a usage error here; the options above are valid, so none may appear.
    if (r.finding.severity == Severity::error && r.kind == ErrorKind::usage) {
      fuzz::fail("rules: usage error for fixed, valid options: " + r.finding.message);
    }
  }

  Layout layout;
  try {
    layout = plan_layout(cfg, topo, target, options, Strictness::lenient);
  } catch (const Error& e) {
    expect_error(e, "plan_layout(lenient)");
    return;
  }

  if (weights) {
    try {
      // The fit answer as make_plan() computes it: weights, placement, vLLM's budget and KV numbers.
      PlanRequest req;
      req.layout = options;
      req.weights = weights;
      req.shard_kinds = kinds;
      req.placements = placements;
      const Fit fit = plan_fit(cfg, topo, layout, weights, WeightsSource::config, "config.json", req);
      if (fit.stages.size() != layout.parallel.stages.size()) {
        fuzz::fail("fit: " + std::to_string(fit.stages.size()) + " stages for " +
                   std::to_string(layout.parallel.stages.size()) + " pipeline stages");
      }
      if (fit.fits && fit.vllm.num_blocks <= fit.stages[0].kv.blocks_per_request) {
        fuzz::fail("fit: fits with " + std::to_string(fit.vllm.num_blocks) + " blocks for a request of " +
                   std::to_string(fit.stages[0].kv.blocks_per_request));
      }
      (void)request_bytes(layout, -1, 1);
    } catch (const Error& e) {
      expect_error(e, "fit");
    }
  }

  // A bounded decode step: 4 requests at 1, 4096, half and all of max_model_len tokens.
  const std::int64_t len = layout.max_model_len;
  BatchOptions batch_options;
  batch_options.context_lens = {1, std::min<std::int64_t>(4096, len), std::max<std::int64_t>(1, len / 2), len};
  try {
    const DecodeBatch batch = make_decode_batch(batch_options, len);
    const auto schedules = plan_decode_schedules(cfg, topo, layout, batch);
    if (!schedules.empty() && schedules.size() != topo.types_present.size()) {
      fuzz::fail("decode schedules: " + std::to_string(schedules.size()) + " plans for " +
                 std::to_string(topo.types_present.size()) + " layer types");
    }
  } catch (const Error& e) {
    expect_error(e, "decode schedules");
  }

  try {
    (void)plan_layout(cfg, topo, target, options, Strictness::strict);
  } catch (const Error& e) {
    expect_error(e, "plan_layout(strict)");
  }
}

void run_pipeline(std::string_view text) {
  ModelConfig cfg;
  try {
    cfg = parse_config(text, std::string(kSource));
  } catch (const Error& e) {
    expect_error(e, "parse_config");
    if (e.kind() != ErrorKind::invalid_config) {
      fuzz::fail(std::string("parse_config threw a kind other than invalid_config: ") + e.what());
    }
    if (std::string_view(e.what()).substr(0, kSource.size()) != kSource) {
      fuzz::fail(std::string("parse_config message does not name the file: ") + e.what());
    }
    if (!is_printable_line(e.what())) {
      fuzz::fail("parse_config message is not one line of printable UTF-8: " + printable(e.what()));
    }
    return;
  }

  Topology topo;
  try {
    topo = build_topology(cfg);
  } catch (const Error& e) {
    expect_error(e, "build_topology");
    return;
  }
  if (static_cast<std::int64_t>(topo.layers.size()) != cfg.total_layers()) {
    fuzz::fail("topology has " + std::to_string(topo.layers.size()) + " layers for a config of " +
               std::to_string(cfg.total_layers()));
  }

  // The checkpoint's weights and how each tensor group shards depend on the config alone: computed
  // once for both targets, as `check --matrix` does once per config, not once per target (a config
  // of thousands of layers has hundreds of thousands of tensor groups).
  // The placements of those weights too, shared by both targets' fits and their searches for a
  // layout that fits (a placement depends on the layout, not on the GPU), as `check --matrix` shares them.
  std::shared_ptr<const WeightsReport> weights;
  std::shared_ptr<const std::vector<ShardKind>> kinds;
  const auto placements = std::make_shared<PlacementMemo>();
  try {
    WeightsOptions wo;
    wo.list_tensors = false;
    weights = std::make_shared<const WeightsReport>(compute_weights(cfg, wo));
    kinds = std::make_shared<const std::vector<ShardKind>>(shard_kinds(*weights, EngramPlacement::gpu));
  } catch (const Error& e) {
    expect_error(e, "compute_weights");
    weights.reset();
  }

  static constexpr Variant kVariants[] = {
      {"h200", "auto", "fp8"},
      {"b200", "nvfp4_ds_mla", "fp4"},
  };
  for (const auto& v : kVariants) {
    try {
      plan_on(cfg, topo, weights, kinds, placements, v);
    } catch (const Error& e) {
      expect_error(e, std::string("plan on ") + v.gpu);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    run_pipeline(text);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("exception other than mlaplan::Error: ") + e.what());
  } catch (...) {
    fuzz::fail("exception of an unknown type");
  }
  return 0;
}
