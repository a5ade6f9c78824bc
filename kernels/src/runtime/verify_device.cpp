// VerifyDevice on CUDA: uploads a host problem, runs quantize -> scheduler -> decode (+ combine)
// with the project's kernels in the problem's decode mode, times the decode with CUDA events,
// downloads the results and reports the launch that ran (kernels::DecodeLaunch).
//
// Several of these may run at once, one per host thread (verify --device 0,1 or 0,0): each
// object works on its own stream of its own device, and sets that device on the calling thread
// before any CUDA call (the current device is per thread). Copies go through the legacy default
// stream, with which the stream (a blocking one) is ordered.

#include "mlaplan_kernels/verify_device.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/format_support.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels {

namespace {

using detail::kernel_format;

struct DeviceCache {
  DeviceBuffer data;
  CacheView view;
};

/// A CUDA stream (blocking: ordered with the legacy default stream's copies and memsets) of the
/// current device, destroyed with the object.
class Stream {
 public:
  Stream() { MLAPLAN_CUDA_CHECK(cudaStreamCreate(&s_)); }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const { MLAPLAN_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_{};
};

DeviceCache upload_and_quantize(const VerifyCache& c, RowFormat f, const Stream& stream) {
  DeviceCache d;
  d.data = DeviceBuffer(c.expected.size());
  d.data.fill_bytes(0xFF);  // rows not written decode to NaN: a stray read shows up
  if (!c.slots.empty()) {
    DeviceBuffer lat = to_device(c.latents);
    DeviceBuffer slots = to_device(c.slots);
    QuantizeParams q;
    q.format = f;
    q.latent = lat.as<std::uint16_t>();
    q.slots = slots.as<std::int64_t>();
    q.n = static_cast<std::int64_t>(c.slots.size());
    q.cache = d.data.as<std::uint8_t>();
    q.page_block_size = c.page_block_size;
    q.page_stride_bytes = c.page_stride;
    q.num_pages = c.num_pages;
    q.stream = stream.get();
    quantize(q);
    stream.synchronize();
  }
  d.view.format = f;
  d.view.data = d.data.as<std::uint8_t>();
  d.view.page_block_size = c.page_block_size;
  d.view.page_stride_bytes = c.page_stride;
  d.view.num_pages = c.num_pages;
  return d;
}

class Event {
 public:
  Event() { MLAPLAN_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_{};
};

/// The launch in the core's plain fields.
VerifyLaunch plain_launch(const DecodeLaunch& L) {
  VerifyLaunch v;
  v.reported = true;
  v.mode = L.mode;
  v.kernel = std::string(to_string(L.kernel));
  v.grid_x = L.dims.grid_x;
  v.grid_y = L.dims.grid_y;
  v.grid_z = L.dims.grid_z;
  v.cluster_x = L.dims.cluster_x;
  v.cluster_z = L.dims.cluster_z;
  v.block = L.dims.block;
  v.pair = L.pair;
  v.pdl = L.pdl;
  v.combine = L.combine;
  v.fallback = L.fallback;
  v.description = L.describe();
  return v;
}

/// Checks device `index` and makes it current on this thread; returns it.
int select_device(int index) {
  require_supported_device(index);
  MLAPLAN_CUDA_CHECK(cudaSetDevice(index));
  return index;
}

class CudaVerifyDevice final : public VerifyDevice {
 public:
  // index_ first: the stream is created on the device select_device() made current.
  explicit CudaVerifyDevice(int index) : index_(select_device(index)) {}

  std::string unsupported_reason(const VerifyProblem& p) const override {
    return detail::decode_support_reason(p.main.format, p.has_extra, p.extra.format, p.h_q);
  }

