// Safetensors headers, model.safetensors.index.json and Hugging Face cache trees, built here in a
// temporary directory: good files give their tensors, every broken one a one-line exit-2 error
// naming the file, the tensor and the field, and the data area is never read.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/model/safetensors.hpp"
#include "mlaplan/base/text.hpp"
#include "heap_counter.hpp"
#include "temp_dir.hpp"

using namespace mlaplan;
namespace fs = std::filesystem;
using json = nlohmann::json;

using testing_files::TempDir;

namespace {

/// A safetensors file: the 8-byte little-endian length of `header`, `header`, then `data_bytes`
/// bytes of data (zeros; with `sparse` a hole made by ftruncate, nothing written).
void write_raw(const std::string& path, const std::string& header, std::int64_t data_bytes, bool sparse = false,
               std::optional<std::uint64_t> length = std::nullopt) {
  std::string bytes(8, '\0');
  std::uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  bytes += header;
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    REQUIRE(f);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!sparse) {
      const std::string zeros(static_cast<std::size_t>(data_bytes), '\0');
      f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
    }
  }
  if (sparse) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes.size()) + data_bytes) == 0);
    ::close(fd);
  }
}

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::int64_t begin;
  std::int64_t end;
};

/// The header JSON of these tensors (and __metadata__ when given).
json header_of(const std::vector<Tensor>& tensors, const json& metadata = nullptr) {
  json h = json::object();
  for (const auto& t : tensors)
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  return h;
}

/// Writes a safetensors file of these tensors, packed one after another from offset 0, each of
/// `bytes` (elements x size of F32 unless given). Returns the data size.
std::int64_t write_file(const std::string& path, const std::vector<Tensor>& tensors, const json& metadata = nullptr) {
  std::int64_t data = 0;
  for (const auto& t : tensors) data = std::max(data, t.end);
  write_raw(path, header_of(tensors, metadata).dump(), data);
  return data;
}

/// The message of the Error(invalid_config) that `f` throws; fails the test when it throws
/// nothing or another kind, or when the message is not one printable line.
std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    CHECK(is_printable_line(e.what()));
    return e.what();
  }
  FAIL("no error was thrown");
  return "";
}

/// The message of read_safetensors_header() for a file of this header text and data size.
std::string header_error(const TempDir& dir, const std::string& header, std::int64_t data = 0) {
  const std::string path = dir / "bad.safetensors";
  write_raw(path, header, data);
  return config_error([&] { read_safetensors_header(path); });
}

std::string one(const std::string& dtype, const json& shape, const json& offsets) {
  return json{{"w", {{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}}}}.dump();
}

/// Bytes this process has read through read()/pread() so far (/proc/self/io rchar), or -1.
std::int64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::int64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return -1;
}

}  // namespace

TEST_CASE("safetensors: dtypes and their sizes, sub-byte dtypes in whole bytes", "[safetensors]") {
  for (const char* name :
       {"F64", "F32", "F16",  "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I64", "I32",     "I16",
        "I8",  "U8",  "BOOL", "U16",  "U32",     "U64",     "C64",     "F4",  "F6_E2M3", "F6_E3M2"}) {
    INFO(name);
    CHECK(find_safetensors_dtype(name));
  }
  CHECK_FALSE(find_safetensors_dtype("f32"));
  CHECK_FALSE(find_safetensors_dtype("F8_E4M3FN"));
  CHECK(safetensors_tensor_bytes(*find_safetensors_dtype("BF16"), 6) == 12);
  CHECK(safetensors_tensor_bytes(*find_safetensors_dtype("C64"), 3) == 24);
  CHECK(safetensors_tensor_bytes(*find_safetensors_dtype("F4"), 6) == 3);
  CHECK_FALSE(safetensors_tensor_bytes(*find_safetensors_dtype("F4"), 3));
  CHECK(safetensors_tensor_bytes(*find_safetensors_dtype("F6_E2M3"), 4) == 3);
  CHECK_FALSE(safetensors_tensor_bytes(*find_safetensors_dtype("F6_E3M2"), 2));
  CHECK(safetensors_tensor_bytes(*find_safetensors_dtype("F4"), INT64_MAX - 1) == (INT64_MAX - 1) / 2);
  CHECK_FALSE(safetensors_tensor_bytes(*find_safetensors_dtype("F64"), INT64_MAX / 4));
}

