// Strict, typed reading of YAML (and JSON, which yaml-cpp parses too) with errors that name the file, the line and
// the key path. Every reader of user input in servesim (scenarios, presets, config.json, profiles) goes through
// YamlMap so that an unknown key, a wrong type or a missing key stops the run with one clear message.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <ios>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/clock_range.h"

namespace servesim {

// Loads a YAML/JSON file; a missing file or a syntax error becomes a ConfigError naming the file and line.
// Every mapping key must be a scalar: a list or mapping used as a key (`? [a]`, `{[1]: x}`) made yaml-cpp's
// as<std::string>() throw its own BadConversion past every reader (found by fuzzing). Checked once when a document
// is loaded, so each reader may take keys as strings.
inline void check_plain_keys(const YAML::Node& n, const std::string& file) {
    if (n.IsMap()) {
        for (const auto& kv : n) {
            if (!kv.first.IsScalar() && !kv.first.IsNull()) {
                const auto m = kv.first.Mark();
                throw ConfigError(file, m.line >= 0 ? m.line + 1 : 0, "",
                                  "a mapping key must be a plain name, not a list or a mapping");
            }
            check_plain_keys(kv.second, file);
        }
    } else if (n.IsSequence()) {
        for (const auto& e : n) {
            check_plain_keys(e, file);
        }
    }
}

// Only a regular file is read: a directory used to reach yaml-cpp's stream as an unnamed read error, a device
// (/dev/zero) would be read without end.
inline YAML::Node load_yaml_file(const std::string& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
        throw ConfigError(path + ": not a regular file (a directory or a device); expected a YAML/JSON file");
    }
    try {
        YAML::Node root = YAML::LoadFile(path);
        check_plain_keys(root, path);
        return root;
    } catch (const YAML::BadFile&) {
        throw ConfigError(path + ": cannot open file");
    } catch (const YAML::ParserException& e) {
        throw ConfigError(path, e.mark.line + 1, "", "malformed YAML/JSON: " + e.msg);
    } catch (const std::ios_base::failure& e) {
        throw ConfigError(path + ": cannot read file: " + e.what());
    }
}

inline YAML::Node load_yaml_string(const std::string& text, const std::string& name) {
    try {
        YAML::Node root = YAML::Load(text);
        check_plain_keys(root, name);
        return root;
    } catch (const YAML::ParserException& e) {
        throw ConfigError(name, e.mark.line + 1, "", "malformed YAML/JSON: " + e.msg);
    }
}

// A mapping node plus where it came from. Key paths are dotted ("engine.block_size").
class YamlMap {
public:
    YamlMap(YAML::Node node, std::string file, std::string path = "")
        : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {
        if (!node_.IsMap()) {
            throw ConfigError(file_, line_of(node_), path_.empty() ? "<top level>" : path_,
                              "expected a mapping of keys to values");
        }
    }

    const std::string& file() const { return file_; }

    const std::string& path() const { return path_; }

    const YAML::Node& raw() const { return node_; }

    std::string key_path(std::string_view key) const {
        return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
    }

    // Rejects any key not in `allowed`, listing the allowed ones.
    void allow_only(std::initializer_list<std::string_view> allowed) const {
        allow_only(std::vector<std::string_view>(allowed));
    }

