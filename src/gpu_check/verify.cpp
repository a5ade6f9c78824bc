#include "mlaplan/gpu_check/verify.hpp"

#include "mlaplan/plan/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>

#include "mlaplan/rules/backends.hpp"
#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/hardware/quant.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

namespace {

constexpr int kDim = kRefHeadDim;  // d_v: the output's dims

/// Decode inputs in the distribution the pass criterion is calibrated for (FlashMLA's tests draw
/// K as randn / 10 clamped to [-1, 1]); per-16-dim magnitudes vary in [0.025, 0.1] so the
/// quantisation scales differ from tile to tile. Never zeros. `dims` values per row.
std::vector<std::uint16_t> random_latents(std::mt19937_64& rng, std::int64_t rows, int dims) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> logmag(std::log10(0.25f), 0.0f);
  std::vector<std::uint16_t> v(static_cast<std::size_t>(rows) * static_cast<std::size_t>(dims));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int tile = 0; tile < dims / 16; ++tile) {
      const float mag = 0.1f * std::pow(10.0f, logmag(rng));
      for (int i = 0; i < 16; ++i) {
        v[static_cast<std::size_t>(r * dims + tile * 16 + i)] =
            float_to_bf16(std::clamp(normal(rng) * mag, -1.0f, 1.0f));
      }
    }
  }
  return v;
}

bool batch_given(const BatchOptions& o) { return o.batch || o.context_len || !o.context_lens.empty(); }

/// The batch of a verification: the flags', or the default mix.
BatchOptions verify_batch_options(const BatchOptions& given, std::int64_t max_model_len) {
  return batch_given(given) ? given : default_verify_batch(max_model_len, given.spec_tokens);
}

/// The decode tokens of a verification batch (VerifyLimits): Error(usage) naming the batch flags
/// given (`given`) and saying what was the default.
void check_verify_batch(const DecodeBatch& batch, const BatchOptions& given) {
  const auto b = static_cast<std::int64_t>(batch.positions.size());
  if (b > VerifyLimits::max_decode_tokens) {
    const std::string requests = std::to_string(batch.context_lens.size());
    std::string from = given.batch                   ? "--batch " + requests
                       : !given.context_lens.empty() ? requests + " requests of --context-lens"
                                                     : "the default mix of " + requests + " requests";
    if (batch.spec_tokens) from += " x (1 + --spec-tokens " + std::to_string(batch.spec_tokens) + ")";
    throw_usage("verify: the batch has " + std::to_string(b) + " decode tokens (" + from + "); allowed 1.." +
                std::to_string(VerifyLimits::max_decode_tokens) +
                " for verification (the host reference recomputes every one)");
  }
}

/// The host memory of one cache of a problem (VerifyLimits): Error(unsupported) when it is too large.
void check_cache_size(std::string_view which, std::int64_t width, const std::vector<std::int32_t>& lengths) {
  const auto b = static_cast<std::int64_t>(lengths.size());
  const std::int64_t slots = checked_mul(b, width, "verify index slots", ErrorKind::unsupported);
  std::int64_t rows = 0;
  for (auto l : lengths) rows += std::min<std::int64_t>(l, width);
  const std::string head = "the " + std::string(which) + " cache is too large to verify on the host: ";
  if (slots > VerifyLimits::max_index_slots) {
    throw_unsupported(head + "b " + std::to_string(b) + " x topk " + std::to_string(width) + " = " +
                      std::to_string(slots) + " index slots; allowed up to " +
                      std::to_string(VerifyLimits::max_index_slots) + " (give a smaller batch)");
  }
  if (rows > VerifyLimits::max_attended_rows) {
    throw_unsupported(head + std::to_string(rows) + " attended rows; allowed up to " +
                      std::to_string(VerifyLimits::max_attended_rows) +
                      " (give a smaller --batch or shorter --context-len)");
  }
}

const CacheObject* find_object(const Layout& layout, std::int64_t layer, CacheKind kind) {
  for (const auto& o : layout.objects) {
    if (o.layer == layer && o.kind == kind) return &o;
  }
  return nullptr;
}