TEST_CASE("safetensors: a good header gives every tensor, the metadata and the sizes", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "model.safetensors";
  write_file(path,
             {{"layers.0.wq_a.weight", "F8_E4M3", {4, 8}, 0, 32},
              {"layers.0.wq_a.scale", "F8_E8M0", {1, 2}, 32, 34},
              {"embed.weight", "BF16", {3, 2}, 40, 52},
              {"empty", "F32", {0, 5}, 52, 52},
              {"scalar", "F32", {}, 52, 56},
              {"packed", "F4", {2, 3}, 56, 59}},
             {{"format", "pt"}});
  const SafetensorsHeader h = read_safetensors_header(path);
  REQUIRE(h.tensors.size() == 6);
  CHECK(h.tensors[0].name == "embed.weight");  // ordered by name
  CHECK(h.tensors[0].dtype == "BF16");
  CHECK(h.tensors[0].shape == std::vector<std::int64_t>{3, 2});
  CHECK(h.tensors[0].elements == 6);
  CHECK(h.tensors[0].bytes == 12);
  CHECK(h.tensors[0].begin == 40);
  CHECK(h.tensors[0].end == 52);
  CHECK(h.tensors[1].name == "empty");
  CHECK(h.tensors[1].bytes == 0);
  CHECK(h.tensors[2].name == "layers.0.wq_a.scale");
  CHECK(h.tensors[2].dtype == "F8_E8M0");
  CHECK(h.tensors[3].name == "layers.0.wq_a.weight");
  CHECK(h.tensors[3].bytes == 32);
  CHECK(h.tensors[4].name == "packed");
  CHECK(h.tensors[4].bytes == 3);
  CHECK(h.tensors[5].name == "scalar");
  CHECK(h.tensors[5].shape.empty());
  CHECK(h.tensors[5].elements == 1);
  CHECK(h.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(h.header_bytes == static_cast<std::int64_t>(fs::file_size(path)) - 8 - 59);
  CHECK(h.data_bytes == 59);
  CHECK(h.tensor_bytes == 32 + 2 + 12 + 0 + 4 + 3);  // the gap 34..40 is allowed
  CHECK(h.path == path);
}

TEST_CASE("safetensors: a file that cannot be a safetensors file", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "short.safetensors";
  {
    std::ofstream f(path, std::ios::binary);
    f << "12345";
  }
  CHECK(config_error([&] { read_safetensors_header(path); }) ==
        "safetensors " + quoted(path, kQuotedPathMaxBytes) +
            ": the file is 5 bytes; a safetensors file starts with an 8-byte header length");

  write_raw(path, "{}", 0, false, 1000);
  CHECK(config_error([&] { read_safetensors_header(path); }) ==
        "safetensors " + quoted(path, kQuotedPathMaxBytes) +
            ": the header length 1000 is past the end of the file (10 bytes: at most 2 after the 8-byte length)");

  write_raw(path, "{}", 0, false, CheckpointLimits::max_header_bytes + 1);
  CHECK(config_error([&] { read_safetensors_header(path); }) ==
        "safetensors " + quoted(path, kQuotedPathMaxBytes) +
            ": the header length 100000001 is over 100000000 bytes (CheckpointLimits::max_header_bytes, "
            "safetensors' own limit)");
  write_raw(path, "{}", 0, false, UINT64_MAX);
  CHECK_THAT(config_error([&] { read_safetensors_header(path); }),
             Catch::Contains("header length 18446744073709551615 is over 100000000 bytes"));

  CHECK_THAT(config_error([&] { read_safetensors_header(dir / "missing.safetensors"); }),
             Catch::EndsWith("missing.safetensors': no such file or directory"));
  CHECK_THAT(config_error([&] { read_safetensors_header(dir.path.string()); }), Catch::EndsWith(": it is a directory"));
  const std::string fifo = dir / "fifo.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(config_error([&] { read_safetensors_header(fifo); }),
             Catch::EndsWith("it is a FIFO (named pipe); only a regular file is read"));
  fs::create_symlink(dir / "nowhere", dir / "dangling.safetensors");
  CHECK_THAT(config_error([&] { read_safetensors_header(dir / "dangling.safetensors"); }),
             Catch::EndsWith("no such file or directory (a symbolic link to a missing file)"));
}

TEST_CASE("safetensors: a header that is not a JSON object of tensors", "[safetensors]") {
  TempDir dir;
  const std::string p = "safetensors " + quoted(dir / "bad.safetensors", kQuotedPathMaxBytes) + ": ";
  CHECK_THAT(header_error(dir, "{\"w\": "),
             Catch::StartsWith(p + "the header is not valid JSON: parse error at line 1, column 7"));
  CHECK(header_error(dir, std::string("{\"w\"\0 }", 7)) ==
        p + "the header holds a NUL byte at byte offset 4 (line 1); it is JSON text, which never holds a NUL byte");
  CHECK(header_error(dir, "[1, 2]") == p + "the header is an array; expected a JSON object of tensors");
  CHECK(header_error(dir, std::string(100, '[') + std::string(100, ']')) ==
        p + "the header is nested deeper than 64 levels (byte offset 64); a safetensors header or index is 3 "
            "levels deep");
  CHECK(header_error(dir, R"({"__metadata__": {"format": 1}})") ==
        p + "\"__metadata__\"['format'] is the integer 1; expected a string");
  CHECK(header_error(dir, R"({"__metadata__": []})") ==
        p + "\"__metadata__\" is an array; expected an object of strings");
  CHECK(header_error(dir, R"({"w": 5})") == p + "tensor 'w': the entry is the integer 5; expected an object");
}

