// Shared by the scenario tests that check refusals: the ConfigError a scenario text gives while it is read and its
// experiments run, with the check that nothing was simulated before it.
#pragma once

#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app::testing {

// Loads `text` as the file `file`, runs its experiments and returns the ConfigError's message; fails the test if
// nothing is refused or if any experiment ran before the error.
inline std::string scenario_error(const std::string& text, const std::string& file) {
    int experiments_run = 0;
    try {
        const Scenario sc = load_scenario_text(text, file, {}, {});
        (void)run_experiments(sc.experiments, 1, [&](int, int) { ++experiments_run; });
    } catch (const ConfigError& e) {
        CHECK(experiments_run == 0);
        return e.what();
    }
    FAIL("no ConfigError for:\n" << text);
    return "";
}

// The ConfigError message a scenario text gives while it is read and its first experiment prepared (nothing is
// simulated), or "" when both are accepted: for refusals that prepare_experiment makes and for acceptance checks.
inline std::string prepare_error(const std::string& text, const std::string& file) {
    try {
        const Scenario sc = load_scenario_text(text, file, {}, {});
        (void)prepare_experiment(sc.experiments.front());
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace servesim::app::testing
