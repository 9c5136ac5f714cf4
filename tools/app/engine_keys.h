// The engine keys, once: each entry is a scenario key under `engine:` (max_num_seqs), the vLLM flag that sets the
// same thing (--max-num-seqs), the kind of value, its range and a help line. The scenario reader (scenario.cpp) and
// the command line (command_line.cpp) both read values through parse_value, so a key takes the same forms and units
// in a file and as a flag. Adding a key is one entry in kEngineKeys (engine_keys.cpp) and one field in
// EngineSettings. Number forms follow vLLM's argument parser (vllm/utils/argparse_utils.py human_readable_int:
// 1k = 1,000, 1K = 1,024; max_model_len also takes -1/auto, which servesim does not model and refuses).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tools/app/scenario.h"

namespace servesim::app {

enum class ValueKind {
    Int,        // a whole number (1e6 accepted when integral): vLLM's `int` fields
    Tokens,     // a token count in vLLM's human_readable_int forms: 8192, 8k (8,000), 8K (8,192), 1e6
    Number,     // a real number
    Bool,       // true/false in a file; --flag / --no-flag on the command line (argparse BooleanOptionalAction)
    Bytes,      // a size: bytes, vLLM's 12G (12·2^30) / 12g (12·10^9), or 12GiB, 12GB, 512MiB, 512MB
    GiB,        // a size in GiB as vLLM's --kv-offloading-size means it (60 = 60 GiB); units as for Bytes accepted
    KvDtype,    // vLLM's CacheDType values; those servesim does not model are refused by name
    MambaMode,  // vLLM's MambaCacheMode: none, align, all
    Version,    // a vLLM release, major.minor[.patch], within the modelled range
    Retention,  // vLLM's --prefix-cache-retention-interval: none (every boundary), 0, or tokens (Tokens forms)
    Quantization,  // vLLM's --quantization methods servesim models (models/quantization_config.h)
    ModelDtype,    // vLLM's --dtype: auto, half, float16, bfloat16, float, float32
    HybridPolicy,  // a name from cache::hybrid_policies()
    SizeList,      // token counts, vLLM's nargs="+" list: 1 2 4 8 on the command line, [1, 2, 4, 8] or "1,2,4,8" in a
                   // file; parsed to the canonical "1,2,4,8" (each a whole number in [lo, hi])
    All2AllBackend,  // vLLM's --all2all-backend values servesim models (engine::parse_all2all_backend)
    SpeculativeJson,  // vLLM's --speculative-config JSON object (engine::parse_speculative_config checks it)
    RateList,         // numbers in [0, 1]: 0.8 0.6 after the flag, [0.8, 0.6] / "0.8,0.6" in a file
};

using EngineValue = std::variant<std::int64_t, double, bool, std::string>;

struct ValueSpec {
    ValueKind kind = ValueKind::Int;
    double lo = 0;              // inclusive lower bound (numbers)
    double hi = 0;              // inclusive upper bound (numbers)
    bool lo_exclusive = false;  // (lo, hi] instead of [lo, hi]
    std::int64_t multiple_of = 1;
    bool vllm_auto = false;     // vLLM also takes -1 / auto here (human_readable_int_or_auto), which is not modelled
};

struct EngineKey {
    std::string_view key;   // scenario key under engine:
    std::string_view flag;  // vLLM's flag ("" when vLLM has none: a servesim modelling knob)
    ValueSpec spec;
    std::string_view help;
    void (*apply)(EngineSettings&, const EngineValue&);
};

// Every engine key, in the order `servesim run --help` lists them.
[[nodiscard]] std::span<const EngineKey> engine_keys();

// The entry for a scenario key or a vLLM flag ("--max-num-seqs"); nullptr when there is none.
[[nodiscard]] const EngineKey* find_engine_key(std::string_view key);
[[nodiscard]] const EngineKey* find_engine_flag(std::string_view flag);

// The sizes of a SizeList value as parse_value returns it ("1,2,4,8").
[[nodiscard]] std::vector<std::int64_t> size_list(const std::string& canonical);
// The rates of a RateList value as parse_value returns it ("0.8,0.6").
[[nodiscard]] std::vector<double> rate_list(const std::string& canonical);

// Reads `text` as `spec` says. A bad value throws ConfigError whose message says what is allowed, without a location:
// callers add the file and key, or the flag.
[[nodiscard]] EngineValue parse_value(const ValueSpec& spec, const std::string& text);

// One line describing the forms a kind accepts (for --help and messages).
[[nodiscard]] std::string_view value_forms(ValueKind kind);

// Settings from a scenario's `engine:` mapping: every key through its entry; null (`~`) leaves vLLM's default.
[[nodiscard]] EngineSettings parse_engine_settings(const YamlMap& engine);

}  // namespace servesim::app