TEST_CASE("safetensors: a tensor entry with a missing or wrong field", "[safetensors]") {
  TempDir dir;
  const std::string p = "safetensors " + quoted(dir / "bad.safetensors", kQuotedPathMaxBytes) + ": tensor 'w': ";
  CHECK(header_error(dir, R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4) ==
        p + "no \"dtype\" (every tensor has dtype, shape and data_offsets)");
  CHECK(header_error(dir, R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4) ==
        p + "no \"shape\" (every tensor has dtype, shape and data_offsets)");
  CHECK(header_error(dir, R"({"w": {"dtype": "F32", "shape": [1]}})", 4) ==
        p + "no \"data_offsets\" (every tensor has dtype, shape and data_offsets)");
  CHECK(header_error(dir, R"({"w": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", 4) ==
        p + "\"dtype\" is the integer 32; expected a string");
  CHECK_THAT(header_error(dir, one("F7", {1}, {0, 4}), 4),
             Catch::StartsWith(p + "\"dtype\" 'F7' is not a safetensors dtype (BOOL, F4, F6_E2M3,"));
  CHECK_THAT(header_error(dir, one("bf16\x1b[31m", {1}, {0, 4}), 4),
             Catch::StartsWith(p + "\"dtype\" 'bf16\\x1b[31m' is not a safetensors dtype"));
  CHECK(header_error(dir, one("F32", "4", {0, 4}), 4) ==
        p + "\"shape\" is the string '4'; expected an array of integers");
  CHECK(header_error(dir, one("F32", {2, -3}, {0, 4}), 4) ==
        p + "\"shape\"[1] is the integer -3; expected an integer from 0 to 2^63-1");
  CHECK(header_error(dir, one("F32", {2, 1.5}, {0, 4}), 4) ==
        p + "\"shape\"[1] is the number 1.5; expected an integer from 0 to 2^63-1");
  CHECK(header_error(dir, one("F32", {1LL << 62, 4}, {0, 4}), 4) ==
        p + "\"shape\" [4611686018427387904, 4] has more elements than 2^63-1");
  CHECK(
      header_error(dir, one("F32", {1LL << 61, 2}, {0, 4}), 4) ==
      p + "\"data_offsets\" [0, 4) holds 4 bytes; \"shape\" [2305843009213693952, 2] of F32 is more than 2^63-1 bytes");
  CHECK(header_error(dir, one("F32", {1}, {0, 4, 8}), 8) ==
        p + "\"data_offsets\" is an array of 3 entries; expected [begin, end]");
  CHECK(header_error(dir, one("F32", {1}, "0-4"), 4) ==
        p + "\"data_offsets\" is the string '0-4'; expected [begin, end]");
  CHECK(header_error(dir, one("F32", {1}, {-4, 0}), 4) ==
        p + "\"data_offsets\"[0] is the integer -4; expected an integer from 0 to 2^63-1");
  CHECK(header_error(dir, one("F32", {1}, {8, 4}), 8) == p + "\"data_offsets\" [8, 4): end is before begin");
  CHECK(header_error(dir, one("F32", {2}, {0, 8}), 6) ==
        p + "\"data_offsets\" [0, 8): end is past the data area (6 bytes after the header)");
  CHECK(header_error(dir, one("F32", {2, 3}, {0, 20}), 24) ==
        p + "\"data_offsets\" [0, 20) holds 20 bytes; \"shape\" [2, 3] of F32 is 24 bytes");
  CHECK(header_error(dir, one("F4", {3}, {0, 2}), 2) ==
        p + "\"shape\" [3] of F4 is 3 x 4 bits, not a whole number of bytes");
}

TEST_CASE("safetensors: overlapping tensors", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "overlap.safetensors";
  write_file(path, {{"a", "F32", {4}, 0, 16}, {"b", "F32", {4}, 8, 24}, {"c", "F32", {0}, 4, 4}});
  CHECK(config_error([&] { read_safetensors_header(path); }) ==
        "safetensors " + quoted(path, kQuotedPathMaxBytes) +
            ": tensor 'a' [0, 16) and tensor 'b' [8, 24) overlap in \"data_offsets\"");
  write_file(path, {{"a", "F32", {4}, 0, 16}, {"b", "F32", {4}, 0, 16}});
  CHECK_THAT(config_error([&] { read_safetensors_header(path); }),
             Catch::EndsWith("tensor 'a' [0, 16) and tensor 'b' [0, 16) overlap in \"data_offsets\""));
  // Adjacent ranges and an empty tensor inside another's range do not overlap.
  write_file(path, {{"a", "F32", {4}, 0, 16}, {"b", "F32", {4}, 16, 32}, {"c", "F32", {0}, 4, 4}});
  CHECK(read_safetensors_header(path).tensors.size() == 3);
}

TEST_CASE("safetensors: the data is never read (a header before a 4 GiB sparse data area)", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "huge.safetensors";
  const std::int64_t data = 4LL << 30;
  write_raw(path, header_of({{"big", "U8", {data}, 0, data}}).dump(), data, /*sparse=*/true);
  REQUIRE(static_cast<std::int64_t>(fs::file_size(path)) > data);
  const std::int64_t before = bytes_read_so_far();
  const heap_counter::Scope heap;
  const SafetensorsHeader h = read_safetensors_header(path);
  const auto work = heap.totals();
  const std::int64_t after = bytes_read_so_far();
  REQUIRE(h.tensors.size() == 1);
  CHECK(h.tensors[0].bytes == data);
  CHECK(h.data_bytes == data);
  // The work of a small header: a few hundred allocations, never a buffer the size of the data.
  if (heap_counter::counting()) {
    CHECK(work.allocations < 1000);
    CHECK(work.peak_bytes < (1u << 20));
  }
  if (before >= 0 && after >= 0) CHECK(after - before < 4096);  // 8 + the header, not the data
}

