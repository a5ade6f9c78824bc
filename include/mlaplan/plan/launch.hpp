#pragma once
// The `vllm serve` command that starts a plan (docs/launch.md): the model, and every value of the
// request that differs from vLLM's default, under vLLM's own flag names and value syntax. What
// vLLM has no flag for is said next to it: the environment a setting needs (Engram placement),
// the mla-plan flags that describe the machine rather than the engine (--gpu, the estimate
// overrides), and notes. Feeding the command back to `mla-plan vllm serve`, with those mla-plan
// flags, plans the same thing.

#include <string>
#include <vector>

#include "mlaplan/plan/plan.hpp"

namespace mlaplan {

/// One flag of a command line as data: its name and its values (none for a switch).
struct CommandFlag {
  std::string name;                 ///< "--tensor-parallel-size"
  std::vector<std::string> values;  ///< {"8"}; {} for "--enable-expert-parallel"
};

/// The argv of `flags`, in order: name then values.
std::vector<std::string> flags_argv(const std::vector<CommandFlag>& flags);

/// The command that launches a plan.
struct LaunchCommand {
  std::vector<std::string> env;    ///< "VAR=value" assignments the command needs, before it
  std::vector<std::string> argv;   ///< "vllm", "serve", MODEL, flags...
  std::vector<CommandFlag> flags;  ///< the flags of argv after MODEL, as data
  /// mla-plan flags (argv form) that give the rest of the plan's assumptions: the GPU, the
  /// overridden estimates, the decode batch. `mla-plan vllm serve ARGV... MLA_PLAN_FLAGS...`
  /// plans the same thing.
  std::vector<std::string> mla_plan_flags;
  std::vector<std::string> notes;  ///< what vLLM has no flag for, or what to put in place of MODEL
  /// One shell line: env, argv, each word quoted where the shell needs it.
  std::string text() const;
};

/// `word` as one shell word: as it is when it holds only characters the shell reads as
/// themselves, else in single quotes ('\'' for a quote inside).
std::string shell_quote(const std::string& word);

/// The model argument of the command for what the user gave: the Hugging Face repo id when the
/// config was resolved through the cache, else the path as given.
std::string launch_model(const ModelConfig& config);

/// The `vllm serve` command of `plan`, made for `request` (the request make_plan() planned).
/// Flags appear only where the request's value differs from vLLM's default for this config and
/// GPU: a value equal to the default is left out, so the command is the shortest that starts
/// the same engine.
LaunchCommand vllm_launch_command(const ModelConfig& config, const Plan& plan, const PlanRequest& request);

/// The `python3 -m sglang.launch_server` command of `plan`'s SGLang fit (plan.sglang set): SGLang's
/// flag names, the resolved --mem-fraction-static, the request cap and the chunk written out, the
/// environment its switches need (SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE, SGLANG_SWA_EVICTION_INTERVAL).
LaunchCommand sglang_launch_command(const ModelConfig& config, const Plan& plan, const PlanRequest& request);

}  // namespace mlaplan
