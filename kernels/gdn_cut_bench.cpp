// gdn_cut_bench: what a state taken inside a prefill chunk costs the chunked Gated DeltaNet scan (issue 44;
// docs/HYBRID-POLICIES.md "What a snapshot costs"). The project's GDN prefill (kernels/gdn.cu, chunk 64, fla's
// four-launch structure) holds the state only at the end of a call, so a state at position c inside an n-token chunk
// needs the chunk run as two calls, (0, c] then (c, n] from the state at c. This times one GDN layer of Qwen3.5-4B
// (16 key heads, 32 value heads, fp32 state) both ways, each captured in a CUDA graph (GPU time only, as a
// graph-replayed forward), and prints the difference for a cut off the 64-grid and one on it.
// Build and run on a CUDA machine from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. kernels/gdn_cut_bench.cpp kernels/gdn.cu kernels/gpu_runtime.cu \
//        -lcublas -lcublasLt -o gdn_cut_bench && ./gdn_cut_bench
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "kernels/kernels.h"

namespace k = servesim::kernels;

namespace {

constexpr int kHk = 16;
constexpr int kHv = 32;

struct Inputs {
    k::DeviceBuffer qk, v, g, beta, o, state, ws;
    int len = 0;
};

Inputs make_inputs(int len) {
    Inputs in;
    in.len = len;
    const std::size_t t = static_cast<std::size_t>(len);
    in.qk = k::DeviceBuffer(t * kHk * 128 * 2 * 2);
    in.v = k::DeviceBuffer(t * kHv * 128 * 2);
    in.g = k::DeviceBuffer(t * kHv * 4);
    in.beta = k::DeviceBuffer(t * kHv * 4);
    in.o = k::DeviceBuffer(t * kHv * 128 * 2);
    in.state = k::DeviceBuffer(static_cast<std::size_t>(kHv) * 128 * 128 * 4);
    in.ws = k::DeviceBuffer(k::gdn_prefill_workspace_bytes(1, len, kHk, kHv));
    k::fill_random_bf16(in.qk.as<k::bf16_t>(), t * kHk * 128 * 2, -1, 1, 76);
    k::fill_random_bf16(in.v.as<k::bf16_t>(), t * kHv * 128, -1, 1, 73);
    k::fill_random_f32(in.g.as<float>(), t * kHv, -0.3f, -0.005f, 74);
    k::fill_random_f32(in.beta.as<float>(), t * kHv, 0.1f, 0.9f, 75);
    k::fill_random_f32(in.state.as<float>(), static_cast<std::size_t>(kHv) * 128 * 128, -0.1f, 0.1f, 77);
    return in;
}

k::GdnPrefillArgs args_of(const Inputs& in, bool initial) {
    k::GdnPrefillArgs a;
    const std::size_t t = static_cast<std::size_t>(in.len);
    a.q = in.qk.as<k::bf16_t>();
    a.k = in.qk.as<k::bf16_t>() + t * kHk * 128;
    a.v = in.v.as<k::bf16_t>();
    a.g = in.g.as<float>();
    a.beta = in.beta.as<float>();
    a.o = in.o.as<k::bf16_t>();
    a.state = in.state.get();
    a.state_dtype = k::StateDtype::kFp32;
    a.num_seqs = 1;
    a.seq_len = in.len;
    a.num_k_heads = kHk;
    a.num_v_heads = kHv;
    a.scale = 1.0f / std::sqrt(128.0f);
    a.workspace = in.ws.get();
    a.use_initial_state = initial;
    return a;
}

// Median ms of one graph replay of `body`.
double graph_ms(k::StreamHandle s, const std::function<void()>& body) {
    body();  // warm-up outside capture
    k::device_synchronize();
    k::CudaGraph graph;
    graph.capture(s, body);
    return k::time_median_ms([&](int) { graph.replay(s); }, 20, 200, 200.0);
}

}  // namespace

int main() {
    k::DeviceInfo info;
    if (!k::query_device(0, &info)) {
        std::fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    std::printf("device %s\n", info.name.c_str());
    k::StreamHandle s = k::create_stream();
    std::printf("n,cut,whole_ms,split_ms,cut_ms_per_layer\n");
    for (const int n : {2048, 8192}) {
        for (const int cut : {n / 2, n / 2 + 16}) {
            Inputs whole = make_inputs(n);
            Inputs a = make_inputs(cut);
            Inputs b = make_inputs(n - cut);
            const k::GdnPrefillArgs aw = args_of(whole, true);
            const k::GdnPrefillArgs aa = args_of(a, true);
            k::GdnPrefillArgs ab = args_of(b, true);
            ab.state = a.state.get();  // the second piece starts from the first's final state
            const double t_whole = graph_ms(s, [&] { k::gdn_prefill(aw, s); });
            const double t_split = graph_ms(s, [&] {
                k::gdn_prefill(aa, s);
                k::gdn_prefill(ab, s);
            });
            std::printf("%d,%d,%.5f,%.5f,%.5f\n", n, cut, t_whole, t_split, t_split - t_whole);
        }
    }
    k::destroy_stream(s);
    return 0;
}
