// NodeKeyIndex's growth; see block_key_index.h.
#include "sim/cluster/block_key_index.h"

#include "common/error.h"

namespace servesim::cluster {

void NodeKeyIndex::rehash(std::size_t num_slots) {
    SERVESIM_CHECK(num_slots <= (std::size_t{1} << 32), "an LRU index of {} slots (at most 2^32)", num_slots);
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(num_slots, Slot{});
    mask_ = num_slots - 1;
    shift_ = 32 - std::countr_zero(num_slots);
    max_size_ = num_slots / 2;
    size_ = 0;
    for (const Slot& s : old) {
        if (s.node != npos) {
            put(s.tag, s.node);
        }
    }
}

}  // namespace servesim::cluster
