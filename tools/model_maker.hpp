// The random-model maker behind tools/smol-make-model: SmolLM3-format GGUF files
// with random weights (the shapes, metadata keys, tensor names and per-tensor
// quantization recipes of real files), for tests, demos and speed work.
//
// The repository's one writer of random models: the tool, the demo model, and
// every test that needs a model without the fixtures (tests/test_quant.cpp checks
// the recipe; model_testutil.hpp, generator_testutil.hpp, test_backend.cpp and
// the fuzzers' micro models build on it). Not part of the library: it lives in
// tools/ and may print.
//
// Weights follow the fixtures' generator: token embeddings N(0, 0.02^2); the input
// projections (attn_q/k/v, ffn_gate/up) N(0, 1/fan_in); the residual output
// projections (attn_output, ffn_down) at half that standard deviation; norms
// 1 + N(0, 0.1^2), output_norm 25 * (1 + N(0, 0.1^2)) (it sets the logit spread).
// Every row draws from its own generator seeded by (seed, tensor, row), so the file
// is the same whatever the thread count.
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <smol/smol.hpp>
#include <smol/gguf/writer.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace smol_tools {

// --- deterministic random numbers -------------------------------------------

// splitmix64: tiny, fast, passes BigCrush; enough for random weights.
class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in (0, 1]: never 0, so log() is safe.
    double uniform() { return double((next() >> 11) + 1) * (1.0 / 9007199254740992.0); }

private:
    uint64_t state_;
};

// Standard normal samples by Marsaglia's polar method: a point uniform in the unit
// disc gives two independent normals for one log and one sqrt (no trigonometry);
// one 64-bit draw supplies both coordinates. Float precision is plenty for weights.
class Gaussian {
public:
    explicit Gaussian(uint64_t seed) : rng_(seed) {}
    float next() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        float u, v, r2;
        do {
            const uint64_t bits = rng_.next();
            // Two 24-bit uniforms in [-1, 1).
            u = float(int32_t(bits >> 40)) * (1.0f / 8388608.0f) - 1.0f;
            v = float(int32_t((bits >> 16) & 0xffffff)) * (1.0f / 8388608.0f) - 1.0f;
            r2 = u * u + v * v;
        } while (r2 >= 1.0f || r2 == 0.0f);
        const float factor = std::sqrt(-2.0f * std::log(r2) / r2);
        spare_ = v * factor;
        has_spare_ = true;
        return u * factor;
    }

private:
    SplitMix64 rng_;
    float spare_ = 0;
    bool has_spare_ = false;
};

// Seed of one row's generator: a hash of (seed, tensor index, row).
inline uint64_t row_seed(uint64_t seed, uint64_t tensor_index, uint64_t row) {
    SplitMix64 mix(seed ^ (tensor_index * 0xd1b54a32d192ed03ull) ^ (row * 0x8cb92ba72f3d8dd7ull));
    mix.next();
    return mix.next();
}

// --- shape, presets, recipes -------------------------------------------------

struct ModelShape {
    uint32_t hidden = 256;
    uint32_t layers = 4;
    uint32_t heads = 4;
    uint32_t kv_heads = 1;
    uint32_t head_dim = 64;
    uint32_t ffn = 768;
    uint32_t vocab = 0;  // 0: as many as the tokenizer has
    uint32_t ctx = 4096;
};

// "3b": the real SmolLM3-3B shape. "demo": the build-time demo model (byte vocab).
// "tiny": the smallest shape the k-quant recipes accept (every row a multiple of 256).
inline ModelShape preset_shape(const std::string& name) {
    ModelShape s;
    if (name == "3b") {
        s = {2048, 36, 16, 4, 128, 11008, 128256, 65536};
    } else if (name == "demo") {
        s = {256, 4, 4, 1, 64, 768, 0, 4096};
    } else if (name == "tiny") {
        s = {256, 2, 4, 2, 64, 512, 0, 512};
    } else {
        throw std::invalid_argument("unknown preset '" + name + "' (expected 3b, demo or tiny)");
    }
    return s;
}

// f16: every matrix and the embedding F16 (the source the reference engine's
// quantizer makes each other type from, for speed work: tools/README.md).
enum class Recipe { q4_k_m, q5_k_m, q8_0, f16, f32 };

