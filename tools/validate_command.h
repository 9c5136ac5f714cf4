// `servesim validate`: the command line of the comparison with real runs (tools/app/validation.h,
// docs/VALIDATION.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tools/app/executor.h"

namespace servesim::cli {

// args: what follows `validate`. Returns the exit status; throws ConfigError for bad input (exit 2 by the caller).
// `plot(out_dir)` draws validation.png (--plot with --out).
int cmd_validate(const std::vector<std::string>& args, app::Executor& executor,
                 const std::function<int(const std::string&)>& plot);

// `servesim calibrate --from-measurements RUN... --fit request-path`: the request path's end-to-end constant fitted
// to measured runs (docs/REQUEST-PATH.md). args: what follows `calibrate`.
int cmd_fit_request_path(const std::vector<std::string>& args, app::Executor& executor);

}  // namespace servesim::cli
