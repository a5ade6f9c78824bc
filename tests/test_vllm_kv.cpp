#include <catch2/catch.hpp>

#include "mlaplan/vllm_kv.hpp"
