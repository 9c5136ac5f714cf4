// The MPI task farm; see mpi_executor.h and docs/MPI.md.
//
// Protocol of one batch (tags below; every message is bytes on MPI_COMM_WORLD):
//   worker → root  kRequest              "one more run, please" (a worker keeps one request per thread open)
//   root → worker  kTask u64 index       the run to do, or
//                  kStop                 nothing left (or a run failed): no more requests from this worker
//   worker → root  kResult u64 index + result_codec bytes, or kFailure u64 index, u8 kind, message
//   worker → root  kDone                 every request answered, every run it got reported
//   root → worker  kOutcome u8 failed    after every worker is done: the batch's end (failed: RunAbandoned there)
// Messages between two ranks arrive in the order sent (MPI's non-overtaking rule), so a worker's kDone comes after
// its last kResult.
#include "tools/mpi/mpi_executor.h"

#include <mpi.h>

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "common/error.h"
#include "tools/app/result_codec.h"

namespace servesim::mpi {

namespace {

enum Tag : int { kRequest = 1, kTask = 2, kStop = 3, kResult = 4, kFailure = 5, kDone = 6, kOutcome = 7 };

constexpr auto kPollInterval = std::chrono::milliseconds(1);

// Launchers' environment: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), PMIx (srun --mpi=pmix, PMIX_RANK) and PMI-2
// (srun --mpi=pmi2, PMI_RANK / PMI_SIZE).
bool launched_by_mpi() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
        if (std::getenv(v) != nullptr) {
            return true;
        }
    }
    return false;
}

void send_bytes(const std::string& bytes, int to, int tag) {
    SERVESIM_CHECK(bytes.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                   "MPI message of {} bytes exceeds MPI's 2 GiB count limit", bytes.size());
    MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, to, tag, MPI_COMM_WORLD);
}

std::string u64_bytes(std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }

std::uint64_t read_u64(const std::string& bytes, std::size_t pos = 0) {
    SERVESIM_CHECK(bytes.size() >= pos + sizeof(std::uint64_t), "MPI message of {} bytes is too short", bytes.size());
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data() + pos, sizeof v);
    return v;
}

// The message `status` announced (after MPI_Iprobe).
std::string receive(const MPI_Status& status) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::string bytes(static_cast<std::size_t>(count), '\0');
    MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return bytes;
}

std::optional<MPI_Status> poll(int source) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
    if (flag == 0) {
        return std::nullopt;
    }
    return status;
}

struct Failure {
    std::size_t index = 0;
    int rank = 0;
    app::FailureKind kind = app::FailureKind::kOther;
    std::string message;
};

Failure describe_current_exception(std::size_t index, int rank) {
    Failure f{index, rank, app::FailureKind::kOther, ""};
    try {
        throw;
    } catch (const ConfigError& e) {
        f.kind = app::FailureKind::kConfig;
        f.message = e.what();
    } catch (const InvariantError& e) {
        f.kind = app::FailureKind::kInvariant;
        f.message = e.what();
    } catch (const std::exception& e) {
        f.message = e.what();
    } catch (...) {
        f.message = "unknown exception";
    }
    return f;
}

[[noreturn]] void rethrow(const Failure& f, const std::vector<app::PreparedExperiment>& prepared) {
    const std::string message =
        fmt::format("{} failed on rank {}: {}", app::describe_run(prepared[f.index].config), f.rank, f.message);
    switch (f.kind) {
        case app::FailureKind::kConfig:
            throw ConfigError(message);
        case app::FailureKind::kInvariant:
            throw InvariantError(message);
        case app::FailureKind::kOther:
            break;
    }
    throw std::runtime_error(message);
}

// One finished run on this process: its result's bytes (workers) or the result itself (root), or its failure.
struct Finished {
    std::size_t index = 0;
    std::optional<app::ExperimentResult> result;
    std::string bytes;
    std::optional<Failure> failure;
};

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
    if (!launched_by_mpi()) {
        return;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    active_ = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
    if (active_) {
        MPI_Finalize();
    }
}

