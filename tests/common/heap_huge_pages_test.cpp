// common/heap_huge_pages.h: the main heap's mappings carry the huge-page advice (Linux's VmFlags "hg" in
// /proc/self/smaps), the margin past the heap's top included, and advise() extends it to what the heap grew by.
// Linux with glibc and transparent huge pages only; not under AddressSanitizer, whose allocator bypasses the heap.
#include "common/heap_huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/catch.h"

namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SERVESIM_TEST_UNDER_ASAN 1  // clang names AddressSanitizer this way; GCC defines __SANITIZE_ADDRESS__
#endif
#endif
#if defined(SERVESIM_HEAP_HUGE_PAGES) && !defined(__SANITIZE_ADDRESS__) && !defined(SERVESIM_TEST_UNDER_ASAN)
constexpr bool kApplies = true;
#else
constexpr bool kApplies = false;
#endif

// The VmFlags of the mapping that holds `address` ("" when none does).
std::string vm_flags_at(std::uintptr_t address) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        std::uintptr_t from = 0;
        std::uintptr_t to = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> from >> dash >> to && dash == '-' && line.find(' ') > line.find('-')) {
            inside = from <= address && address < to;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) {
            return line.substr(8) + " ";
        }
    }
    return "";
}

bool advised(std::uintptr_t address) { return vm_flags_at(address).find(" hg ") != std::string::npos; }

bool thp_available() { return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"); }

std::uintptr_t heap_top() { return reinterpret_cast<std::uintptr_t>(sbrk(0)); }

}  // namespace

TEST_CASE("after prepare_heap_for_huge_pages, the heap's top page and the allocations below it are advised") {
    if (!kApplies || !thp_available()) {
        WARN("not Linux with glibc and transparent huge pages, or under AddressSanitizer: nothing to check");
        return;
    }
    servesim::prepare_heap_for_huge_pages();
    // A 1 MiB block is below the 32 MiB mmap threshold now, so it comes from the heap, inside the margin.
    void* block = std::malloc(1 << 20);
    const auto at = reinterpret_cast<std::uintptr_t>(block);
    CHECK(at < heap_top());
    CHECK(advised(at));
    CHECK(advised(heap_top() - 1));
    std::free(block);
}

TEST_CASE("HeapHugePages::advise extends the advice to the pages the heap grew by") {
    if (!kApplies || !thp_available()) {
        WARN("not Linux with glibc and transparent huge pages, or under AddressSanitizer: nothing to check");
        return;
    }
    servesim::prepare_heap_for_huge_pages();
    servesim::HeapHugePages pages;
    pages.advise();
    // Grow the heap past its 256 MiB margin with 16 MiB blocks (from the heap: below the threshold), never
    // touched, so nothing becomes resident.
    const std::uintptr_t before = heap_top();
    std::vector<void*> blocks;
    while (heap_top() == before && blocks.size() < 64) {
        blocks.push_back(std::malloc(16 << 20));
    }
    REQUIRE(heap_top() > before);
    const std::uintptr_t grown = heap_top() - 1;
    // The kernel maps the growth as a mapping of its own, without the advice, until advise() sees it.
    CHECK_FALSE(advised(grown));
    pages.advise();
    CHECK(advised(grown));
    pages.advise();  // nothing grew: nothing changes
    CHECK(advised(grown));
    for (void* b : blocks) {
        std::free(b);
    }
}
