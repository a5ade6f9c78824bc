// operator new and delete of the unit tests, counting calls, bytes and the live bytes' peak
// (heap_counter.hpp). Not in sanitizer builds: ASan and UBSan keep their own operator new.
#include "heap_counter.hpp"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define MLAPLAN_HEAP_COUNTER 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLAPLAN_HEAP_COUNTER 0
#endif
#endif
#ifndef MLAPLAN_HEAP_COUNTER
#define MLAPLAN_HEAP_COUNTER 1
#endif

namespace {

std::atomic<std::uint64_t> g_allocations{0};
std::atomic<std::uint64_t> g_bytes{0};
std::atomic<std::uint64_t> g_live{0};
std::atomic<std::uint64_t> g_peak{0};  // of g_live since the last Scope began

}  // namespace

namespace heap_counter {

bool counting() { return MLAPLAN_HEAP_COUNTER != 0; }

Scope::Scope() : allocations_(g_allocations.load()), bytes_(g_bytes.load()), live_at_start_(g_live.load()) {
  g_peak.store(live_at_start_);
}

Totals Scope::totals() const {
  Totals t;
  t.allocations = g_allocations.load() - allocations_;
  t.bytes = g_bytes.load() - bytes_;
  const std::uint64_t peak = g_peak.load();
  t.peak_bytes = peak > live_at_start_ ? peak - live_at_start_ : 0;
  return t;
}

}  // namespace heap_counter

#if MLAPLAN_HEAP_COUNTER
namespace {

void* counted_alloc(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  const std::uint64_t size = malloc_usable_size(p);
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(n, std::memory_order_relaxed);
  const std::uint64_t live = g_live.fetch_add(size, std::memory_order_relaxed) + size;
  std::uint64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {}
  return p;
}

void counted_free(void* p) {
  if (p == nullptr) return;
  g_live.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
#endif
