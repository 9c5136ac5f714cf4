// Did-you-mean for the command line (issue 39): a mistyped flag is refused naming the nearest known one. Known flags
// are the command's Boost.Program_options descriptions plus vLLM's engine flags (engine_keys.h), which every
// simulating command takes.
#pragma once

#include <boost/program_options.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::app {

// The known flag nearest `typed` ("--max-num-seq" → "--max-num-seqs"): common/nearest_name.h's rule.
[[nodiscard]] std::optional<std::string> nearest_flag(std::string_view typed, const std::vector<std::string>& known);

// "--name" for every long option of `opts`, then every engine flag.
[[nodiscard]] std::vector<std::string> known_flags(const boost::program_options::options_description& opts);

// po::store of `parser.run()`; an unknown option becomes a ConfigError "command line: unrecognised option '--x'"
// with "; did you mean '--y'?" when a known flag is near.
void store_or_suggest(boost::program_options::command_line_parser& parser,
                      const boost::program_options::options_description& opts,
                      boost::program_options::variables_map& vm, const std::string& command);

}  // namespace servesim::app
