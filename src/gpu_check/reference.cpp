#include "mlaplan/gpu_check/reference.hpp"

#include "mlaplan/base/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <locale>
#include <sstream>
#include <string>
#include <vector>

namespace mlaplan {

namespace {

constexpr int kD = kRefHeadDim;

void check_rows(const RefRows& rows, const char* which) {
  if (rows.dense == nullptr && !rows.fetch) {
    throw_usage(std::string("reference: the ") + which + " cache has neither dense rows nor a fetch function");
  }
  if (rows.num_rows < 0) throw_usage(std::string("reference: the ") + which + " cache has a negative row count");
}

void check_input(const RefDecodeInput& in) {
  if (in.b < 0 || in.s_q < 1 || in.h_q < 1) {
    throw_usage("reference: b must be >= 0, s_q and h_q >= 1 (got b " + std::to_string(in.b) + ", s_q " +
                std::to_string(in.s_q) + ", h_q " + std::to_string(in.h_q) + ")");
  }
  if (in.d_qk != 512 && in.d_qk != 576) {
    throw_usage("reference: d_qk must be 512 or 576 (got " + std::to_string(in.d_qk) + ")");
  }
  if (in.b == 0) return;
  if (in.q == nullptr) throw_usage("reference: q is null");
  if (in.topk < 0 || in.extra_topk < 0) throw_usage("reference: topk and extra_topk must be >= 0");
  if (in.topk > 0) {
    check_rows(in.main, "main");
    if (in.indices == nullptr) throw_usage("reference: indices is null while topk > 0");
  }
  if (in.has_extra && in.extra_topk > 0) {
    check_rows(in.extra, "extra");
    if (in.extra_indices == nullptr) throw_usage("reference: extra_indices is null while extra_topk > 0");
  }
}

// Appends the valid rows of one (request, query) of one cache to `keys` (dqk floats each).
void gather(const RefRows& rows, const std::int32_t* idx, std::int32_t width, std::int32_t length, int dqk,
            std::vector<double>& keys, std::vector<float>& scratch) {
  const std::int32_t n = std::min(width, std::max(length, 0));
  for (std::int32_t t = 0; t < n; ++t) {
    const std::int64_t id = idx[t];
    if (id < 0) continue;
    if (rows.num_rows > 0 && id >= rows.num_rows) continue;
    const float* src = nullptr;
    if (rows.dense != nullptr) {
      src = rows.dense + id * dqk;
    } else {
      rows.fetch(id, scratch.data());
      src = scratch.data();
    }
    keys.insert(keys.end(), src, src + dqk);
  }
}

}  // namespace

void reference_decode_range(const RefDecodeInput& in, std::int32_t b_begin, std::int32_t b_end, float* out,
                            float* lse) {
  check_input(in);
  if (b_begin < 0 || b_end > in.b || b_begin > b_end) {
    throw_usage("reference: request range [" + std::to_string(b_begin) + ", " + std::to_string(b_end) +
                ") is outside [0, " + std::to_string(in.b) + ")");
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> keys;
  const int dqk = in.d_qk;
  std::vector<float> scratch(static_cast<std::size_t>(dqk));
  std::vector<double> scores;
  std::vector<double> acc(kD);
  for (std::int32_t bi = b_begin; bi < b_end; ++bi) {
    const std::int32_t len = in.topk_length != nullptr ? in.topk_length[bi] : in.topk;
    const std::int32_t elen =
        in.has_extra ? (in.extra_topk_length != nullptr ? in.extra_topk_length[bi] : in.extra_topk) : 0;
    for (std::int32_t s = 0; s < in.s_q; ++s) {
      const std::int64_t bs = static_cast<std::int64_t>(bi) * in.s_q + s;
      keys.clear();
      if (in.topk > 0) gather(in.main, in.indices + bs * in.topk, in.topk, len, dqk, keys, scratch);
      if (in.has_extra && in.extra_topk > 0) {
        gather(in.extra, in.extra_indices + bs * in.extra_topk, in.extra_topk, elen, dqk, keys, scratch);
      }
      const std::size_t nk = keys.size() / static_cast<std::size_t>(dqk);
      scores.resize(nk);
      for (std::int32_t h = 0; h < in.h_q; ++h) {
        const std::int64_t row = bs * in.h_q + h;
        const float* qh = in.q + row * dqk;
        float* oh = out + row * kD;
        if (nk == 0) {
          std::fill(oh, oh + kD, 0.0f);
          lse[row] = static_cast<float>(inf);
          continue;
        }
        double mx = -inf;
        for (std::size_t k = 0; k < nk; ++k) {
          const double* kr = keys.data() + k * static_cast<std::size_t>(dqk);
          double dot = 0;
          for (int d = 0; d < dqk; ++d) dot += static_cast<double>(qh[d]) * kr[d];
          scores[k] = dot * in.softmax_scale;
          mx = std::max(mx, scores[k]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::size_t k = 0; k < nk; ++k) {
          const double p = std::exp(scores[k] - mx);
          sum += p;
          const double* kr = keys.data() + k * static_cast<std::size_t>(dqk);  // V: its first kD values
          for (int d = 0; d < kD; ++d) acc[d] += p * kr[d];
        }
        const double l = std::log(sum) + mx;
        double factor = 1.0 / sum;
        if (in.attn_sink != nullptr) {
          // out * exp(lse) / (exp(lse) + exp(sink)) = out / (1 + exp(sink - lse)): +inf -> 0, -inf -> 1.
          factor /= 1.0 + std::exp(static_cast<double>(in.attn_sink[h]) - l);
        }
        for (int d = 0; d < kD; ++d) oh[d] = static_cast<float>(acc[d] * factor);
        lse[row] = static_cast<float>(l);
      }
    }
  }
}

RefDecodeOutput reference_decode(const RefDecodeInput& in) {
  check_input(in);
  RefDecodeOutput r;
  const std::int64_t rows = checked_mul(checked_mul(in.b, in.s_q, "reference rows", ErrorKind::usage), in.h_q,
                                        "reference rows", ErrorKind::usage);
  r.out.assign(static_cast<std::size_t>(checked_mul(rows, kD, "reference output", ErrorKind::usage)), 0.0f);
  r.lse.assign(static_cast<std::size_t>(rows), 0.0f);
  reference_decode_range(in, 0, in.b, r.out.data(), r.lse.data());
  return r;
}

namespace {

// Classifies a value for the "inf/NaN positions equal" rule: 0 finite, 1 NaN, 2 +inf, 3 -inf.
int anomaly(double v) {
  if (std::isnan(v)) return 1;
  if (std::isinf(v)) return v > 0 ? 2 : 3;
  return 0;
}

}  // namespace

DecodeComparison compare_decode(std::span<const float> out, std::span<const float> ref_out, std::span<const float> lse,
                                std::span<const float> ref_lse, const DecodeTolerance& tol) {
  if (out.size() != ref_out.size() || lse.size() != ref_lse.size()) {
    throw_usage("compare_decode: sizes differ (out " + std::to_string(out.size()) + " vs " +
                std::to_string(ref_out.size()) + ", lse " + std::to_string(lse.size()) + " vs " +
                std::to_string(ref_lse.size()) + ")");
  }
  DecodeComparison c;
  std::int64_t first_bad_out = -1;
  std::int64_t first_bad_lse = -1;
  double sum_ab = 0;
  double sum_sq = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double a = out[i];
    const double r = ref_out[i];
    const int ka = anomaly(a);
    const int kr = anomaly(r);
    if (ka != 0 || kr != 0) {
      if (ka != kr) {
        ++c.bad_out;
        if (first_bad_out < 0) first_bad_out = static_cast<std::int64_t>(i);
      }
      continue;
    }
    const double diff = std::fabs(a - r);
    c.max_abs = std::max(c.max_abs, diff);
    if (diff > tol.abs) c.max_rel = std::max(c.max_rel, diff / std::fabs(r));  // r == 0 gives +inf
    if (!(diff <= tol.abs || diff <= tol.rel * std::fabs(r))) {
      ++c.bad_out;
      if (first_bad_out < 0) first_bad_out = static_cast<std::int64_t>(i);
    }
    sum_ab += a * r;
    sum_sq += a * a + r * r;
  }
  c.cos_diff = sum_sq > 0 ? 1.0 - 2.0 * sum_ab / sum_sq : 0.0;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    const double a = lse[i];
    const double r = ref_lse[i];
    const int ka = anomaly(a);
    const int kr = anomaly(r);
    bool bad = false;
    if (ka != 0 || kr != 0) {
      bad = ka != kr;
    } else {
      const double diff = std::fabs(a - r);
      c.lse_max_abs = std::max(c.lse_max_abs, diff);
      bad = !(diff <= tol.lse_abs || diff <= tol.lse_rel * std::fabs(r));
    }
    if (bad) {
      ++c.bad_lse;
      if (first_bad_lse < 0) first_bad_lse = static_cast<std::int64_t>(i);
    }
  }
  c.pass = c.bad_out == 0 && c.bad_lse == 0 && c.cos_diff <= tol.cos_diff;
  std::ostringstream m;
  m.imbue(std::locale::classic());  // no digit grouping from the global locale
  m.precision(3);
  m << (c.pass ? "pass" : "fail") << ": max_abs " << c.max_abs << ", max_rel " << c.max_rel << ", cos_diff "
    << c.cos_diff << ", lse_max_abs " << c.lse_max_abs;
  if (c.bad_out > 0) {
    const auto i = static_cast<std::size_t>(first_bad_out);
    m << "; " << c.bad_out << " output elements out of tolerance, first at " << i << " (got " << out[i] << ", want "
      << ref_out[i] << ")";
  }
  if (c.bad_lse > 0) {
    const auto i = static_cast<std::size_t>(first_bad_lse);
    m << "; " << c.bad_lse << " lse values out of tolerance, first at " << i << " (got " << lse[i] << ", want "
      << ref_lse[i] << ")";
  }
  if (c.cos_diff > tol.cos_diff) m << "; cos_diff above " << tol.cos_diff;
  c.message = m.str();
  return c;
}

}  // namespace mlaplan
