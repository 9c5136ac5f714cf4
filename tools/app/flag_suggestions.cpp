// Did-you-mean for mistyped flags (flag_suggestions.h).
#include "tools/app/flag_suggestions.h"

#include "common/error.h"
#include "common/nearest_name.h"
#include "tools/app/engine_keys.h"

namespace servesim::app {

namespace po = boost::program_options;

std::optional<std::string> nearest_flag(std::string_view typed, const std::vector<std::string>& known) {
    return nearest_name(typed, known);
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
    // The engine flags' companions that are not engine keys (command_line.cpp take_engine_flags): -dp and vLLM's
    // short spellings, so "--tp" is pointed at "-tp".
    out.insert(out.end(), {"--data-parallel-size", "-tp", "-pp", "-dp"});
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
