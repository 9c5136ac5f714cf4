// common/yaml_reader.h: every YAML/JSON text is checked in one pass over its parse events before a node is built,
// so reading is linear in the text whatever its aliases (issue 41: nested aliases, 9 per level, hung every reader);
// a repeated key, a second document, a key that is a list or mapping and an alias inside its own anchor are refused
// naming file and line.
#include "common/yaml_reader.h"

#include <chrono>
#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim {
namespace {

// The message load_yaml_string gives for `text` as the file "r.yaml" ("" when it is accepted).
std::string yaml_error(const std::string& text) {
    try {
        (void)load_yaml_string(text, "r.yaml");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

// a0 is a list of 9 scalars; each a<k> a list of 9 aliases of a<k-1>: 10 levels, ~500 bytes.
std::string alias_bomb() {
    std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
    for (int k = 1; k < 10; ++k) {
        const std::string prev = "*a" + std::to_string(k - 1);
        text += "a" + std::to_string(k) + ": &a" + std::to_string(k) + " [";
        for (int i = 0; i < 9; ++i) {
            text += (i > 0 ? ", " : "") + prev;
        }
        text += "]\n";
    }
    return text;
}

TEST_CASE("Nested aliases are refused in linear time once they expand past a million nodes", "[common][yaml]") {
    // Expanded sizes (the list node plus its items): a0 = 1 + 9 = 10, a1 = 1 + 9·10 = 91, a2 = 820, a3 = 7,381,
    // a4 = 66,430, a5 = 597,871. Nodes brought in by aliases through a5: 9·(10 + 91 + 820 + 7,381 + 66,430) =
    // 672,588; a6's first alias of a5 adds 597,871 → 1,270,459 > 1,000,000, refused there (line 7). The whole
    // tree (a9 ≈ 4.3e8 nodes) was walked by check_plain_keys before: 8 levels took 6 s, 10 levels over 30 s.
    const auto start = std::chrono::steady_clock::now();
    const std::string m = yaml_error(alias_bomb());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(m);
    CHECK(m == "r.yaml:7: aliases expand the document past 1000000 nodes (the alias of 'a5' here repeats 597871 "
               "nodes); write the repeated parts out or use fewer nested aliases");
    CHECK(seconds < 1.0);
}

TEST_CASE("Aliases within the bound read as before", "[common][yaml]") {
    // Five levels: 672,588 nodes brought in by aliases, under the bound; the reader sees the expanded lists.
    std::string text;
    const std::string bomb = alias_bomb();
    std::size_t at = 0;
    for (int line = 0; line < 6; ++line) {
        at = bomb.find('\n', at) + 1;
    }
    text = bomb.substr(0, at);
    const YAML::Node root = load_yaml_string(text, "r.yaml");
    CHECK(root["a5"].size() == 9);
    CHECK(root["a5"][8][8][8][8][8][8].as<std::string>() == "x");
    // An alias of a scalar may be a key.
    const YAML::Node keyed = load_yaml_string("name: &n block_size\nengine: {*n : 16}\n", "r.yaml");
    CHECK(keyed["engine"]["block_size"].as<int>() == 16);
}

TEST_CASE("A repeated key is refused naming it and its line", "[common][yaml]") {
    // yaml-cpp kept one of the two silently.
    CHECK(yaml_error("model: a\nmodel: b\n") == "r.yaml:2: the key 'model' is repeated in one mapping; give it once");
    CHECK(yaml_error("engine:\n  block_size: 16\n  max_num_seqs: 8\n  block_size: 32\n") ==
          "r.yaml:4: the key 'block_size' is repeated in one mapping; give it once");
    CHECK(yaml_error("{\"a\": 1, \"a\": 2}") == "r.yaml:1: the key 'a' is repeated in one mapping; give it once");
    // The same key in two mappings, and a key equal to a value, are fine.
    CHECK(yaml_error("a: {x: 1}\nb: {x: a}\n").empty());
}

TEST_CASE("A second document is refused naming its line", "[common][yaml]") {
    // YAML::Load read the first document and dropped the rest silently.
    CHECK(yaml_error("model: a\n---\nmodel: b\n") ==
          "r.yaml:2: a second YAML document (after '---'); a file holds one document");
    // A leading '---' opens the one document.
    CHECK(yaml_error("---\nmodel: a\n").empty());
}

TEST_CASE("Keys that are not plain names and self-referencing aliases are refused", "[common][yaml]") {
    CHECK(yaml_error("engine: {[1, 2]: 16}\n") ==
          "r.yaml:1: a mapping key must be a plain name, not a list or a mapping");
    CHECK(yaml_error("m: &m {a: 1}\nengine: {*m : 16}\n") ==
          "r.yaml:2: a mapping key must be a plain name, not a list or a mapping");
    // yaml-cpp builds a node that contains itself; a reader walking it would never end.
    CHECK(yaml_error("a: &x [1, *x]\n") == "r.yaml:1: the alias *x is inside its own anchor &x (a cycle)");
}

TEST_CASE("A syntax error is file:line and the parser's words", "[common][yaml]") {
    CHECK(yaml_error("model: a\n  workload: x\n") == "r.yaml:2: malformed YAML/JSON: illegal map value");
    CHECK(yaml_error("a: *nowhere\n") == "r.yaml:1: malformed YAML/JSON: the referenced anchor is not defined");
}

TEST_CASE("A YAML file that is a device is refused before it is read", "[common][yaml]") {
    std::string m;
    try {
        (void)load_yaml_file("/dev/zero");
    } catch (const ConfigError& e) {
        m = e.what();
    }
    CHECK(m == "/dev/zero: a device, not a file; expected a YAML/JSON file (a regular file)");
}

}  // namespace
}  // namespace servesim
