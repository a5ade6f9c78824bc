#include <catch2/catch.hpp>

#include "mlaplan/budget.hpp"
