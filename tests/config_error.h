// The message of the ConfigError an expression throws, for the tests of bad input in every test folder: a test that
// expects an error checks what the message says, so a missing error (an empty message) fails it. Only what Catch2
// 2.13 and 3.x share is used.
#pragma once

#include <string>

#include "common/error.h"

namespace servesim::testing {

// Runs fn; returns the ConfigError's message, or "" when none is thrown.
template <typename Fn>
std::string config_error_of(Fn&& fn) {
    try {
        fn();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace servesim::testing
