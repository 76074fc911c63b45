// The one Catch2 main for every test executable (Catch2 v2, single header).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
