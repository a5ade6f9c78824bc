// End-to-end tests of the binary: input files (only regular files, the cause of every failure to open, NUL bytes, two spellings that disagree).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "e2e_run.hpp"

using e2e::cfg;
using e2e::run;
