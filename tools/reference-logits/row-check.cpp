// One weight matrix's product, three ways: the reference engine's dot product
// (its type traits' vec_dot against its own activation quantizer), the
// reference's graph (ggml_mul_mat of the first rows, the path its forward pass
// takes), and smol's scalar spec; plus the exact product of the dequantized
// row with the float input. Where the reference's two disagree, its goldens
// are not an exact engine's (README: "row-check").
//
//   row-check LAYERS.gguf TENSOR [ROWS]
//
// Build against a reference checkout whose ggml library is built (README).
#include <ggml.h>
#include <smol/smol.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: row-check LAYERS.gguf TENSOR [ROWS]\n");
        return 2;
    }
    const int n_rows = argc > 3 ? std::atoi(argv[3]) : 4;
    ggml_init_params params = {64 * 1024 * 1024, nullptr, false};
    ggml_context* ctx = ggml_init(params);
    const auto file = smol::gguf::File::open(argv[1]);
    const smol::gguf::TensorInfo& t = file->tensor(argv[2]);
    const size_t cols = t.dims[0], row_bytes = smol::row_bytes(t.type, cols);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> x(cols);
    for (float& v : x) v = normal(rng);

    // The reference's graph: W (n_rows rows) times x.
    ggml_tensor* w = ggml_new_tensor_2d(ctx, ggml_type(t.type), int64_t(cols), n_rows);
    std::memcpy(w->data, t.data, size_t(n_rows) * row_bytes);
    ggml_tensor* input = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, int64_t(cols), 1);
    std::memcpy(input->data, x.data(), cols * sizeof(float));
    ggml_tensor* y = ggml_mul_mat(ctx, w, input);
    ggml_cgraph* graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, y);
    ggml_graph_compute_with_ctx(ctx, graph, 1);

    // The reference's dot product (meaningful where vec_dot_type is a plain row format).
    const ggml_type_traits_t weight_traits = ggml_internal_get_type_traits(ggml_type(t.type));
    const ggml_type_traits_t act_traits = ggml_internal_get_type_traits(weight_traits.vec_dot_type);
    std::vector<uint8_t> xq(cols * 4 + 4096);
    act_traits.from_float(x.data(), xq.data(), int64_t(cols));

    // smol's spec with its own activations.
    const smol::ActivationType act = smol::activation_type_for(t.type);
    smol::QuantizedInput quantized(smol::kernels::kernel_set(smol::CpuLevel::scalar));
    quantized.quantize(t.type, x.data(), 1, cols);
    std::vector<float> dequantized(cols);
    std::printf("%s: %s, %zu columns, smol activations %s, reference vec_dot_type %d\n", argv[2],
                smol::type_name(t.type).c_str(), cols, smol::activation_type_name(act),
                int(weight_traits.vec_dot_type));
    for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = t.data + size_t(r) * row_bytes;
        float dot = 0;
        weight_traits.vec_dot(int(cols), &dot, 0, row, 0, xq.data(), 0, 1);
        const float ours =
            smol::weight_type_info(t.type)->dot_reference(row, quantized.row(0), cols);
        smol::dequantize_row(t.type, row, dequantized.data(), cols);
        double exact = 0;
        for (size_t i = 0; i < cols; ++i) exact += double(dequantized[i]) * x[i];
        std::printf("row %d: reference graph %.6f, reference vec_dot %.6f, smol %.6f, exact %.6f\n",
                    r, double(static_cast<const float*>(y->data)[r]), double(dot), double(ours),
                    exact);
    }
    ggml_free(ctx);
    return 0;
}
