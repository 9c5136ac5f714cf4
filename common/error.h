// Errors shared by every servesim library.
// ConfigError: bad user input (scenario, config.json, profile, CLI flag), raised where the input is read and
// before anything is simulated; it names the file, the key path and what is allowed. InvariantError: a broken
// internal invariant (a bug), raised by SERVESIM_CHECK with the offending values in the message.
// Only tools/ catches these and turns them into an exit status; the libraries never call exit().
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace servesim {

class ConfigError : public std::runtime_error {
public:
    explicit ConfigError(const std::string& message) : std::runtime_error(escape_controls(message)) {}

    // "<file>: <key>: <message>"; line > 0 adds ":<line>" after the file.
    ConfigError(const std::string& file, int line, const std::string& key, const std::string& message)
        : std::runtime_error(escape_controls(format_location(file, line, key) + message)) {}

    // A message echoes what the user wrote (a key, a value, a path); a raw carriage return or another control
    // character would rewrite the terminal line it is printed on (issue 41), so each is shown escaped: "\r",
    // "\x1b". Newlines and tabs are kept (messages span lines on purpose).
    static std::string escape_controls(const std::string& text) {
        std::string out;
        out.reserve(text.size());
        for (const char c : text) {
            const auto u = static_cast<unsigned char>(c);
            if (c == '\r') {
                out += "\\r";
            } else if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) {
                out += fmt::format("\\x{:02x}", u);
            } else {
                out += c;
            }
        }
        return out;
    }

private:
    static std::string format_location(const std::string& file, int line, const std::string& key) {
        std::string out;
        if (!file.empty()) {
            out += file;
            if (line > 0) {
                out += fmt::format(":{}", line);
            }
            out += ": ";
        }
        if (!key.empty()) {
            out += "'" + key + "': ";
        }
        return out;
    }
};

class InvariantError : public std::logic_error {
public:
    explicit InvariantError(const std::string& message) : std::logic_error(message) {}
};

}  // namespace servesim

// SERVESIM_CHECK(cond, "fmt {}", values...): throws InvariantError with file:line, the condition and the values.
#define SERVESIM_CHECK(cond, ...)                                                                          \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            throw ::servesim::InvariantError(fmt::format("{}:{}: check failed: {}: {}", __FILE__, __LINE__, \
                                                         #cond, fmt::format(__VA_ARGS__)));                \
        }                                                                                                  \
    } while (false)
