// The bound on every token count read from input (a length key, a length distribution's bounds and moments, a
// trace record's input and output lengths, a shared prefix): at most 1e9 tokens. It lies under max_model_len's own
// bound (2^30 = 1,073,741,824 tokens, tools/app/engine_keys.cpp), so no length the bound admits is one vLLM could
// serve that we refuse; and it keeps every sum the simulation forms in int64: a tenant's prompt holds at most
// shared + system + 1e6 turns × (user + answer) ≤ 2.0e15 tokens, a request's prompt + output and its block count
// far less, against int64's 9.2e18. Without it `prompt_tokens: 9e18` overflowed prompt + output in the replica's
// admission check (issue 41). docs/INPUT-RANGES.md.
#pragma once

#include <cstdint>

namespace servesim {

inline constexpr std::int64_t kMaxTokenCount = 1'000'000'000;

}  // namespace servesim
