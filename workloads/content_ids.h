// Content ids of prompt runs (docs/ARCHITECTURE.md, "Prompt content as runs"), derived with core::hash_combine from
// what the content *is*: a tenant's system prompt from the tenant, a user message from (tenant, dialogue, turn), an
// answer from the request that generated it, a Mooncake block from its hash id. Each kind has its own tag, so ids of
// different kinds never meet.
#pragma once

#include <cstdint>

#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::workloads {

namespace content_tag {
inline constexpr std::uint64_t kSharedPrefix = 0x5348415245440001ULL;
inline constexpr std::uint64_t kSystemPrompt = 0x53595354454d0002ULL;
inline constexpr std::uint64_t kUserMessage = 0x5553455200000003ULL;
inline constexpr std::uint64_t kAnswer = 0x414e535745520004ULL;
inline constexpr std::uint64_t kUniquePrompt = 0x554e495155450005ULL;
inline constexpr std::uint64_t kTraceBlock = 0x424c4f434b000006ULL;
inline constexpr std::uint64_t kDatasetPrefix = 0x4450524546000007ULL;
inline constexpr std::uint64_t kDatasetEntry = 0x44454e5452590008ULL;
inline constexpr std::uint64_t kDatasetMessage = 0x444d534700000009ULL;
inline constexpr std::uint64_t kConversationMessage = 0x434d53470000000aULL;
inline constexpr std::uint64_t kConversationCommon = 0x43434f4d4d4f000bULL;
}  // namespace content_tag

// The prefix common to every tenant (or every synthetic request) when `shared_prefix_tokens` > 0.
[[nodiscard]] constexpr core::ContentId shared_prefix_content() {
    return core::ContentId{core::mix64(content_tag::kSharedPrefix)};
}

[[nodiscard]] constexpr core::ContentId system_prompt_content(core::TenantId tenant) {
    return core::ContentId{core::hash_combine(content_tag::kSystemPrompt, core::to_int(tenant))};
}

[[nodiscard]] constexpr core::ContentId user_message_content(core::TenantId tenant, std::uint64_t dialogue, int turn) {
    std::uint64_t h = core::hash_combine(content_tag::kUserMessage, core::to_int(tenant));
    h = core::hash_combine(h, dialogue);
    return core::ContentId{core::hash_combine(h, static_cast<std::uint64_t>(turn))};
}

// The answer a request generates; the next turn's prompt contains a run with this id.
[[nodiscard]] constexpr core::ContentId answer_content(core::RequestId id) {
    return core::ContentId{core::hash_combine(content_tag::kAnswer, core::to_int(id))};
}

// A prompt shared with nobody (synthetic requests, Azure trace records), keyed by its request or record index.
[[nodiscard]] constexpr core::ContentId unique_prompt_content(std::uint64_t index) {
    return core::ContentId{core::hash_combine(content_tag::kUniquePrompt, index)};
}

// One hashed block of a trace (Mooncake hash id): ids are prefix-chained, so equal ids mean equal prefixes.
[[nodiscard]] constexpr core::ContentId trace_block_content(std::uint64_t hash_id) {
    return core::ContentId{core::hash_combine(content_tag::kTraceBlock, hash_id)};
}

// vllm bench serve datasets: prefix `index` of a dataset (the random dataset's one prefix is index 0; the
// prefix_repetition dataset's prefixes are 0..num_prefixes-1). Every request with that prefix starts with this run.
[[nodiscard]] constexpr core::ContentId dataset_prefix_content(std::uint64_t index) {
    return core::ContentId{core::hash_combine(content_tag::kDatasetPrefix, index)};
}

// The prompt of dataset entry `entry` (a line of a custom or ShareGPT-like file): an oversampled copy of the entry
// sends the same content again.
[[nodiscard]] constexpr core::ContentId dataset_entry_content(std::uint64_t entry) {
    return core::ContentId{core::hash_combine(content_tag::kDatasetEntry, entry)};
}

// Message `message` (0-based, user and assistant alike) of a pre-generated dataset conversation `entry`: a replayed
// turn's prompt carries the dataset's answers under these ids, not the answers the server generated.
[[nodiscard]] constexpr core::ContentId dataset_message_content(std::uint64_t entry, std::uint64_t message) {
    return core::ContentId{core::hash_combine(core::hash_combine(content_tag::kDatasetMessage, entry), message)};
}

// The multi-turn benchmark's generated conversations: user message `message` of conversation `conversation`, and the
// common prefix every conversation's first message starts with.
[[nodiscard]] constexpr core::ContentId conversation_message_content(std::uint64_t conversation,
                                                                     std::uint64_t message) {
    return core::ContentId{
        core::hash_combine(core::hash_combine(content_tag::kConversationMessage, conversation), message)};
}

[[nodiscard]] constexpr core::ContentId conversation_common_prefix_content() {
    return core::ContentId{core::mix64(content_tag::kConversationCommon)};
}

}  // namespace servesim::workloads
