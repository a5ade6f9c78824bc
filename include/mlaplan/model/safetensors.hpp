#pragma once
// A checkpoint's tensor list from its files, never from its tensor data: the safetensors headers
// (an 8-byte little-endian length N, then N bytes of JSON: per tensor dtype, shape and
// data_offsets [begin, end) relative to the end of the header, and an optional __metadata__),
// model.safetensors.index.json (metadata.total_size, weight_map tensor -> file) and the layout of
// a Hugging Face cache (models--ORG--NAME/refs/main -> snapshots/REV/). Only regular files are
// read (as include/mlaplan/base/input_file.hpp), at most a limit of bytes (CheckpointLimits); of a
// safetensors file only its first 8 + N bytes. Every failure is Error(invalid_config), exit 2,
// one line naming the file, the tensor (quoted), the field and the value. The usual JSON of a
// header or an index is read by a small scanner; any other JSON goes to nlohmann::json, which
// reads the same values and words every error.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan {

/// What safetensors knows of a dtype: its name and its size in bits (F4 is 4, F6_E2M3 6).
struct SafetensorsDtype {
  std::string_view name;
  int bits = 0;
};

/// Every dtype safetensors defines, in the order of its Dtype enum.
const std::vector<SafetensorsDtype>& safetensors_dtypes();

/// The dtype of this name, or nullopt.
std::optional<SafetensorsDtype> find_safetensors_dtype(std::string_view name);

/// The bytes of `elements` elements of `dtype`: elements x bits / 8. For a sub-byte dtype (F4,
/// F6_E2M3, F6_E3M2) the bits must make whole bytes (safetensors' rule: a tensor is a whole
/// number of bytes, elements packed without padding); nullopt when they do not or on overflow.
std::optional<std::int64_t> safetensors_tensor_bytes(const SafetensorsDtype& dtype, std::int64_t elements);

/// One tensor of a safetensors header.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::int64_t elements = 0;  ///< product of shape (1 for a scalar, shape [])
  std::int64_t bytes = 0;     ///< end - begin, which is elements x dtype size
  std::int64_t begin = 0;     ///< data_offsets, relative to the end of the header
  std::int64_t end = 0;
};

/// One safetensors file's header.
struct SafetensorsHeader {
  std::string path;
  std::vector<SafetensorsTensor> tensors;       ///< ordered by name
  std::map<std::string, std::string> metadata;  ///< __metadata__ (string -> string), if any
  std::int64_t header_bytes = 0;                ///< N, the JSON after the 8-byte length
  std::int64_t data_bytes = 0;                  ///< file size - 8 - N: the data area
  std::int64_t tensor_bytes = 0;                ///< sum of the tensors' bytes (at most data_bytes)
};

/// Reads and validates the header of the safetensors file `path`; the data area is never read.
/// Throws Error(invalid_config) for: a file that cannot be read (its cause, as input_file.hpp), a
/// file shorter than 8 bytes, a Git LFS pointer file (the weights not fetched), a header length
/// past the end of the file or over CheckpointLimits::max_header_bytes, a header that is not JSON
/// (or holds a NUL byte) or not an object, a key given twice (a tensor name: safetensors keys
/// tensors by name, so one entry would be lost), more than CheckpointLimits::max_total_tensors
/// tensors, a tensor entry without dtype / shape / data_offsets or with a wrong type, an unknown
/// dtype, a negative shape entry or an element count past int64, data_offsets with end < begin,
/// past the data area, or not holding elements x dtype size bytes, and two tensors whose ranges
/// overlap. Gaps between tensors are allowed.
SafetensorsHeader read_safetensors_header(const std::string& path);

/// One tensor of a checkpoint, with the file (a name in the model directory) that holds it.
struct CheckpointTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::int64_t bytes = 0;
  std::string file;
};

/// A shard the checkpoint should have whole and does not: what a download in progress leaves.
struct MissingShard {
  std::string file;           ///< its name in the model directory
  std::string why;            ///< "not in the directory", "a Git LFS pointer, not the file", "truncated: ..."
  std::int64_t tensors = -1;  ///< tensors the index maps to it (or its own header lists); -1 when not known
};

