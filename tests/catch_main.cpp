// Test runner entry point for Catch2 2.x; Catch2 3.x links Catch2::Catch2WithMain instead.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
