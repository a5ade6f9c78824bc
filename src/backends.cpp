#include "mlaplan/backends.hpp"