/// A checkpoint's tensors, from every safetensors file of a model directory.
struct CheckpointFiles {
  std::string dir;
  bool has_index = false;                        ///< read through model.safetensors.index.json
  std::vector<std::string> files;                ///< the safetensors files read (names), sorted
  std::vector<CheckpointTensor> tensors;         ///< ordered by name
  std::int64_t tensor_bytes = 0;                 ///< sum of the tensors' bytes
  std::int64_t header_bytes = 0;                 ///< sum of the files' 8 + N
  std::optional<std::int64_t> index_total_size;  ///< the index's metadata.total_size
  /// What is odd but not wrong enough to refuse the checkpoint: a metadata.total_size that is not
  /// the sum of the tensors' bytes of a complete checkpoint ("model.safetensors.index.json:
  /// metadata.total_size is 100 bytes; the tensors of its shards hold 96 bytes"). The headers'
  /// figure is the one used.
  std::vector<std::string> findings;
  /// Shards the checkpoint lacks whole: named by the index (or by the "-NNNNN-of-MMMMM" numbering
  /// of the files) and not in the directory, Git LFS pointers, files shorter than their headers
  /// say. The first CheckpointLimits::max_missing_listed by name; `missing_count` counts all.
  std::vector<MissingShard> missing;
  std::int64_t missing_count = 0;
  std::int64_t missing_tensors = 0;  ///< tensors the index maps to missing shards (0 without an index)
  std::int64_t expected_files = 0;   ///< shards the index names, or the numbering says; 0 when not known
  /// Skipped files: names starting with '.' (macOS AppleDouble "._x.safetensors", editors' and
  /// tools' hidden files), which the engines' "*.safetensors" glob does not match either.
  std::int64_t hidden_files_skipped = 0;
  /// true when no shard is missing: the files are the checkpoint.
  bool complete() const { return missing_count == 0; }
  /// "45 of the 46 shards are missing (model-00002-of-00046.safetensors, ...: not in the
  /// directory), holding 1,920 tensors; the files hold 64 B of the index's total_size
  /// 510,286,023,000 B", or "" when complete.
  std::string incomplete_reason() const;
};

/// Whether `dir` holds what read_checkpoint_files() reads: model.safetensors.index.json or a
/// *.safetensors file whose name does not start with '.'. False for "" and for a directory that
/// cannot be listed.
bool has_checkpoint_files(const std::string& dir);

/// Reads the tensor list of the model directory `dir` (as resolve_model_dir() leaves it). With
/// model.safetensors.index.json: the index (a regular file of at most
/// CheckpointLimits::max_index_bytes, a JSON object with a weight_map object of tensor -> shard
/// file name and an optional metadata.total_size integer) and every shard it names; a tensor of
/// the map missing from its shard, a shard tensor the map lacks or maps to another shard, a
/// tensor named twice and a shard name with a '/' or '..' are errors. Without an index:
/// model.safetensors, or else every *.safetensors file of the directory whose name does not
/// start with '.' (sorted by name); a tensor in two files is an error, and so is a directory
/// without any. A shard the index names and the directory lacks, a Git LFS pointer and a file
/// shorter than its header says are not errors: they are listed in `missing` (an incomplete
/// checkpoint, a download in progress), and so are the absent members of a numbered series
/// ("model-00002-of-00046.safetensors" when model-00001-of-00046.safetensors is there). The
/// whole directory is bounded: at most CheckpointLimits::max_total_header_bytes of headers and
/// CheckpointLimits::max_total_tensors tensors (index entries included), checked before each
/// header is read and while it is parsed. Throws Error(invalid_config).
CheckpointFiles read_checkpoint_files(const std::string& dir);

/// The model directory of `path`: a Hugging Face cache repository (models--ORG--NAME, or any
/// directory holding refs/main) resolves through refs/main (a commit hash: 1 to
/// CheckpointLimits::max_ref_hex_digits hex digits, a trailing newline allowed) to
/// snapshots/<hash>; any other directory (a snapshot models--ORG--NAME/snapshots/REV, a plain
/// model directory) is used as is. Throws Error(invalid_config) naming the file and the fault.
std::string resolve_model_dir(const std::string& path);

}  // namespace mlaplan
