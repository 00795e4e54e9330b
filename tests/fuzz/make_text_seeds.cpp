// Writes seed corpora for fuzz_tokenizer and fuzz_chat_template from the
// fixtures' tokenizer test texts and chat conversations, in each target's
// input format (see the top comment of each target).
//   make_text_seeds FIXTURES_DIR TARGET OUT_DIR
#include <nlohmann/json.hpp>
#include <smol/detail/bytes.hpp>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {
void save(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}
}  // namespace

// JSON Schemas both constraint targets start from (fuzz_json_schema adds more).
const char* const kSchemaSeeds[] = {
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
               "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name"]})",
    R"({"type": "array", "items": {"enum": ["a", 1, null]}, "minItems": 1, "maxItems": 3})",
    R"({"anyOf": [{"type": "string", "format": "date"}, {"type": "number", "minimum": -2.5}]})",
    R"({"$defs": {"n": {"type": "object", "properties": {"v": {"type": "boolean"},
               "next": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}}}}, "$ref": "#/$defs/n"})",
    R"({"type": ["string", "null"], "format": "uuid"})",
};

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: make_text_seeds FIXTURES_DIR TARGET OUT_DIR\n");
        return 2;
    }
    const std::string fixtures = argv[1], target = argv[2], out = argv[3];
    int n = 0;
    if (target == "fuzz_tokenizer") {
        int vocab = 0;
        for (const char* name : {"tiny-q4km.gguf.json", "vocab-llama-bpe.gguf.json"}) {
            std::ifstream in(fixtures + "/tokenizer/" + name);
            if (!in) continue;
            const auto cases = nlohmann::json::parse(in);
            for (const auto& c : cases) {
                const bool special = c.value("parse_special", false);
                const char mode = char(vocab | (special ? 2 : 0));
                save(out + "/text-" + std::to_string(n++),
                     std::string(1, mode) + c["text"].get<std::string>());
                // The same case as an id stream for the detokenizer.
                std::vector<uint8_t> ids(1, uint8_t(mode | 4));
                for (const auto& id : c["ids"]) smol::detail::append_le(ids, id.get<uint32_t>());
                save(out + "/ids-" + std::to_string(n++), std::string(ids.begin(), ids.end()));
            }
            vocab = 1;
        }
    } else if (target == "fuzz_chat_template") {
        std::ifstream in(fixtures + "/chat/smollm3-chat.json");
        if (in) {
            for (const auto& c : nlohmann::json::parse(in)) {
                const auto& o = c["options"];
                char flags = o.value("add_generation_prompt", true) ? 1 : 0;
                if (o.contains("enable_thinking"))
                    flags |= o["enable_thinking"].get<bool>() ? 2 : 4;
                std::string bytes(1, flags);
                for (const auto& m : c["messages"]) {
                    const std::string role = m["role"].get<std::string>();
                    const char r = role == "system"      ? 0
                                   : role == "user"      ? 1
                                   : role == "assistant" ? 2
                                                         : 3;
                    if (bytes.size() > 1) bytes += '\x1e';
                    bytes += r;
                    bytes += m["content"].get<std::string>();
                }
                save(out + "/chat-" + std::to_string(n++), bytes);
            }
        }
        save(out + "/think-" + std::to_string(n++),
             std::string("\x01\x02<think>\nhmm\n</think>\n\nanswer"));
    } else if (target == "fuzz_grammar") {
        // Grammars (kind byte 0) and JSON Schemas (kind byte 1), each with a probe.
        const char* grammars[] = {
            "root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= [a-z]+ ws \":\" ws "
            "[0-9]{1,3}\nws ::= [ \\t\\n]{0,4}",
            "root ::= expr\nexpr ::= term ([-+] term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
            "root ::= (\"(\" root \")\" | \"[]\")+ # comment",
            "root ::= \"\\u00e9\\x41\" [^\\n\\]] .{1,2} \"\\U0001F600\"?",
            "root ::= \"yes\" | \"no\" | \"maybe\"",
        };
        for (const char* g : grammars)
            save(out + "/grammar-" + std::to_string(n++),
                 std::string(1, '\0') + g + std::string(1, '\0') + "{ab: 12,  cd:3}(1+2)[]");
        for (const char* s : kSchemaSeeds)
            save(out + "/schema-" + std::to_string(n++),
                 std::string(1, '\1') + s + std::string(1, '\0') + "{\"name\": \"x\", \"age\": 7}");
    } else if (target == "fuzz_json_schema") {
        // Flags byte, schema, 0x00, choice bytes.
        std::vector<const char*> schemas(std::begin(kSchemaSeeds), std::end(kSchemaSeeds));
        for (const char* extra : {
                 R"({"enum": ["e0", "e1", "e2", "e10", "e11", "e100", "f", "fa", "fab"]})",
                 R"({"type": "array", "maxItems": 50, "items": {"type": "array", "maxItems": 50,
               "items": {"type": "string", "maxLength": 50}}})",
                 R"({"type": "object"})",
             })
            schemas.push_back(extra);
        int flags = 0;
        for (const char* s : schemas)
            save(out + "/schema-" + std::to_string(n++),
                 std::string(1, char(flags++ * 7)) + s + std::string(1, '\0') +
                     "\x01\x02\x03\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0");
    } else {
        std::fprintf(stderr, "make_text_seeds: unknown target %s\n", target.c_str());
        return 2;
    }
    std::printf("make_text_seeds: wrote %d seeds for %s\n", n, target.c_str());
    return 0;
}