/// Draws indices for one cache: valid positions get distinct live rows (2% of them -1), positions
/// past the length point at rows that are never written (NaN-poisoned), so a stray read shows up.
/// Fills `cache` (pages, latents, slots, expected bytes).
void build_cache(std::mt19937_64& rng, VerifyCache& cache, std::int32_t b, std::int32_t width,
                 const std::vector<std::int32_t>& lengths, std::vector<std::int32_t>& indices) {
  std::int64_t used = 0;
  for (auto l : lengths) used += std::min(l, width);
  const std::int64_t page = cache.page_block_size;
  const std::int64_t live_rows = std::max<std::int64_t>(2 * used, page);
  const std::int64_t dead_rows = std::max<std::int64_t>(used / 8, page);
  cache.num_pages = ceil_div(live_rows + dead_rows, page);
  const std::int64_t num_rows = cache.num_pages * page;
  const std::int64_t live_end = num_rows - dead_rows;
  std::uniform_int_distribution<std::int64_t> live(0, live_end - 1);
  std::uniform_int_distribution<std::int64_t> dead(live_end, num_rows - 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  indices.assign(static_cast<std::size_t>(b) * static_cast<std::size_t>(width), -1);
  std::vector<char> written(static_cast<std::size_t>(num_rows), 0);
  for (std::int32_t i = 0; i < b; ++i) {
    std::unordered_set<std::int64_t> mine;
    const auto len = lengths[static_cast<std::size_t>(i)];
    for (std::int32_t t = 0; t < width; ++t) {
      auto& slot = indices[static_cast<std::size_t>(i) * static_cast<std::size_t>(width) + static_cast<std::size_t>(t)];
      if (t >= len) {
        slot = static_cast<std::int32_t>(dead(rng));
        continue;
      }
      if (u(rng) < 0.02) continue;  // an invalid entry inside the valid range
      std::int64_t id = live(rng);
      while (!mine.insert(id).second) id = live(rng);
      slot = static_cast<std::int32_t>(id);
      written[static_cast<std::size_t>(id)] = 1;
    }
  }
  cache.slots.clear();
  for (std::int64_t r = 0; r < num_rows; ++r) {
    if (written[static_cast<std::size_t>(r)]) cache.slots.push_back(r);
  }
  // Shuffle the order the rows are written in: the quantize kernel must not rely on it.
  std::shuffle(cache.slots.begin(), cache.slots.end(), rng);
  cache.latents = random_latents(rng, static_cast<std::int64_t>(cache.slots.size()),
                                 static_cast<int>(row_format(cache.format).dims));
  const auto bytes = checked_mul(cache.num_pages, cache.page_stride, "verify cache bytes");
  cache.expected.assign(static_cast<std::size_t>(bytes), 0xFF);
  quantize_into_pages(cache.format, cache.latents.data(), static_cast<std::int64_t>(cache.slots.size()),
                      cache.slots.data(), cache.expected.data(), cache.num_pages, page, cache.page_stride);
}

/// Dequantised rows of a cache's expected bytes, NaN where nothing was written.
std::vector<float> dequantised_rows(const VerifyCache& c) {
  const std::int64_t num_rows = c.num_pages * c.page_block_size;
  const std::int64_t dims = row_format(c.format).dims;
  std::vector<float> rows(static_cast<std::size_t>(num_rows * dims), std::numeric_limits<float>::quiet_NaN());
  for (const auto id : c.slots) {
    dequantize_from_pages(c.format, c.expected.data(), c.num_pages, c.page_block_size, c.page_stride, &id, 1,
                          rows.data() + id * dims);
  }
  return rows;
}

}  // namespace

RefDecodeOutput verify_reference(const VerifyProblem& p) {
  const auto main_rows = dequantised_rows(p.main);
  const auto extra_rows = p.has_extra ? dequantised_rows(p.extra) : std::vector<float>{};
  std::vector<float> q(p.q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = bf16_to_float(p.q[i]);
  RefDecodeInput in;
  in.b = p.b;
  in.s_q = p.s_q;
  in.h_q = p.h_q;
  in.d_qk = p.d_qk;
  in.q = q.data();
  in.main.dense = main_rows.data();
  in.main.num_rows = p.main.num_pages * p.main.page_block_size;
  in.indices = p.indices.data();
  in.topk = p.topk;
  in.topk_length = p.topk_length.data();
  in.has_extra = p.has_extra;
  if (p.has_extra) {
    in.extra.dense = extra_rows.data();
    in.extra.num_rows = p.extra.num_pages * p.extra.page_block_size;
    in.extra_indices = p.extra_indices.data();
    in.extra_topk = p.extra_topk;
    in.extra_topk_length = p.extra_topk_length.data();
  }
  in.attn_sink = p.attn_sink.empty() ? nullptr : p.attn_sink.data();
  in.softmax_scale = p.softmax_scale;
  RefDecodeOutput out;
  out.out.assign(static_cast<std::size_t>(p.b) * static_cast<std::size_t>(p.s_q * p.h_q * kDim), 0.0f);
  out.lse.assign(static_cast<std::size_t>(p.b) * static_cast<std::size_t>(p.s_q * p.h_q), 0.0f);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  const std::int32_t per = (p.b + static_cast<std::int32_t>(threads) - 1) / static_cast<std::int32_t>(threads);
  for (std::int32_t begin = 0; begin < p.b; begin += per) {
    const std::int32_t end = std::min(p.b, begin + per);
    pool.emplace_back([&, begin, end] { reference_decode_range(in, begin, end, out.out.data(), out.lse.data()); });
  }
  for (auto& t : pool) t.join();
  return out;
}

namespace {

std::string schedule_difference(const VerifyProblem& p, const VerifyRun& run) {
  const auto& plan = p.host_plan;
  if (run.records.size() != plan.records.size() * 8) {
    return "the GPU scheduler wrote " + std::to_string(run.records.size() / 8) + " records, the host plan has " +
           std::to_string(plan.records.size());
  }
  for (std::size_t part = 0; part < plan.records.size(); ++part) {
    const auto& h = plan.records[part];
    for (std::size_t k = 0; k < 8; ++k) {
      if (run.records[part * 8 + k] != h[k]) {
        return "record " + std::to_string(part) + " field " + std::to_string(k) + ": GPU " +
               std::to_string(run.records[part * 8 + k]) + ", host " + std::to_string(h[k]);
      }
    }
  }
  if (run.num_splits != plan.num_splits) return "num_splits differ";
  return {};
}

std::int64_t first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  const auto n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<std::int64_t>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<std::int64_t>(n);
}

}  // namespace