void MpiSession::abort(int status) const {
    if (active_) {
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    std::exit(status);
}

MpiExecutor::~MpiExecutor() {
    std::int64_t total = 0;
    std::string each;
    for (std::size_t r = 0; r < runs_per_rank_.size(); ++r) {
        total += runs_per_rank_[r];
        each += fmt::format("{}rank {}: {}", r == 0 ? "" : ", ", r, runs_per_rank_[r]);
    }
    if (is_root() && total > 0) {
        std::cerr << fmt::format("servesim: MPI: {} run{} on {} ranks ({})\n", total, total == 1 ? "" : "s",
                                 session_.size(), each);
    }
}

void MpiExecutor::run(const std::vector<app::PreparedExperiment>& prepared, const std::vector<std::size_t>& todo,
                      int jobs, std::vector<app::ExperimentResult>& results,
                      const std::function<void(std::size_t)>& on_result) {
    if (is_root()) {
        run_root(prepared, todo, jobs, results, on_result);
    } else {
        run_worker(prepared, jobs);
    }
}

void MpiExecutor::run_root(const std::vector<app::PreparedExperiment>& prepared, const std::vector<std::size_t>& todo,
                           int jobs, std::vector<app::ExperimentResult>& results,
                           const std::function<void(std::size_t)>& on_result) {
    std::mutex mu;
    std::condition_variable done_cv;
    std::deque<std::size_t> queue(todo.begin(), todo.end());
    std::deque<Finished> finished;
    std::optional<Failure> failure;
    int local_alive = std::max(1, jobs);

    auto local_worker = [&] {
        while (true) {
            Finished f;
            {
                std::lock_guard<std::mutex> lock(mu);
                if (failure || queue.empty()) {
                    --local_alive;
                    done_cv.notify_one();
                    return;
                }
                f.index = queue.front();
                queue.pop_front();
            }
            try {
                before_run(prepared[f.index].config);
                f.result = app::run_experiment(prepared[f.index]);
            } catch (...) {
                f.failure = describe_current_exception(f.index, 0);
            }
            std::lock_guard<std::mutex> lock(mu);
            finished.push_back(std::move(f));
            done_cv.notify_one();
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::max(1, jobs); ++t) {
        threads.emplace_back(local_worker);
    }

    // Called on this (the main) thread only; `mu` is not held.
    auto record_failure = [&](Failure f) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) {
            failure = std::move(f);
        }
        queue.clear();
    };
    auto store = [&](std::size_t index, int rank) {
        try {
            results[index].config = prepared[index].config;
            results[index].plan = prepared[index].plan;
            on_result(index);
        } catch (...) {
            record_failure(describe_current_exception(index, rank));
        }
    };

    int workers_busy = session_.size() - 1;  // workers not yet kDone
    while (true) {
        bool progressed = false;
        std::deque<Finished> batch;
        {
            std::lock_guard<std::mutex> lock(mu);
            batch.swap(finished);
        }
        for (auto& f : batch) {
            progressed = true;
            if (f.failure) {
                record_failure(std::move(*f.failure));
                continue;
            }
            results[f.index] = std::move(*f.result);
            ++runs_per_rank_[0];
            store(f.index, 0);
        }
        while (const auto status = poll(MPI_ANY_SOURCE)) {
            progressed = true;
            const int from = status->MPI_SOURCE;
            const std::string bytes = receive(*status);
            switch (status->MPI_TAG) {
                case kRequest: {
                    std::optional<std::size_t> next;
                    {
                        std::lock_guard<std::mutex> lock(mu);
                        if (!failure && !queue.empty()) {
                            next = queue.front();
                            queue.pop_front();
                        }
                    }
                    if (next) {
                        send_bytes(u64_bytes(*next), from, kTask);
                    } else {
                        send_bytes(std::string(1, '\0'), from, kStop);
                    }
                    break;
                }
                case kResult: {
                    const std::size_t index = read_u64(bytes);
                    try {
                        SERVESIM_CHECK(index < results.size(), "rank {} sent a result for run {} of {}", from, index,
                                       results.size());
                        app::decode_result(std::string_view(bytes).substr(sizeof(std::uint64_t)), results[index]);
                    } catch (...) {
                        record_failure(describe_current_exception(index, from));
                        break;
                    }
                    ++runs_per_rank_[static_cast<std::size_t>(from)];
                    store(index, from);
                    break;
                }
                case kFailure: {
                    Failure f;
                    f.index = read_u64(bytes);
                    f.rank = from;
                    SERVESIM_CHECK(bytes.size() > sizeof(std::uint64_t) && f.index < results.size(),
                                   "rank {} sent a malformed failure report", from);
                    f.kind = static_cast<app::FailureKind>(bytes[sizeof(std::uint64_t)]);
                    f.message = bytes.substr(sizeof(std::uint64_t) + 1);
                    record_failure(std::move(f));
                    break;
                }
                case kDone:
                    --workers_busy;
                    break;
                default:
                    throw InvariantError(fmt::format("MPI: rank {} sent tag {} during a batch", from, status->MPI_TAG));
            }
        }
        {
            std::unique_lock<std::mutex> lock(mu);
            if (workers_busy == 0 && local_alive == 0 && finished.empty()) {
                break;
            }
            if (!progressed) {
                done_cv.wait_for(lock, kPollInterval, [&] { return !finished.empty(); });
            }
        }
    }
    for (auto& t : threads) {
        t.join();
    }
    const std::string outcome(1, failure ? '\1' : '\0');
    for (int r = 1; r < session_.size(); ++r) {
        send_bytes(outcome, r, kOutcome);
    }
    if (failure) {
        failed_cleanly_ = true;
        rethrow(*failure, prepared);
    }
}

