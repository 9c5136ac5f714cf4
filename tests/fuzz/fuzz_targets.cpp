// The readers under fuzzing; see fuzz_targets.h. Readers that take a path get the bytes through a file in a
// private temporary folder (one per process, removed at exit), as a user's file would reach them.
#include "tests/fuzz/fuzz_targets.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "calibration/gpu_spec.h"
#include "calibration/hardware_profile.h"
#include "calibration/measurements.h"
#include "common/error.h"
#include "models/hf_config.h"
#include "tools/app/scenario.h"
#include "tools/app/validation.h"
#include "workloads/trace_reader.h"

namespace servesim::fuzz {

namespace {

namespace fs = std::filesystem;

// A private folder for this process's input files.
const fs::path& scratch_dir() {
    static const fs::path dir = [] {
        std::string tmpl = (fs::temp_directory_path() / "servesim-fuzz-XXXXXX").string();
        if (mkdtemp(tmpl.data()) == nullptr) {
            std::abort();
        }
        const fs::path d = tmpl;
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(scratch_dir(), ec);
        });
        return d;
    }();
    return dir;
}

std::string write_input(const char* name, const std::uint8_t* data, std::size_t size) {
    const fs::path p = scratch_dir() / name;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return p.string();
}

std::string text_of(const std::uint8_t* data, std::size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

// ---- yaml_grammar: scenario documents built from a small grammar, driven by the fuzz input ----
// Byte mutations rarely produce a well-formed anchor, alias or merge key; this target spends every input on
// documents that have them. Each byte picks the next production; an exhausted input picks 0 (the shortest), so
// every input gives a finite document. Anchors are named &a0, &a1, ... in order; an alias names one defined so far
// (or, one time in 16, the anchor being built: a cycle), and mappings nest aliases so that expansion can grow
// geometrically (the alias bomb), which the reader must refuse by its node bound. `<<` merge keys are written as
// YAML 1.1 has them (yaml-cpp 0.7 reads `<<` as an ordinary key).
class Grammar {
public:
    Grammar(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

    std::string document() {
        std::string out = "name: g\nseed: " + scalar_of(kSeeds) + "\n";
        out += "model: " + value(kModelValues, 2) + "\n";
        out += "gpu: " + value(kGpuValues, 2) + "\n";
        out += "engine: " + mapping(kEngineKeys, kEngineValues, 1, "") + "\n";
        out += "workload: " + mapping(kWorkloadKeys, kWorkloadValues, 1,
                                      "type: synthetic, prompt_tokens: 100, output_tokens: 10, rate: 10, "
                                      "num_requests: 20") +
               "\n";
        if (next() % 2 == 1) {
            out += "experiments: [" + mapping(kTopKeys, kWorkloadValues, 1, "name: e0");
            for (int i = 1, n = next() % 4; i <= n; ++i) {
                out += ", " + mapping(kTopKeys, kWorkloadValues, 1, "name: e" + std::to_string(i));
            }
            out += "]\n";
        }
        if (next() % 3 == 2) {
            out += "sweep: {" + std::string(kSweepKeys[next() % kSweepKeys.size()]) + ": [" +
                   value(kEngineValues, 2) + ", " + value(kEngineValues, 2) + "]}\n";
        }
        return out;
    }

private:
    using Words = std::vector<std::string_view>;
    static inline const Words kSeeds = {"1", "0", "7", "1", "18446744073709551615", "-1", "''", "2"};
    static inline const Words kModelValues = {"Qwen3-4B", "Qwen3.5-4B", "Llama-3.1-8B", "nope"};
    static inline const Words kGpuValues = {"H200", "H100", "A100-80GB", "RTX3090"};
    static inline const Words kTopKeys = {"model", "gpu", "engine", "workload", "max_time", "warmup", "cluster",
                                          "replicates", "<<", "seed"};
    static inline const Words kSweepKeys = {"engine.block_size", "engine.max_num_seqs", "workload.rate",
                                            "cluster.replicas", "model"};
    static inline const Words kEngineKeys = {"block_size", "max_num_seqs", "max_num_batched_tokens",
                                             "enable_prefix_caching", "kv_cache_memory_bytes",
                                             "gpu_memory_utilization", "max_model_len", "<<", "tensor_parallel_size"};
    static inline const Words kEngineValues = {"16", "1", "0", "-1", "32", "1e9", "0.9", "true", "10GiB", "inf",
                                               "null", "[]", "{}", "2048", "9223372036854775808", "nan"};
    static inline const Words kWorkloadKeys = {"type", "prompt_tokens", "output_tokens", "rate", "num_requests",
                                               "duration", "tenants", "shared_prefix_tokens", "max_concurrency",
                                               "<<", "arrival", "think_time"};
    static inline const Words kWorkloadValues = {"synthetic", "tenants", "100", "1", "0", "inf", "30s", "1e9",
                                                 "poisson", "{dist: uniform, min: 1, max: 10}", "-5", "''", "[1, 2]",
                                                 "{}", "null", "1e300"};

    std::uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }

    std::string scalar_of(const Words& w) { return std::string(w[next() % w.size()]); }

    // An alias of an anchor written so far; one time in 16 one past them (an undefined anchor, or the anchor being
    // written: a cycle).
    std::string alias(const Words& scalars) {
        const bool past = next() % 16 == 15;
        if (anchors_ == 0 && !past) {
            return scalar_of(scalars);
        }
        // A space after the name: yaml-cpp 0.7 reads `*a1]` as an alias of "a1]".
        return "*a" + std::to_string(past ? anchors_ : next() % anchors_) + " ";
    }

    // A value: a scalar, an alias, a nested mapping, a sequence, or any of them under a new anchor.
    std::string value(const Words& scalars, int depth) {
        switch (next() % 8) {
            case 0:
            case 1:
            case 2:
                return scalar_of(scalars);
            case 3:
            case 4:
                return alias(scalars);
            case 5:
                return depth < 4 ? mapping(kEngineKeys, scalars, depth + 1, "") : scalar_of(scalars);
            case 6: {
                std::string s = "[";
                for (int i = 0, n = next() % 5; i < n && depth < 4; ++i) {
                    s += (i > 0 ? ", " : "") + value(scalars, depth + 1);
                }
                return s + "]";
            }
            default: {
                const int id = anchors_;
                const bool early = next() % 8 == 7;  // named before its content: its content may alias it
                if (early) {
                    ++anchors_;
                }
                // The content is a scalar or a mapping (an anchor on an alias or on an anchor is a syntax error).
                std::string content = scalar_of(scalars);
                if (depth < 4 && next() % 2 == 1) {
                    content = mapping(kEngineKeys, scalars, depth + 1, "");
                }
                if (!early) {
                    ++anchors_;
                }
                return "&a" + std::to_string(id) + " " + content;
            }
        }
    }

    // A flow mapping: the fixed entries, then generated ones (a key, a merge of one alias or of a list of them).
    // A key is used once per mapping (the fixed entries' keys included), except one time in 16: a repeated key.
    std::string mapping(const Words& keys, const Words& scalars, int depth, const std::string& fixed) {
        std::string s = "{" + fixed;
        bool first = fixed.empty();
        std::vector<std::string> used;
        for (std::size_t b = 0; b < fixed.size();) {  // "k: v, k2: v2"
            const std::size_t colon = fixed.find(':', b);
            if (colon == std::string::npos) {
                break;
            }
            used.push_back(fixed.substr(b, colon - b));
            const std::size_t comma = fixed.find(", ", colon);
            b = comma == std::string::npos ? fixed.size() : comma + 2;
        }
        for (int i = 0, n = next() % 6; i < n; ++i) {
            const std::string key = scalar_of(keys);
            if (std::find(used.begin(), used.end(), key) != used.end() && next() % 16 != 0) {
                continue;
            }
            used.push_back(key);
            s += first ? "" : ", ";
            first = false;
            if (key == "<<") {
                if (next() % 2 == 0) {
                    s += "<<: " + alias(scalars);
                } else {
                    s += "<<: [" + alias(scalars) + ", " + alias(scalars) + "]";
                }
            } else {
                s += key + ": " + value(scalars, depth);
            }
        }
        return s + "}";
    }

    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
    int anchors_ = 0;
};

}  // namespace