std::string_view to_string(VerifyStatus s) {
  switch (s) {
    case VerifyStatus::pass: return "PASS";
    case VerifyStatus::fail: return "FAIL";
    case VerifyStatus::unsupported: return "UNSUPPORTED";
  }
  return "?";
}

std::vector<std::string> backend_kv_dtypes(Family family) {
  if (family == Family::deepseek_v41) return {"fp8_ds_mla", "nvfp4_ds_mla"};
  return {"fp8_ds_mla"};
}

BatchOptions default_verify_batch(std::int64_t max_model_len, std::int64_t spec_tokens) {
  // Short (inside the window), window edges, compressed-group edges and long requests.
  static const std::int64_t mix[] = {1,    2,    7,    63,   64,   65,    127,   128,   129,   130,   200,  255,  256,
                                     257,  300,  511,  512,  513,  777,   1000,  1023,  1024,  1025,  1500, 2048, 2049,
                                     3000, 4096, 5000, 8191, 8192, 10000, 16384, 20000, 32768, 50000, 65536};
  BatchOptions o;
  o.spec_tokens = spec_tokens;
  const std::int64_t longest = std::max<std::int64_t>(1, max_model_len - std::max<std::int64_t>(spec_tokens, 0));
  for (auto len : mix) o.context_lens.push_back(std::min(len, longest));
  return o;
}

void check_verify_size(const LayerTypeSchedule& s) {
  if (static_cast<std::int64_t>(s.input.lengths.size()) > VerifyLimits::max_decode_tokens) {
    throw_usage("verify: b = " + std::to_string(s.input.lengths.size()) + " decode tokens; allowed 1.." +
                std::to_string(VerifyLimits::max_decode_tokens));
  }
  check_cache_size("main", s.topk, s.input.lengths);
  if (s.input.has_extra) check_cache_size("extra", s.extra_topk, s.input.extra_lengths);
}

VerifyProblem build_verify_problem(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                   const LayerTypeSchedule& s, std::uint64_t seed, std::int32_t timing_iterations) {
  VerifyProblem p;
  std::mt19937_64 rng(seed);
  const Layer* layer = nullptr;
  for (const auto& l : topo.layers) {
    if (l.type == s.type && (!layer || (layer->draft && !l.draft))) layer = &l;
  }
  if (!layer) throw_internal("no layer of type " + std::string(to_string(s.type)));
  // Main cache: the window cache (V4/V4.1) or the latent cache (V3.2) of the layer.
  const CacheObject* main = s.type == LayerType::dsa ? find_object(layout, layer->index, CacheKind::compressed)
                                                     : find_object(layout, layer->index, CacheKind::swa);
  if (!main) throw_unsupported("the layout has no main cache for " + std::string(to_string(s.type)) + " layers");
  // The kernels take rows of 512 dims (V4, V4.1) or 576 (V3.2's 656-byte rows, main cache alone);
  // a compressed cache holds rows of the main cache's dims.
  const std::int64_t dqk = row_format(main->format).dims;
  if (dqk != 512 && dqk != 576) {
    throw_unsupported("no decode kernel for " + std::string(row_format(main->format).name) + " rows (" +
                      std::to_string(dqk) + " dims); the kernels take 512 or 576");
  }
  check_verify_size(s);
  p.b = static_cast<std::int32_t>(s.input.lengths.size());
  p.s_q = 1;
  p.h_q = s.input.h_q;
  p.d_qk = static_cast<std::int32_t>(dqk);
  p.main.format = main->format;
  p.main.page_block_size = static_cast<std::int32_t>(main->rows_per_page);
  p.main.page_stride = main->page_bytes;
  p.topk = static_cast<std::int32_t>(s.topk);
  p.topk_length = s.input.lengths;
  build_cache(rng, p.main, p.b, p.topk, p.topk_length, p.indices);
  if (s.input.has_extra) {
    const CacheObject* extra =
        layer->kv_source ? find_object(layout, *layer->kv_source, CacheKind::compressed) : nullptr;
    if (!extra) throw_unsupported("the layout has no compressed cache for layer " + std::to_string(layer->index));
    if (row_format(extra->format).dims != dqk) {
      throw_unsupported("the compressed cache's " + std::string(row_format(extra->format).name) + " rows hold " +
                        std::to_string(row_format(extra->format).dims) + " dims, the main cache's " +
                        std::to_string(dqk) + ": no decode kernel reads both");
    }
    p.has_extra = true;
    p.extra.format = extra->format;
    p.extra.page_block_size = static_cast<std::int32_t>(extra->rows_per_page);
    p.extra.page_stride = extra->page_bytes;
    p.extra_topk = static_cast<std::int32_t>(s.extra_topk);
    p.extra_topk_length = s.input.extra_lengths;
    build_cache(rng, p.extra, p.b, p.extra_topk, p.extra_topk_length, p.extra_indices);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.q.resize(static_cast<std::size_t>(p.b) * static_cast<std::size_t>(p.s_q * p.h_q) *
             static_cast<std::size_t>(p.d_qk));
  for (auto& x : p.q) x = float_to_bf16(std::clamp(normal(rng), -1.0f, 1.0f));
  std::uniform_real_distribution<float> sink(-2.0f, 4.0f);
  p.attn_sink.resize(static_cast<std::size_t>(p.h_q));
  for (auto& x : p.attn_sink) x = sink(rng);
  p.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.head_dim)));
  p.sched_input = s.input;
  p.host_plan = s.plan;
  p.timing_iterations = timing_iterations;
  p.mode = s.mode.mode;
  return p;
}

