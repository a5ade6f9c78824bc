#pragma once
// verify --engine-kernels (docs/verify.md, "The engine's kernels"): the engine's own sparse decode
// op run on exactly the bytes of a verify cell. mla-plan writes the cell's case bundle (manifest.json
// + raw little-endian .bin files), starts the probe (tools/engine_probe/mla_plan_engine_probe.py)
// under the engine's Python, and reads back its result.json, outputs and scheduler metadata: judged
// against the cell's host reference with verify's tolerance rule, the metadata against the plan.
// The probe is a separate process, so everything here runs (and is tested) without a GPU.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mlaplan/gpu_check/reference.hpp"
#include "mlaplan/hardware/target.hpp"

namespace mlaplan {

struct VerifyProblem;
struct VerifyRun;
struct VerifyCell;

/// How the probe runs.
struct EngineProbeOptions {
  std::string python = "python3";         ///< the engine's interpreter: a path, or a name looked up on PATH
  std::string probe;                      ///< the probe file; "" when none was found (no_probe)
  std::string probe_looked_in;            ///< where it was looked for (for the no_probe message)
  std::vector<std::string> engine_paths;  ///< put first on the probe's sys.path (--engine-path)
  std::string route;                      ///< "" vLLM's ops, then the flash_mla package; or "vllm", "flash_mla"
  std::string bundles_dir;                ///< "" bundles in a temporary directory, removed; else kept here
  int timeout_s = 600;                    ///< per probe run; past it the probe is killed (error)
  int device_index = 0;                   ///< the CUDA device the probe runs on (the cell's)
  std::int32_t replays = 100;             ///< timed CUDA-graph replays (median)
  std::int32_t warmup = 10;
  std::int64_t flush_bytes = std::int64_t{256} << 20;    ///< memset before every replay (cold L2)
  std::int32_t eager_iterations = 20;                    ///< eager timed calls (verify's own method)
  std::vector<std::pair<std::string, std::string>> env;  ///< added to the probe's environment (tests)
};

/// The result of one cell's engine run. The absent cases are each their own status, never a pass.
enum class EngineStatus {
  pass,             ///< ran; output within the tolerances, metadata (when returned) equal to the plan
  fail,             ///< ran; output or metadata differ (the message names the first difference)
  not_run,          ///< the engine's op has no kernel for this cell (the message says why); no effect
  no_python,        ///< the interpreter could not be started
  no_probe,         ///< the probe file is not beside mla-plan
  no_torch,         ///< the interpreter has no PyTorch
  no_engine,        ///< no op library (vLLM's _flashmla_C, flash_mla) importable
  schema_mismatch,  ///< the op's schema is not one the probe can call
  unsupported_gpu,  ///< PyTorch sees no CUDA device, or the engine's build has no kernel for it
  error,            ///< the op raised, the probe crashed or timed out, or its result is unreadable
  bad_bundle,       ///< the probe found the bundle inconsistent (a bug of mla-plan's)
};
std::string_view to_string(EngineStatus s);
/// The exit code a status gives verify (docs/cli.md): 0 pass and not_run; 5 fail and error (the
/// engine ran and failed); 6 no_python, no_probe, no_torch, no_engine, schema_mismatch and
/// unsupported_gpu (the engine's kernels cannot run here); 70 bad_bundle.
int engine_exit_code(EngineStatus s);
/// The statuses of result.json's "status" (the probe's words): ok, no_torch, no_engine,
/// schema_mismatch, unsupported_gpu, bad_bundle, error.
const std::vector<std::string>& engine_probe_statuses();

struct EngineCellResult {
  EngineStatus status = EngineStatus::not_run;
  std::string message;                  ///< the probe's message, or why it did not run, or the first difference
  std::vector<std::string> looked_for;  ///< what the probe looked for (torch, the op libraries)
  std::vector<std::string> where;       ///< where it looked, what it found there
  // what ran
  std::string route, module, file, version, op, schema;  ///< the op library and the op's schema text
  std::string device_name, device_capability;
  std::string python_version, torch_version, cuda_version;
  // results (status pass or fail)
  bool ran = false;
  DecodeComparison decode;          ///< the engine's output against the host reference
  bool metadata_returned = false;   ///< the op returned tile_scheduler_metadata and num_splits
  bool metadata_match = false;      ///< ... equal to the plan mla-plan computed, record for record
  std::string metadata_message;     ///< "" or the first difference
  std::int64_t metadata_parts = 0;  ///< num_sm_parts of the engine's plan
  std::optional<double> graph_us;   ///< median of CUDA-graph replays, L2 flushed (as bench times)
  std::optional<double> graph_min_us;
  std::optional<double> eager_us;  ///< median of eager calls (as verify times its own kernels)
  std::string timing_note;         ///< e.g. why the op could not be captured in a graph
  // the run
  std::string bundle;        ///< the bundle directory when kept (--engine-bundles), else ""
  int probe_exit = 0;        ///< the probe's exit code (-signal when killed)
  std::string probe_stderr;  ///< the last lines of its stderr
};

/// "" when the engine's op (FlashMLA's sparse decode, as vLLM and the flash_mla package build it)
/// has a kernel for the problem on `target`, else why not: h_q 64 or 128; fp8_ds_mla 584-byte rows
/// (+ 584), V3.2's 656-byte rows alone, or V4.1's 528 (+ 288) on compute capability 10.x only.
std::string engine_skip_reason(const VerifyProblem& p, const Target& target);

/// Writes the case bundle of `p` into `dir` (created): manifest.json and the .bin files (docs/verify.md,
/// "The case bundle"). `own` is mla-plan's run of the cell (its output and lse go in too), `cell`
/// names it. Error(output) when a file cannot be written.
void write_engine_bundle(const std::string& dir, const VerifyProblem& p, const VerifyRun& own, const VerifyCell& cell,
                         const EngineProbeOptions& options);

/// Reads what the probe left in `dir` (result.json, out.bin, lse.bin, the metadata) and judges it
/// against `reference` and the problem's plan. A missing or unreadable result.json is status error.
EngineCellResult read_engine_result(const std::string& dir, const VerifyProblem& p, const RefDecodeOutput& reference);

/// What running the probe gave, before its result is read.
struct ProbeProcess {
  bool started = false;
  std::string start_error;  ///< why it could not be started (strerror of posix_spawnp)
  bool timed_out = false;
  int exit_code = 0;  ///< the exit status, or -signal
  std::string stderr_tail;
};
/// Runs `options.python probe --bundle dir ...` with stdout and stderr into dir/probe.stdout.txt and
/// dir/probe.stderr.txt, killed after options.timeout_s.
ProbeProcess run_probe_process(const std::string& dir, const EngineProbeOptions& options);

/// The whole cell: the skip check, the bundle (kept or in a temporary directory), the probe, its
/// result. Never throws for what the probe or the engine does; those are statuses.
EngineCellResult run_engine_cell(const VerifyProblem& p, const VerifyRun& own, const VerifyCell& cell,
                                 const RefDecodeOutput& reference, const Target& target,
                                 const EngineProbeOptions& options);

/// The probe beside the executable in `exe_dir`: exe_dir/mla_plan_engine_probe.py, or "" when it is
/// not there.
std::string find_engine_probe(const std::string& exe_dir);

}  // namespace mlaplan
