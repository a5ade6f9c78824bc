// `mla-plan bench` orchestration (mlaplan/gpu_check/bench.hpp): shapes from the planned layout, rules,
// ceilings, timings, rates and floors. The timing is the device's (kernels/src/runtime/bench_device.cpp).

#include "mlaplan/gpu_check/bench.hpp"

#include "mlaplan/plan/plan.hpp"

#include <algorithm>
#include <string>

#include "mlaplan/cache/decode.hpp"
#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/base/error.hpp"

namespace mlaplan {
namespace {

constexpr std::int64_t kHeadDim = 512;

const CacheObject* object_of(const Layout& layout, std::int64_t layer, CacheKind kind) {
  for (const auto& o : layout.objects) {
    if (o.layer == layer && o.kind == kind) return &o;
  }
  return nullptr;
}

std::int32_t narrow(std::int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX) throw_internal(std::string(what) + " " + std::to_string(v) + " does not fit 32 bits");
  return static_cast<std::int32_t>(v);
}

/// Sets the shape's heads and what follows from them: FLOPs, bytes and the decode mode.
void set_heads(BenchShape& s, std::int32_t h_q, std::int64_t num_sms) {
  s.h_q = h_q;
  const double rows = static_cast<double>(s.topk) + (s.has_extra ? s.extra_topk : 0);
  const double tokens = static_cast<double>(s.b) * s.s_q;
  // Q K^T over d_qk dims and P V over d_v = 512; q (d_qk) in and out (512) in bf16.
  const double dqk = static_cast<double>(row_format(s.main_format).dims);
  s.flops = 2.0 * s.h_q * tokens * rows * (dqk + kHeadDim);
  s.bytes = tokens * (s.topk * static_cast<double>(row_format(s.main_format).row_bytes) +
                      (s.has_extra ? s.extra_topk * static_cast<double>(row_format(s.extra_format).row_bytes) : 0.0)) +
            tokens * s.h_q * (dqk + kHeadDim) * 2.0;
  if (s.unsupported.empty()) {
    s.mode = choose_decode_mode(s.b, s.s_q, s.h_q, s.topk, s.has_extra, s.extra_topk, num_sms);
  }
}

}  // namespace

void check_bench_batches(const std::vector<std::int64_t>& batches) {
  if (batches.empty()) throw_usage("--batch: give at least one batch size");
  if (static_cast<std::int64_t>(batches.size()) > BenchLimits::max_batch_sizes) {
    throw_usage("--batch: " + std::to_string(batches.size()) + " batch sizes; allowed 1.." +
                std::to_string(BenchLimits::max_batch_sizes));
  }
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (batches[i] < 1 || batches[i] > BenchLimits::max_batch) {
      throw_usage("--batch[" + std::to_string(i) + "]: '" + std::to_string(batches[i]) +
                  "' is out of range; allowed 1.." + std::to_string(BenchLimits::max_batch));
    }
  }
}

void check_bench_options(const BenchOptions& options) {
  check_bench_batches(options.batches);
  if (options.run.replays < 1 || options.run.replays > BenchLimits::max_replays) {
    throw_usage("--replays: '" + std::to_string(options.run.replays) + "' is out of range; allowed 1.." +
                std::to_string(BenchLimits::max_replays));
  }
  if (options.run.warmup < 0 || options.run.warmup > BenchLimits::max_warmup) {
    throw_usage("--warmup: '" + std::to_string(options.run.warmup) + "' is out of range; allowed 0.." +
                std::to_string(BenchLimits::max_warmup));
  }
}

void check_bench_layer_types(const Topology& topo, const std::vector<LayerType>& types) {
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (std::find(topo.types_present.begin(), topo.types_present.end(), types[i]) == topo.types_present.end()) {
      std::string present;
      for (auto p : topo.types_present) present += (present.empty() ? "" : ", ") + std::string(to_string(p));
      throw_usage("--layer-type[" + std::to_string(i) + "]: the config has no " + std::string(to_string(types[i])) +
                  " layer; allowed: " + present + " (the types it has)");
    }
  }
}

void check_bench_flags(const ModelConfig& cfg, const Topology& topo, const BenchOptions& options) {
  check_bench_options(options);
  check_bench_layer_types(topo, options.types);
  LayoutOptions lo = options.layout;
  lo.kv_cache_dtype = options.kv_cache_dtype;
  // The backends of the release run_bench's plan models (make_plan's: the newest).
  lo.release = backend_release_rules(newest_vllm_release());
  check_layout_flags(cfg, topo, lo);
}

