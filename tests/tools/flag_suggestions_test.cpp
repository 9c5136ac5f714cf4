// tools/app/flag_suggestions.*: a mistyped flag is refused naming the nearest known one (an engine flag or the
// command's own), and a flag near nothing gets no guess.
#include "tools/app/flag_suggestions.h"

#include <string>
#include <vector>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace sa = servesim::app;
using servesim::test::contains;

TEST_CASE("the nearest flag is suggested within max(2, length / 4) edits", "[tools][flags]") {
    const std::vector<std::string> known = {"--gpu", "--model", "--max-num-seqs", "--max-num-batched-tokens"};
    CHECK(sa::nearest_flag("--max-num-seq", known) == std::optional<std::string>("--max-num-seqs"));
    CHECK(sa::nearest_flag("--gpuu", known) == std::optional<std::string>("--gpu"));
    // "--max-num-batch-tokens" (22 characters) is 2 edits from --max-num-batched-tokens: within 22 / 4 = 5.
    CHECK(sa::nearest_flag("--max-num-batch-tokens", known) ==
          std::optional<std::string>("--max-num-batched-tokens"));
    CHECK_FALSE(sa::nearest_flag("--zzzzzz", known).has_value());  // 6+ edits from everything, limit 2
}

TEST_CASE("CLI: a mistyped flag names the nearest one and the command's help", "[tools][cli][flags]") {
    const auto r = servesim::test::run_servesim("run --max-num-seq 4");
    CHECK(r.status == 2);
    CHECK(contains(r.output, "servesim: error: command line: unrecognised option '--max-num-seq'; did you mean "
                             "'--max-num-seqs'? (`servesim run --help` lists the flags)"));
    const auto v = servesim::test::run_servesim("validate x --formt csv");
    CHECK(contains(v.output, "did you mean '--format'? (`servesim validate --help` lists the flags)"));
    // vLLM's short spellings are candidates too: "--tp" is one edit from "-tp".
    const auto tp = servesim::test::run_servesim("inspect --model Qwen3-4B --tp 2");
    CHECK(contains(tp.output, "unrecognised option '--tp'; did you mean '-tp'?"));
    CHECK(contains(servesim::test::run_servesim("run --dp 2").output,
                   "unrecognised option '--dp'; did you mean '-dp'?"));
    const auto none = servesim::test::run_servesim("sweep --zzzzzz");
    CHECK(contains(none.output, "unrecognised option '--zzzzzz' (`servesim sweep --help` lists the flags)"));
}
