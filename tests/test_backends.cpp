// Filled in by its module's tests.
#include <catch2/catch.hpp>
