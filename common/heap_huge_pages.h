// Huge pages under the allocator's main heap (Linux with glibc; elsewhere these do nothing). A cluster run reads
// ~100 MiB of tables at random (the replicas' block pools and prefix indexes, their requests, the store's LRU
// nodes and index); with 4 KiB pages nearly every such read also misses the TLB, whose second level covers ~6 MiB,
// and the page walk's reads are cache misses of their own. Linux's transparent huge pages back a mapping with 2 MiB
// pages where the mapping asks for them (madvise(MADV_HUGEPAGE); /sys/kernel/mm/transparent_hugepage/enabled is
// `madvise` by default on Debian), and glibc's malloc does not ask unless the environment says so
// (GLIBC_TUNABLES=glibc.malloc.hugetlb=1). So the simulator asks itself:
//   prepare_heap_for_huge_pages(), once from main(): malloc serves allocations up to 32 MiB from its main heap (not
//     from a mapping each above 128 KiB), keeps a 256 MiB margin past its top and does not give memory back at the
//     top, so the heap grows rarely and in large steps; then the heap, margin included, is advised.
//   HeapHugePages::advise(), from the run loop: advises the heap again when it has grown (a compare when it has not).
// Only speed depends on this, never a result; where the kernel gives no huge page the memory is 4 KiB pages.
// Threads' own arenas (a sweep's workers) are not covered. Measured in bench/README.md, "Huge pages and a
// profile-guided build".
#pragma once

#include <cstdint>
#include <cstdlib>  // on glibc, defines __GLIBC__ (features.h), tested below

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#define SERVESIM_HEAP_HUGE_PAGES 1
// The end of the program's data and BSS, the linker's symbol `end` (end(3)), under a name of our own: the heap
// lies above it.
extern char servesim_data_end asm("end");
#endif

namespace servesim {

// Advises the main heap's pages for huge pages, up to its current top, from where the last call stopped.
class HeapHugePages {
public:
    void advise() {
#ifdef SERVESIM_HEAP_HUGE_PAGES
        const auto top = reinterpret_cast<std::uintptr_t>(sbrk(0));  // no system call: glibc's cached break
        if (top <= advised_to_) {
            return;
        }
        constexpr std::uintptr_t kPage = 4096;
        // From the data's end on the first call (the gap up to the heap is unmapped: madvise skips it and says
        // ENOMEM, which changes nothing).
        const std::uintptr_t from =
            advised_to_ != 0 ? advised_to_ : reinterpret_cast<std::uintptr_t>(&servesim_data_end);
        const std::uintptr_t first = (from + kPage - 1) & ~(kPage - 1);
        if (top > first) {
            (void)madvise(reinterpret_cast<void*>(first), top - first, MADV_HUGEPAGE);  // a hint
        }
        advised_to_ = top;
#endif
    }

private:
    std::uintptr_t advised_to_ = 0;
};

// Once, from main(), before the simulation allocates: see above.
inline void prepare_heap_for_huge_pages() {
#ifdef SERVESIM_HEAP_HUGE_PAGES
    (void)mallopt(M_MMAP_THRESHOLD, 32 << 20);
    (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
    (void)mallopt(M_TOP_PAD, 256 << 20);
    // Grows the heap by 16 MiB and the margin (a top chunk that held 16 MiB already could not have been grown by a
    // smaller request), all advised before anything touches it; untouched, none of it is resident.
    void* grow = malloc(16 << 20);
    asm volatile("" : : "r"(grow) : "memory");  // kept: GCC removes a malloc whose block is only freed
    HeapHugePages().advise();
    free(grow);
#endif
}

}  // namespace servesim