TEST_CASE("safetensors: a checkpoint through its index", "[safetensors]") {
  TempDir dir;
  write_file(dir / "model-00001-of-00002.safetensors", {{"a", "BF16", {2, 2}, 0, 8}, {"b", "F32", {3}, 8, 20}});
  write_file(dir / "model-00002-of-00002.safetensors", {{"c", "F8_E4M3", {16}, 0, 16}});
  json index = {{"metadata", {{"total_size", 36}}},
                {"weight_map",
                 {{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00001-of-00002.safetensors"},
                  {"c", "model-00002-of-00002.safetensors"}}}};
  const auto write_index = [&](const json& j) { std::ofstream(dir / "model.safetensors.index.json") << j.dump(); };
  write_index(index);
  // A stray file beside the shards is not read when there is an index.
  write_raw(dir / "stray.safetensors", "{\"z\": 1}", 0);

  const CheckpointFiles c = read_checkpoint_files(dir.path.string());
  CHECK(c.has_index);
  CHECK(c.files == std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
  REQUIRE(c.tensors.size() == 3);
  CHECK(c.tensors[0].name == "a");
  CHECK(c.tensors[0].dtype == "BF16");
  CHECK(c.tensors[0].shape == std::vector<std::int64_t>{2, 2});
  CHECK(c.tensors[0].bytes == 8);
  CHECK(c.tensors[0].file == "model-00001-of-00002.safetensors");
  CHECK(c.tensors[2].name == "c");
  CHECK(c.tensors[2].file == "model-00002-of-00002.safetensors");
  CHECK(c.tensor_bytes == 36);
  CHECK(c.index_total_size == 36);
  CHECK(c.findings.empty());
  CHECK(c.header_bytes == static_cast<std::int64_t>(fs::file_size(dir / "model-00001-of-00002.safetensors") - 20 +
                                                    fs::file_size(dir / "model-00002-of-00002.safetensors") - 16));

  SECTION("total_size that is not the sum of the tensors' bytes is a finding") {
    index["metadata"]["total_size"] = 50;
    write_index(index);
    const CheckpointFiles m = read_checkpoint_files(dir.path.string());
    CHECK(m.tensor_bytes == 36);
    CHECK(m.findings ==
          std::vector<std::string>{
              "model.safetensors.index.json: \"metadata\".\"total_size\" is 50 bytes; the tensors of its 2 "
              "shards hold 36 bytes (the headers' figure is used)"});
    CHECK(m.complete());
  }
  const std::string ip = quoted(dir / "model.safetensors.index.json", kQuotedPathMaxBytes) + ": ";
  SECTION("a shard the directory lacks makes the checkpoint incomplete, not invalid") {
    index["weight_map"]["d"] = "model-00003-of-00003.safetensors";
    index["weight_map"]["e"] = "model-00003-of-00003.safetensors";
    index["metadata"]["total_size"] = 5000;
    write_index(index);
    const CheckpointFiles m = read_checkpoint_files(dir.path.string());
    CHECK_FALSE(m.complete());
    CHECK(m.missing_count == 1);
    CHECK(m.expected_files == 3);
    CHECK(m.missing_tensors == 2);
    REQUIRE(m.missing.size() == 1);
    CHECK(m.missing[0].file == "model-00003-of-00003.safetensors");
    CHECK(m.missing[0].why == "not in the directory");
    CHECK(m.missing[0].tensors == 2);
    CHECK(m.tensor_bytes == 36);
    CHECK(m.findings.empty());  // the index's total is larger because shards are missing: said below
    CHECK(m.incomplete_reason() ==
          "1 of 3 shards is missing: 'model-00003-of-00003.safetensors' (not in the directory); the index maps 2 "
          "tensors to them; the files present hold 3 tensors, 36 B of the index's total_size 5,000 B");
  }
  SECTION("a shard that is a Git LFS pointer or shorter than its header says is missing too") {
    std::ofstream(dir / "model-00002-of-00002.safetensors")
        << "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 5000000000\n";
    CheckpointFiles m = read_checkpoint_files(dir.path.string());
    REQUIRE(m.missing.size() == 1);
    CHECK(m.missing[0].why ==
          "the file is a Git LFS pointer to 5,000,000,000 bytes, not the safetensors file (the weights were not "
          "fetched: git lfs pull)");
    CHECK(m.files == std::vector<std::string>{"model-00001-of-00002.safetensors"});
    write_raw(dir / "model-00002-of-00002.safetensors", header_of({{"c", "F8_E4M3", {16}, 0, 16}}).dump(), 10);
    m = read_checkpoint_files(dir.path.string());
    REQUIRE(m.missing.size() == 1);
    CHECK(m.missing[0].why == "truncated: its header describes 16 bytes of tensor data, the file holds 10");
    write_raw(dir / "model-00002-of-00002.safetensors", "{\"c\"", 0, false, 1000);
    m = read_checkpoint_files(dir.path.string());
    REQUIRE(m.missing.size() == 1);
    CHECK_THAT(m.missing[0].why, Catch::StartsWith("the header length 1000 is past the end of the file"));
    std::ofstream(dir / "model-00002-of-00002.safetensors", std::ios::trunc) << "";
    m = read_checkpoint_files(dir.path.string());
    REQUIRE(m.missing.size() == 1);
    CHECK(m.missing[0].why == "the file is 0 bytes; a safetensors file starts with an 8-byte header length");
    // Alone, the same files are errors.
    CHECK(config_error([&] { read_safetensors_header(dir / "model-00002-of-00002.safetensors"); }) ==
          "safetensors " + quoted(dir / "model-00002-of-00002.safetensors", kQuotedPathMaxBytes) +
              ": the file is 0 bytes; a safetensors file starts with an 8-byte header length");
  }
  SECTION("a tensor named twice in weight_map") {
    std::ofstream(dir / "model.safetensors.index.json")
        << R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "a": "model-00002-of-00002.safetensors"}})";
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "\"weight_map\" names tensor 'a' twice (one shard would be lost)");
  }
  SECTION("a tensor of the map that its shard lacks") {
    index["weight_map"]["d"] = "model-00002-of-00002.safetensors";
    write_index(index);
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "\"weight_map\" puts tensor 'd' in shard 'model-00002-of-00002.safetensors', which does not hold it");
  }
  SECTION("a shard tensor the map lacks") {
    index["weight_map"].erase("b");
    write_index(index);
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "tensor 'b' of shard 'model-00001-of-00002.safetensors' is not in \"weight_map\"");
  }
  SECTION("a tensor in another shard than the map says") {
    index["weight_map"]["b"] = "model-00002-of-00002.safetensors";
    write_index(index);
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "tensor 'b' is in shard 'model-00001-of-00002.safetensors', but \"weight_map\" puts it in "
               "'model-00002-of-00002.safetensors'");
  }
  SECTION("a shard outside the directory") {
    index["weight_map"]["b"] = "../model.safetensors";
    write_index(index);
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "\"weight_map\"['b'] is '../model.safetensors'; a shard is a file of the model directory (a name "
               "without '/')");
  }
  SECTION("an index of the wrong shape") {
    write_index(json{{"weight_map", {{"a", 3}}}});
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "\"weight_map\"['a'] is the integer 3; expected a shard file name");
    write_index(json{{"metadata", {{"total_size", "44"}}}, {"weight_map", json::object()}});
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "\"metadata\".\"total_size\" is the string '44'; expected an integer from 0 to 2^63-1 (the tensors' "
               "bytes)");
    write_index(json{{"metadata", json::object()}});
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "no \"weight_map\" (tensor name -> shard file)");
    write_index(json::array());
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          ip + "the top level is an array; expected a JSON object");
    std::ofstream(dir / "model.safetensors.index.json") << "{\"weight_map\": ";
    CHECK_THAT(config_error([&] { read_checkpoint_files(dir.path.string()); }),
               Catch::StartsWith(ip + "the index is not valid JSON: parse error"));
  }
  SECTION("a broken shard names the shard") {
    write_raw(dir / "model-00002-of-00002.safetensors", one("F32", {4}, {0, 8}), 16);
    CHECK(config_error([&] { read_checkpoint_files(dir.path.string()); }) ==
          "safetensors " + quoted(dir / "model-00002-of-00002.safetensors", kQuotedPathMaxBytes) +
              ": tensor 'w': \"data_offsets\" [0, 8) holds 8 bytes; \"shape\" [4] of F32 is 16 bytes");
  }
}