std::string scenario_from_grammar(const std::uint8_t* data, std::size_t size) {
    return Grammar(data, size).document();
}

namespace {

template <typename F>
void expect_only_config_errors(F&& f) {
    try {
        f();
    } catch (const ConfigError&) {
        // bad input, reported as such: fine
    }
}

void run_scenario(const std::uint8_t* data, std::size_t size) {
    expect_only_config_errors([&] { (void)app::load_scenario_text(text_of(data, size), "fuzz.yaml", {}, {}); });
}

void run_hf_config(const std::uint8_t* data, std::size_t size) {
    const std::string path = write_input("config.json", data, size);
    expect_only_config_errors([&] { (void)models::read_hf_config(path, "fuzz"); });
}

void run_trace(const char* format, const std::uint8_t* data, std::size_t size) {
    const std::string path = write_input(format, data, size);
    expect_only_config_errors([&] {
        auto reader = workloads::open_trace(path, format);
        // Bounded: a reader must end on its file's end; 100k records is far more than any fuzz input holds.
        for (int i = 0; i < 100000 && reader->next(); ++i) {
        }
    });
}

void run_mooncake(const std::uint8_t* data, std::size_t size) { run_trace("mooncake", data, size); }

void run_azure(const std::uint8_t* data, std::size_t size) { run_trace("azure", data, size); }

void run_csv_trace(const std::uint8_t* data, std::size_t size) { run_trace("csv", data, size); }

// validate's per-request files (tools/app/validation.cpp read_requests_csv / read_requests_jsonl), chosen by the
// extension as `servesim validate FILE` chooses; the model and GPU are taken as given on the command line.
void run_requests_csv(const std::uint8_t* data, std::size_t size) {
    const std::string path = write_input("requests.csv", data, size);
    expect_only_config_errors([&] { (void)app::read_measured_run(path, true); });
}

void run_requests_jsonl(const std::uint8_t* data, std::size_t size) {
    const std::string path = write_input("requests.jsonl", data, size);
    expect_only_config_errors([&] { (void)app::read_measured_run(path, true); });
}

// --gpu FILE.yaml (calibration/gpu_spec.h read_gpu_file).
void run_gpu_file(const std::uint8_t* data, std::size_t size) {
    const std::string path = write_input("gpu.yaml", data, size);
    expect_only_config_errors([&] { (void)calibration::read_gpu_file(path); });
}

void run_yaml_grammar(const std::uint8_t* data, std::size_t size) {
    expect_only_config_errors(
        [&] { (void)app::load_scenario_text(scenario_from_grammar(data, size), "fuzz.yaml", {}, {}); });
}

void run_profile(const std::uint8_t* data, std::size_t size) {
    expect_only_config_errors([&] { (void)calibration::load_profile_string(text_of(data, size), "fuzz.yaml"); });
}

void run_measurements(const std::uint8_t* data, std::size_t size) {
    const std::string path = write_input("measurements.yaml", data, size);
    expect_only_config_errors([&] {
        const calibration::Measurements m = calibration::read_measurements(path);
        (void)calibration::fit_measurements(m, path);
    });
}

}  // namespace

const std::vector<FuzzTarget>& fuzz_targets() {
    static const std::vector<FuzzTarget> targets = {
        {"scenario", run_scenario},   {"hf_config", run_hf_config},        {"mooncake", run_mooncake},
        {"azure", run_azure},         {"profile", run_profile},            {"measurements", run_measurements},
        {"csv_trace", run_csv_trace}, {"requests_csv", run_requests_csv},  {"requests_jsonl", run_requests_jsonl},
        {"gpu_file", run_gpu_file},   {"yaml_grammar", run_yaml_grammar},
    };
    return targets;
}

}  // namespace servesim::fuzz
