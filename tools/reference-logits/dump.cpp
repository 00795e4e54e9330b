// Reference logits dumper: runs prompts through a llama.cpp-family engine over
// its public llama.h and writes goldens in the fixtures' format (the shared
// fixtures README, "Golden outputs"):
//   OUT            [{"prompt", "prompt_ids", "prompt_logits_top", "greedy"}]
//                  top-k [id, logit] of every prompt position, and a greedy
//                  continuation: each chosen id with the top-k after feeding it;
//   OUT.<i>.logits.f32
//                  the full last-prompt-position logits of prompt i
//                  (n_vocab little-endian f32).
// Settings as the fixtures' goldens were taken: CPU, KV cache F16, flash
// attention on, prompts decoded in passes of --ubatch tokens with every
// position's logits, then one token per greedy step.
//
// Not part of smol's build: it compiles against a reference checkout (see
// tools/reference-logits/README.md).
//
//   dump -m MODEL -o OUT [-c N_CTX] [-t THREADS] [-k TOP] [-g GREEDY_STEPS]
//        [--ubatch N] (--text TEXT | --ids "1 2 3")...
// --text is tokenized by the engine (special tokens parsed, nothing added);
// --ids takes the ids as given (space- or comma-separated) and records them
// with an empty prompt text. Each --text / --ids is one prompt.
#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Prompt {
    std::string text;
    std::vector<llama_token> ids;
};

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "dump: %s\n", what.c_str());
    std::exit(1);
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    return out + "\"";
}

// Top-k of `logits` as [[id, logit], ...], best first (ties: lower id first).
std::string top_json(const float* logits, int n_vocab, int k) {
    std::vector<int> order(static_cast<size_t>(n_vocab));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    std::string out = "[";
    for (int i = 0; i < k; ++i) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s[%d, %.9g]", i ? ", " : "", order[size_t(i)],
                      double(logits[order[size_t(i)]]));
        out += buf;
    }
    return out + "]";
}

int argmax(const float* logits, int n_vocab) {
    return int(std::max_element(logits, logits + n_vocab) - logits);
}

// Decodes tokens[0, n) at positions start.. in one pass; `all_logits`: every
// position's logits, else only the last one's.
void decode(llama_context* ctx, const llama_token* tokens, int n, int start, bool all_logits) {
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = start + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = all_logits || i + 1 == n;
    }
    batch.n_tokens = n;
    const int rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    if (rc != 0) die("llama_decode failed with " + std::to_string(rc));
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, out_path;
    int n_ctx = 0, threads = 2, top = 8, greedy = 24, ubatch = 512;
    std::vector<std::pair<bool, std::string>> inputs;  // (is_text, value)
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value after " + a);
            return argv[++i];
        };
        if (a == "-m")
            model_path = value();
        else if (a == "-o")
            out_path = value();
        else if (a == "-c")
            n_ctx = std::atoi(value().c_str());
        else if (a == "-t")
            threads = std::atoi(value().c_str());
        else if (a == "-k")
            top = std::atoi(value().c_str());
        else if (a == "-g")
            greedy = std::atoi(value().c_str());
        else if (a == "--ubatch")
            ubatch = std::atoi(value().c_str());
        else if (a == "--text")
            inputs.emplace_back(true, value());
        else if (a == "--ids")
            inputs.emplace_back(false, value());
        else
            die("unknown argument " + a);
    }
    if (model_path.empty() || out_path.empty() || inputs.empty())
        die("usage: dump -m MODEL -o OUT [-c N_CTX] [-t THREADS] [-k TOP] [-g STEPS] "
            "[--ubatch N] (--text TEXT | --ids IDS)...");

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) die("cannot load " + model_path);
    const int n_vocab = llama_n_vocab(model);
    if (top < 1 || top > n_vocab) die("bad -k");

    std::vector<Prompt> prompts;
    for (const auto& [is_text, v] : inputs) {
        Prompt p;
        if (is_text) {
            p.text = v;
            p.ids.resize(v.size() + 16);
            const int n = llama_tokenize(model, v.c_str(), int(v.size()), p.ids.data(),
                                         int(p.ids.size()), false, true);
            if (n < 0) die("tokenization failed");
            p.ids.resize(size_t(n));
        } else {
            std::string s = v;
            std::replace(s.begin(), s.end(), ',', ' ');
            std::istringstream in(s);
            for (long id; in >> id;) {
                if (id < 0 || id >= n_vocab) die("token id out of range: " + std::to_string(id));
                p.ids.push_back(llama_token(id));
            }
        }
        if (p.ids.empty()) die("empty prompt");
        prompts.push_back(std::move(p));
    }

    size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.ids.size());
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = uint32_t(n_ctx > 0 ? n_ctx : int(longest) + greedy);
    cp.n_batch = uint32_t(ubatch);
    cp.n_ubatch = uint32_t(ubatch);
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_F16;
    cp.flash_attn = true;
    if (longest + size_t(greedy) > cp.n_ctx) die("prompt + greedy steps exceed -c");

    std::FILE* out = std::fopen(out_path.c_str(), "w");
    if (!out) die("cannot write " + out_path);
    std::fprintf(out, "[\n");
    for (size_t pi = 0; pi < prompts.size(); ++pi) {
        const Prompt& p = prompts[pi];
        // A fresh context per prompt: nothing carries over between prompts.
        llama_context* ctx = llama_init_from_model(model, cp);
        if (!ctx) die("cannot create a context");
        const int n = int(p.ids.size());
        std::string tops;
        std::vector<float> last(static_cast<size_t>(n_vocab));
        for (int done = 0; done < n; done += ubatch) {
            const int m = std::min(ubatch, n - done);
            decode(ctx, p.ids.data() + done, m, done, true);
            for (int t = 0; t < m; ++t) {
                const float* logits = llama_get_logits_ith(ctx, t);
                if (!logits) die("no logits");
                tops += (done + t ? ", " : "") + top_json(logits, n_vocab, top);
                if (done + t + 1 == n) std::copy(logits, logits + n_vocab, last.begin());
            }
        }
        const std::string logits_path = out_path + "." + std::to_string(pi) + ".logits.f32";
        if (std::FILE* f = std::fopen(logits_path.c_str(), "wb")) {
            std::fwrite(last.data(), sizeof(float), last.size(), f);
            std::fclose(f);
        } else {
            die("cannot write " + logits_path);
        }

        std::string steps;
        int id = argmax(last.data(), n_vocab);
        for (int s = 0; s < greedy; ++s) {
            const llama_token tok = id;
            decode(ctx, &tok, 1, n + s, false);
            const float* logits = llama_get_logits_ith(ctx, 0);
            if (!logits) die("no logits");
            steps += std::string(s ? ", " : "") + "{\"id\": " + std::to_string(id) +
                     ", \"top\": " + top_json(logits, n_vocab, top) + "}";
            id = argmax(logits, n_vocab);
        }
        llama_free(ctx);

        std::string ids;
        for (size_t i = 0; i < p.ids.size(); ++i) ids += (i ? ", " : "") + std::to_string(p.ids[i]);
        std::fprintf(out,
                     "  {\"prompt\": %s, \"prompt_ids\": [%s],\n   \"prompt_logits_top\": [%s],\n"
                     "   \"greedy\": [%s]}%s\n",
                     json_string(p.text).c_str(), ids.c_str(), tops.c_str(), steps.c_str(),
                     pi + 1 < prompts.size() ? "," : "");
    }
    std::fprintf(out, "]\n");
    std::fclose(out);
    llama_free_model(model);
    llama_backend_free();
    return 0;
}