TEST_CASE("safetensors: a checkpoint without an index", "[safetensors]") {
  TempDir dir;
  const std::string d = dir.path.string();
  CHECK(config_error([&] { read_checkpoint_files(d); }) ==
        "checkpoint " + quoted(d, kQuotedPathMaxBytes) +
            ": no model.safetensors.index.json, no model.safetensors and no *.safetensors file");
  write_file(dir / "b.safetensors", {{"y", "F16", {2}, 0, 4}});
  write_file(dir / "a.safetensors", {{"x", "F16", {3}, 0, 6}});
  std::ofstream(dir / "config.json") << "{}";
  CheckpointFiles c = read_checkpoint_files(d);
  CHECK_FALSE(c.has_index);
  CHECK(c.files == std::vector<std::string>{"a.safetensors", "b.safetensors"});
  REQUIRE(c.tensors.size() == 2);
  CHECK(c.tensors[0].file == "a.safetensors");
  CHECK(c.tensors[1].file == "b.safetensors");
  CHECK(c.tensor_bytes == 10);
  CHECK_FALSE(c.index_total_size);

  write_file(dir / "c.safetensors", {{"x", "F16", {1}, 0, 2}});
  CHECK(config_error([&] { read_checkpoint_files(d); }) ==
        "checkpoint " + quoted(d, kQuotedPathMaxBytes) + ": tensor 'x' is in both 'a.safetensors' and 'c.safetensors'");

  // model.safetensors alone is read when it is there.
  write_file(dir / "model.safetensors", {{"m", "BF16", {8}, 0, 16}});
  c = read_checkpoint_files(d);
  CHECK(c.files == std::vector<std::string>{"model.safetensors"});
  REQUIRE(c.tensors.size() == 1);
  CHECK(c.tensors[0].name == "m");

  // macOS AppleDouble files ("._NAME", resource forks a copy from a Mac leaves) are skipped, as the
  // engines' "*.safetensors" glob skips names starting with '.'.
  fs::remove(dir / "c.safetensors");
  fs::remove(dir / "model.safetensors");
  std::ofstream(dir / "._a.safetensors") << std::string("\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X", 16);
  c = read_checkpoint_files(d);
  CHECK(c.files == std::vector<std::string>{"a.safetensors", "b.safetensors"});
  CHECK(c.hidden_files_skipped == 1);
  CHECK(c.complete());

  CHECK_THAT(config_error([&] { read_checkpoint_files(dir / "config.json"); }),
             Catch::EndsWith("config.json': it is a regular file; expected a model directory"));
  CHECK_THAT(config_error([&] { read_checkpoint_files(dir / "none"); }),
             Catch::EndsWith("': no such file or directory"));
}

