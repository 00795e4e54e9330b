// smol-tokenize: tokenizes text with a GGUF file's vocabulary and prints the
// ids as a JSON array on one line (no BOS is added).
//   smol-tokenize -m MODEL.gguf [-p TEXT | -f FILE] [--no-special]   (--help: all options)
// Without -p or -f the text is read from standard input. Special tokens
// written in the text (<|im_start|>, <think>, ...) become single ids unless
// --no-special is given.
#include <smol/smol.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

#include "common/cli.hpp"

int main(int argc, char** argv) {
    std::string model, text_file;
    std::optional<std::string> text_arg;
    bool parse_special = true;
    smol_cli::Parser cli(
        "smol-tokenize",
        "Prints the token ids of a text (no BOS added) as a JSON array on one line.");
    cli.option("-m, --model", model, "MODEL.gguf", "the file whose vocabulary to use").required();
    cli.option("-p, --prompt", text_arg, "TEXT", "the text (default: standard input)");
    cli.option("-f, --file", text_file, "FILE", "read the text from FILE");
    cli.flag("--no-special", parse_special,
             "special tokens written in the text (<|im_start|>, ...) stay plain text", false);
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    if (text_arg && !text_file.empty()) {
        std::fprintf(stderr, "smol-tokenize: -p and -f exclude each other\n%s\n",
                     cli.usage_line().c_str());
        return 2;
    }
    std::string text = text_arg.value_or("");

    try {
        if (!text_file.empty()) {
            std::ifstream in(text_file, std::ios::binary);
            if (!in) {
                std::fprintf(stderr, "smol-tokenize: cannot open '%s'\n", text_file.c_str());
                return 1;
            }
            text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        } else if (!text_arg) {
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
