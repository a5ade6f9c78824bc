// Side-by-side harness: a C ABI over mla-plan's kernels (kernels/include/mlaplan_kernels/kernels.hpp)
// and its decode planner (include/mlaplan/cache/decode_mode.hpp), loaded by sxs_bench.py with ctypes so
// that the project's kernels run in the same process, on the same device buffers, as FlashMLA.
// Every pointer argument is a device pointer unless its name ends in _host. Functions return 0 on
// success and 1 on failure; sxs_last_error() then gives the message.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include <cuda_runtime_api.h>

#include "mlaplan/base/text.hpp"
#include "mlaplan/cache/decode_mode.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mk = mlaplan::kernels;

namespace {
thread_local std::string g_error;

int fail(const char* what) {
  g_error = what;
  return 1;
}

void copy_text(const std::string& s, char* dst, int cap) {
  if (dst == nullptr || cap <= 0) return;
  const auto n = std::min<std::size_t>(s.size(), static_cast<std::size_t>(cap - 1));
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

mk::CacheView cache_view(const void* data, int page, long long stride, long long pages) {
  mk::CacheView v;
  v.format = mk::RowFormat::fp8_ds_mla_584;
  v.data = static_cast<const std::uint8_t*>(data);
  v.page_block_size = page;
  v.page_stride_bytes = stride;
  v.num_pages = pages;
  return v;
}

// MLAPLAN_SXS_KERNEL=generic|sm90_ws|small_heads|small_heads_sm90|small_heads_lean: the decode kernel
// forced for every call (DecodeForce::kernel; small_heads_lean for the split_kv calls only), e.g. to
// time the portable small-head kernel beside the default;
// unset or empty: the dispatch's own choice. Read at every call (the harness sets it per process).
bool forced_kernel(std::optional<mk::DecodeKernel>& out) {
  const char* v = std::getenv("MLAPLAN_SXS_KERNEL");
  out.reset();
  if (v == nullptr || *v == '\0') return true;
  out = mk::decode_kernel_named(v);
  if (out.has_value()) return true;
  g_error = "MLAPLAN_SXS_KERNEL " + mlaplan::quoted(v) + ": expected " + std::string(mk::kDecodeKernelNames);
  return false;
}
}  // namespace

extern "C" {

const char* sxs_last_error() { return g_error.c_str(); }

/// cudaMemsetAsync(ptr, value, bytes, stream): the L2 flush of the project's own benchmark
/// (kernels/src/runtime/bench.cpp), for the harness's "sync" timing method.
int sxs_memset_async(void* ptr, int value, long long bytes, void* stream) {
  const cudaError_t e = cudaMemsetAsync(ptr, value, static_cast<std::size_t>(bytes), static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) return fail(cudaGetErrorString(e));
  return 0;
}

/// The project's per-request scheduler overhead for its own split_kv launches (kSplitKvFixedOverhead).
int sxs_split_kv_fixed_overhead() { return mk::kSplitKvFixedOverhead; }

/// padded_page_stride(fp8_ds_mla_584, page): the page stride the project expects.
long long sxs_padded_page_stride(int page) {
  try {
    return mk::padded_page_stride(mk::RowFormat::fp8_ds_mla_584, page);
  } catch (const std::exception& e) {
    fail(e.what());
    return -1;
  }
}

/// decode_num_sm_parts(num_sms, s_q, h_q): split_kv's partition count P (h_q 8 / 16: the small-head kernel's).
int sxs_num_sm_parts(int num_sms, int s_q, int h_q) {
  try {
    return mk::decode_num_sm_parts(num_sms, s_q, h_q);
  } catch (const std::exception& e) {
    fail(e.what());
    return -1;
  }
}

long long sxs_o_accum_elems(int b, int s_q, int h_q, int parts) { return mk::o_accum_elems(b, s_q, h_q, parts); }
long long sxs_lse_accum_elems(int b, int s_q, int h_q, int parts) { return mk::lse_accum_elems(b, s_q, h_q, parts); }

/// The planner's choice as kernels/src/runtime/bench.cpp makes it: choose_decode_mode over the
/// batch's lengths (decode_work). mode_out: 0 split_kv, 1 one_pass, 2 cluster_split.
int sxs_choose_mode(int b, int s_q, int h_q, int topk, int extra_topk, const int* len_host, const int* elen_host,
                    int num_sms, int* mode_out, int* cluster_ctas_out, char* reason, int reason_cap) {
  try {
    const mlaplan::DecodeWork w = mlaplan::decode_work(len_host, b, topk, elen_host, extra_topk);
    const mlaplan::DecodeModeChoice ch = mlaplan::choose_decode_mode(b, s_q, h_q, topk, true, extra_topk, num_sms, w);
    *mode_out = static_cast<int>(ch.mode);
    *cluster_ctas_out = static_cast<int>(ch.cluster_ctas);
    copy_text(ch.reason, reason, reason_cap);
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

/// The project's GPU tile scheduler (split_kv's plan), as bench.cpp calls it.
int sxs_schedule(int b, int topk, const int* len, int extra_topk, const int* elen, int parts, int fixed_overhead,
                 int* records, int* num_splits, void* stream) {
  try {
    mk::ScheduleParams sp;
    sp.b = b;
    sp.topk = topk;
    sp.topk_length = len;
    sp.has_extra = true;
    sp.extra_topk = extra_topk;
    sp.extra_topk_length = elen;
    sp.num_sm_parts = parts;
    sp.fixed_overhead = fixed_overhead;
    sp.records = records;
    sp.num_splits = num_splits;
    sp.stream = stream;
    mk::schedule(sp);
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

/// One sparse decode call (fp8_ds_mla 584 main + 584 extra cache, s_q 1 or more), as bench.cpp
/// fills DecodeParams. mode: 0 split_kv, 1 one_pass, 2 cluster_split. describe: the launch as it ran.
int sxs_decode(int mode, int b, int s_q, int h_q, const void* q, const void* main_data, int main_page,
               long long main_stride, long long main_pages, const int* indices, int topk, const int* topk_length,
               const void* extra_data, int extra_page, long long extra_stride, long long extra_pages,
               const int* extra_indices, int extra_topk, const int* extra_topk_length, float softmax_scale,
               const int* sched_records, const int* num_splits, int parts, void* out, float* lse, void* o_accum,
               float* lse_accum, void* stream, char* describe, int describe_cap) {
  try {
    mk::DecodeParams p;
    p.mode = static_cast<mk::DecodeMode>(mode);
    p.b = b;
    p.s_q = s_q;
    p.h_q = h_q;
    p.d_qk = 512;
    p.q = static_cast<const std::uint16_t*>(q);
    p.main = cache_view(main_data, main_page, main_stride, main_pages);
    p.indices = indices;
    p.topk = topk;
    p.topk_length = topk_length;
    p.has_extra = true;
    p.extra = cache_view(extra_data, extra_page, extra_stride, extra_pages);
    p.extra_indices = extra_indices;
    p.extra_topk = extra_topk;
    p.extra_topk_length = extra_topk_length;
    p.attn_sink = nullptr;
    p.softmax_scale = softmax_scale;
    p.sched_records = sched_records;
    p.num_splits = num_splits;
    p.num_sm_parts = parts;
    p.out = static_cast<std::uint16_t*>(out);
    p.lse = lse;
    p.o_accum = static_cast<float*>(o_accum);
    p.lse_accum = lse_accum;
    p.stream = stream;
    if (!forced_kernel(p.force.kernel)) return 1;
    p.force.kernel = mk::forced_kernel_for_mode(p.force.kernel, p.mode);
    const mk::DecodeLaunch L = mk::sparse_decode(p);
    copy_text(L.describe() + (L.fallback.empty() ? "" : " [" + L.fallback + "]"), describe, describe_cap);
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // extern "C"
