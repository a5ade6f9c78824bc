// read_checkpoint_files() over a checkpoint of 64 safetensors shards of 1,000 tensors each (with
// model.safetensors.index.json), the data areas sparse: the time to read the tensor list from the
// headers alone. Usage: mlaplan_bench_safetensors [runs] (default 20); prints the median and the
// fastest run in ms.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mlaplan/model/safetensors.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int kShards = 64;
constexpr int kTensorsPerShard = 1000;

void write_shard(const fs::path& path, int shard, json& weight_map, std::int64_t& total) {
  json header = json::object();
  std::int64_t offset = 0;
  const char* kinds[] = {"gate_proj", "up_proj", "down_proj", "weight_scale_inv"};
  for (int i = 0; i < kTensorsPerShard; ++i) {
    const int global = shard * kTensorsPerShard + i;
    const std::string name = "model.layers." + std::to_string(global / 1024) + ".mlp.experts." +
                             std::to_string(global % 256) + "." + kinds[global % 4] + "." + std::to_string(global);
    const bool scale = global % 4 == 3;
    const std::vector<std::int64_t> shape =
        scale ? std::vector<std::int64_t>{16, 56} : std::vector<std::int64_t>{2048, 7168};
    const std::int64_t bytes = scale ? 16 * 56 * 4 : 2048LL * 7168;
    header[name] = {{"dtype", scale ? "F32" : "F8_E4M3"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    weight_map[name] = path.filename().string();
  }
  header["__metadata__"] = {{"format", "pt"}};
  total += offset;
  const std::string text = header.dump();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  bytes += text;
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes.size()) + offset) != 0) {
    std::perror("ftruncate");
    std::exit(1);
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const fs::path dir = fs::temp_directory_path() / ("mlaplan-bench-safetensors-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  json weight_map = json::object();
  std::int64_t total = 0;
  for (int s = 0; s < kShards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, kShards);
    write_shard(dir / name, s, weight_map, total);
  }
  std::ofstream(dir / "model.safetensors.index.json")
      << json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump();

  std::vector<double> ms;
  std::size_t tensors = 0;
  std::int64_t header_bytes = 0;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto c = mlaplan::read_checkpoint_files(dir.string());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    tensors = c.tensors.size();
    header_bytes = c.header_bytes;
    if (c.tensor_bytes != total || !c.findings.empty()) {
      std::fprintf(stderr, "unexpected totals\n");
      return 1;
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "read_checkpoint_files: %d shards, %zu tensors, %.1f MB of headers, %.1f GB of (sparse) data: "
      "median %.1f ms, fastest %.1f ms over %d runs\n",
      kShards, tensors, static_cast<double>(header_bytes) / 1e6, static_cast<double>(total) / 1e9, ms[ms.size() / 2],
      ms.front(), runs);
  fs::remove_all(dir);
  return 0;
}
