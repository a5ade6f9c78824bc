// End-to-end tests of the binary: flag values (decimal integers, empty values, quoted values, the flag named, one-line parse errors, flags checked before the GPU).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "e2e_run.hpp"

using e2e::cfg;
using e2e::run;
