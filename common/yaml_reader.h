// Strict, typed reading of YAML (and JSON, which yaml-cpp parses too) with errors that name the file, the line and
// the key path. Every reader of user input in servesim (scenarios, presets, config.json, profiles) goes through
// YamlMap so that an unknown key, a wrong type or a missing key stops the run with one clear message.
#pragma once

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/clock_range.h"
#include "common/error.h"
#include "common/nearest_name.h"
#include "common/input_file.h"

namespace servesim {

// Checks a document's shape in one pass over its parse events, before any node is built, so the time is linear
// in the text whatever its aliases (issue 41: an 821-byte file of nested aliases, 9 per level, made every reader
// walk 9^10 nodes and hang). Refused, each with the file and line:
// - a key that is not a plain name (a list or mapping as a key, `? [a]`): yaml-cpp's as<std::string>() threw its
//   own BadConversion past every reader (found by fuzzing);
// - a key repeated in one mapping: yaml-cpp keeps one of them silently;
// - a second document (`---`): YAML::Load reads the first and drops the rest silently;
// - aliases that bring in more than kMaxYamlAliasNodes nodes in all, counted as the expanded tree a reader would
//   walk (an alias of an anchored mapping counts every node under it, aliases inside included).
inline constexpr std::uint64_t kMaxYamlAliasNodes = 1'000'000;

class YamlShapeCheck final : public YAML::EventHandler {
public:
    explicit YamlShapeCheck(std::string file) : file_(std::move(file)) {}

    void OnDocumentStart(const YAML::Mark& mark) override {
        if (++num_documents_ > 1) {
            throw ConfigError(file_, line_of(mark), "",
                              "a second YAML document (after '---'); a file holds one document");
        }
    }
    void OnDocumentEnd() override {}

    void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        on_node(mark, Key::kNull, "null");
        leaf(anchor, std::string("null"));
    }

    void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        const Anchor& a = anchors_.at(anchor);
        if (a.open) {
            // yaml-cpp would build a node that contains itself, and every reader would walk it without end.
            throw ConfigError(file_, line_of(mark), "",
                              "the alias *" + a.name + " is inside its own anchor &" + a.name + " (a cycle)");
        }
        on_node(mark, a.scalar ? Key::kScalar : Key::kCollection, a.scalar ? *a.scalar : std::string());
        alias_nodes_ = saturating_add(alias_nodes_, a.nodes);
        if (alias_nodes_ > kMaxYamlAliasNodes) {
            throw ConfigError(file_, line_of(mark), "",
                              fmt::format("aliases expand the document past {} nodes (the alias of '{}' here "
                                          "repeats {} nodes); write the repeated parts out or use fewer nested "
                                          "aliases",
                                          kMaxYamlAliasNodes, a.name, a.nodes));
        }
        add_nodes(a.nodes);
    }

    void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  const std::string& value) override {
        on_node(mark, Key::kScalar, value);
        leaf(anchor, value);
    }

    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                         YAML::EmitterStyle::value) override {
        on_node(mark, Key::kCollection, "");
        open(false, anchor);
    }
    void OnSequenceEnd() override { close(); }

    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                    YAML::EmitterStyle::value) override {
        on_node(mark, Key::kCollection, "");
        open(true, anchor);
    }
    void OnMapEnd() override { close(); }

    void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_anchor_name_ = name; }

private:
    enum class Key { kScalar, kNull, kCollection };
    struct Frame {
        bool is_map = false;
        bool expect_key = true;
        std::uint64_t nodes = 1;  // this collection and everything under it, aliases expanded
        YAML::anchor_t anchor = 0;
        std::unordered_set<std::string> keys;
    };
    struct Anchor {
        std::string name;
        std::uint64_t nodes = 1;
        std::optional<std::string> scalar;  // the value of an anchored scalar (an alias of it may be a key)
        bool open = false;                  // a collection still being read: an alias of it would be a cycle
    };

    static std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
        return a > std::numeric_limits<std::uint64_t>::max() / 2 - b ? std::numeric_limits<std::uint64_t>::max() / 2
                                                                     : a + b;
    }
    static int line_of(const YAML::Mark& m) { return m.line >= 0 ? m.line + 1 : 0; }

    // A node begins: as a key of the enclosing mapping, it must be a plain name not seen before in it.
    void on_node(const YAML::Mark& mark, Key kind, const std::string& text) {
        if (stack_.empty() || !stack_.back().is_map) {
            return;
        }
        Frame& f = stack_.back();
        if (!f.expect_key) {
            f.expect_key = true;  // this node is the value; the next node at this level is a key
            return;
        }
        f.expect_key = false;
        if (kind == Key::kCollection) {
            throw ConfigError(file_, line_of(mark), "", "a mapping key must be a plain name, not a list or a mapping");
        }
        if (!f.keys.insert(text).second) {
            throw ConfigError(file_, line_of(mark), "",
                              "the key '" + text + "' is repeated in one mapping; give it once");
        }
    }

    void add_nodes(std::uint64_t n) {
        if (!stack_.empty()) {
            stack_.back().nodes = saturating_add(stack_.back().nodes, n);
        }
    }

    void leaf(YAML::anchor_t anchor, std::string value) {
        add_nodes(1);
        if (anchor != 0) {
            anchors_[anchor] = {std::exchange(pending_anchor_name_, {}), 1, std::move(value)};
        }
    }

    void open(bool is_map, YAML::anchor_t anchor) {
        Frame f;
        f.is_map = is_map;
        f.anchor = anchor;
        stack_.push_back(std::move(f));
        if (anchor != 0) {
            anchors_[anchor] = {std::exchange(pending_anchor_name_, {}), 1, std::nullopt, true};
        }
    }

    void close() {
        const Frame f = std::move(stack_.back());
        stack_.pop_back();
        if (f.anchor != 0) {
            anchors_[f.anchor].nodes = f.nodes;
            anchors_[f.anchor].open = false;
        }
        add_nodes(f.nodes);
    }

    std::string file_;
    int num_documents_ = 0;
    std::vector<Frame> stack_;
    std::unordered_map<YAML::anchor_t, Anchor> anchors_;
    std::string pending_anchor_name_;
    std::uint64_t alias_nodes_ = 0;
};

// Loads a YAML/JSON text after YamlShapeCheck; a syntax error becomes a ConfigError "file:line: malformed
// YAML/JSON: <what the parser says>" (no yaml-cpp exception gets past).
inline YAML::Node load_yaml_string(const std::string& text, const std::string& name) {
    try {
        {
            std::istringstream stream(text);
            YAML::Parser parser(stream);
            YamlShapeCheck check(name);
            while (parser.HandleNextDocument(check)) {
            }
        }
        return YAML::Load(text);
    } catch (const YAML::ParserException& e) {
        throw ConfigError(name, e.mark.line + 1, "", "malformed YAML/JSON: " + e.msg);
    } catch (const YAML::Exception& e) {
        throw ConfigError(name, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", "malformed YAML/JSON: " + e.msg);
    }
}

// A YAML/JSON file through the one file-opening helper (common/input_file.h): a regular file, at most 1 GiB.
inline YAML::Node load_yaml_file(const std::string& path, std::string_view what = "YAML/JSON file") {
    return load_yaml_string(read_input_file(path, what), path);
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
                throw ConfigError(file_, line_of(kv.first), key_path(key),
                                  "unknown key" + did_you_mean(key, allowed) + "; allowed: " + list);
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