void judge_verify_run(const VerifyProblem& p, const VerifyRun& run, VerifyCell& cell) {
  judge_verify_run(p, run, verify_reference(p), cell);
}

void judge_verify_run(const VerifyProblem& p, const VerifyRun& run, const RefDecodeOutput& ref, VerifyCell& cell) {
  cell.ran = true;
  cell.decode_us = run.decode_us;
  cell.launch = run.launch;
  const auto d_main = first_difference(run.main_bytes, p.main.expected);
  const auto d_extra = p.has_extra ? first_difference(run.extra_bytes, p.extra.expected) : -1;
  cell.quantize_match = d_main < 0 && d_extra < 0;
  cell.quantize_first_diff = d_main >= 0 ? d_main : d_extra;
  cell.schedule_message = schedule_difference(p, run);
  cell.schedule_match = cell.schedule_message.empty();
  std::vector<float> out(run.out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(run.out[i]);
  if (out.size() != ref.out.size() || run.lse.size() != ref.lse.size()) {
    cell.decode.pass = false;
    cell.decode.message = "fail: the device returned " + std::to_string(out.size()) + " outputs, expected " +
                          std::to_string(ref.out.size());
  } else {
    cell.decode = compare_decode(out, ref.out, run.lse, ref.lse);
  }
  std::vector<std::string> problems;
  if (!cell.quantize_match) {
    problems.push_back("quantize: " + std::string(d_main >= 0 ? "main" : "extra") + " cache byte " +
                       std::to_string(cell.quantize_first_diff) + " differs from the host quantizer");
  }
  if (!cell.schedule_match) problems.push_back("scheduler: " + cell.schedule_message);
  if (!cell.decode.pass) problems.push_back("decode: " + cell.decode.message);
  cell.status = problems.empty() ? VerifyStatus::pass : VerifyStatus::fail;
  cell.reason.clear();
  for (const auto& x : problems) cell.reason += (cell.reason.empty() ? "" : "; ") + x;
}

const std::vector<std::string>& verify_decode_mode_values() {
  static const std::vector<std::string> v = {"planned", "all", "split_kv", "one_pass", "cluster_split"};
  return v;
}

std::vector<DecodeMode> parse_verify_decode_modes(std::string_view value) {
  const std::vector<DecodeMode> every = {DecodeMode::split_kv, DecodeMode::one_pass, DecodeMode::cluster_split};
  if (value == "planned") return {};
  if (value == "all") return every;
  for (auto m : every) {
    if (value == to_string(m)) return {m};
  }
  const auto& allowed = verify_decode_mode_values();
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw_usage("--decode-mode: " + mlaplan::quoted(value) + " is not allowed; allowed: " + list +
              did_you_mean_suffix(value, allowed));
}

void check_verify_options(const ModelConfig& cfg, const Topology& topo, const VerifyOptions& options) {
  if (options.timing_iterations < 1 || options.timing_iterations > VerifyLimits::max_iterations) {
    throw_usage("--iterations: '" + std::to_string(options.timing_iterations) + "' is out of range; allowed 1.." +
                std::to_string(VerifyLimits::max_iterations));
  }
  LayoutOptions lo = options.layout;
  lo.kv_cache_dtype = "auto";
  // The backends of the release the cells' plans model (make_plan's: the newest).
  lo.release = backend_release_rules(newest_vllm_release());
  check_layout_flags(cfg, topo, lo);
  for (const auto& dtype : options.kv_cache_dtypes) (void)canonical_kv_cache_dtype(dtype);
  // As run_verify() makes the batch of every cell: max_model_len as the layout resolves it.
  const std::int64_t mml = lo.max_model_len.value_or(cfg.max_position_embeddings);
  const DecodeBatch batch =
      make_decode_batch(verify_batch_options(options.batch, mml), mml,
                        lo.max_model_len ? MaxModelLenSource::flag : MaxModelLenSource::config_default);
  check_verify_batch(batch, options.batch);
}

VerifyReport run_verify(const ModelConfig& cfg, const Topology& topo, const Target& target, VerifyDevice& device,
                        const VerifyOptions& options) {
  check_verify_options(cfg, topo, options);
  VerifyReport report;
  report.target = target;
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  LayoutOptions base = options.layout;
  base.kv_cache_dtype = "auto";
  base.release = backend_release_rules(newest_vllm_release());  // as make_plan's, below
  report.rules = evaluate_rules(cfg, topo, target, RuleOptions{options.dtype, base});
  throw_first_usage_error(report.rules);
  // Rules that do not depend on the kv dtype make every cell unsupported.
  std::string config_reason;
  for (const auto& r : report.rules) {
    if (r.finding.severity == Severity::error && r.finding.id != "backend.kv_cache_dtype") {
      config_reason = r.finding.message;
      break;
    }
  }
  const auto dtypes = options.kv_cache_dtypes.empty() ? backend_kv_dtypes(cfg.family) : options.kv_cache_dtypes;
  std::uint64_t seed = options.seed;
  for (const auto& dtype : dtypes) {
    // The cell's plan is make_plan()'s, exactly as `mla-plan plan` makes it for these flags.
    PlanRequest req;
    req.resolved_target = target;
    req.layout = options.layout;
    req.layout.kv_cache_dtype = dtype;
    req.batch = verify_batch_options(options.batch, options.layout.max_model_len.value_or(cfg.max_position_embeddings));
    req.dtype = options.dtype;
    req.suggestions = false;
    req.deploy.read_checkpoint_files = false;  // the kernels' inputs do not depend on the weights
    std::optional<Plan> plan;
    std::string reason = config_reason;
    std::optional<Error> plan_error;
    try {
      plan = make_plan_on(cfg, topo, req);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::usage || e.kind() == ErrorKind::internal) throw;
      plan_error = e;
    }
    if (plan) {
      for (const auto& r : plan->rules) {
        if (reason.empty() && r.finding.severity == Severity::error) reason = r.finding.message;
      }
    }
    const bool forced = !reason.empty() && options.force;
    // One cell per (layer type, mode): the planner's mode (unknown without a plan), or each asked.
    const std::vector<std::optional<DecodeMode>> asked_modes = [&] {
      std::vector<std::optional<DecodeMode>> m;
      if (options.decode_modes.empty()) m.push_back(std::nullopt);
      for (auto x : options.decode_modes) m.push_back(x);
      return m;
    }();
    auto unsupported_cells = [&](const std::string& why) {
      for (auto t : topo.types_present) {
        for (const auto& m : asked_modes) {
          VerifyCell c;
          c.kv_cache_dtype = dtype;
          c.type = t;
          c.mode = m;
          c.status = VerifyStatus::unsupported;
          c.reason = why;
          report.cells.push_back(c);
        }
      }
    };
    if (!reason.empty() && !options.force) {
      unsupported_cells(reason);
      continue;
    }
    if (plan_error) {
      unsupported_cells(plan_error->what());
      continue;
    }
    const Layout& layout = *plan->layout;
    report.batch = plan->batch;
    check_verify_batch(report.batch, options.batch);
    // The project's kernels run every layout on FlashMLA's tile plans; where the backend is not
    // FlashMLA (FlashInfer plans its own work), the plan has none, and the cells get FlashMLA's
    // plans of this device for the same batch.
    std::vector<LayerTypeSchedule> own_schedules;
    if (plan->schedules.empty() && !backend_info(layout.backend).tile_plans) {
      own_schedules = plan_decode_schedules(cfg, topo, layout, plan->batch);
    }
    const std::vector<LayerTypeSchedule>& schedules = plan->schedules.empty() ? own_schedules : plan->schedules;
    if (schedules.empty()) {
      unsupported_cells("no sparse decode kernel of mla-plan's for " + target.cc.sm() + " with " +
                        std::to_string(layout.parallel.padded_query_heads) + " query heads" +
                        (small_head_count(layout.parallel.padded_query_heads)
                             ? " (mla-plan plans 8 or 16 unpadded heads on compute capability 9.x, where "
                               "TRITON_MLA_SPARSE_DSV41 runs them)"
                             : ""));
      continue;
    }
    for (const auto& s : schedules) {
      VerifyCell proto;
      proto.kv_cache_dtype = dtype;
      proto.type = s.type;
      proto.h_q = s.input.h_q;
      proto.forced = forced;
      proto.kernel = std::string(to_string(s.plan.kernel));
      proto.b = static_cast<std::int32_t>(s.input.lengths.size());
      proto.topk = static_cast<std::int32_t>(s.topk);
      proto.extra_topk = static_cast<std::int32_t>(s.extra_topk);
      proto.planned_mode = s.mode.mode;
      proto.planned_reason = s.mode.reason;
      // The cells of this layer type, one per mode: the same problem (same seed), each mode run on it.
      std::vector<VerifyCell> cells;
      for (const auto& m : asked_modes) {
        cells.push_back(proto);
        cells.back().mode = m.value_or(s.mode.mode);
      }
      auto all_unsupported = [&](const std::string& why) {
        for (auto& c : cells) {
          c.status = VerifyStatus::unsupported;
          c.reason = why;
          report.cells.push_back(c);
        }
      };
      VerifyProblem problem;
      try {
        problem = build_verify_problem(cfg, topo, layout, s, seed++, options.timing_iterations);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::internal) throw;
        all_unsupported(e.what());
        continue;
      }
      for (auto& c : cells) {
        c.main_format = std::string(row_format(problem.main.format).name);
        c.main_page = problem.main.page_block_size;
        c.main_stride = problem.main.page_stride;
        if (problem.has_extra) {
          c.extra_format = std::string(row_format(problem.extra.format).name);
          c.extra_page = problem.extra.page_block_size;
          c.extra_stride = problem.extra.page_stride;
        }
      }
      std::optional<RefDecodeOutput> reference;  // one per problem, whatever the modes
      std::optional<EngineCellResult> engine;    // --engine-kernels: one run per problem
      for (auto& c : cells) {
        problem.mode = *c.mode;
        if (auto why = device.unsupported_reason(problem); !why.empty()) {
          c.status = VerifyStatus::unsupported;
          c.reason = why;
          report.cells.push_back(c);
          continue;
        }
        say("verify: " + dtype + " " + std::string(to_string(s.type)) + " h_q " + std::to_string(c.h_q) + ", b " +
            std::to_string(c.b) + ", " + std::string(to_string(problem.mode)) + ": " + c.main_format + " page " +
            std::to_string(c.main_page) +
            (problem.has_extra ? " + " + c.extra_format + " page " + std::to_string(c.extra_page) : "") + " ...");
        try {
          const VerifyRun run = device.run(problem);
          if (!reference) reference = verify_reference(problem);
          judge_verify_run(problem, run, *reference, c);
          if (options.engine && !engine) {
            say("verify:   the engine's kernels on the same bytes (" + options.engine->python + ") ...");
            engine = run_engine_cell(problem, run, c, *reference, target, *options.engine);
          }
        } catch (const Error& e) {
          if (e.kind() == ErrorKind::usage || e.kind() == ErrorKind::internal) throw;
          c.status = VerifyStatus::fail;
          c.reason = std::string("device fault: ") + e.what();
        }
        if (c.ran && engine) c.engine = engine;
        std::string ran;
        if (c.launch.reported) {
          ran = " (" + (c.launch.description.empty() ? std::string(to_string(c.launch.mode)) : c.launch.description) +
                (c.launch.fallback.empty() ? "" : "; " + c.launch.fallback) + ")";
        }
        say("verify:   " + std::string(to_string(c.status)) + ran + (c.reason.empty() ? "" : ": " + c.reason));
        if (c.engine) {
          const auto& e = *c.engine;
          say("verify:   engine: " + std::string(to_string(e.status)) + (e.op.empty() ? "" : " (" + e.op + ")") +
              (e.graph_us ? ", " + format_fixed(*e.graph_us, 1) + " us" : "") +
              (e.message.empty() ? "" : ": " + e.message));
        }
        report.cells.push_back(c);
      }
    }
  }

  const bool any_fail = std::any_of(report.cells.begin(), report.cells.end(),
                                    [](const VerifyCell& c) { return c.status == VerifyStatus::fail; });
  const bool any_pass = std::any_of(report.cells.begin(), report.cells.end(),
                                    [](const VerifyCell& c) { return c.status == VerifyStatus::pass; });
  if (any_fail) {
    report.exit_code = exit_code(ErrorKind::verify_failed);
    for (const auto& c : report.cells) {
      if (c.status == VerifyStatus::fail) {
        report.exit_message = "verification failed: " + c.kv_cache_dtype + " " + std::string(to_string(c.type)) +
                              (c.mode ? " " + std::string(to_string(*c.mode)) : std::string()) + ": " + c.reason;
        break;
      }
    }
  } else if (!any_pass) {
    report.exit_code = exit_code(ErrorKind::unsupported);
    report.exit_message = "nothing of this config can run on " + target.name + " with this build: " +
                          (report.cells.empty() ? std::string("no layer types") : report.cells.front().reason);
  }
  // --engine-kernels: the engine's results weigh in as docs/cli.md says (engine_exit_code()).
  for (const auto& c : report.cells) {
    if (!c.engine) continue;
    const int code = engine_exit_code(c.engine->status);
    if (combine_exit_codes(report.exit_code, code) != report.exit_code) {
      report.exit_code = code;
      report.exit_message = "the engine's kernels: " + c.kv_cache_dtype + " " + std::string(to_string(c.type)) + ": " +
                            std::string(to_string(c.engine->status)) + ": " + c.engine->message;
    }
  }
  return report;
}

