// smol-tokenize: tokenizes text with a GGUF file's vocabulary and prints the
// ids as a JSON array on one line (no BOS is added).
//   smol-tokenize -m MODEL.gguf [-p TEXT | -f FILE] [--no-special]
// Without -p or -f the text is read from standard input. Special tokens
// written in the text (<|im_start|>, <think>, ...) become single ids unless
// --no-special is given.
#include <smol/smol.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

namespace {

int usage(const char* argv0) {
    std::fprintf(stderr, "usage: %s -m MODEL.gguf [-p TEXT | -f FILE] [--no-special]\n", argv0);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, text, text_file;
    bool have_text = false, parse_special = true;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (arg == "-m" || arg == "--model") {
            const char* v = value();
            if (!v) return usage(argv[0]);
            model = v;
        } else if (arg == "-p" || arg == "--prompt") {
            const char* v = value();
            if (!v) return usage(argv[0]);
            text = v;
            have_text = true;
        } else if (arg == "-f" || arg == "--file") {
            const char* v = value();
            if (!v) return usage(argv[0]);
            text_file = v;
        } else if (arg == "--no-special") {
            parse_special = false;
        } else if (arg == "-h" || arg == "--help") {
            usage(argv[0]);
            return 0;
        } else {
            std::fprintf(stderr, "unknown argument '%s'\n", arg.c_str());
            return usage(argv[0]);
        }
    }
    if (model.empty() || (have_text && !text_file.empty())) return usage(argv[0]);

    try {
        if (!text_file.empty()) {
            std::ifstream in(text_file, std::ios::binary);
            if (!in) {
                std::fprintf(stderr, "cannot open '%s'\n", text_file.c_str());
                return 1;
            }
            text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        } else if (!have_text) {
            std::ostringstream all;
            all << std::cin.rdbuf();
            text = all.str();
        }
        const auto tokenizer = smol::Tokenizer::from_gguf(smol::gguf::File::open(model));
        const auto ids = tokenizer.encode(text, parse_special);
        std::string line = "[";
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) line += ", ";
            line += std::to_string(ids[i]);
        }
        line += "]\n";
        std::fwrite(line.data(), 1, line.size(), stdout);
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "smol-tokenize: %s error: %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    }
    return 0;
}
