#pragma once
// `mla-plan vllm serve MODEL [vLLM flags]`: a vLLM command line read as vLLM's own parser reads it
// (docs/launch.md, "A vLLM command line goes in"), turned into the arguments of `mla-plan plan`.
// vLLM's spellings are taken as vLLM takes them: short forms (-tp, -pp, -dp, -dcp, -ep, -sc, -cc,
// -ac ...), --flag=value, underscores in flag names, a unique prefix of a flag, --model moved to
// MODEL, --no-X of every boolean flag, JSON-valued flags and their dotted sub-keys
// (--speculative-config.num_speculative_tokens 2). Flags that change nothing mla-plan computes are
// accepted and listed once; flags that change memory in ways mla-plan does not model are kept as
// warnings; an unknown flag is an error naming the nearest one. mla-plan's own plan flags (--gpu,
// --json, --details ...) may be mixed in.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan::cli {

/// What a vLLM command line became.
struct VllmServeInput {
  std::vector<std::string> argv;              ///< the words after `vllm serve`, as given
  std::vector<std::string> plan_args;         ///< `mla-plan plan` arguments: MODEL, then flags
  std::vector<std::string> ignored;           ///< vLLM flags that change nothing the plan computes, as typed
  std::vector<std::string> not_modelled;      ///< vLLM flags (with their values) that change memory unmodelled
  std::optional<std::string> spec_method;     ///< --speculative-config's method, checked against the config
  std::vector<std::string> from_environment;  ///< the environment variables read ("VAR=value (--flag value)")
};

/// How mla-plan's own plan flags are recognised: whether `name` ("--gpu") is one, and whether it
/// takes a value.
struct OwnFlags {
  std::function<bool(std::string_view)> is_flag;
  std::function<bool(std::string_view)> takes_value;
  std::vector<std::string> names;  ///< for "did you mean"
  /// The environment the engine would read (vLLM: VLLM_PLE_CPU_OFFLOAD,
  /// VLLM_SPARSE_INDEXER_MAX_LOGITS_MB; SGLang: SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE,
  /// SGLANG_SWA_EVICTION_INTERVAL); unset: none is read.
  std::function<const char*(const char*)> getenv;
};

/// Translates the words after `vllm serve`. The environment variables vLLM reads for what it has
/// no flag for become mla-plan's flags unless those are given: VLLM_PLE_CPU_OFFLOAD (1 / true:
/// --engram offload, 0 / false: --engram gpu) and VLLM_SPARSE_INDEXER_MAX_LOGITS_MB
/// (--indexer-logits-budget-mib). Error(usage) for an unknown flag (with the nearest
/// vLLM or mla-plan flag), a flag without its value, a JSON value that is not JSON or not an
/// object, a value vLLM refuses, no MODEL.
VllmServeInput translate_vllm_serve(const std::vector<std::string>& args, const OwnFlags& own);

/// Every vLLM flag name the translation knows (long and short), for tests and completions.
std::vector<std::string> vllm_flag_names();

}  // namespace mlaplan::cli