std::string VerifyRank::text() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " (TP rank " + std::to_string(tp_rank) +
         ", DP rank " + std::to_string(dp_rank) + ")";
}

std::int64_t verify_rank_count(const VerifyOptions& options) {
  const std::int64_t tp = options.layout.tensor_parallel_size, dp = options.layout.data_parallel_size;
  if (tp < 1 || dp < 1) {
    throw_usage("verify: --tensor-parallel-size and --data-parallel-size must be >= 1 (got " + std::to_string(tp) +
                " and " + std::to_string(dp) + ")");
  }
  return checked_mul(tp, dp, "TP x DP ranks", ErrorKind::usage);
}

VerifyRank verify_rank(const VerifyOptions& options, std::int64_t rank) {
  VerifyRank r;
  r.ranks = verify_rank_count(options);
  if (rank < 0 || rank >= r.ranks) {
    throw_usage("verify: rank " + std::to_string(rank) + " is outside the layout's ranks 0.." +
                std::to_string(r.ranks - 1) + " (TP " + std::to_string(options.layout.tensor_parallel_size) + " x DP " +
                std::to_string(options.layout.data_parallel_size) + ")");
  }
  r.rank = rank;
  r.tp_rank = rank % options.layout.tensor_parallel_size;
  r.dp_rank = rank / options.layout.tensor_parallel_size;
  return r;
}

