// Unit tests of the host sparse-decode reference and of the pass criterion (src/gpu_check/reference.cpp).
// Every case is small enough to check by hand.
#include <catch2/catch.hpp>

#include "mlaplan/base/error.hpp"
#include "mlaplan/gpu_check/reference.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using mlaplan::compare_decode;
using mlaplan::RefDecodeInput;
using mlaplan::reference_decode;

namespace {

constexpr int D = 512;
const double kInf = std::numeric_limits<double>::infinity();

// A cache of `n` rows where row r has value (r + 1) * 0.01 * (d % 7 - 3) in dim d.
std::vector<float> make_rows(int n) {
  std::vector<float> rows(static_cast<std::size_t>(n) * D);
  for (int r = 0; r < n; ++r) {
    for (int d = 0; d < D; ++d)
      rows[static_cast<std::size_t>(r) * D + d] = static_cast<float>((r + 1) * 0.01 * (d % 7 - 3));
  }
  return rows;
}

// One request, one query, one head; q is all `qv`.
RefDecodeInput one_head(const std::vector<float>& q, const std::vector<float>& rows,
                        const std::vector<std::int32_t>& idx) {
  RefDecodeInput in;
  in.b = 1;
  in.s_q = 1;
  in.h_q = 1;
  in.q = q.data();
  in.main.dense = rows.data();
  in.main.num_rows = static_cast<std::int64_t>(rows.size() / D);
  in.indices = idx.data();
  in.topk = static_cast<std::int32_t>(idx.size());
  return in;
}

double dot_scaled(const std::vector<float>& q, const std::vector<float>& rows, int r, double scale) {
  double s = 0;
  for (int d = 0; d < D; ++d)
    s += static_cast<double>(q[static_cast<std::size_t>(d)]) * rows[static_cast<std::size_t>(r) * D + d];
  return s * scale;
}

}  // namespace

TEST_CASE("one valid key: out is its row, lse is its scaled score", "[reference]") {
  const auto rows = make_rows(4);
  std::vector<float> q(D, 0.5f);
  const std::vector<std::int32_t> idx = {2};
  const auto in = one_head(q, rows, idx);
  const auto r = reference_decode(in);
  for (int d = 0; d < D; ++d) REQUIRE(r.out[static_cast<std::size_t>(d)] == Approx(rows[2 * D + d]).margin(1e-7));
  REQUIRE(r.lse[0] == Approx(dot_scaled(q, rows, 2, in.softmax_scale)).epsilon(1e-6));
}

TEST_CASE("two keys with equal scores give the mean of their rows and lse = s + ln 2", "[reference]") {
  // q orthogonal to every row: all scores 0 -> p = 1/2 each, lse = ln 2.
  auto rows = make_rows(3);
  std::vector<float> q(D, 0.0f);
  const std::vector<std::int32_t> idx = {0, 2};
  const auto r = reference_decode(one_head(q, rows, idx));
  for (int d = 0; d < D; ++d) {
    const double mean = 0.5 * (rows[static_cast<std::size_t>(d)] + rows[2 * D + d]);
    REQUIRE(r.out[static_cast<std::size_t>(d)] == Approx(mean).margin(1e-7));
  }
  REQUIRE(r.lse[0] == Approx(std::log(2.0)).epsilon(1e-7));
}

TEST_CASE("softmax weights follow the scores", "[reference]") {
  // Two keys whose scaled scores differ by ln 3: weights 3/4 and 1/4.
  std::vector<float> rows(2 * D, 0.0f);
  rows[0] = 1.0f;      // row 0: e0
  rows[D + 1] = 1.0f;  // row 1: e1
  std::vector<float> q(D, 0.0f);
  const std::vector<std::int32_t> idx = {0, 1};
  RefDecodeInput in = one_head(q, rows, idx);
  in.softmax_scale = 1.0;
  q[0] = static_cast<float>(std::log(3.0));
  const auto r = reference_decode(in);
  REQUIRE(r.out[0] == Approx(0.75).epsilon(1e-6));
  REQUIRE(r.out[1] == Approx(0.25).epsilon(1e-6));
  REQUIRE(r.lse[0] == Approx(std::log(4.0)).epsilon(1e-6));  // log(e^ln3 + e^0)
}

