// Which ISA table the kernels run: the best this CPU supports (cpuid, through __builtin_cpu_supports, which also
// checks that the OS saves the AVX-512 registers), or the one PLAINLLAMA_KERNELS names; chosen once, at the first
// kernel call (main() asks first, so a bad PLAINLLAMA_KERNELS is a one-line error before any work).
#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "isa.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/sys/error.h"

namespace plainllama {
namespace isa {
namespace {

struct Variant {
    const char* name;
    bool (*supported)();
    const Kernels& (*table)();
};

// Best first.
const Variant kVariants[] = {
    {"avx512_bf16", [] { return __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512bf16") &&
                                __builtin_cpu_supports("avx512vnni"); },
     avx512_bf16_kernels},
    {"avx512", [] { return bool(__builtin_cpu_supports("x86-64-v4")); }, avx512_kernels},
    {"avx2", [] { return bool(__builtin_cpu_supports("x86-64-v3")); }, avx2_kernels},
    {"scalar", [] { return true; }, scalar_kernels},
};

std::atomic<const Kernels*> g_active{nullptr};

// AMD, family 26 (0x1A) or later: base family 15 plus the extended family.
bool cpu_is_zen5_or_later() {
    __builtin_cpu_init();
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &a, &b, &c, &d)) return false;
    const unsigned base = (a >> 8) & 0xF, family = base == 0xF ? base + ((a >> 20) & 0xFF) : base;
    return family >= 0x1A;
}
// zen5(): cpuid's answer from the start, until use_zen5_tuning sets it.
std::atomic<bool> g_zen5{cpu_is_zen5_or_later()};

std::string join(const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

// The table of `name`, or a UsageError naming `what` when it is unknown or this CPU cannot run it.
const Kernels& table_of(const std::string& name, const std::string& what) {
    __builtin_cpu_init();
    for (const Variant& v : kVariants) {
        if (name != v.name) continue;
        if (!v.supported())
            throw UsageError(what + ": this CPU does not support the " + name + " kernels (it runs " +
                             join(kernel_variants()) + ")");
        return v.table();
    }
    std::vector<std::string> all;
    for (const Variant& v : kVariants) all.push_back(v.name);
    throw UsageError(what + ": unknown kernel variant '" + name + "' (expected one of " + join(all) + ")");
}

const Kernels& choose() {
    const char* env = std::getenv("PLAINLLAMA_KERNELS");
    if (env && *env) return table_of(env, std::string("PLAINLLAMA_KERNELS=") + env);
    return table_of(kernel_variants().front(), "kernels");
}

}  // namespace

const Kernels& active() {
    const Kernels* k = g_active.load(std::memory_order_acquire);
    if (!k) {
        k = &choose();
        g_active.store(k, std::memory_order_release);
    }
    return *k;
}

bool zen5() { return g_zen5.load(std::memory_order_relaxed); }

}  // namespace isa

std::vector<std::string> kernel_variants() {
    __builtin_cpu_init();
    std::vector<std::string> names;
    for (const isa::Variant& v : isa::kVariants)
        if (v.supported()) names.push_back(v.name);
    return names;
}

const char* kernels_isa() { return isa::active().name; }

void use_kernels(const std::string& name) {
    isa::g_active.store(&isa::table_of(name, "kernels"), std::memory_order_release);
}

bool zen5_tuning() { return isa::zen5(); }

void use_zen5_tuning(bool on) { isa::g_zen5.store(on, std::memory_order_relaxed); }

}  // namespace plainllama