void MpiExecutor::run_worker(const std::vector<app::PreparedExperiment>& prepared, int jobs) {
    const int me = session_.rank();
    std::mutex mu;
    std::condition_variable work_cv;
    std::condition_variable done_cv;
    std::deque<std::size_t> queue;
    std::deque<Finished> finished;
    bool closing = false;

    auto worker = [&] {
        while (true) {
            Finished f;
            {
                std::unique_lock<std::mutex> lock(mu);
                work_cv.wait(lock, [&] { return closing || !queue.empty(); });
                if (queue.empty()) {
                    return;
                }
                f.index = queue.front();
                queue.pop_front();
            }
            try {
                before_run(prepared[f.index].config);
                f.bytes = u64_bytes(f.index) + app::encode_result(app::run_experiment(prepared[f.index]));
            } catch (...) {
                f.failure = describe_current_exception(f.index, me);
            }
            std::lock_guard<std::mutex> lock(mu);
            finished.push_back(std::move(f));
            done_cv.notify_one();
        }
    };
    const int n = std::max(1, jobs);
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) {
        threads.emplace_back(worker);
    }

    int open_requests = 0;  // sent, not yet answered
    int in_flight = 0;      // runs received, not yet reported
    bool stopped = false;
    for (int t = 0; t < n; ++t) {
        send_bytes(std::string(1, '\0'), 0, kRequest);
        ++open_requests;
    }
    while (!(stopped && open_requests == 0 && in_flight == 0)) {
        bool progressed = false;
        std::deque<Finished> batch;
        {
            std::lock_guard<std::mutex> lock(mu);
            batch.swap(finished);
        }
        for (auto& f : batch) {
            progressed = true;
            if (f.failure) {
                send_bytes(u64_bytes(f.index) + std::string(1, static_cast<char>(f.failure->kind)) + f.failure->message,
                           0, kFailure);
            } else {
                send_bytes(f.bytes, 0, kResult);
            }
            --in_flight;
            if (!stopped) {
                send_bytes(std::string(1, '\0'), 0, kRequest);
                ++open_requests;
            }
        }
        if (const auto status = poll(0)) {
            progressed = true;
            const std::string bytes = receive(*status);
            --open_requests;
            if (status->MPI_TAG == kTask) {
                const std::size_t index = read_u64(bytes);
                SERVESIM_CHECK(index < prepared.size(), "MPI: the root sent run {} of {}", index, prepared.size());
                ++in_flight;
                {
                    std::lock_guard<std::mutex> lock(mu);
                    queue.push_back(index);
                }
                work_cv.notify_one();
            } else {
                SERVESIM_CHECK(status->MPI_TAG == kStop, "MPI: the root sent tag {} during a batch", status->MPI_TAG);
                stopped = true;
            }
        }
        if (!progressed) {
            std::unique_lock<std::mutex> lock(mu);
            done_cv.wait_for(lock, kPollInterval, [&] { return !finished.empty(); });
        }
    }
    {
        std::lock_guard<std::mutex> lock(mu);
        closing = true;
    }
    work_cv.notify_all();
    for (auto& t : threads) {
        t.join();
    }
    send_bytes(std::string(1, '\0'), 0, kDone);
    while (true) {
        if (const auto status = poll(0)) {
            const std::string bytes = receive(*status);
            SERVESIM_CHECK(status->MPI_TAG == kOutcome && bytes.size() == 1, "MPI: the root sent tag {} after kDone",
                           status->MPI_TAG);
            if (bytes[0] != '\0') {
                failed_cleanly_ = true;
                throw app::RunAbandoned();
            }
            return;
        }
        std::this_thread::sleep_for(kPollInterval);
    }
}

void MpiExecutor::share(const std::vector<app::PreparedExperiment>& prepared,
                        std::vector<app::ExperimentResult>& results) {
    std::string blob;
    if (is_root()) {
        for (const auto& r : results) {
            const std::string bytes = app::encode_result(r);
            blob += u64_bytes(bytes.size()) + bytes;
        }
    }
    std::uint64_t size = blob.size();
    MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    blob.resize(size);
    constexpr std::uint64_t kChunk = 1ULL << 30;
    for (std::uint64_t at = 0; at < size; at += kChunk) {
        MPI_Bcast(blob.data() + at, static_cast<int>(std::min(kChunk, size - at)), MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    if (is_root()) {
        return;
    }
    results.assign(prepared.size(), app::ExperimentResult{});
    std::size_t pos = 0;
    for (std::size_t i = 0; i < prepared.size(); ++i) {
        const std::uint64_t n = read_u64(blob, pos);
        pos += sizeof n;
        SERVESIM_CHECK(blob.size() - pos >= n, "MPI: shared results end early at run {}", i);
        app::decode_result(std::string_view(blob).substr(pos, n), results[i]);
        results[i].config = prepared[i].config;
        results[i].plan = prepared[i].plan;
        pos += n;
    }
}

}  // namespace servesim::mpi
