// Tests of planner/layouts.*: the layouts of a GPU budget in nodes, listed by hand.
#include "planner/layouts.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::planner {
namespace {

std::vector<std::string> labels(const LayoutSpace& s) {
    std::vector<std::string> out;
    for (const auto& l : enumerate_layouts(s)) {
        out.push_back(l.label());
        CHECK(l.gpus() == s.gpus);  // every layout uses the whole budget
    }
    return out;
}

std::string error_of(const LayoutSpace& s) {
    try {
        (void)enumerate_layouts(s);
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError");
    return "";
}

TEST_CASE("Layouts: 16 GPUs in 8-GPU nodes, a dense model", "[planner][layouts]") {
    // TP divides the node: 1, 2, 4, 8. A replica of TP × PP GPUs divides 16 and tiles the nodes (divides 8 or is a
    // multiple of 8): TP1 × PP 1, 2, 4, 8, 16 (PP 3, 5, 6, 7 leave GPUs over or straddle); TP2 × PP 1, 2, 4, 8;
    // TP4 × PP 1, 2, 4; TP8 × PP 1, 2. DP = 16 / (TP × PP). 5 + 4 + 3 + 2 = 14 layouts.
    const LayoutSpace s{16, 8, false, std::nullopt};
    CHECK(labels(s) == std::vector<std::string>{
                           "tp1 pp1 dp16", "tp1 pp2 dp8", "tp1 pp4 dp4", "tp1 pp8 dp2", "tp1 pp16 dp1",
                           "tp2 pp1 dp8", "tp2 pp2 dp4", "tp2 pp4 dp2", "tp2 pp8 dp1",
                           "tp4 pp1 dp4", "tp4 pp2 dp2", "tp4 pp4 dp1",
                           "tp8 pp1 dp2", "tp8 pp2 dp1"});
}

TEST_CASE("Layouts: a MoE model adds expert parallelism where PP is 1 and TP × DP > 1", "[planner][layouts]") {
    // The 14 above; PP = 1 rows (tp1 dp16, tp2 dp8, tp4 dp4, tp8 dp2) each gain an EP twin (EP = TP × DP = 16):
    // 18 layouts. No EP with pipeline stages (servesim does not model it).
    const LayoutSpace s{16, 8, true, std::nullopt};
    const auto l = labels(s);
    CHECK(l.size() == 18);
    CHECK(l == std::vector<std::string>{
                   "tp1 pp1 dp16", "tp1 pp1 dp16 ep", "tp1 pp2 dp8", "tp1 pp4 dp4", "tp1 pp8 dp2", "tp1 pp16 dp1",
                   "tp2 pp1 dp8", "tp2 pp1 dp8 ep", "tp2 pp2 dp4", "tp2 pp4 dp2", "tp2 pp8 dp1",
                   "tp4 pp1 dp4", "tp4 pp1 dp4 ep", "tp4 pp2 dp2", "tp4 pp4 dp1",
                   "tp8 pp1 dp2", "tp8 pp1 dp2 ep", "tp8 pp2 dp1"});
    // One node of a MoE at TP 8: TP × DP = 8 > 1, so tp8 dp1 has an EP twin too (EP over the 8 TP ranks).
    const auto one = labels({8, 8, true, 1});
    CHECK(one == std::vector<std::string>{"tp1 pp1 dp8", "tp1 pp1 dp8 ep", "tp2 pp1 dp4", "tp2 pp1 dp4 ep",
                                          "tp4 pp1 dp2", "tp4 pp1 dp2 ep", "tp8 pp1 dp1", "tp8 pp1 dp1 ep"});
}

TEST_CASE("Layouts: replicas never straddle a node; --max-pp caps the stages", "[planner][layouts]") {
    // 24 GPUs (3 nodes of 8), TP 1: PP 3 would make replicas of 3 GPUs (8 is not a multiple of 3: one would span two
    // nodes), PP 6 and 12 likewise; PP 1, 2, 4, 8, 24 tile. With --max-pp 4: PP 1, 2, 4 only.
    std::vector<std::string> tp1;
    for (const auto& l : enumerate_layouts({24, 8, false, std::nullopt})) {
        if (l.tensor_parallel_size == 1) {
            tp1.push_back(l.label());
        }
    }
    CHECK(tp1 == std::vector<std::string>{"tp1 pp1 dp24", "tp1 pp2 dp12", "tp1 pp4 dp6", "tp1 pp8 dp3",
                                          "tp1 pp24 dp1"});
    CHECK(labels({8, 8, false, 2}) == std::vector<std::string>{"tp1 pp1 dp8", "tp1 pp2 dp4", "tp2 pp1 dp4",
                                                               "tp2 pp2 dp2", "tp4 pp1 dp2", "tp4 pp2 dp1",
                                                               "tp8 pp1 dp1"});
    // 4-GPU nodes (--gpus-per-node 4): TP at most 4.
    for (const auto& l : enumerate_layouts({8, 4, false, std::nullopt})) {
        CHECK(l.tensor_parallel_size <= 4);
    }
}

TEST_CASE("Layouts: a budget that is not whole nodes is refused with the nearest budgets", "[planner][layouts]") {
    CHECK(error_of({12, 8, false, std::nullopt}) ==
          "--gpus: 12 GPUs are not whole nodes of 8 (--gpus-per-node); GPUs come in nodes: give 8 or 16, or the node "
          "size with --gpus-per-node");
    CHECK(error_of({4, 8, false, std::nullopt}) ==
          "--gpus: 4 GPUs are not whole nodes of 8 (--gpus-per-node); GPUs come in nodes: give 8, or the node size "
          "with --gpus-per-node");
    CHECK(error_of({0, 8, false, std::nullopt}).find("--gpus: 0 is not a GPU count") != std::string::npos);
    CHECK(error_of({8, 0, false, std::nullopt}).find("--gpus-per-node: 0") != std::string::npos);
    CHECK(error_of({8, 8, false, 0}).find("--max-pp: 0") != std::string::npos);
}

}  // namespace
}  // namespace servesim::planner