VerifyOptions verify_rank_options(const ModelConfig& cfg, const VerifyOptions& options, std::int64_t rank) {
  const VerifyRank r = verify_rank(options, rank);
  const std::int64_t dp = options.layout.data_parallel_size;
  const std::int64_t mml = options.layout.max_model_len.value_or(cfg.max_position_embeddings);
  const DecodeBatch whole =
      make_decode_batch(verify_batch_options(options.batch, mml), mml,
                        options.layout.max_model_len ? MaxModelLenSource::flag : MaxModelLenSource::config_default);
  const auto n = static_cast<std::int64_t>(whole.context_lens.size());
  if (n < dp) {
    throw_usage("verify: --data-parallel-size " + std::to_string(dp) + " needs at least " + std::to_string(dp) +
                " requests, one per DP rank (the batch has " + std::to_string(n) + ")");
  }
  VerifyOptions o = options;
  o.batch = BatchOptions{};
  o.batch.spec_tokens = options.batch.spec_tokens;
  for (std::int64_t i = r.dp_rank; i < n; i += dp) o.batch.context_lens.push_back(whole.context_lens[i]);
  // Rank 0 keeps the seed; the others draw their own inputs.
  o.seed = options.seed ^ (static_cast<std::uint64_t>(rank) * 0x9E3779B97F4A7C15ull);
  return o;
}

