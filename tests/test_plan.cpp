#include <catch2/catch.hpp>

#include "mlaplan/plan.hpp"