TEST_CASE("attention sink scales the output and leaves lse alone", "[reference]") {
  const auto rows = make_rows(3);
  std::vector<float> q(D, 0.0f);  // scores 0, two keys: lse = ln 2
  const std::vector<std::int32_t> idx = {0, 1};
  auto in = one_head(q, rows, idx);
  const auto plain = reference_decode(in);

  SECTION("finite sink: factor exp(lse) / (exp(lse) + exp(sink)) = 2 / (2 + e)") {
    const float sink = 1.0f;
    in.attn_sink = &sink;
    const auto r = reference_decode(in);
    const double f = 2.0 / (2.0 + std::exp(1.0));
    for (int d = 0; d < D; ++d)
      REQUIRE(r.out[static_cast<std::size_t>(d)] == Approx(plain.out[static_cast<std::size_t>(d)] * f).margin(1e-7));
    REQUIRE(r.lse[0] == plain.lse[0]);
  }
  SECTION("sink +inf gives 0") {
    const float sink = static_cast<float>(kInf);
    in.attn_sink = &sink;
    const auto r = reference_decode(in);
    for (int d = 0; d < D; ++d) REQUIRE(r.out[static_cast<std::size_t>(d)] == 0.0f);
    REQUIRE(r.lse[0] == plain.lse[0]);
  }
  SECTION("sink -inf has no effect") {
    const float sink = static_cast<float>(-kInf);
    in.attn_sink = &sink;
    const auto r = reference_decode(in);
    REQUIRE(r.out == plain.out);
    REQUIRE(r.lse == plain.lse);
  }
}

TEST_CASE("invalid (-1) entries and positions past the length are skipped", "[reference]") {
  const auto rows = make_rows(4);
  std::vector<float> q(D, 0.25f);
  const std::vector<std::int32_t> only = {3};
  const auto want = reference_decode(one_head(q, rows, only));

  const std::vector<std::int32_t> idx = {-1, 3, -1, 0, 1};  // length 3: positions 3 and 4 skipped
  auto in = one_head(q, rows, idx);
  const std::int32_t len = 3;
  in.topk_length = &len;
  const auto got = reference_decode(in);
  REQUIRE(got.out == want.out);
  REQUIRE(got.lse == want.lse);
}

TEST_CASE("main and extra rows form one softmax", "[reference]") {
  const auto rows = make_rows(4);
  const auto extra_rows = make_rows(6);
  std::vector<float> q(D, 0.0f);  // equal scores: the mean of all attended rows
  const std::vector<std::int32_t> idx = {1};
  const std::vector<std::int32_t> eidx = {5, -1, 0};
  auto in = one_head(q, rows, idx);
  in.has_extra = true;
  in.extra.fetch = [&](std::int64_t r, float* o) {
    for (int d = 0; d < D; ++d) o[d] = extra_rows[static_cast<std::size_t>(r) * D + d];
  };
  in.extra_indices = eidx.data();
  in.extra_topk = 3;
  const auto r = reference_decode(in);
  for (int d = 0; d < D; ++d) {
    const double mean = (rows[D + d] + extra_rows[5 * D + d] + extra_rows[static_cast<std::size_t>(d)]) / 3.0;
    REQUIRE(r.out[static_cast<std::size_t>(d)] == Approx(mean).margin(1e-7));
  }
  REQUIRE(r.lse[0] == Approx(std::log(3.0)).epsilon(1e-7));
}

TEST_CASE("no valid key: out 0 and lse +inf, with or without a sink", "[reference]") {
  const auto rows = make_rows(2);
  std::vector<float> q(D, 1.0f);
  const std::vector<std::int32_t> idx = {-1, -1, 1};
  auto in = one_head(q, rows, idx);
  const std::int32_t len = 2;  // the only valid id sits past the length
  in.topk_length = &len;
  const float sink = 0.5f;
  SECTION("no sink") {}
  SECTION("finite sink") { in.attn_sink = &sink; }
  const auto r = reference_decode(in);
  for (int d = 0; d < D; ++d) REQUIRE(r.out[static_cast<std::size_t>(d)] == 0.0f);
  REQUIRE(std::isinf(r.lse[0]));
  REQUIRE(r.lse[0] > 0);
}