TEST_CASE("safetensors: a Hugging Face cache resolves through refs/main to a snapshot of symlinked blobs",
          "[safetensors]") {
  TempDir dir;
  const fs::path repo = dir.path / "models--deepseek-ai--DeepSeek-V3.2";
  const std::string hash = "0123456789abcdef0123456789abcdef01234567";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / hash);
  write_file((repo / "blobs" / "9f2c").string(), {{"w", "BF16", {4}, 0, 8}});
  fs::create_symlink("../../blobs/9f2c", repo / "snapshots" / hash / "model.safetensors");
  std::ofstream(repo / "refs" / "main") << hash;  // huggingface_hub writes no newline

  const std::string snapshot = (repo / "snapshots" / hash).string();
  CHECK(resolve_model_dir(repo.string()) == snapshot);
  CHECK(resolve_model_dir(repo.string() + "/") == snapshot);
  CHECK(resolve_model_dir(snapshot) == snapshot);  // a snapshot is used as is
  CHECK(resolve_model_dir(dir.path.string()) == dir.path.string());
  const CheckpointFiles c = read_checkpoint_files(resolve_model_dir(repo.string()));
  REQUIRE(c.tensors.size() == 1);
  CHECK(c.tensors[0].bytes == 8);
  CHECK(c.files == std::vector<std::string>{"model.safetensors"});

  const std::string ref = quoted((repo / "refs" / "main").string(), kQuotedPathMaxBytes) + ": ";
  std::ofstream(repo / "refs" / "main") << hash << "\n";
  CHECK(resolve_model_dir(repo.string()) == snapshot);
  std::ofstream(repo / "refs" / "main") << "../../../etc";
  CHECK(config_error([&] { resolve_model_dir(repo.string()); }) ==
        ref + "the ref '../../../etc' is not a commit hash (byte 0 is '.'; expected hex digits only)");
  std::ofstream(repo / "refs" / "main") << "abc/def";
  CHECK(config_error([&] { resolve_model_dir(repo.string()); }) ==
        ref + "the ref 'abc/def' is not a commit hash (byte 3 is '/'; expected hex digits only)");
  std::ofstream(repo / "refs" / "main") << "\n";
  CHECK(config_error([&] { resolve_model_dir(repo.string()); }) == ref + "the file is empty; expected a commit hash");
  std::ofstream(repo / "refs" / "main") << std::string(65, 'a');
  CHECK(config_error([&] { resolve_model_dir(repo.string()); }) ==
        ref + "the ref '" + std::string(65, 'a') +
            "' is 65 bytes; a commit hash is at most 64 hex digits (CheckpointLimits::max_ref_hex_digits)");
  std::ofstream(repo / "refs" / "main") << std::string(300, 'a');
  CHECK_THAT(config_error([&] { resolve_model_dir(repo.string()); }),
             Catch::Contains("CheckpointLimits::max_ref_bytes"));
  std::ofstream(repo / "refs" / "main") << "fedcba";
  CHECK(config_error([&] { resolve_model_dir(repo.string()); }) ==
        "Hugging Face cache " + quoted(repo.string(), kQuotedPathMaxBytes) +
            ": refs/main names snapshot 'fedcba', but " +
            quoted((repo / "snapshots" / "fedcba").string(), kQuotedPathMaxBytes) +
            " cannot be read: no such file or directory");
  fs::remove(repo / "refs" / "main");
  CHECK_THAT(config_error([&] { resolve_model_dir(repo.string()); }),
             Catch::StartsWith("Hugging Face cache " + quoted(repo.string(), kQuotedPathMaxBytes) + ": no refs/main"));

  // A snapshot link whose blob is gone.
  fs::remove(repo / "blobs" / "9f2c");
  CHECK_THAT(config_error([&] { read_checkpoint_files(snapshot); }),
             Catch::EndsWith("model.safetensors': no such file or directory (a symbolic link to a missing file)"));
}