std::vector<BenchShape> bench_shapes(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                     const std::vector<std::int64_t>& batches, const std::vector<LayerType>& types) {
  check_bench_batches(batches);
  check_bench_layer_types(topo, types);
  // The index widths and pages of each type: the plan's own derivation (one request suffices).
  BatchOptions one_request;
  one_request.batch = 1;
  one_request.context_len = std::min<std::int64_t>(layout.max_model_len, 4096);
  const DecodeBatch one = make_decode_batch(one_request, layout.max_model_len);
  const auto plans = plan_decode_schedules(cfg, topo, layout, one);
  std::vector<BenchShape> shapes;
  for (auto type : topo.types_present) {
    if (!types.empty() && std::find(types.begin(), types.end(), type) == types.end()) continue;
    const Layer* layer = nullptr;
    for (const auto& l : topo.layers) {
      if (l.type == type && (!layer || (layer->draft && !l.draft))) layer = &l;
    }
    if (!layer) continue;
    const LayerTypeSchedule* plan = nullptr;
    for (const auto& p : plans) {
      if (p.type == type) plan = &p;
    }
    BenchShape base;
    base.type = type;
    base.num_layers = topo.count(type);
    // The heads the backend runs (8 / 16 unpadded, or padded), and for 8 / 16 local heads the
    // other form as well.
    const DecodeHeads heads = decode_heads(layout.parallel.local_query_heads, layout.parallel.padded_query_heads);
    base.h_q = narrow(heads.h_q, "h_q");
    base.compare_h_q = narrow(heads.compare_h_q, "compare h_q");
    const CacheObject* main =
        object_of(layout, layer->index, type == LayerType::dsa ? CacheKind::compressed : CacheKind::swa);
    const CacheObject* extra = nullptr;
    if (!plan) {
      base.unsupported = "no sparse decode for " + layout.target.cc.sm() + " with " +
                         std::to_string(layout.parallel.padded_query_heads) + " query heads per rank";
    } else if (!main) {
      base.unsupported = "the layout has no main cache for " + std::string(to_string(type)) + " layers";
    } else {
      base.main_format = main->format;
      base.main_page = narrow(main->rows_per_page, "rows per page");
      base.topk = narrow(plan->topk, "topk");
      if (plan->input.has_extra) {
        extra = layer->kv_source ? object_of(layout, *layer->kv_source, CacheKind::compressed) : nullptr;
        if (!extra) {
          base.unsupported = "the layout has no compressed cache for layer " + std::to_string(layer->index);
        } else {
          base.has_extra = true;
          base.extra_format = extra->format;
          base.extra_page = narrow(extra->rows_per_page, "rows per page");
          base.extra_topk = narrow(plan->extra_topk, "extra_topk");
        }
      }
      // The kernels take 512-dim rows (V4, V4.1) or V3.2's 576-dim rows; an extra cache holds rows
      // of the main cache's dims.
      const std::int64_t dqk = row_format(main->format).dims;
      if (dqk != kHeadDim && dqk != 576) {
        base.unsupported = "no decode kernel for " + std::string(row_format(main->format).name) + " rows (" +
                           std::to_string(dqk) + " dims); the kernels take 512 or 576";
      } else if (extra && base.unsupported.empty() && row_format(extra->format).dims != dqk) {
        base.unsupported = "no decode kernel reads " + std::string(row_format(main->format).name) + " with " +
                           std::string(row_format(extra->format).name) + " rows";
      }
    }
    for (auto b : batches) {
      BenchShape s = base;
      s.b = static_cast<std::int32_t>(b);
      set_heads(s, s.h_q, layout.target.num_sms);
      shapes.push_back(std::move(s));
    }
  }
  return shapes;
}

BenchShape bench_shape_with_heads(const BenchShape& shape, std::int32_t h_q, std::int64_t num_sms) {
  BenchShape s = shape;
  s.compare_h_q = 0;
  set_heads(s, h_q, num_sms);
  return s;
}

void finish_bench_heads(const BenchRow& row, BenchHeadsComparison& c) {
  const bool row_unpadded = small_head_count(row.shape.h_q);
  c.unpadded_h_q = row_unpadded ? row.shape.h_q : c.shape.h_q;
  c.padded_h_q = row_unpadded ? c.shape.h_q : row.shape.h_q;
  const double row_us = row.ran ? row.timing.us_per_call : 0.0;
  const double other_us = c.ran ? c.timing.us_per_call : 0.0;
  c.unpadded_us = row_unpadded ? row_us : other_us;
  c.padded_us = row_unpadded ? other_us : row_us;
  c.unpadded_over_padded = c.unpadded_us > 0 && c.padded_us > 0 ? c.unpadded_us / c.padded_us : 0.0;
}

