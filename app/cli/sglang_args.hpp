#pragma once
// `mla-plan sglang serve [MODEL] [SGLang flags]` and `mla-plan python -m sglang.launch_server
// [SGLang flags]`: an SGLang command line read as SGLang's own parser reads it (docs/launch.md,
// "An SGLang command line goes in"), turned into the arguments of `mla-plan plan --engine sglang`.
// SGLang's parser is Python's argparse (python/sglang/srt/server_args.py, ServerArgs.add_cli_args):
// long flags with dashes (no underscores), --flag=value, a unique prefix of a long flag, store_true
// switches that take no value, the last value of a repeated flag. `sglang serve` also takes MODEL
// as its first word (python/sglang/cli/serve.py). Flags that change nothing mla-plan computes are
// accepted and listed once; flags that change memory in ways mla-plan does not model are kept as
// warnings; an unknown flag is an error naming the nearest one. mla-plan's own plan flags (--gpu,
// --json, --engine ...) may be mixed in.

#include <string>
#include <vector>

#include "cli/vllm_args.hpp"  // OwnFlags

namespace mlaplan::cli {

/// Which command line the words came from.
enum class SglangForm {
  serve,          ///< `sglang serve [MODEL] ...`: MODEL may be the first word
  launch_server,  ///< `python -m sglang.launch_server ...`: MODEL only as --model-path
};

/// What an SGLang command line became.
struct SglangServeInput {
  std::string prog;                           ///< "sglang serve" or "python -m sglang.launch_server"
  std::vector<std::string> argv;              ///< the words after `sglang serve` / the module, as given
  std::vector<std::string> plan_args;         ///< `mla-plan plan` arguments: MODEL, then flags
  std::vector<std::string> ignored;           ///< SGLang flags that change nothing the plan computes, as typed
  std::vector<std::string> not_modelled;      ///< SGLang flags (with their values) that change memory unmodelled
  std::vector<std::string> from_environment;  ///< the environment variables read ("VAR=value (--flag value)")
};

/// Translates the words after `sglang serve` (or `python -m sglang.launch_server`). The parallel
/// layout: --tp-size W and --dp-size N become --tensor-parallel-size W/N --data-parallel-size N
/// --enable-dp-attention with DP attention (W a multiple of N), else --tensor-parallel-size W
/// --data-parallel-size N (N replicas); --ep-size 1 or W (--enable-expert-parallel). --engine
/// sglang is added unless --engine is given. The environment SGLang reads (own.getenv) becomes
/// mla-plan's flags unless those are given: SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE (1 / true:
/// --engram offload, 0 / false: --engram gpu) and SGLANG_SWA_EVICTION_INTERVAL
/// (--swa-eviction-interval). Error(usage) for an unknown flag (with the nearest SGLang or
/// mla-plan flag), an ambiguous prefix, a flag without its value, a switch given a value, a value
/// SGLang refuses, a layout mla-plan does not model, no MODEL.
SglangServeInput translate_sglang_serve(const std::vector<std::string>& args, const OwnFlags& own,
                                        SglangForm form = SglangForm::serve);

/// Every SGLang flag name the translation knows, for tests and "did you mean".
std::vector<std::string> sglang_flag_names();

}  // namespace mlaplan::cli