inline Recipe parse_recipe(const std::string& name) {
    if (name == "q4_k_m") return Recipe::q4_k_m;
    if (name == "q5_k_m") return Recipe::q5_k_m;
    if (name == "q8_0") return Recipe::q8_0;
    if (name == "f16") return Recipe::f16;
    if (name == "f32") return Recipe::f32;
    throw std::invalid_argument("unknown recipe '" + name +
                                "' (expected q4_k_m, q5_k_m, q8_0, f16 or f32)");
}

// general.file_type values (llama.cpp's LLAMA_FTYPE_*).
inline uint32_t file_type_of(Recipe recipe) {
    switch (recipe) {
        case Recipe::q4_k_m:
            return 15;
        case Recipe::q5_k_m:
            return 17;
        case Recipe::q8_0:
            return 7;
        case Recipe::f16:
            return 1;
        case Recipe::f32:
            return 0;
    }
    return 0;
}

// The K_M recipes give more bits to attn_v and ffn_down in the first and last
// eighth of the layers and in every third layer between.
inline bool uses_more_bits(int layer, int n_layers) {
    const int eighth = n_layers / 8;
    return layer < eighth || layer >= 7 * n_layers / 8 || (layer - eighth) % 3 == 2;
}

enum class Init { embedding, input_projection, output_projection, norm, output_norm };

struct TensorPlan {
    std::string name;
    std::vector<uint64_t> dims;  // innermost first, as GGUF stores them
    smol::GGMLType type = smol::GGMLType::F32;
    Init init = Init::norm;
};

// Every tensor of a SmolLM3 model with its dims and its type under the recipe, in
// file order (token_embd, output_norm, [output], then each block).
inline std::vector<TensorPlan> plan_tensors(const ModelShape& shape, Recipe recipe, bool untied) {
    using smol::GGMLType;
    const uint64_t hidden = shape.hidden, q_dim = uint64_t(shape.heads) * shape.head_dim,
                   kv_dim = uint64_t(shape.kv_heads) * shape.head_dim, ffn = shape.ffn,
                   vocab = shape.vocab;
    const bool k_quant = recipe == Recipe::q4_k_m || recipe == Recipe::q5_k_m;
    const GGMLType base = recipe == Recipe::q4_k_m   ? GGMLType::Q4_K
                          : recipe == Recipe::q5_k_m ? GGMLType::Q5_K
                          : recipe == Recipe::q8_0   ? GGMLType::Q8_0
                          : recipe == Recipe::f16    ? GGMLType::F16
                                                     : GGMLType::F32;
    const GGMLType head_type = k_quant ? GGMLType::Q6_K : base;  // token_embd and output
    // attn_v with >= 4 query heads per KV head is one step above the base type.
    const bool wide_gqa = shape.kv_heads > 0 && shape.heads / shape.kv_heads >= 4;
    const GGMLType gqa_v_type = recipe == Recipe::q4_k_m ? GGMLType::Q5_K : GGMLType::Q6_K;

    std::vector<TensorPlan> plan;
    plan.push_back({"token_embd.weight", {hidden, vocab}, head_type, Init::embedding});
    plan.push_back({"output_norm.weight", {hidden}, GGMLType::F32, Init::output_norm});
    if (untied)
        plan.push_back({"output.weight", {hidden, vocab}, head_type, Init::input_projection});
    for (uint32_t layer = 0; layer < shape.layers; ++layer) {
        const std::string prefix = "blk." + std::to_string(layer) + ".";
        const bool more_bits = k_quant && uses_more_bits(int(layer), int(shape.layers));
        GGMLType v_type = base, down_type = base;
        if (k_quant) {
            v_type = more_bits ? GGMLType::Q6_K : wide_gqa ? gqa_v_type : base;
            down_type = more_bits ? GGMLType::Q6_K : base;
        }
        plan.push_back({prefix + "attn_norm.weight", {hidden}, GGMLType::F32, Init::norm});
        plan.push_back({prefix + "attn_q.weight", {hidden, q_dim}, base, Init::input_projection});
        plan.push_back({prefix + "attn_k.weight", {hidden, kv_dim}, base, Init::input_projection});
        plan.push_back(
            {prefix + "attn_v.weight", {hidden, kv_dim}, v_type, Init::input_projection});
        plan.push_back(
            {prefix + "attn_output.weight", {q_dim, hidden}, base, Init::output_projection});
        plan.push_back({prefix + "ffn_norm.weight", {hidden}, GGMLType::F32, Init::norm});
        plan.push_back({prefix + "ffn_gate.weight", {hidden, ffn}, base, Init::input_projection});
        plan.push_back({prefix + "ffn_up.weight", {hidden, ffn}, base, Init::input_projection});
        plan.push_back(
            {prefix + "ffn_down.weight", {ffn, hidden}, down_type, Init::output_projection});
    }
    return plan;
}

