// BlockSegments: reference counts and the free queue per segment of blocks (vLLM KVCacheBlock.ref_cnt,
// FreeKVCacheBlockQueue); see block_segments.h and docs/BLOCK-SEGMENTS.md.
#include "sim/cache/prefix_cache/block_segments.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "sim/cache/prefix_cache/block_span.h"

namespace servesim::cache {

namespace {
// A segment's dead prefix is dropped once it is this long and longer than the segment itself.
constexpr std::uint32_t kCompactFrom = 64;
// Spare segments keep their id arrays for reuse up to this capacity.
constexpr std::size_t kLargestKeptCapacity = 4096;
}  // namespace

std::int64_t BlockSegments::allocated_bytes(std::int64_t num_blocks) {
    return num_blocks * static_cast<std::int64_t>(sizeof(Place) + sizeof(core::BlockId));
}

BlockSegments::BlockSegments(std::int64_t num_blocks) {
    SERVESIM_CHECK(num_blocks >= 1 && num_blocks < kNotLinked, "bad number of blocks {}", num_blocks);
    const auto n = static_cast<std::size_t>(num_blocks);
    place_.assign(n, Place{});
    segments_.emplace_back();  // the sentinel
    segments_[kSentinel].prev = kSentinel;
    segments_[kSentinel].next = kSentinel;
    if (n == 1) {
        return;
    }
    // One queued segment: its list order is the reverse of the queue's, so block 1 (the head) is its last id.
    const std::uint32_t s = new_segment();
    Segment& all = segments_[s];
    all.ids.reserve(n - 1);
    for (std::size_t i = n - 1; i >= 1; --i) {
        all.ids.push_back(core::BlockId{static_cast<std::uint32_t>(i)});
    }
    place_ids(s, 0);
    link_before(s, kSentinel);
    num_free_blocks_ = num_blocks - 1;
}

std::uint32_t BlockSegments::new_segment() {
    std::uint32_t s;
    if (!spare_segments_.empty()) {
        s = spare_segments_.back();
        spare_segments_.pop_back();
    } else {
        SERVESIM_CHECK(segments_.size() < kNotLinked, "too many block segments");
        s = static_cast<std::uint32_t>(segments_.size());
        segments_.emplace_back();
    }
    Segment& seg = segments_[s];
    seg.ids.clear();
    seg.begin = 0;
    seg.ref_cnt = 0;
    seg.prev = kNotLinked;
    seg.next = kNotLinked;
    return s;
}

void BlockSegments::recycle(std::uint32_t s) {
    Segment& seg = segments_[s];
    if (seg.ids.capacity() > kLargestKeptCapacity) {
        std::vector<core::BlockId>().swap(seg.ids);
    }
    seg.ids.clear();
    seg.begin = 0;
    spare_segments_.push_back(s);
}

void BlockSegments::link_before(std::uint32_t s, std::uint32_t next) {
    Segment& seg = segments_[s];
    const std::uint32_t prev = segments_[next].prev;
    seg.prev = prev;
    seg.next = next;
    segments_[prev].next = s;
    segments_[next].prev = s;
}

void BlockSegments::unlink(std::uint32_t s) {
    Segment& seg = segments_[s];
    segments_[seg.prev].next = seg.next;
    segments_[seg.next].prev = seg.prev;
    seg.prev = kNotLinked;
    seg.next = kNotLinked;
}

void BlockSegments::place_ids(std::uint32_t s, std::uint32_t from) {
    const Segment& seg = segments_[s];
    for (std::uint32_t i = from; i < seg.end(); ++i) {
        place_[core::to_int(seg.ids[i])] = Place{s, i};
    }
}

std::size_t BlockSegments::run_in_common(std::span<const core::BlockId> blocks, std::uint32_t s,
                                         std::uint32_t pos) const {
    const Segment& seg = segments_[s];
    return leading_blocks_in_common(blocks, std::span<const core::BlockId>(seg.ids.data() + pos, seg.end() - pos));
}

BlockSegments::Parts BlockSegments::split(std::uint32_t s, std::uint32_t pos) {
    const std::uint32_t t = new_segment();  // (may move segments_: references are taken after)
    Segment& seg = segments_[s];
    Segment& part = segments_[t];
    SERVESIM_CHECK(pos > seg.begin && pos < seg.end(), "splitting a segment of [{}, {}) at {}", seg.begin, seg.end(),
                   pos);
    part.ref_cnt = seg.ref_cnt;
    const bool queued = seg.ref_cnt == 0;
    if (pos - seg.begin <= seg.end() - pos) {
        // The first part moves; in the queue it follows the second (a queued segment's blocks are in reverse order).
        part.ids.assign(seg.ids.begin() + seg.begin, seg.ids.begin() + pos);
        place_ids(t, 0);
        seg.begin = pos;
        if (queued) {
            link_before(t, seg.next);
        }
        if (seg.begin >= kCompactFrom && seg.begin > seg.size()) {
            compact(s);
        }
        return Parts{t, s};
    }
    part.ids.assign(seg.ids.begin() + pos, seg.ids.end());
    place_ids(t, 0);
    seg.ids.resize(pos);
    if (queued) {
        link_before(t, s);
    }
    return Parts{s, t};
}

void BlockSegments::compact(std::uint32_t s) {
    Segment& seg = segments_[s];
    seg.ids.erase(seg.ids.begin(), seg.ids.begin() + seg.begin);
    seg.begin = 0;
    place_ids(s, 0);
}

std::uint32_t BlockSegments::isolate(core::BlockId id) {
    const auto b = core::to_int(id);
    SERVESIM_CHECK(b != 0 && b < place_.size(), "block {} outside the pool's {} or the null block", b,
                   place_.size());
    std::uint32_t s = place_[b].segment;
    const std::uint32_t pos = place_[b].position;
    if (pos > segments_[s].begin) {
        s = split(s, pos).second;
    }
    if (segments_[s].size() > 1) {
        s = split(s, segments_[s].begin + 1).first;
    }
    return s;
}

void BlockSegments::take(std::uint32_t s) {
    Segment& seg = segments_[s];
    if (seg.ref_cnt == 0) {
        unlink(s);
        num_free_blocks_ -= seg.size();
    }
    ++seg.ref_cnt;
}

bool BlockSegments::release(std::uint32_t s, bool append) {
    Segment& seg = segments_[s];
    SERVESIM_CHECK(seg.ref_cnt > 0, "freeing block {} with ref_cnt {}", core::to_int(seg.ids[seg.begin]),
                   seg.ref_cnt);
    if (--seg.ref_cnt > 0) {
        return false;
    }
    if (append) {
        link_before(s, kSentinel);
        num_free_blocks_ += seg.size();
    }
    return true;
}

void BlockSegments::pop_into(std::int64_t n, std::vector<core::BlockId>& out) {
    SERVESIM_CHECK(n <= num_free_blocks_, "cannot get {} blocks, only {} free", n, num_free_blocks_);
    if (n <= 0) {
        return;
    }
    // The holder's last segment takes the new blocks when the list's last block ends it and nobody else holds it.
    std::uint32_t held = kNotLinked;
    if (!out.empty() && core::to_int(out.back()) != 0) {
        const auto last = core::to_int(out.back());
        const std::uint32_t s = place_[last].segment;
        if (segments_[s].ref_cnt == 1 && place_[last].position + 1 == segments_[s].end()) {
            held = s;
        }
    }
    if (held == kNotLinked) {
        held = new_segment();
        segments_[held].ref_cnt = 1;
    }
    num_free_blocks_ -= n;
    const std::uint32_t first_new = segments_[held].end();
    for (std::int64_t k = 0; k < n; ++k) {
        const std::uint32_t h = segments_[kSentinel].next;
        Segment& head = segments_[h];
        const core::BlockId id = head.ids.back();
        head.ids.pop_back();
        if (head.size() == 0) {
            unlink(h);
            recycle(h);
        }
        segments_[held].ids.push_back(id);
        out.push_back(id);
    }
    place_ids(held, first_new);
}

void BlockSegments::touch(std::span<const core::BlockId> blocks) {
    std::size_t i = 0;
    while (i < blocks.size()) {
        const auto b = core::to_int(blocks[i]);
        if (b == 0) {
            ++i;
            continue;
        }
        SERVESIM_CHECK(b < place_.size(), "block {} outside a pool of {}", b, place_.size());
        std::uint32_t s = place_[b].segment;
        const std::uint32_t pos = place_[b].position;
        if (pos > segments_[s].begin) {
            s = split(s, pos).second;
        }
        const Segment& seg = segments_[s];
        const std::size_t m = run_in_common(blocks.subspan(i), s, seg.begin);
        if (m < seg.size()) {
            s = split(s, seg.begin + static_cast<std::uint32_t>(m)).first;
        }
        take(s);
        i += m;
    }
}

void BlockSegments::free_tail_first(std::span<const core::BlockId> blocks) {
    std::size_t i = blocks.size();
    while (i > 0) {
        const auto b = core::to_int(blocks[i - 1]);
        if (b == 0) {
            --i;
            continue;
        }
        SERVESIM_CHECK(b < place_.size(), "block {} outside a pool of {}", b, place_.size());
        std::uint32_t s = place_[b].segment;
        const std::uint32_t pos = place_[b].position;
        if (pos + 1 < segments_[s].end()) {
            s = split(s, pos + 1).first;
        }
        // How many of the list's blocks before this one continue the segment backwards: usually the whole segment
        // (the holder's list holds it whole), checked with one comparison of the two runs of ids.
        const Segment& seg = segments_[s];
        const core::BlockId* ids = seg.ids.data();
        std::uint32_t m = 1;
        if (seg.size() <= i &&
            std::memcmp(blocks.data() + (i - seg.size()), ids + seg.begin, seg.size() * sizeof(core::BlockId)) == 0) {
            m = seg.size();
        } else {
            while (m < seg.size() && m < i && blocks[i - 1 - m] == ids[seg.end() - 1 - m]) {
                ++m;
            }
        }
        if (m < seg.size()) {
            s = split(s, seg.end() - m).second;
        }
        release(s, /*append=*/true);
        i -= m;
    }
}

bool BlockSegments::drop_ref(core::BlockId id, bool append) { return release(isolate(id), append); }

void BlockSegments::prepend(core::BlockId id) {
    const auto b = core::to_int(id);
    SERVESIM_CHECK(b != 0 && b < place_.size(), "prepending block {} of {}", b, place_.size());
    const std::uint32_t s = place_[b].segment;
    SERVESIM_CHECK(segments_[s].ref_cnt == 0 && segments_[s].size() == 1 && segments_[s].prev == kNotLinked,
                   "block {} is not a free block left out of the queue", b);
    link_before(s, segments_[kSentinel].next);
    ++num_free_blocks_;
}

std::int64_t BlockSegments::num_queued_among(std::span<const core::BlockId> blocks) const {
    std::int64_t n = 0;
    std::size_t i = 0;
    while (i < blocks.size()) {
        const auto b = core::to_int(blocks[i]);
        if (b == 0) {
            ++i;
            continue;
        }
        const Place at = place_[b];
        const std::size_t m = std::max<std::size_t>(1, run_in_common(blocks.subspan(i), at.segment, at.position));
        n += segments_[at.segment].ref_cnt == 0 ? static_cast<std::int64_t>(m) : 0;
        i += m;
    }
    return n;
}

std::vector<core::BlockId> BlockSegments::get_all_free_blocks() const {
    std::vector<core::BlockId> out;
    out.reserve(static_cast<std::size_t>(num_free_blocks_));
    for (std::uint32_t s = segments_[kSentinel].next; s != kSentinel; s = segments_[s].next) {
        const Segment& seg = segments_[s];
        for (std::uint32_t i = seg.end(); i > seg.begin; --i) {
            out.push_back(seg.ids[i - 1]);
        }
    }
    return out;
}

void BlockSegments::check_invariants(std::span<const std::int32_t> num_holders) const {
    SERVESIM_CHECK(num_holders.size() == place_.size(), "holders for {} of {} blocks", num_holders.size(),
                   place_.size());
    SERVESIM_CHECK(place_[0].segment == kNoSegment, "the null block is in segment {}", place_[0].segment);
    // The queue: linked both ways, every linked segment free and non-empty.
    std::int64_t queued = 0;
    std::uint32_t prev = kSentinel;
    std::size_t num_linked = 0;
    for (std::uint32_t s = segments_[kSentinel].next; s != kSentinel; s = segments_[s].next) {
        SERVESIM_CHECK(s < segments_.size(), "free queue links to segment {} of {}", s, segments_.size());
        const Segment& seg = segments_[s];
        SERVESIM_CHECK(seg.prev == prev, "segment {} has prev {} but follows {}", s, seg.prev, prev);
        SERVESIM_CHECK(seg.ref_cnt == 0 && seg.size() > 0, "queued segment {} has ref_cnt {} and {} blocks", s,
                       seg.ref_cnt, seg.size());
        queued += seg.size();
        prev = s;
        SERVESIM_CHECK(++num_linked < segments_.size(), "the free queue's segments form a cycle");
    }
    SERVESIM_CHECK(segments_[kSentinel].prev == prev, "tail segment is {} not {}", segments_[kSentinel].prev, prev);
    SERVESIM_CHECK(queued == num_free_blocks_, "free queue holds {} blocks but counts {}", queued, num_free_blocks_);
    // Every block in the segment it names, at the position it names, with that segment's count.
    std::vector<bool> spare(segments_.size(), false);
    for (const std::uint32_t s : spare_segments_) {
        spare[s] = true;
    }
    std::int64_t listed = 0;
    for (std::uint32_t s = 1; s < segments_.size(); ++s) {
        const Segment& seg = segments_[s];
        if (spare[s]) {
            continue;
        }
        SERVESIM_CHECK(seg.size() > 0, "live segment {} is empty", s);
        SERVESIM_CHECK(seg.ref_cnt >= 0, "segment {} has negative ref_cnt {}", s, seg.ref_cnt);
        SERVESIM_CHECK((seg.ref_cnt == 0) == (seg.prev != kNotLinked), "segment {} with ref_cnt {} is {}queued", s,
                       seg.ref_cnt, seg.prev != kNotLinked ? "" : "not ");
        for (std::uint32_t i = seg.begin; i < seg.end(); ++i) {
            const auto b = core::to_int(seg.ids[i]);
            SERVESIM_CHECK(b != 0 && b < place_.size() && place_[b].segment == s && place_[b].position == i,
                           "segment {} lists block {} at {}, which names segment {} position {}", s, b, i,
                           b < place_.size() ? place_[b].segment : 0, b < place_.size() ? place_[b].position : 0);
            ++listed;
        }
    }
    SERVESIM_CHECK(listed == static_cast<std::int64_t>(place_.size()) - 1, "segments list {} of {} blocks",
                   listed, place_.size() - 1);
    for (std::size_t b = 1; b < place_.size(); ++b) {
        const std::int32_t ref = segments_[place_[b].segment].ref_cnt;
        SERVESIM_CHECK(ref == num_holders[b], "block {} has ref_cnt {} but {} holders", b, ref, num_holders[b]);
    }
}

}  // namespace servesim::cache
