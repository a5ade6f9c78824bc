// End-to-end tests of the binary: the output side (write errors, files written whole, text from the input made inert).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "e2e_run.hpp"

using e2e::cfg;
using e2e::run;