// Tensor count per type name, e.g. {"Q4_K": 198, ...}.
inline std::map<std::string, int> count_types(const std::vector<TensorPlan>& plan) {
    std::map<std::string, int> counts;
    for (const auto& t : plan) ++counts[smol::type_name(t.type)];
    return counts;
}

// File bytes of the tensor data (before alignment padding).
inline uint64_t tensor_bytes(const std::vector<TensorPlan>& plan) {
    uint64_t total = 0;
    for (const auto& t : plan) {
        uint64_t rows = 1;
        for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
        total += rows * smol::row_bytes(t.type, t.dims[0]);
    }
    return total;
}

// --- tokenizer ---------------------------------------------------------------

// GPT-2's byte-to-unicode map: printable bytes stand for themselves, the others
// are shifted to U+0100 and up, so every byte is a visible character. The order
// is the byte-level BPE vocabularies' own (printable first), so token i is entry i.
inline std::vector<std::pair<uint8_t, std::string>> byte_tokens() {
    auto utf8 = [](uint32_t cp) {
        std::string s;
        if (cp < 0x80) {
            s += char(cp);
        } else {
            s += char(0xC0 | (cp >> 6));
            s += char(0x80 | (cp & 0x3F));
        }
        return s;
    };
    std::vector<std::pair<uint8_t, std::string>> out;
    std::vector<bool> printable(256, false);
    for (int b = 33; b <= 126; ++b) printable[b] = true;
    for (int b = 161; b <= 172; ++b) printable[b] = true;
    for (int b = 174; b <= 255; ++b) printable[b] = true;
    for (int b = 0; b < 256; ++b)
        if (printable[b]) out.push_back({uint8_t(b), utf8(uint32_t(b))});
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b)
        if (!printable[b]) out.push_back({uint8_t(b), utf8(next++)});
    return out;
}

// A few hundred merges learned (plain BPE training: repeatedly merge the most
// frequent adjacent pair) from a short English sample, so the byte vocabulary
// tokenizes common words into fewer tokens. Spaces are "Ġ" as in the byte map.
inline std::vector<std::pair<std::string, std::string>> learn_merges(int max_merges) {
    static const char* kSample =
        "The quick brown fox jumps over the lazy dog. Once upon a time there was a little "
        "village at the edge of the forest, and the people who lived there were kind to "
        "every traveller who came along the road. In the morning the baker would open his "
        "shop and the smell of fresh bread filled the streets. The children played in the "
        "square while their parents talked about the weather, the harvest and the news "
        "from the city. You are a helpful assistant. What is the capital of France? The "
        "capital of France is Paris. How are you today? I am fine, thank you, and how are "
        "you? Please tell me a story about a dragon and a knight who became friends. The "
        "knight said that he would protect the village, and the dragon promised that it "
        "would never burn another field. They were both happy and the people of the "
        "village thanked them for their courage. This is the end of the story, but there "
        "are many other stories that we could tell. Hello, traveller! Welcome to our "
        "town. Would you like to buy something? We have swords, shields, potions and "
        "maps of the surrounding lands. The weather is nice today, is it not? ";
    // Words: a leading space joins the word after it ("Ġthe").
    std::map<std::vector<std::string>, int> words;
    std::vector<std::string> current;
    auto flush = [&] {
        if (!current.empty()) ++words[current];
        current.clear();
    };
    for (const char* p = kSample; *p; ++p) {
        const char c = *p;
        if (c == ' ') {
            flush();
            current.push_back("\xC4\xA0");  // "Ġ"
        } else if (std::isalpha(static_cast<unsigned char>(c))) {
            current.push_back(std::string(1, c));
        } else {
            flush();
            current.push_back(std::string(1, c));
            flush();
        }
    }
    flush();
    std::vector<std::pair<std::string, std::string>> merges;
    for (int m = 0; m < max_merges; ++m) {
        std::map<std::pair<std::string, std::string>, int> pairs;
        for (const auto& [pieces, count] : words)
            for (size_t i = 0; i + 1 < pieces.size(); ++i)
                pairs[{pieces[i], pieces[i + 1]}] += count;
        auto best = pairs.end();
        for (auto it = pairs.begin(); it != pairs.end(); ++it)
            if (best == pairs.end() || it->second > best->second) best = it;
        if (best == pairs.end() || best->second < 2) break;
        const auto pair = best->first;
        merges.push_back(pair);
        std::map<std::vector<std::string>, int> merged;
        for (const auto& [pieces, count] : words) {
            std::vector<std::string> out;
            for (size_t i = 0; i < pieces.size(); ++i) {
                if (i + 1 < pieces.size() && pieces[i] == pair.first &&
                    pieces[i + 1] == pair.second) {
                    out.push_back(pair.first + pair.second);
                    ++i;
                } else {
                    out.push_back(pieces[i]);
                }
            }
            merged[out] += count;
        }
        words = std::move(merged);
    }
    return merges;
}

