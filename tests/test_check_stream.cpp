// check at its limits: each file's result printed as it is done, only what the summary needs kept, the matrix within its promised time.

#include <catch2/catch.hpp>
