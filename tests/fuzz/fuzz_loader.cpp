// libFuzzer target for the whole model loader: the input is a GGUF file that
// goes through what Model::load does after mapping (Config, Weights, the
// network's matrices, the Tokenizer), and, when it loads, through a short
// forward pass, so that a file whose metadata and tensor table agree with
// each other but lie about anything else is caught here. The only acceptable
// outcomes are a working model or smol::Error; the sanitizers catch the rest,
// libFuzzer's -rss_limit_mb memory out of proportion to the input.
//   tools/fuzz.sh fuzz_loader 600
#include <smol/smol.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static smol::ThreadPool pool(1);  // one for the whole run: a pool per input would dominate
    try {
        auto file = smol::gguf::File::from_buffer(data, size, "fuzz.gguf");
        const smol::SmolLM3 net(file);
        const smol::Tokenizer tokenizer = smol::Tokenizer::from_gguf(file);
        if (size_t(tokenizer.vocab_size()) != net.config().vocab_size)
            return 0;  // Model refuses this too
        std::vector<int32_t> ids = tokenizer.encode("Hi <|im_start|>user\nA\xc3\xa9!", true);
        if (ids.empty()) ids.push_back(0);
        ids.resize(std::min<size_t>(ids.size(), 4));
        smol::KVCache kv(net.config(), std::min<size_t>(8, net.config().context_length));
        ids.resize(std::min(ids.size(), kv.n_ctx()));
        std::vector<float> logits(net.config().vocab_size);
        net.forward(ids.data(), ids.size(), 0, kv, logits.data(), pool);
        (void)tokenizer.decode(ids);
    } catch (const smol::Error&) {
    }
    return 0;
}