TEST_CASE("batch, queries and heads are laid out [b, s_q, h_q, 512]", "[reference]") {
  const auto rows = make_rows(5);
  RefDecodeInput in;
  in.b = 2;
  in.s_q = 2;
  in.h_q = 2;
  std::vector<float> q(static_cast<std::size_t>(2 * 2 * 2 * D), 0.0f);
  in.q = q.data();
  in.main.dense = rows.data();
  // request b, query s attends row 2b + s only (request 1, query 1 attends nothing: all -1).
  const std::vector<std::int32_t> lens = {1, 1};
  std::vector<std::int32_t> idx2 = {0, -1, 1, -1, 2, -1, -1, -1};
  in.indices = idx2.data();
  in.topk = 2;
  in.topk_length = lens.data();
  const auto r = reference_decode(in);
  for (int bs = 0; bs < 3; ++bs) {
    for (int h = 0; h < 2; ++h) {
      for (int d = 0; d < D; d += 97) {
        REQUIRE(r.out[static_cast<std::size_t>((bs * 2 + h) * D + d)] ==
                Approx(rows[static_cast<std::size_t>(bs) * D + d]).margin(1e-7));
      }
      REQUIRE(r.lse[static_cast<std::size_t>(bs * 2 + h)] == Approx(0.0).margin(1e-12));
    }
  }
  REQUIRE(std::isinf(r.lse[6]));
  REQUIRE(std::isinf(r.lse[7]));
}

TEST_CASE("reference rejects inconsistent inputs", "[reference]") {
  std::vector<float> q(D, 0.0f);
  const std::vector<std::int32_t> idx = {0};
  RefDecodeInput in;
  in.b = 1;
  in.q = q.data();
  in.indices = idx.data();
  in.topk = 1;
  REQUIRE_THROWS_AS(reference_decode(in), mlaplan::Error);  // main cache has no rows
  in.q = nullptr;
  REQUIRE_THROWS_AS(reference_decode(in), mlaplan::Error);
}

TEST_CASE("compare_decode applies the pass criterion", "[reference]") {
  std::vector<float> ref(1024);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  std::vector<float> lse = {1.0f, 2.0f, static_cast<float>(kInf)};

  SECTION("identical output passes with zero errors") {
    const auto c = compare_decode(ref, ref, lse, lse);
    REQUIRE(c.pass);
    REQUIRE(c.max_abs == 0.0);
    REQUIRE(c.cos_diff == Approx(0.0).margin(1e-15));
  }
  SECTION("bf16-sized element error passes, a larger one fails") {
    auto out = ref;
    out[10] += 9e-4f;  // inside abs 1e-3
    const auto ok = compare_decode(out, ref, lse, lse);
    REQUIRE(ok.pass);
    REQUIRE(ok.max_abs == Approx(9e-4).epsilon(1e-3));
    REQUIRE(ok.max_rel == 0.0);  // no element needed the rel criterion
    out[10] = ref[10] + 0.05f;   // |ref[10]| < 1: outside abs and rel
    const auto c = compare_decode(out, ref, lse, lse);
    REQUIRE_FALSE(c.pass);
    REQUIRE(c.bad_out == 1);
    REQUIRE(c.max_rel == Approx(0.05 / std::fabs(ref[10])).epsilon(1e-3));
    REQUIRE(c.message.find("first at 10") != std::string::npos);
  }
  SECTION("a NaN where the reference is finite fails") {
    auto out = ref;
    out[3] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE_FALSE(compare_decode(out, ref, lse, lse).pass);
  }
  SECTION("lse: +inf must match +inf, small relative error passes") {
    auto l2 = lse;
    l2[2] = 5.0f;
    REQUIRE_FALSE(compare_decode(ref, ref, l2, lse).pass);
    l2 = lse;
    l2[1] = 2.0f * (1.0f + 1e-4f);  // rel 1e-4 < 8.01/65536
    REQUIRE(compare_decode(ref, ref, l2, lse).pass);
    l2[1] = 2.0f * (1.0f + 2e-4f);
    REQUIRE_FALSE(compare_decode(ref, ref, l2, lse).pass);
  }
  SECTION("many small errors trip the cosine criterion") {
    auto out = ref;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = ref[i] * 1.01f;  // each within rel 2.01/128
    const auto c = compare_decode(out, ref, lse, lse);
    REQUIRE(c.bad_out == 0);
    REQUIRE(c.cos_diff > 5e-6);
    REQUIRE_FALSE(c.pass);
  }
  SECTION("size mismatch is a usage error") {
    std::vector<float> shorter(ref.begin(), ref.end() - 1);
    REQUIRE_THROWS_AS(compare_decode(shorter, ref, lse, lse), mlaplan::Error);
  }
}
