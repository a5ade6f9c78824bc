#include <catch2/catch.hpp>

#include "mlaplan/checkpoint_weights.hpp"
