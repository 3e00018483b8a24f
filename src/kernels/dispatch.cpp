// Which ISA table the kernels run: the best this CPU supports (cpuid, through __builtin_cpu_supports, which also
// checks that the OS saves the AVX-512 registers), or the one PLAINLLAMA_KERNELS names; chosen once, at the first
// kernel call (main() asks first, so a bad PLAINLLAMA_KERNELS is a one-line error before any work); and the decode
// kernels' tuning (kernels.h), from PLAINLLAMA_TUNING or cpuid, chosen once at the first call that asks for it (a
// table's choice asks too) unless use_tuning set it before.
#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "isa/isa.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/testing.h"
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
    {"avx512_bf16",
     [] {
         return __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512bf16") &&
                __builtin_cpu_supports("avx512vnni");
     },
     avx512_bf16_kernels},
    {"avx512", [] { return bool(__builtin_cpu_supports("x86-64-v4")); }, avx512_kernels},
    {"avx2", [] { return bool(__builtin_cpu_supports("x86-64-v3")); }, avx2_kernels},
    {"scalar", [] { return true; }, scalar_kernels},
};

std::atomic<const Kernels*> g_active{nullptr};

constexpr Tuning kTunings[] = {Tuning::intel, Tuning::zen4, Tuning::zen5};

// The tuning in use, as an int; -1 until the first tuning() (or use_tuning) sets it.
std::atomic<int> g_tuning{-1};

std::string join(const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

// PLAINLLAMA_TUNING's (UsageError when it names none), else cpuid's.
Tuning choose_tuning() {
    const char* t = std::getenv("PLAINLLAMA_TUNING");
    if (!t || !*t) return cpu_tuning();
    std::vector<std::string> names;
    for (Tuning k : kTunings) {
        if (std::string(t) == tuning_name(k)) return k;
        names.push_back(tuning_name(k));
    }
    throw UsageError(std::string("PLAINLLAMA_TUNING=") + t + ": unknown tuning (expected one of " + join(names) + ")");
}

// The table of `name`, or a UsageError naming `what` when it is unknown or this CPU cannot run it. Choosing a table
// chooses the tuning too (tuning()), so that a bad PLAINLLAMA_TUNING is an error here, never in a kernel's first call.
const Kernels& table_of(const std::string& name, const std::string& what) {
    tuning();
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

Tuning tuning() {
    int t = g_tuning.load(std::memory_order_relaxed);
    if (t < 0) {
        t = static_cast<int>(choose_tuning());
        int unset = -1;  // a use_tuning meanwhile wins
        if (!g_tuning.compare_exchange_strong(unset, t, std::memory_order_relaxed)) t = unset;
    }
    return static_cast<Tuning>(t);
}

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

Tuning tuning() { return isa::tuning(); }

// AMD family 25 (0x19: Zen 3 and Zen 4; only Zen 4 runs the AVX-512 kernels) zen4, 26 (0x1A) or later zen5, any other
// CPU intel. The family: base family 15 plus the extended family.
Tuning cpu_tuning() {
    __builtin_cpu_init();
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &a, &b, &c, &d)) return Tuning::intel;
    const unsigned base = (a >> 8) & 0xF, family = base == 0xF ? base + ((a >> 20) & 0xFF) : base;
    return family >= 0x1A ? Tuning::zen5 : family == 0x19 ? Tuning::zen4 : Tuning::intel;
}

bool kernels_tuned() { return isa::active().has_tuning; }

void use_tuning(Tuning t) { isa::g_tuning.store(static_cast<int>(t), std::memory_order_relaxed); }

const char* tuning_name(Tuning t) {
    switch (t) {
        case Tuning::intel:
            return "intel";
        case Tuning::zen4:
            return "zen4";
        case Tuning::zen5:
            return "zen5";
    }
    return "?";
}

}  // namespace plainllama
