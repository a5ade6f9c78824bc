// Input files: only regular files are read, every failure to open has its own cause, the whole file is JSON (no NUL), two spellings that disagree are an error.

#include <catch2/catch.hpp>
