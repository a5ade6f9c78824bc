#include <catch2/catch.hpp>

#include "mlaplan/placement.hpp"
