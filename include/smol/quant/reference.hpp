// Reference (scalar) dequantization and quantization of the weight formats smol
// reads and writes: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K (and Q8_K, the
// activation format). The readable spec the SIMD kernels are tested against,
// in two halves:
//   quant/dequantize.hpp   dequantize_row(type, src, dst, n), can_dequantize and the
//                          per-type dequantize_row_*: what each block's bytes mean
//   quant/quantize.hpp     quantize_row(type, src, dst, n, effort), can_quantize,
//                          QuantizeEffort and the per-type quantize_row_*
// Their internals (the k-quant scale search, rounding) live in quant/detail/.
#pragma once

#include "dequantize.hpp"
#include "quantize.hpp"