TEST_CASE("safetensors: the usual JSON and any other JSON of the same header read the same", "[safetensors]") {
  TempDir dir;
  const std::vector<Tensor> tensors = {{"b", "BF16", {2, 3}, 0, 12}, {"a", "F32", {}, 12, 16}};
  const std::string usual = dir / "usual.safetensors";
  const std::string pretty = dir / "pretty.safetensors";
  const std::string other = dir / "other.safetensors";
  write_raw(usual, header_of(tensors, {{"format", "pt"}}).dump(), 16);
  write_raw(pretty, header_of(tensors, {{"format", "pt"}}).dump(2), 16);
  // A unicode escape and an unknown key (holding a float): the fast reader leaves them to
  // nlohmann::json, which reads the same tensors.
  write_raw(other,
            R"({"__metadata__": {"format": "p\u0074"}, "\u0062": {"data_offsets": [0, 12], "dtype": "BF16", )"
            R"("shape": [2, 3], "extra": {"x": [1.5]}}, "a": {"dtype": "F32", "shape": [], "data_offsets": [12, 16]}})",
            16);
  const auto same = [](const SafetensorsHeader& x, const SafetensorsHeader& y) {
    REQUIRE(x.tensors.size() == y.tensors.size());
    for (std::size_t i = 0; i < x.tensors.size(); ++i) {
      CHECK(x.tensors[i].name == y.tensors[i].name);
      CHECK(x.tensors[i].dtype == y.tensors[i].dtype);
      CHECK(x.tensors[i].shape == y.tensors[i].shape);
      CHECK(x.tensors[i].begin == y.tensors[i].begin);
      CHECK(x.tensors[i].end == y.tensors[i].end);
    }
    CHECK(x.metadata == y.metadata);
    CHECK(x.tensor_bytes == y.tensor_bytes);
  };
  const SafetensorsHeader u = read_safetensors_header(usual);
  REQUIRE(u.tensors.size() == 2);
  CHECK(u.tensors[0].name == "a");
  same(u, read_safetensors_header(pretty));
  same(u, read_safetensors_header(other));
  // A shape entry of 19 digits goes to nlohmann::json, which reads it (and the sizes disagree).
  CHECK_THAT(header_error(dir, one("U8", {1000000000000000000LL}, {0, 4}), 4),
             Catch::EndsWith("\"data_offsets\" [0, 4) holds 4 bytes; \"shape\" [1000000000000000000] of U8 is "
                             "1000000000000000000 bytes"));
  // A duplicate tensor name makes the fast reader give up; the general one refuses it (never keeps one).
  write_raw(other,
            R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, )"
            R"("a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})",
            4);
  CHECK_THAT(config_error([&] { read_safetensors_header(other); }),
             Catch::EndsWith(": tensor 'a' is in the header twice (safetensors keys tensors by name: one entry and its "
                             "bytes would be lost)"));
}

TEST_CASE("safetensors: has_checkpoint_files says whether read_checkpoint_files has something to read",
          "[safetensors]") {
  testing_files::TempDir dir;
  const std::string d = dir.path.string();
  CHECK_FALSE(mlaplan::has_checkpoint_files(""));
  CHECK_FALSE(mlaplan::has_checkpoint_files(d));
  dir.write("config.json", "{}");
  dir.write(".safetensors", "");  // no name before the suffix: not a shard
  CHECK_FALSE(mlaplan::has_checkpoint_files(d));
  dir.write("._model.safetensors", "");  // a macOS AppleDouble file: not a shard
  CHECK_FALSE(mlaplan::has_checkpoint_files(d));
  dir.write("model-00001-of-00002.safetensors", "");
  CHECK(mlaplan::has_checkpoint_files(d));
  testing_files::TempDir indexed;
  indexed.write("model.safetensors.index.json", "{}");
  CHECK(mlaplan::has_checkpoint_files(indexed.path.string()));
  CHECK_FALSE(mlaplan::has_checkpoint_files(d + "/no-such-dir"));
}