namespace {

/// Opens `device` and runs verify on it with `options` (the rank's, for a rank) into `r`: its
/// report, exit code and message. What opening it or run_verify() throws escapes.
void verify_on(const ModelConfig& cfg, const Topology& topo, const VerifyDeviceEntry& device,
               const VerifyOptions& options, VerifyDeviceReport& r) {
  if (!device.open) throw_internal("verify: " + r.label + " has no way to open it");
  std::unique_ptr<VerifyDevice> opened = device.open();
  if (!opened) throw_internal("verify: " + r.label + " opened as nothing");
  VerifyOptions o = options;
  if (o.engine) o.engine->device_index = device.index;  // the probe runs on the device's GPU
  r.report = run_verify(cfg, topo, device.target, *opened, o);
  r.exit_code = r.report.exit_code;
  r.exit_message = r.report.exit_message;
}

}  // namespace

VerifyMultiReport run_verify_device(const ModelConfig& cfg, const Topology& topo, const VerifyDeviceEntry& device,
                                    const VerifyOptions& options) {
  VerifyDeviceReport d;
  d.index = device.index;
  d.name = device.name;
  d.label = device.label.empty() ? "device " + std::to_string(device.index) : device.label;
  const auto t0 = std::chrono::steady_clock::now();
  if (device.rank) {
    d.rank = verify_rank(options, *device.rank);
    verify_on(cfg, topo, device, verify_rank_options(cfg, options, *device.rank), d);
  } else {
    verify_on(cfg, topo, device, options, d);
  }
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  VerifyMultiReport multi;
  multi.exit_code = d.exit_code;
  multi.exit_message = d.exit_message;
  multi.devices.push_back(std::move(d));
  return multi;
}

