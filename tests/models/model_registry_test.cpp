// Tests models/model_registry.*: the embedded presets (names, each loads and is named after its file), lookup by
// name, the error for an unknown name, and resolve_model's choice between a path and a preset name.
#include "models/model_registry.h"

#include <algorithm>
#include <string>

#include "models/hf_config.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::test::config_error_of;
using sm::test::contains;
using sm::test::fixture;

TEST_CASE("The embedded presets include the models of the study, sorted", "[models]") {
    const auto names = sm::preset_names();
    CHECK(std::is_sorted(names.begin(), names.end()));
    for (const std::string wanted :
         {"Qwen3-4B", "Qwen3-8B", "Qwen3-32B", "Llama-3.1-8B", "Llama-3.1-70B", "Qwen3-235B-A22B", "MiniMax-M2.5",
          "Qwen3-Next-80B-A3B", "Qwen3.5-4B", "Qwen3.5-27B", "Nemotron-H-8B"}) {
        INFO(wanted);
        CHECK(std::find(names.begin(), names.end(), wanted) != names.end());
    }
}

TEST_CASE("Every preset loads, is named after its file and has layers", "[models]") {
    for (const auto& name : sm::preset_names()) {
        INFO(name);
        const auto spec = sm::load_preset(name);
        CHECK(spec.name == name);
        CHECK_FALSE(spec.layers.empty());
        CHECK(spec.hidden_size > 0);
    }
}

TEST_CASE("Preset names match case-insensitively", "[models]") {
    CHECK(sm::load_preset("qwen3-4b") == sm::load_preset("Qwen3-4B"));
    CHECK(sm::load_preset("NEMOTRON-H-8B").name == "Nemotron-H-8B");
}

TEST_CASE("An unknown preset is an error listing every known name", "[models]") {
    const auto msg = config_error_of([] { (void)sm::load_preset("Qwen9-1T"); });
    CHECK(contains(msg, "Qwen9-1T"));
    for (const auto& name : sm::preset_names()) {
        CHECK(contains(msg, name));
    }
}

TEST_CASE("resolve_model reads paths and looks up names", "[models]") {
    // A .json path reads the file; a plain name is a preset.
    CHECK(sm::resolve_model(fixture("Qwen3-4B.json")) == sm::load_preset("Qwen3-4B"));
    CHECK(sm::resolve_model("Qwen3-4B") == sm::load_preset("Qwen3-4B"));
    // A preset-format YAML on disk reads like the embedded one.
    const std::string preset_file = std::string(SERVESIM_SOURCE_DIR) + "/models/presets/Qwen3.5-4B.yaml";
    CHECK(sm::resolve_model(preset_file) == sm::load_preset("Qwen3.5-4B"));
    // A path that does not exist is a file error, not a preset lookup.
    const auto msg = config_error_of([] { (void)sm::resolve_model("no/such/config.json"); });
    CHECK(contains(msg, "no/such/config.json"));
}

TEST_CASE("A preset with an unknown top-level key is rejected", "[models]") {
    const auto doc = YAML::Load("name: toy\nhf_configs: {}\n");
    const auto msg = config_error_of([&] { (void)sm::model_from_preset(doc, "toy.yaml"); });
    CHECK(contains(msg, "toy.yaml"));
    CHECK(contains(msg, "hf_configs"));
    CHECK(contains(msg, "hf_config"));
}

TEST_CASE("Errors inside a preset's hf_config name the key under hf_config", "[models]") {
    const auto doc = YAML::Load("name: toy\nhf_config:\n  model_type: llama\n  hidden_size: big\n");
    const auto msg = config_error_of([&] { (void)sm::model_from_preset(doc, "toy.yaml"); });
    CHECK(contains(msg, "toy.yaml:4"));
    CHECK(contains(msg, "'hf_config.hidden_size'"));
}