struct Vocabulary {
    std::vector<std::string> tokens;
    std::vector<int32_t> token_types;  // 1 normal, 3 control
    std::vector<std::string> merges;   // "left right"
    uint32_t bos = 0, eos = 0, pad = 0;
};

// The byte-level vocabulary: 256 byte tokens, the learned merges' tokens, then the
// SmolLM3 special tokens. Padded with <|reserved_special_token_N|> up to min_size.
inline Vocabulary byte_vocabulary(uint32_t min_size = 0) {
    Vocabulary v;
    for (const auto& [byte, text] : byte_tokens()) {
        (void)byte;
        v.tokens.push_back(text);
        v.token_types.push_back(1);
    }
    // Two merges can spell the same token ("a" + "bc", "ab" + "c"): list it once.
    std::set<std::string> seen(v.tokens.begin(), v.tokens.end());
    for (const auto& [left, right] : learn_merges(300)) {
        v.merges.push_back(left + " " + right);
        if (!seen.insert(left + right).second) continue;
        v.tokens.push_back(left + right);
        v.token_types.push_back(1);
    }
    auto special = [&](const std::string& text) {
        v.tokens.push_back(text);
        v.token_types.push_back(3);
        return uint32_t(v.tokens.size() - 1);
    };
    v.bos = special("<|begin_of_text|>");
    special("<|end_of_text|>");
    special("<think>");
    special("</think>");
    special("<|im_start|>");
    v.eos = v.pad = special("<|im_end|>");
    for (uint32_t i = 0; v.tokens.size() < min_size; ++i)
        special("<|reserved_special_token_" + std::to_string(i) + "|>");
    return v;
}

// --- building the file -------------------------------------------------------

struct MakeOptions {
    ModelShape shape;
    Recipe recipe = Recipe::q4_k_m;
    bool untied = false;
    std::string tokenizer_from;  // a GGUF to copy tokenizer.* from; empty: byte vocabulary
    // false: no tokenizer.* keys (a forward pass needs none); shape.vocab, which
    // must then be set, is token_embd's row count.
    bool tokenizer = true;
    uint64_t seed = 1;
    unsigned threads = 2;
    // Quantization effort; `fast` is used automatically above ~1e9 parameters unless
    // forced here.
    enum class Effort { automatic, standard, fast } effort = Effort::automatic;
    std::string name;  // general.name; empty: "SmolLM3 random <hidden>x<layers> seed <seed>"

    // For the tests of other type mixes and of what a loader must reject; a
    // real-shaped file needs none of these.
    std::string architecture = "smollm3";  // general.architecture, and the prefix of its keys
    std::optional<smol::GGMLType>
        matrix_type;  // every attention and MLP matrix, instead of the recipe's
    std::optional<smol::GGMLType>
        embedding_type;  // token_embd (and output), instead of the recipe's
    // One tensor's type by name, applied last. A type smol cannot quantize (e.g.
    // Q4_0) is written as zero bytes of the right size: enough to be rejected.
    std::map<std::string, smol::GGMLType> tensor_types;
};

