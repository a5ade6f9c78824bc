// Flag values read as the user wrote them: decimal integers, no empty value or list item, the value quoted and the flag named in every message, CLI11's parse errors as one line.

#include <catch2/catch.hpp>
