// The mixed-flags program (issue: "Fast by default on every CPU"): this unit
// is built without ISA flags, module_avx2.cpp with -mavx2 -mfma -mf16c, and
// both use smol. Before the ABI tag (include/smol/detail/abi.hpp) both units
// emitted the same weak symbols (smol::Model::forward, ...) with different
// code, and depending on the link order a baseline CPU could run AVX2 code.
// Built in both link orders (tests/kernels.cmake) and run natively and under
// qemu-x86_64 -cpu Nehalem / Haswell (tools/ci-mixed-flags.sh): this unit must
// work everywhere and reach the dispatched kernels; the module is called only
// where the CPU has AVX2, and must then match the goldens as well.
#include "check.hpp"

int run_avx2_module();

int main() {
    int status = check_against_golden("baseline unit");
    bool has_avx2 = false;
#if defined(__GNUC__) || defined(__clang__)
    __builtin_cpu_init();
    has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
    if (status != 1 && has_avx2) status = std::max(status, run_avx2_module());
    else if (!has_avx2) std::printf("[main] no AVX2 on this CPU: the avx2 unit is not called\n");
    if (status == 2) {
        const char* required = std::getenv("SMOL_REQUIRE_FIXTURES");
        return required && std::string(required) == "1" ? 1 : 0;
    }
    return status;
}
