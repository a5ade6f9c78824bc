// Device queries, the CUDA checking function and DeviceBuffer (kernels.hpp, "Device checks").

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/launchers.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels {

namespace detail {

void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  const bool no_device = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice ||
                         e == cudaErrorNoKernelImageForDevice || e == cudaErrorUnsupportedPtxVersion;
  throw Error(no_device ? ErrorKind::no_gpu : ErrorKind::verify_failed,
              std::string("cuda call failed: ") + call + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                  ") at " + file + ":" + std::to_string(line));
}

}  // namespace detail

DecodeDevice current_decode_device() {
  int dev = 0;
  MLAPLAN_CUDA_CHECK(cudaGetDevice(&dev));
  DecodeDevice d;
  MLAPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, dev));
  MLAPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
  MLAPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&d.num_sms, cudaDevAttrMultiProcessorCount, dev));
  d.clusters_fit = &detail::sm90ws_clusters_fit;
  return d;
}

namespace {

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace

DeviceProbe probe_devices() {
  DeviceProbe p;
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  if (cudaRuntimeGetVersion(&p.runtime_version) != cudaSuccess) p.runtime_version = 0;
  (void)cudaGetLastError();
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();  // clear the sticky "no device" state
  if (e == cudaSuccess && n > 0) {
    p.count = n;
    return p;
  }
  if (e != cudaSuccess) p.detail = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  if (p.driver_version == 0) {
    p.problem = DeviceProblem::no_driver;
  } else if (e == cudaErrorInsufficientDriver || (p.runtime_version != 0 && p.driver_version < p.runtime_version &&
                                                  e != cudaSuccess && e != cudaErrorNoDevice)) {
    p.problem = DeviceProblem::driver_too_old;
  } else if (e == cudaSuccess || e == cudaErrorNoDevice) {
    p.problem = DeviceProblem::no_device;
  } else {
    p.problem = DeviceProblem::other;
  }
  return p;
}

std::string device_problem_message(const DeviceProbe& p, std::string_view command) {
  const std::string cmd(command);
  const std::string what = cmd + " runs the project's kernels on a local GPU (plan, check and report need none)";
  switch (p.problem) {
    case DeviceProblem::none: return {};
    case DeviceProblem::no_driver: return "no NVIDIA driver on this machine (the CUDA runtime reports none): " + what;
    case DeviceProblem::driver_too_old:
      return "the NVIDIA driver supports CUDA " + cuda_version_text(p.driver_version) +
             ", older than this build's CUDA " + cuda_version_text(p.runtime_version) +
             " runtime: update the driver (" + what + ")";
    case DeviceProblem::no_device:
      return "the NVIDIA driver (CUDA " + cuda_version_text(p.driver_version) + ") finds no CUDA device: " + what;
    case DeviceProblem::other:
      return "the CUDA runtime could not count the devices (" +
             (p.detail.empty() ? std::string("no detail") : p.detail) + "): " + what;
  }
  return {};
}

std::string unsupported_device_message(int index, std::string_view name, int cc_major, int cc_minor) {
  return "device " + std::to_string(index) + " (" + std::string(name) + ", compute capability " +
         std::to_string(cc_major) + "." + std::to_string(cc_minor) +
         ") is not a GPU the kernels were built for: they run on compute capability 9.0 (sm_90a: H100, H200) and "
         "10.0 (sm_100a: B200, GB200); plan and check still plan for it";
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" state
    return 0;
  }
  return n;
}

DeviceInfo device_info(int index) {
  const int n = device_count();
  if (index < 0 || index >= n) {
    throw Error(ErrorKind::no_gpu, "no CUDA device " + std::to_string(index) + " (found " + std::to_string(n) + ")");
  }
  cudaDeviceProp prop{};
  MLAPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo d;
  d.index = index;
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sm_count = prop.multiProcessorCount;
  d.global_mem_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  d.l2_bytes = prop.l2CacheSize;
  d.smem_per_block_optin = static_cast<std::int64_t>(prop.sharedMemPerBlockOptin);
  MLAPLAN_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  MLAPLAN_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

void require_supported_device(int index) {
  const DeviceInfo d = device_info(index);
  const bool ok = (d.cc_major == 9 && d.cc_minor == 0) || (d.cc_major == 10 && d.cc_minor == 0);
  if (!ok) {
    throw Error(ErrorKind::no_gpu, unsupported_device_message(index, d.name, d.cc_major, d.cc_minor));
  }
  MLAPLAN_CUDA_CHECK(cudaSetDevice(index));
}

std::string last_error_string() {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return "";
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void synchronize() { MLAPLAN_CUDA_CHECK(cudaDeviceSynchronize()); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes != 0) MLAPLAN_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);  // a destructor must not throw
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_)
    throw_usage("DeviceBuffer::upload: " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  if (bytes != 0) MLAPLAN_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_)
    throw_usage("DeviceBuffer::download: " + std::to_string(bytes) + " bytes from a buffer of " +
                std::to_string(bytes_));
  if (bytes != 0) MLAPLAN_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(std::uint8_t value) {
  if (bytes_ != 0) MLAPLAN_CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
}

}  // namespace mlaplan::kernels