    void allow_only(const std::vector<std::string_view>& allowed) const {
        for (const auto& kv : node_) {
            const auto key = kv.first.as<std::string>();
            if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
                std::string list;
                for (auto a : allowed) {
                    list += (list.empty() ? "" : ", ") + std::string(a);
                }
                throw ConfigError(file_, line_of(kv.first), key_path(key), "unknown key; allowed: " + list);
            }
        }
    }

    bool has(std::string_view key) const { return static_cast<bool>(node_[std::string(key)]); }

    std::vector<std::string> keys() const {
        std::vector<std::string> out;
        for (const auto& kv : node_) {
            out.push_back(kv.first.as<std::string>());
        }
        return out;
    }

    YAML::Node node(std::string_view key) const {
        YAML::Node n = node_[std::string(key)];
        if (!n) {
            fail(key, "missing required key");
        }
        return n;
    }

    YamlMap map(std::string_view key) const { return YamlMap(node(key), file_, key_path(key)); }

    int line(std::string_view key) const {
        YAML::Node n = node_[std::string(key)];
        return n ? line_of(n) : line_of(node_);
    }

    [[noreturn]] void fail(std::string_view key, const std::string& message) const {
        throw ConfigError(file_, line(key), key_path(key), message);
    }

    template <typename T>
    T get(std::string_view key) const {
        return convert<T>(node(key), key);
    }

    template <typename T>
    T get_or(std::string_view key, T fallback) const {
        return has(key) ? get<T>(key) : fallback;
    }

    template <typename T>
    std::optional<T> get_optional(std::string_view key) const {
        if (!has(key) || node_[std::string(key)].IsNull()) {
            return std::nullopt;
        }
        return get<T>(key);
    }

    // A number that must lie in [lo, hi]; the message states the range.
    template <typename T>
    T get_in_range(std::string_view key, T lo, T hi) const {
        T v = get<T>(key);
        check_range(key, v, lo, hi);
        return v;
    }

    template <typename T>
    void check_range(std::string_view key, T v, T lo, T hi) const {
        if (v < lo || v > hi) {
            fail(key, fmt::format("value {} is out of range; allowed: {} to {}", v, lo, hi));
        }
    }

    template <typename T>
    T convert(const YAML::Node& n, std::string_view key) const {
        if constexpr (std::is_same_v<T, bool>) {
            if (!n.IsScalar()) {
                fail(key, "expected true or false");
            }
            const auto s = n.Scalar();
            if (s == "true" || s == "True" || s == "TRUE") {
                return true;
            }
            if (s == "false" || s == "False" || s == "FALSE") {
                return false;
            }
            fail(key, "expected true or false, got '" + s + "'");
        } else if constexpr (std::is_integral_v<T>) {
            if (!n.IsScalar()) {
                fail(key, "expected an integer");
            }
            const auto s = n.Scalar();
            try {
                std::size_t pos = 0;
                const long long v = std::stoll(s, &pos, 10);
                if (pos != s.size()) {
                    throw std::invalid_argument(s);
                }
                // std::in_range compares signed and unsigned correctly (a negative value for a signed key is in
                // range, so the key's own "must be non-negative" message fires; for an unsigned key it is not).
                if (!std::in_range<T>(v)) {
                    fail(key, "integer out of range: " + s);
                }
                return static_cast<T>(v);
            } catch (const std::logic_error&) {
                // A float like 1e6 written for an integer is accepted when it is integral.
                try {
                    std::size_t pos = 0;
                    const double d = std::stod(s, &pos);
                    if (pos == s.size() && std::isfinite(d) && d == std::floor(d)) {
                        // The same range check as the integer path: a cast of an out-of-range double is undefined.
                        if (d < static_cast<double>(std::numeric_limits<T>::min()) ||
                            d >= std::ldexp(1.0, std::numeric_limits<T>::digits)) {
                            fail(key, "integer out of range: " + s);
                        }
                        return static_cast<T>(d);
                    }
                } catch (const std::logic_error&) {
                }
                fail(key, "expected an integer, got '" + s + "'");
            }
        } else if constexpr (std::is_floating_point_v<T>) {
            if (!n.IsScalar()) {
                fail(key, "expected a number");
            }
            const auto s = n.Scalar();
            try {
                std::size_t pos = 0;
                const double v = std::stod(s, &pos);
                if (pos != s.size() || !std::isfinite(v)) {
                    throw std::invalid_argument(s);
                }
                return static_cast<T>(v);
            } catch (const std::logic_error&) {
                fail(key, "expected a number, got '" + s + "'");
            }
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!n.IsScalar()) {
                fail(key, "expected a string");
            }
            return n.Scalar();
        } else {
            static_assert(sizeof(T) == 0, "unsupported type");
        }
    }

    static int line_of(const YAML::Node& n) {
        const auto m = n.Mark();
        return m.line >= 0 ? m.line + 1 : 0;
    }

private:
    YAML::Node node_;
    std::string file_;
    std::string path_;
};

// "30s", "5min", "250ms", "1h", "2.5" (seconds) → seconds. Throws ConfigError naming the key.
inline double parse_duration_s(const std::string& text, const std::string& file, int line, const std::string& key) {
    std::size_t pos = 0;
    double value = 0;
    try {
        value = std::stod(text, &pos);
    } catch (const std::logic_error&) {
        throw ConfigError(file, line, key, "expected a duration like 30s, 5min, 250ms or 1h, got '" + text + "'");
    }
    std::string unit = text.substr(pos);
    unit.erase(0, unit.find_first_not_of(' '));
    double scale = 0;
    if (unit.empty() || unit == "s") {
        scale = 1;
    } else if (unit == "ms") {
        scale = 1e-3;
    } else if (unit == "us") {
        scale = 1e-6;
    } else if (unit == "min" || unit == "m") {
        scale = 60;
    } else if (unit == "h") {
        scale = 3600;
    } else {
        throw ConfigError(file, line, key, "unknown duration unit '" + unit + "'; allowed: ms, s, min, h");
    }
    if (!std::isfinite(value) || value < 0) {
        throw ConfigError(file, line, key, "duration must be a non-negative number, got '" + text + "'");
    }
    // Simulated time is int64 nanoseconds (±9.22e9 s); durations are bounded well inside it so that sums of a few of
    // them (warm-up + max_time + a think time) cannot wrap. docs/INPUT-RANGES.md.
    if (value * scale > kMaxDurationS) {
        throw ConfigError(file, line, key,
                          fmt::format("duration '{}' is beyond the simulated clock's range; allowed: 0 to {:.0e} s "
                                      "(about 31 years)",
                                      text, kMaxDurationS));
    }
    return value * scale;
}

}  // namespace servesim
