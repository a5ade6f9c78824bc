#pragma once
// A bench device for the host tests: set timings, no GPU (bench's CUDA device runs on a GPU only).

#include <string>
#include <vector>

#include "mlaplan/gpu_check/bench.hpp"

namespace testing_devices {

/// Times every shape at `us` microseconds (+1 with the scheduler in split_kv) and counts calls.
class FakeBenchDevice final : public mlaplan::BenchDevice {
 public:
  double us = 20.0;
  int ceilings_calls = 0;
  std::vector<mlaplan::BenchShape> timed;
  std::string refuse;  ///< a format name it refuses

  mlaplan::BenchCeilings ceilings() override {
    ++ceilings_calls;
    return {4000.0, "fake copy", 800.0, "fake matmul"};
  }
  std::string unsupported_reason(const mlaplan::BenchShape& s) const override {
    if (!refuse.empty() && mlaplan::row_format(s.main_format).name == refuse) return "refused " + refuse;
    return {};
  }
  mlaplan::BenchTiming time(const mlaplan::BenchShape& s, const mlaplan::BenchRunOptions&) override {
    timed.push_back(s);
    mlaplan::BenchTiming t;
    t.us_decode = us;
    t.us_per_call = s.mode.mode == mlaplan::DecodeMode::split_kv ? us + 1.0 : us;
    t.min_us = us - 0.5;
    return t;
  }
};

}  // namespace testing_devices
