#pragma once
// Weights from the checkpoint's own files: the tensors of CheckpointFiles (safetensors headers,
// include/mlaplan/model/safetensors.hpp) classified into the parts, layers and draft stages of
// WeightsReport by their names, so that placement and fit use exact bytes; and the list of
// places where the config-derived contract (compute_weights) and the files disagree.
// docs/weights.md "From files".

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/model/safetensors.hpp"
#include "mlaplan/model/weights.hpp"

namespace mlaplan {

/// One place where the files and the contract differ.
struct WeightsMismatch {
  std::string tensor;    ///< the tensor name (or a group name with "{e}")
  std::string what;      ///< "missing_in_files", "not_in_contract", "dtype", "shape", "bytes"
  std::string contract;  ///< the contract's value ("" when it has no such tensor)
  std::string files;     ///< the files' value ("" when they have no such tensor)
};

/// Weights whose bytes come from the files.
struct FileWeights {
  WeightsReport report;                     ///< tensors from the files, parts from their names
  std::vector<WeightsMismatch> mismatches;  ///< contract vs files, at most `max_mismatches` listed
  std::int64_t mismatch_count = 0;          ///< all of them
  std::int64_t contract_bytes = 0;          ///< compute_weights(cfg).total_bytes()
  std::int64_t files_bytes = 0;             ///< sum over the files' tensors
  bool compared = false;                    ///< the contract was known and compared (else no mismatches)
  std::int64_t pattern_classified = 0;      ///< tensors the contract does not know, placed by name patterns
  /// The contract's main-model bytes in the parts whose rules are exact (not estimated): what any
  /// whole checkpoint of this config holds at least. 0 when the contract is not known.
  std::int64_t contract_exact_main_bytes = 0;
  /// The files' main model holds fewer bytes than contract_exact_main_bytes: tensors are missing
  /// (an incomplete checkpoint, or a config.json that is not this checkpoint's).
  bool short_of_contract = false;
  std::int64_t missing_contract_tensors = 0;  ///< contract tensors the files lack (each of a "{e}" group counted)
  /// Tensors naming a layer past the backbone and the draft stages ("model.layers.5000.x"): no
  /// GPU holds them, so they are left out of `report` (finding weights.unplaceable).
  std::int64_t unplaceable_tensors = 0;
  std::int64_t unplaceable_bytes = 0;
  /// "the files' main model holds 64 B, less than the 509,... B config.json's contract has in
  /// the parts it derives exactly; 1,896 of its tensors are not in the files", or "".
  std::string shortfall_reason() const;
};

/// The part, layer, draft and scale flag a tensor name gets from the name patterns alone (the
/// rule table of src/model/checkpoint_weights.cpp, docs/weights.md "From files"): what a tensor the
/// contract does not list gets. `num_hidden_layers` makes "mtp.K." layer num_hidden_layers + K and
/// a "layers.N." with N >= num_hidden_layers a draft layer (V3.2's MTP layers), as long as the
/// layer is one of the `num_draft_stages` draft stages; past them the tensor is `unplaceable`
/// (no stage of the model holds it).
struct NameClass {
  WeightPart part = WeightPart::attention;
  std::int64_t layer = -1;
  bool draft = false;
  bool scale = false;
  bool unplaceable = false;
};
NameClass classify_tensor_name(std::string_view name, std::int64_t num_hidden_layers, std::int64_t num_draft_stages);

/// Classifies `files` for `cfg` and compares them with `derived` (compute_weights(cfg)). A tensor
/// the contract lists (an expert tensor through its "{e}" group) gets the contract's part, layer,
/// draft and scale flags; any other gets them from classify_tensor_name() and is counted in the
/// finding weights.unclassified (attention when no pattern matches), or, past the model's layers
/// and draft stages, in weights.unplaceable and left out. With derived.known false every tensor
/// is classified by its name and nothing is compared (finding weights.no_contract). Bytes, dtypes
/// and shapes are the files'. Never throws for the files' content (read_checkpoint_files
/// validated them).
FileWeights weights_from_files(const ModelConfig& cfg, const CheckpointFiles& files, const WeightsReport& derived,
                               std::size_t max_mismatches = 20);

}  // namespace mlaplan
