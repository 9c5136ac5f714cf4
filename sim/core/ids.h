// Strong ids: an id never stands in for a count or for another kind of id (vLLM's NewType BlockHash etc.).
#pragma once

#include <cstdint>
#include <functional>

namespace servesim::core {

enum class RequestId : std::uint64_t {};
enum class BlockId : std::uint32_t {};
enum class TenantId : std::uint32_t {};
enum class ReplicaId : std::uint32_t {};
// Identifies a piece of prompt content (a system prompt, a user message, a generated answer, a trace block).
enum class ContentId : std::uint64_t {};
// Chained block hash (see sim/cache/prefix_cache/block_hash.h); equality means equal token prefixes.
enum class BlockHash : std::uint64_t {};

template <typename Id>
constexpr auto to_int(Id id) {
    return static_cast<std::underlying_type_t<Id>>(id);
}

}  // namespace servesim::core
