// Did-you-mean for mistyped flags (flag_suggestions.h).
#include "tools/app/flag_suggestions.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "tools/app/engine_keys.h"

namespace servesim::app {

namespace po = boost::program_options;

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // One row of the Wagner–Fischer table at a time.
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t{0});
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::optional<std::string> nearest_flag(std::string_view typed, const std::vector<std::string>& known) {
    const std::size_t limit = std::max<std::size_t>(2, typed.size() / 4);
    std::optional<std::string> best;
    std::size_t best_distance = limit + 1;
    for (const auto& k : known) {
        const std::size_t d = edit_distance(typed, k);
        if (d < best_distance) {
            best_distance = d;
            best = k;
        }
    }
    return best;
}

std::vector<std::string> known_flags(const po::options_description& opts) {
    std::vector<std::string> out;
    for (const auto& o : opts.options()) {
        if (!o->long_name().empty()) {
            out.push_back("--" + o->long_name());
        }
    }
    for (const auto& k : engine_keys()) {
        if (!k.flag.empty()) {
            out.emplace_back(k.flag);
        }
    }
    return out;
}

void store_or_suggest(po::command_line_parser& parser, const po::options_description& opts, po::variables_map& vm,
                      const std::string& command) {
    try {
        po::store(parser.run(), vm);
    } catch (const po::unknown_option& e) {
        const std::string typed = e.get_option_name();
        std::string message = "command line: unrecognised option '" + typed + "'";
        // Compare the flag without a value glued on with '='.
        const std::string name = typed.substr(0, typed.find('='));
        if (const auto near = nearest_flag(name, known_flags(opts)); near && *near != name) {
            message += "; did you mean '" + *near + "'?";
        }
        throw ConfigError(message + " (`servesim " + command + " --help` lists the flags)");
    }
}

}  // namespace servesim::app