  VerifyRun run(const VerifyProblem& p) override {
    MLAPLAN_CUDA_CHECK(cudaSetDevice(index_));
    VerifyRun r;
    // 1. quantize random latents into caches with the planned page sizes and strides
    DeviceCache main = upload_and_quantize(p.main, *kernel_format(p.main.format), stream_);
    r.main_bytes = to_host<std::uint8_t>(main.data, p.main.expected.size());
    DeviceCache extra;
    if (p.has_extra) {
      extra = upload_and_quantize(p.extra, *kernel_format(p.extra.format), stream_);
      r.extra_bytes = to_host<std::uint8_t>(extra.data, p.extra.expected.size());
    }
    // 2. the GPU tile scheduler on the planned inputs (in every mode: its records must equal the
    //    host plan's; split_kv's decode then runs on them)
    const auto parts = p.host_plan.params.num_sm_parts;
    DeviceBuffer topk_len = to_device(p.topk_length);
    DeviceBuffer extra_len = to_device(p.has_extra ? p.extra_topk_length : std::vector<std::int32_t>{0});
    DeviceBuffer records(static_cast<std::size_t>(parts) * 8 * sizeof(std::int32_t));
    DeviceBuffer splits(static_cast<std::size_t>(p.b + 1) * sizeof(std::int32_t));
    ScheduleParams sp;
    sp.b = p.b;
    sp.topk = p.topk;
    sp.topk_length = topk_len.as<std::int32_t>();
    sp.has_extra = p.has_extra;
    sp.extra_topk = p.extra_topk;
    sp.extra_topk_length = p.has_extra ? extra_len.as<std::int32_t>() : nullptr;
    sp.num_sm_parts = parts;
    sp.fixed_overhead = p.host_plan.params.fixed_overhead;
    sp.block = p.host_plan.params.block;
    sp.records = records.as<std::int32_t>();
    sp.num_splits = splits.as<std::int32_t>();
    sp.stream = stream_.get();
    schedule(sp);
    stream_.synchronize();
    r.records = to_host<std::int32_t>(records, static_cast<std::size_t>(parts) * 8);
    r.num_splits = to_host<std::int32_t>(splits, static_cast<std::size_t>(p.b) + 1);

    // 3. decode in the problem's mode (split_kv: driven by the GPU plan, then the combine)
    DeviceBuffer q = to_device(p.q);
    DeviceBuffer idx = to_device(p.indices);
    DeviceBuffer eidx = to_device(p.has_extra ? p.extra_indices : std::vector<std::int32_t>{0});
    DeviceBuffer sink = to_device(p.attn_sink);
    // q holds d_qk dims per head, out the 512 of V.
    const std::size_t out_elems = p.q.size() / static_cast<std::size_t>(p.d_qk) * 512;
    const std::size_t lse_elems = static_cast<std::size_t>(p.b) * static_cast<std::size_t>(p.s_q * p.h_q);
    DeviceBuffer out(out_elems * sizeof(std::uint16_t));
    DeviceBuffer lse(lse_elems * sizeof(float));
    out.fill_bytes(0xFF);  // poison: every element must be written
    lse.fill_bytes(0xFF);
    const bool split = p.mode == DecodeMode::split_kv;
    DeviceBuffer o_acc, lse_acc;  // split_kv's partials (fp32 rows and lse); the other modes have none
    if (split) {
      o_acc = DeviceBuffer(static_cast<std::size_t>(o_accum_elems(p.b, p.s_q, p.h_q, parts)) * sizeof(float));
      lse_acc = DeviceBuffer(static_cast<std::size_t>(lse_accum_elems(p.b, p.s_q, p.h_q, parts)) * sizeof(float));
    }
    DecodeParams d;
    d.mode = p.mode;
    d.b = p.b;
    d.s_q = p.s_q;
    d.h_q = p.h_q;
    d.d_qk = p.d_qk;
    d.q = q.as<std::uint16_t>();
    d.main = main.view;
    d.indices = idx.as<std::int32_t>();
    d.topk = p.topk;
    d.topk_length = topk_len.as<std::int32_t>();
    d.has_extra = p.has_extra;
    if (p.has_extra) {
      d.extra = extra.view;
      d.extra_indices = eidx.as<std::int32_t>();
      d.extra_topk = p.extra_topk;
      d.extra_topk_length = extra_len.as<std::int32_t>();
    }
    d.attn_sink = sink.as<float>();
    d.softmax_scale = p.softmax_scale;
    if (split) {
      d.sched_records = records.as<std::int32_t>();
      d.num_splits = splits.as<std::int32_t>();
      d.num_sm_parts = parts;
      d.o_accum = o_acc.as<float>();
      d.lse_accum = lse_acc.as<float>();
    }
    d.out = out.as<std::uint16_t>();
    d.lse = lse.as<float>();
    d.stream = stream_.get();
    r.launch = plain_launch(sparse_decode(d));
    stream_.synchronize();
    r.out = to_host<std::uint16_t>(out, out_elems);
    r.lse = to_host<float>(lse, lse_elems);

    // 4. time the same launch (median of timing_iterations after a warm-up): d is unchanged, so
    //    every call decides the launch that was checked above
    Event start, stop;
    std::vector<float> ms;
    (void)sparse_decode(d);
    for (int i = 0; i < std::max(1, p.timing_iterations); ++i) {
      MLAPLAN_CUDA_CHECK(cudaEventRecord(start.get(), stream_.get()));
      (void)sparse_decode(d);
      MLAPLAN_CUDA_CHECK(cudaEventRecord(stop.get(), stream_.get()));
      MLAPLAN_CUDA_CHECK(cudaEventSynchronize(stop.get()));
      float t = 0;
      MLAPLAN_CUDA_CHECK(cudaEventElapsedTime(&t, start.get(), stop.get()));
      ms.push_back(t);
    }
    stream_.synchronize();
    std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
    r.decode_us = 1000.0 * ms[ms.size() / 2];
    return r;
  }

 private:
  int index_;
  Stream stream_;  ///< this object's work, apart from another thread's on the same GPU
};

}  // namespace

std::unique_ptr<VerifyDevice> make_cuda_verify_device(int index) { return std::make_unique<CudaVerifyDevice>(index); }

}  // namespace mlaplan::kernels
