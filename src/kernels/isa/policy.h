// The AVX-512 decode kernels' CPU-specific choices, named by what they do: how each stream of weights is read ahead of
// its loads, into how many chains one token's integer sums are split, and whether x's chunks are vpdpbusd's broadcast
// memory operand. One policy per CPU family; the family is chosen once (dispatch.cpp: PLAINLLAMA_TUNING, else cpuid;
// kernels.h's Tuning), and each decode kernel runs its body instantiated for that policy (with_policy). Every choice
// is exact (a prefetch, the form of a load or of an operand, the order of integer additions), so every policy gives
// the same bits. A choice is a policy's only where an interleaved A/B on that CPU showed it outside the noise; the
// rest is the default (docs/performance.md has the measurements).
#pragma once
#include <cstddef>

#include "isa.h"
#include "plainllama/kernels/quant.h"

namespace plainllama::isa {

// How a decode kernel reads one stream of weights (the float panels, or the tiles of one quantized format) ahead of
// its loads. Prefetches only: what is loaded, and so the result, never changes.
struct ReadAhead {
    // Each 64-byte line the kernel loads comes with a prefetch into L1 of the line `l1_ahead` bytes on (0: none). For
    // tiles, a tile's header's worth of lines at l1_ahead on is prefetched too: with a whole number of tiles, the
    // header of the tile that far on (the hardware prefetcher follows a tile's header and body as separate streams
    // poorly); otherwise body lines, the headers then reaching L2 through the L2 prefetch.
    size_t l1_ahead = 0;
    // With l1_ahead: each line also prefetched into L2, 4 x l1_ahead on, so that the L1 prefetch mostly finds it there
    // (L1 has few fill buffers for misses in flight; L2 tracks more).
    bool l2 = false;
    // The first line of each 4 KiB page, prefetched when the stream comes within page_start_ahead bytes of it (0:
    // none): a hardware prefetcher that does not carry a stream across a page boundary leaves each page's first lines
    // waiting on memory. One prefetch per page, where a line prefetch makes 64.
    size_t page_start_ahead = 0;
};

// The default: Intel's cores, and any CPU not named below. Their hardware prefetcher alone leaves decode well short of
// the bandwidth, so every line is prefetched into L1 and L2 (q4_k's tiles, read as two streams, furthest ahead).
struct DefaultPolicy {
    static constexpr ReadAhead kPanels = {.l1_ahead = 4096, .l2 = true};
    static constexpr ReadAhead kQ8_0 = {.l1_ahead = 8 * kQ8x16Tile, .l2 = true};
    static constexpr ReadAhead kQ4_K = {.l1_ahead = 4 * kQ4x16Tile, .l2 = true};
    static constexpr ReadAhead kQ6_K = {.l1_ahead = 2 * kQ6x16Tile, .l2 = true};
    // q4_0 and q5_0 as q8_0 (about as many bytes on, an even number of tiles: see avx512_quant.cpp), q5_k as q4_k.
    static constexpr ReadAhead kQ4_0 = {.l1_ahead = 16 * kQ40x16Tile, .l2 = true};
    static constexpr ReadAhead kQ5_0 = {.l1_ahead = 12 * kQ50x16Tile, .l2 = true};
    static constexpr ReadAhead kQ5_K = {.l1_ahead = 4 * kQ5Kx16Tile, .l2 = true};
    // With VNNI, one token's integer sums of a q8_0 tile, and of each q4_k sub-block, as this many independent chains
    // of vpdpbusd (chunk c into chain c mod n, added at the end), not one dependent chain: more of the stream's loads
    // in flight. Several tokens already give independent chains.
    static constexpr int kQ8_0Chains = 1;
    static constexpr int kQ4_KChains = 1;
    static constexpr int kQ5_KChains = 1;
    // With VNNI, the q8_0, q4_0, q5_0, q4_k and q5_k kernels for groups of at least this many tokens (0: never) take
    // x's 4-byte chunks as vpdpbusd's broadcast memory operand ({1to16}) rather than broadcast into a register first (a
    // vector operation less per load and token), and q4_k's and q5_k's mins' sums as vpdpwssd with x's two sums as its
    // memory operand, the rows' mins paired by one vpermw. It pays where the arithmetic, not the stream, is the bound:
    // several tokens.
    static constexpr int kXOperandTokens = 0;
};

// AMD family 25 (Zen 4): the hardware prefetchers alone read fastest there (a software prefetch of every line, or of
// each page's first, reads slower), so no stream prefetches; x as the broadcast memory operand for 2 tokens or more.
struct Zen4Policy : DefaultPolicy {
    static constexpr ReadAhead kPanels = {}, kQ8_0 = {}, kQ4_K = {}, kQ6_K = {}, kQ4_0 = {}, kQ5_0 = {}, kQ5_K = {};
    static constexpr int kXOperandTokens = 2;
};

// AMD family 26 and later (Zen 5): its hardware prefetcher keeps up within a page but not across one, so the panels
// and q8_0 tiles prefetch each page's first line alone (a prefetch of every line reads slower there); q4_k and q6_k
// tiles prefetch 2 tiles on into L1 alone, and the page starts further on than that; q4_0 and q5_0 tiles, whose
// arithmetic per byte is more than q8_0's, every line about 4 KiB on (an even number of tiles) into L1 alone; q5_k
// tiles, whose arithmetic takes longest per byte and which lean on their prefetches alone, every line 8 KiB on into L1
// and 32 KiB on into L2 (nearer, the fast-memory minutes read less of the bandwidth); one token's sums in chains.
struct Zen5Policy : DefaultPolicy {
    static constexpr ReadAhead kPanels = {.page_start_ahead = 4096};
    static constexpr ReadAhead kQ8_0 = {.page_start_ahead = 4096};
    static constexpr ReadAhead kQ4_K = {.l1_ahead = 2 * kQ4x16Tile, .page_start_ahead = 16 << 10};
    static constexpr ReadAhead kQ6_K = {.l1_ahead = 2 * kQ6x16Tile, .page_start_ahead = 16 << 10};
    static constexpr ReadAhead kQ4_0 = {.l1_ahead = 14 * kQ40x16Tile}, kQ5_0 = {.l1_ahead = 12 * kQ50x16Tile};
    static constexpr ReadAhead kQ5_K = {.l1_ahead = 8192, .l2 = true};
    static constexpr int kQ8_0Chains = 4;
    static constexpr int kQ4_KChains = 2;
    static constexpr int kQ5_KChains = 2;
};

// f.template operator()<P>() with P the policy of the tuning in use (tuning(), chosen once): the one place that maps a
// tuning to its policy.
template <class F>
__attribute__((always_inline)) inline void with_policy(const F& f) {
    switch (tuning()) {
        case Tuning::zen5:
            f.template operator()<Zen5Policy>();
            break;
        case Tuning::zen4:
            f.template operator()<Zen4Policy>();
            break;
        default:
            f.template operator()<DefaultPolicy>();
    }
}

}  // namespace plainllama::isa