VerifyMultiReport run_verify_devices(const ModelConfig& cfg, const Topology& topo,
                                     const std::vector<VerifyDeviceEntry>& devices, const VerifyOptions& options) {
  // Whatever does not depend on a device fails here, once, on this thread.
  check_verify_options(cfg, topo, options);
  VerifyMultiReport multi;
  multi.devices.resize(devices.size());
  // Each thread gets its own options (a copy made here, before any thread runs) whose progress
  // goes through one mutex, so that lines are whole and one at a time. The threads share only
  // cfg, topo and `devices`, which they read, and each writes its own slot of multi.devices.
  std::mutex progress_mutex;
  std::vector<VerifyOptions> per_device(devices.size(), options);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string label =
        devices[i].label.empty() ? "device " + std::to_string(devices[i].index) : devices[i].label;
    multi.devices[i].index = devices[i].index;
    multi.devices[i].name = devices[i].name;
    multi.devices[i].label = label;
    if (devices[i].rank) {
      // A bad rank or too small a batch fails here, on this thread, before any device runs.
      multi.devices[i].rank = verify_rank(options, *devices[i].rank);
      per_device[i] = verify_rank_options(cfg, options, *devices[i].rank);
      check_verify_options(cfg, topo, per_device[i]);
    }
    if (options.progress) {
      per_device[i].progress = [&progress_mutex, &progress = options.progress, label](const std::string& line) {
        const std::lock_guard<std::mutex> lock(progress_mutex);
        progress(label + ": " + line);
      };
    }
  }
  auto run_one = [&](std::size_t i) {
    VerifyDeviceReport& r = multi.devices[i];
    const auto t0 = std::chrono::steady_clock::now();
    auto fail = [&](int code, const std::string& what) {
      r.report = VerifyReport{};
      r.report.target = devices[i].target;
      r.error = what;
      r.exit_code = code;
      r.exit_message = what;
    };
    try {
      verify_on(cfg, topo, devices[i], per_device[i], r);
    } catch (const Error& e) {
      fail(exit_code(e.kind()), e.what());
    } catch (const std::exception& e) {
      fail(exit_code(ErrorKind::internal), std::string("internal error: ") + e.what());
    } catch (...) {
      fail(exit_code(ErrorKind::internal), "internal error: an unknown exception");
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<std::thread> threads;
  threads.reserve(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) threads.emplace_back(run_one, i);
  for (auto& t : threads) t.join();
  for (const auto& d : multi.devices) {
    const int worst = combine_exit_codes(multi.exit_code, d.exit_code);
    if (worst != multi.exit_code) {
      multi.exit_code = worst;
      multi.exit_message = d.label + ": " + d.exit_message;
    }
  }
  return multi;
}

namespace {

class HostVerifyDevice final : public VerifyDevice {
 public:
  HostVerifyDevice(std::function<void(VerifyRun&)> perturb, bool cluster_kernel)
      : perturb_(std::move(perturb)), cluster_kernel_(cluster_kernel) {}

  std::string unsupported_reason(const VerifyProblem& p) const override {
    const auto ok = [](RowFormatId f) {
      return f == RowFormatId::fp8_ds_mla_v4 || f == RowFormatId::v41_fp8 || f == RowFormatId::v41_fp4 ||
             f == RowFormatId::fp8_ds_mla_v32 || f == RowFormatId::bf16 || f == RowFormatId::fp8_per_tensor;
    };
    if (!ok(p.main.format) || (p.has_extra && !ok(p.extra.format))) {
      return "no decode kernel for " + std::string(row_format(p.main.format).name) +
             (p.has_extra ? " + " + std::string(row_format(p.extra.format).name) : "");
    }
    // The small-head kernel's formats (kernels/src/small): fp8_ds_mla 584 alone or + 584, 656 alone.
    const bool small_ok = (p.main.format == RowFormatId::fp8_ds_mla_v4 &&
                           (!p.has_extra || p.extra.format == RowFormatId::fp8_ds_mla_v4)) ||
                          (p.main.format == RowFormatId::fp8_ds_mla_v32 && !p.has_extra);
    if (small_head_count(p.h_q) && !small_ok) {
      return "no small-head decode kernel (h_q " + std::to_string(p.h_q) + " unpadded) for " +
             std::string(row_format(p.main.format).name) +
             (p.has_extra ? " + " + std::string(row_format(p.extra.format).name) : "");
    }
    return {};
  }

  VerifyRun run(const VerifyProblem& p) override {
    VerifyRun r;
    auto quantize = [](const VerifyCache& c) {
      std::vector<std::uint8_t> bytes(c.expected.size(), 0xFF);
      quantize_into_pages(c.format, c.latents.data(), static_cast<std::int64_t>(c.slots.size()), c.slots.data(),
                          bytes.data(), c.num_pages, c.page_block_size, c.page_stride);
      return bytes;
    };
    r.main_bytes = quantize(p.main);
    if (p.has_extra) r.extra_bytes = quantize(p.extra);
    const auto plan = plan_schedule(p.sched_input);
    for (const auto& rec : plan.records) r.records.insert(r.records.end(), rec.begin(), rec.end());
    r.num_splits = plan.num_splits;
    const auto ref = verify_reference(p);
    r.out.resize(ref.out.size());
    for (std::size_t i = 0; i < ref.out.size(); ++i) r.out[i] = float_to_bf16(ref.out[i]);
    r.lse = ref.lse;
    r.decode_us = 0;
    r.launch = launch_of(p);
    if (perturb_) perturb_(r);
    return r;
  }

 private:
  /// The launch the kernels' rule would give on a device with every cluster resident: the grid of
  /// the mode; cluster_split with cluster_split_ctas() CTAs per request (one_pass with one). A CTA
  /// covers 64 heads, or all 8 / 16 of the small-head kernel, which has no cluster form.
  VerifyLaunch launch_of(const VerifyProblem& p) const {
    VerifyLaunch L;
    L.reported = true;
    L.kernel = "host";
    L.mode = p.mode;
    const bool small_heads = small_head_count(p.h_q);
    const std::int64_t head_slices = small_heads ? 1 : p.h_q / 64;
    const auto per_request = static_cast<std::int64_t>(p.s_q) * head_slices;
    L.grid_x = static_cast<std::uint32_t>(p.mode == DecodeMode::split_kv ? p.host_plan.params.num_sm_parts : p.b);
    L.grid_y = static_cast<std::uint32_t>(p.s_q);
    L.grid_z = static_cast<std::uint32_t>(head_slices);
    L.block = 128;
    if (p.mode == DecodeMode::cluster_split) {
      if (small_heads) {
        L.mode = DecodeMode::one_pass;
        L.fallback = "cluster_split has no small-head kernel; ran one_pass";
      } else if (!cluster_kernel_) {
        L.mode = DecodeMode::one_pass;
        L.fallback = "cluster_split needs a cluster kernel, which this device has none of; ran one_pass";
      } else {
        const std::int64_t c = cluster_split_ctas(static_cast<std::int64_t>(p.b) * per_request,
                                                  decode_request_blocks(p.topk, p.has_extra, p.extra_topk),
                                                  std::max<std::int64_t>(p.sched_input.num_sms, 1));
        if (c > 1) {
          L.grid_x = static_cast<std::uint32_t>(p.b * c);
          L.cluster_x = static_cast<std::uint32_t>(c);
        } else {
          L.mode = DecodeMode::one_pass;
        }
      }
    }
    L.combine = L.mode == DecodeMode::split_kv;
    L.description = L.kernel + " " + std::string(to_string(L.mode)) + ", grid " + std::to_string(L.grid_x) + "x" +
                    std::to_string(L.grid_y) + "x" + std::to_string(L.grid_z) +
                    (L.cluster_x > 1 ? ", cluster " + std::to_string(L.cluster_x) + " CTAs per request" : "") +
                    (L.combine ? ", combine" : "");
    return L;
  }

  std::function<void(VerifyRun&)> perturb_;
  bool cluster_kernel_ = true;
};

}  // namespace

std::unique_ptr<VerifyDevice> make_host_verify_device(std::function<void(VerifyRun&)> perturb, bool cluster_kernel) {
  return std::make_unique<HostVerifyDevice>(std::move(perturb), cluster_kernel);
}

}  // namespace mlaplan
