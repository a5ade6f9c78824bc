#pragma once
// How mla-plan's sparse decode kernels run a decode step (split-KV or one pass per request) and
// the host heuristic that decides it. Plain C++17 so that the CUDA sources can include it too.

#include <cstdint>
#include <string>
#include <string_view>

namespace mlaplan {

/// How mla-plan's sparse decode kernels spread one decode step over the GPU.
///   split_kv - one CTA per tile-scheduler partition (grid num_sm_parts x s_q x h_q / 64): each CTA
///              walks the requests and 64-row blocks of its record; split requests are merged by
///              a combine kernel.
///   one_pass - one CTA per request (grid b x s_q x h_q / 64), which it attends in one pass: no
///              plan, no fp32 partials, no combine kernel.
enum class DecodeMode { split_kv, one_pass };

/// "split_kv", "one_pass".
std::string_view to_string(DecodeMode m);

/// Rows a request may attend for the one-pass plan: at most 10 blocks of 64 (the V4.1 decode
/// shape: window 128 + extra top-k 512), so one request per CTA stays balanced.
inline constexpr std::int32_t kOnePassMaxRows = 640;

/// The decision and, for people, why.
struct DecodeModeChoice {
  DecodeMode mode = DecodeMode::split_kv;
  std::string reason;
};

/// The plan for a decode shape: one_pass when a request attends at most kOnePassMaxRows rows
/// (topk + extra_topk) and the CTAs (b * s_q * h_q / 64) nearly fill the SMs:
/// ctas * n_blocks >= num_sms * (n_blocks - 1), n_blocks the 64-row blocks of a request (10 for
/// the V4.1 shape: ctas >= 118.8 on 132 SMs); a one-block request is never split; b 0 -> one_pass.
/// split_kv otherwise. Error(usage) for negative sizes, s_q or num_sms < 1, h_q < 64.
DecodeModeChoice choose_decode_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk, bool has_extra,
                                    std::int64_t extra_topk, std::int64_t num_sms);

/// choose_decode_mode(...).mode.
DecodeMode decode_plan_mode(std::int64_t b, std::int64_t s_q, std::int64_t h_q, std::int64_t topk, bool has_extra,
                            std::int64_t extra_topk, std::int64_t num_sms);

}  // namespace mlaplan
