// The readers under fuzzing; see fuzz_targets.h. Readers that take a path get the bytes through a file in a
// private temporary folder (one per process, removed at exit), as a user's file would reach them.
#include "tests/fuzz/fuzz_targets.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "calibration/hardware_profile.h"
#include "calibration/measurements.h"
#include "common/error.h"
#include "models/hf_config.h"
#include "tools/app/scenario.h"
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
    };
    return targets;
}

}  // namespace servesim::fuzz