// The recipe's plan with `options`' type overrides applied.
inline std::vector<TensorPlan> plan_tensors(const ModelShape& shape, const MakeOptions& options) {
    std::vector<TensorPlan> plan = plan_tensors(shape, options.recipe, options.untied);
    for (TensorPlan& t : plan) {
        const bool embedding = t.name == "token_embd.weight" || t.name == "output.weight";
        if (embedding && options.embedding_type) t.type = *options.embedding_type;
        const bool matrix = t.dims.size() == 2 && !embedding;
        if (matrix && options.matrix_type) t.type = *options.matrix_type;
        const auto forced = options.tensor_types.find(t.name);
        if (forced != options.tensor_types.end()) t.type = forced->second;
    }
    return plan;
}

// Fills one tensor's bytes: rows generated and quantized in parallel.
inline std::vector<uint8_t> make_tensor_data(const TensorPlan& t, uint64_t tensor_index,
                                             uint64_t seed, unsigned threads,
                                             smol::QuantizeEffort effort) {
    const uint64_t row_length = t.dims[0];
    uint64_t rows = 1;
    for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
    const size_t bytes_per_row = smol::row_bytes(t.type, row_length);
    std::vector<uint8_t> data(size_t(rows) * bytes_per_row);
    if (!smol::can_quantize(t.type))
        return data;  // a forced type no writer has (MakeOptions::tensor_types)
    float stddev = 1, mean = 0;
    switch (t.init) {
        case Init::embedding:
            stddev = 0.02f;
            break;
        case Init::input_projection:
            stddev = 1.0f / std::sqrt(float(row_length));
            break;
        case Init::output_projection:
            stddev = 0.5f / std::sqrt(float(row_length));
            break;
        case Init::norm:
            mean = 1, stddev = 0.1f;
            break;
        case Init::output_norm:
            mean = 25, stddev = 2.5f;
            break;
    }
    std::atomic<uint64_t> next_row{0};
    constexpr uint64_t kRowsPerGrab = 16;
    auto worker = [&] {
        std::vector<float> row(row_length);
        for (;;) {
            const uint64_t first = next_row.fetch_add(kRowsPerGrab);
            if (first >= rows) break;
            const uint64_t last = std::min(rows, first + kRowsPerGrab);
            for (uint64_t r = first; r < last; ++r) {
                Gaussian gaussian(row_seed(seed, tensor_index, r));
                for (auto& x : row) x = mean + stddev * gaussian.next();
                smol::quantize_row(t.type, row.data(), data.data() + r * bytes_per_row, row_length,
                                   effort);
            }
        }
    };
    const unsigned n_threads = std::max(1u, std::min<unsigned>(threads, unsigned(rows)));
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < n_threads; ++i) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
    return data;
}

inline void check_shape(const ModelShape& s, Recipe recipe) {
    auto require = [](bool ok, const std::string& what) {
        if (!ok) throw std::invalid_argument(what);
    };
    require(s.hidden > 0 && s.layers > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0 &&
                s.ffn > 0 && s.ctx > 0,
            "every dimension must be positive");
    require(s.heads % s.kv_heads == 0, "heads must be a multiple of kv-heads");
    require(s.head_dim % 2 == 0, "head-dim must be even (RoPE rotates pairs)");
    uint32_t block = 1;
    if (recipe == Recipe::q4_k_m || recipe == Recipe::q5_k_m) block = 256;
    if (recipe == Recipe::q8_0) block = 32;
    require(s.hidden % block == 0 && (s.heads * s.head_dim) % block == 0 && s.ffn % block == 0,
            "hidden, heads * head-dim and ffn must be multiples of " + std::to_string(block) +
                " for this recipe");
}

