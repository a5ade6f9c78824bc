#pragma once
// The attention backends vLLM can select for DeepSeek's sparse-MLA families (placeholder).