TEST_CASE("safetensors: a name given twice in a header is refused, never collapsed", "[safetensors]") {
  TempDir dir;
  const std::string p = "safetensors " + quoted(dir / "bad.safetensors", kQuotedPathMaxBytes) + ": ";
  // nlohmann::json keeps the last of two equal keys: 1.85 GB would become 1 B.
  write_raw(dir / "bad.safetensors",
            R"({"w": {"dtype": "U8", "shape": [1850000000], "data_offsets": [0, 1850000000]},)"
            R"( "w": {"dtype": "U8", "shape": [1], "data_offsets": [1850000000, 1850000001]}})",
            1850000001, /*sparse=*/true);
  CHECK(config_error([&] { read_safetensors_header(dir / "bad.safetensors"); }) ==
        p + "tensor 'w' is in the header twice (safetensors keys tensors by name: one entry and its bytes would be "
            "lost)");
  // The same through the general parser (an escape makes the fast one give up).
  CHECK(header_error(dir,
                     R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                     R"( "\u0077": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                     2) == p + "tensor 'w' is in the header twice (safetensors keys tensors by name: one entry and its "
                               "bytes would be lost)");
  CHECK(header_error(dir, R"({"w": {"dtype": "U8", "dtype": "F32", "shape": [1], "data_offsets": [0, 1]}})", 1) ==
        p + "tensor 'w': the key 'dtype' is given twice");
  CHECK(header_error(dir, R"({"__metadata__": {"a": "1", "a": "2"}})") ==
        p + "\"__metadata__\" holds the key 'a' twice");
  CHECK(header_error(dir, R"({"__metadata__": {}, "__metadata__": {}})") ==
        p + "\"__metadata__\" is in the header twice");
}

TEST_CASE("safetensors: a Git LFS pointer is named as one", "[safetensors]") {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  std::ofstream(path) << "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 123\n";
  CHECK(config_error([&] { read_safetensors_header(path); }) ==
        "safetensors " + quoted(path, kQuotedPathMaxBytes) +
            ": the file is a Git LFS pointer to 123 bytes, not the safetensors file (the weights were not fetched: git "
            "lfs pull)");
}

TEST_CASE("safetensors: the missing members of a numbered series make the checkpoint incomplete", "[safetensors]") {
  TempDir dir;
  const std::string d = dir.path.string();
  // A download in progress: 1 of 46 shards, no index yet.
  write_file(dir / "model-00001-of-00046.safetensors", {{"embed.weight", "BF16", {4, 8}, 0, 64}});
  CheckpointFiles c = read_checkpoint_files(d);
  CHECK_FALSE(c.complete());
  CHECK(c.missing_count == 45);
  CHECK(c.expected_files == 46);
  CHECK(c.missing_tensors == 0);
  REQUIRE(c.missing.size() == static_cast<std::size_t>(CheckpointLimits::max_missing_listed));
  CHECK(c.missing[0].file == "model-00002-of-00046.safetensors");
  CHECK(c.missing[0].why == "not in the directory");
  CHECK(c.missing[7].file == "model-00009-of-00046.safetensors");
  CHECK(c.incomplete_reason() ==
        "45 of 46 shards are missing: 'model-00002-of-00046.safetensors', 'model-00003-of-00046.safetensors', "
        "'model-00004-of-00046.safetensors' (not in the directory) and 42 more; the files present hold 1 tensor, 64 B");
  // The whole series is complete; another name beside it is not part of it.
  for (int i = 2; i <= 46; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-00046.safetensors", i);
    write_file(dir / name, {{"t" + std::to_string(i), "U8", {1}, 0, 1}});
  }
  write_file(dir / "extra.safetensors", {{"x", "U8", {1}, 0, 1}});
  c = read_checkpoint_files(d);
  CHECK(c.complete());
  CHECK(c.expected_files == 47);
  CHECK(c.incomplete_reason().empty());
}

TEST_CASE("safetensors: a whole directory is bounded (CheckpointLimits::max_total_header_bytes, max_total_tensors)",
          "[safetensors][limits]") {
  TempDir dir;
  const std::string d = dir.path.string();
  // Headers of spaces (a writer pads with them): half the limit each, so that the second passes it.
  const std::int64_t half = CheckpointLimits::max_total_header_bytes / 2;
  write_raw(dir / "a.safetensors", "{}" + std::string(static_cast<std::size_t>(half - 8 - 2), ' '), 0);
  write_raw(dir / "b.safetensors", "{}", 0, true, static_cast<std::uint64_t>(half - 8 + 1));
  // The second header is refused before it is read (it is not there to read: a sparse hole).
  const auto hole = dir / "b.safetensors";
  REQUIRE(::truncate(hole.c_str(), static_cast<off_t>(8 + half)) == 0);
  CHECK(config_error([&] { read_checkpoint_files(d); }) ==
        "safetensors " + quoted(dir / "b.safetensors", kQuotedPathMaxBytes) + ": the header length " +
            std::to_string(half - 7) + " takes the headers of checkpoint " + quoted(d, kQuotedPathMaxBytes) + " to " +
            std::to_string(CheckpointLimits::max_total_header_bytes + 1) + " bytes, over " +
            std::to_string(CheckpointLimits::max_total_header_bytes) +
            " (CheckpointLimits::max_total_header_bytes); DeepSeek-V3's 163 shards have about 16 MB");
  fs::remove(dir / "b.safetensors");
  CHECK(read_checkpoint_files(d).header_bytes == half);

  // Tensors: at the limit over two files, then one more.
  fs::remove(dir / "a.safetensors");
  const auto many = [](std::int64_t from, std::int64_t n) {
    std::string h = "{";
    for (std::int64_t i = 0; i < n; ++i) {
      h += (i ? "," : "") + std::string("\"t") + std::to_string(from + i) + "\":{\"dtype\":\"U8\",\"shape\":[0]," +
           "\"data_offsets\":[0,0]}";
    }
    return h + "}";
  };
  const std::int64_t n = CheckpointLimits::max_total_tensors;
  write_raw(dir / "a.safetensors", many(0, n / 2), 0);
  write_raw(dir / "b.safetensors", many(n / 2, n - n / 2), 0);
  const heap_counter::Scope heap;
  CHECK(static_cast<std::int64_t>(read_checkpoint_files(d).tensors.size()) == n);
  const auto work = heap.totals();
  // Linear in the tensors: a bounded number of allocations and bytes for each (not a wall-clock
  // bound, which a loaded machine breaks).
  if (heap_counter::counting()) {
    CHECK(work.allocations < 40 * static_cast<std::uint64_t>(n));
    CHECK(work.peak_bytes < 2000 * static_cast<std::uint64_t>(n));
  }
  write_raw(dir / "c.safetensors", many(n, 1), 0);
  CHECK(config_error([&] { read_checkpoint_files(d); }) ==
        "safetensors " + quoted(dir / "c.safetensors", kQuotedPathMaxBytes) + ": more than " + std::to_string(n) +
            " tensors in checkpoint " + quoted(d, kQuotedPathMaxBytes) + " (CheckpointLimits::max_total_tensors; " +
            std::to_string(n) + " before this file); DeepSeek-V3 has 91,000");
}