// Builds the whole model into a writer. `progress` (may be null) is told each tensor.
template <class Progress>
inline void make_model(const MakeOptions& options, smol::gguf::Writer& writer,
                       Progress&& progress) {
    ModelShape shape = options.shape;
    check_shape(shape, options.recipe);

    // Tokenizer first: it fixes the vocabulary size.
    uint32_t token_count = 0;
    if (!options.tokenizer) {
        if (shape.vocab == 0)
            throw std::invalid_argument("a model without a tokenizer needs --vocab");
        token_count = shape.vocab;
    } else if (!options.tokenizer_from.empty()) {
        auto source = smol::gguf::File::open(options.tokenizer_from);
        for (const auto& kv : source->metadata())
            if (kv.key.rfind("tokenizer.", 0) == 0) writer.copy_value(kv.key, kv.value);
        token_count = uint32_t(source->get<smol::gguf::ArrayView>("tokenizer.ggml.tokens").size());
    } else {
        const Vocabulary v = byte_vocabulary(shape.vocab);
        writer.set_string("tokenizer.ggml.model", "gpt2");
        writer.set_string("tokenizer.ggml.pre", "smaug-bpe");
        writer.set_strings("tokenizer.ggml.tokens", v.tokens);
        writer.set_array("tokenizer.ggml.token_type", v.token_types);
        writer.set_strings("tokenizer.ggml.merges", v.merges);
        writer.set_u32("tokenizer.ggml.bos_token_id", v.bos);
        writer.set_u32("tokenizer.ggml.eos_token_id", v.eos);
        writer.set_u32("tokenizer.ggml.padding_token_id", v.pad);
        token_count = uint32_t(v.tokens.size());
    }
    if (shape.vocab != 0 && shape.vocab != token_count)
        throw std::invalid_argument("--vocab " + std::to_string(shape.vocab) +
                                    " but the tokenizer has " + std::to_string(token_count) +
                                    " tokens");
    shape.vocab = token_count;

    const std::string& arch = options.architecture;
    writer.set_string("general.architecture", arch);
    writer.set_string("general.name", options.name.empty()
                                          ? "SmolLM3 random " + std::to_string(shape.hidden) + "x" +
                                                std::to_string(shape.layers) + " seed " +
                                                std::to_string(options.seed)
                                          : options.name);
    writer.set_u32("general.file_type", file_type_of(options.recipe));
    writer.set_u32(arch + ".vocab_size", shape.vocab);
    writer.set_u32(arch + ".context_length", shape.ctx);
    writer.set_u32(arch + ".embedding_length", shape.hidden);
    writer.set_u32(arch + ".block_count", shape.layers);
    writer.set_u32(arch + ".feed_forward_length", shape.ffn);
    writer.set_u32(arch + ".attention.head_count", shape.heads);
    writer.set_u32(arch + ".attention.head_count_kv", shape.kv_heads);
    writer.set_u32(arch + ".rope.dimension_count", shape.head_dim);
    writer.set_f32(arch + ".rope.freq_base", 5e6f);
    writer.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
    if (shape.head_dim * shape.heads != shape.hidden) {
        writer.set_u32(arch + ".attention.key_length", shape.head_dim);
        writer.set_u32(arch + ".attention.value_length", shape.head_dim);
    }
    writer.set_u32("general.quantization_version", 2);

    const std::vector<TensorPlan> plan = plan_tensors(shape, options);
    uint64_t parameters = 0;
    for (const auto& t : plan) {
        uint64_t n = 1;
        for (uint64_t d : t.dims) n *= d;
        parameters += n;
    }
    smol::QuantizeEffort effort = smol::QuantizeEffort::standard;
    if (options.effort == MakeOptions::Effort::fast ||
        (options.effort == MakeOptions::Effort::automatic && parameters > 1000000000ull))
        effort = smol::QuantizeEffort::fast;
    for (size_t i = 0; i < plan.size(); ++i) {
        const TensorPlan& t = plan[i];
        const std::vector<uint8_t> data =
            make_tensor_data(t, i, options.seed, options.threads, effort);
        writer.add_tensor(t.name, t.type, t.dims, data.data(), data.size());
        progress(i, plan.size(), t);
    }
}

inline void make_model(const MakeOptions& options, smol::gguf::Writer& writer) {
    make_model(options, writer, [](size_t, size_t, const TensorPlan&) {});
}

// The model as a GGUF file's bytes, for File::from_bytes or Model::load_from_memory.
inline std::vector<uint8_t> make_model_bytes(const MakeOptions& options) {
    smol::gguf::Writer writer;
    make_model(options, writer);
    return writer.to_bytes();
}

}  // namespace smol_tools