void finish_bench_row(BenchRow& r, const BenchCeilings& c) {
  const double us = r.timing.us_per_call;
  if (us <= 0) return;
  r.tflops = r.shape.flops / us / 1e6;
  r.gbps = r.shape.bytes / us / 1e3;
  r.bytes_floor_us = c.copy_gbps > 0 ? r.shape.bytes / (c.copy_gbps * 1e3) : 0;
  r.flop_floor_us = c.matmul_tflops > 0 ? r.shape.flops / (c.matmul_tflops * 1e6) : 0;
  r.floor_us = std::max(r.bytes_floor_us, r.flop_floor_us);
  r.floor_fraction = r.floor_us / us;
}

BenchReport run_bench(const ModelConfig& cfg, const Topology& topo, const Target& target, BenchDevice& device,
                      const BenchOptions& options) {
  check_bench_flags(cfg, topo, options);
  BenchReport report;
  report.target = target;
  LayoutOptions lo = options.layout;
  lo.kv_cache_dtype = options.kv_cache_dtype;
  // The layout is make_plan()'s, exactly as `mla-plan plan` makes it for these flags.
  PlanRequest req;
  req.resolved_target = target;
  req.layout = lo;
  req.dtype = options.dtype;
  req.schedules = false;
  req.suggestions = false;
  req.deploy.read_checkpoint_files = false;  // the kernels' inputs do not depend on the weights
  const Plan plan = make_plan_on(cfg, topo, req);
  report.rules = plan.rules;
  std::string rejected;
  for (const auto& r : report.rules) {
    if (rejected.empty() && r.finding.severity == Severity::error) rejected = r.finding.message;
  }
  const Layout& layout = *plan.layout;
  report.kv_cache_dtype = std::string(to_string(layout.kv_cache_dtype));
  report.forced = !rejected.empty() && options.force;
  const auto shapes = bench_shapes(cfg, topo, layout, options.batches, options.types);
  const bool any_runnable = std::any_of(shapes.begin(), shapes.end(), [&](const BenchShape& s) {
    return s.unsupported.empty() && device.unsupported_reason(s).empty();
  });
  if (any_runnable && (rejected.empty() || options.force)) {
    if (options.progress) options.progress("bench: measuring the copy and matmul ceilings ...");
    report.ceilings = device.ceilings();
  }
  for (const auto& s : shapes) {
    BenchRow row;
    row.shape = s;
    if (!rejected.empty() && !options.force) {
      row.reason = rejected;
    } else if (!s.unsupported.empty()) {
      row.reason = s.unsupported;
    } else {
      row.reason = device.unsupported_reason(s);
    }
    if (row.reason.empty()) {
      if (options.progress) {
        options.progress("bench: " + std::string(to_string(s.type)) + " h_q " + std::to_string(s.h_q) + " b " +
                         std::to_string(s.b) + " (" + std::string(to_string(s.mode.mode)) + ") ...");
      }
      row.timing = device.time(s, options.run);
      row.ran = true;
      finish_bench_row(row, report.ceilings);
    }
    if (s.compare_h_q > 0) {
      // The same shape at the other head count: 8 / 16 unpadded against padded to 64.
      BenchHeadsComparison c;
      c.shape = bench_shape_with_heads(s, s.compare_h_q, layout.target.num_sms);
      if (!row.ran) {
        c.reason = "the row did not run";
      } else {
        c.reason = device.unsupported_reason(c.shape);
      }
      if (c.reason.empty()) {
        if (options.progress) {
          options.progress("bench: " + std::string(to_string(s.type)) + " h_q " + std::to_string(c.shape.h_q) + " b " +
                           std::to_string(s.b) + " (" + std::string(to_string(c.shape.mode.mode)) +
                           ", the other head count) ...");
        }
        c.timing = device.time(c.shape, options.run);
        c.ran = true;
      }
      finish_bench_heads(row, c);
      row.heads = std::move(c);
    }
    report.rows.push_back(std::move(row));
  }
  if (std::none_of(report.rows.begin(), report.rows.end(), [](const BenchRow& r) { return r.ran; })) {
    report.exit_code = exit_code(ErrorKind::unsupported);
    report.exit_message =
        report.rows.empty() ? "nothing to time" : "nothing could be timed: " + report.rows.front().reason;
  }
  return report;
}

}  // namespace mlaplan
