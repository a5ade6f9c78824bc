#pragma once
// What `mla-plan gpus` and `mla-plan formats` print: the GPU presets and the KV row formats, as
// text or as JSON (docs/cli.md).

#include <iosfwd>

namespace mlaplan::cli {

/// Every GPU preset (--gpu ids): a table, or the JSON document {"schema", "tool_version", "gpus"}.
void write_gpus(std::ostream& out, bool json);
/// Every KV row format with its byte map: text, or the JSON document {"schema", ..., "formats"}.
void write_formats(std::ostream& out, bool json);

}  // namespace mlaplan::cli
