// Device queries, the CUDA checking function and DeviceBuffer (kernels.hpp, "Device checks").

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/launchers.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels {

namespace detail {

void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  const bool no_device = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
                         e == cudaErrorInvalidDevice || e == cudaErrorNoKernelImageForDevice ||
                         e == cudaErrorUnsupportedPtxVersion;
  throw Error(no_device ? ErrorKind::no_gpu : ErrorKind::verify_failed,
              std::string("cuda call failed: ") + call + ": " + cudaGetErrorName(e) + " (" +
                  cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line));
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
    throw Error(ErrorKind::no_gpu, "device " + std::to_string(index) + " (" + d.name + ", compute capability " +
                                       std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) +
                                       ") is not one the kernels were built for (sm_90a, sm_100a)");
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
  if (bytes > bytes_) throw_usage("DeviceBuffer::upload: " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  if (bytes != 0) MLAPLAN_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) throw_usage("DeviceBuffer::download: " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  if (bytes != 0) MLAPLAN_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(std::uint8_t value) {
  if (bytes_ != 0) MLAPLAN_CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
}

}  // namespace mlaplan::kernels
