// extract-fields: pull a C++ struct out of free text with a JSON Schema.
//
//   extract-fields --text "Hi, I'm Ada Lovelace (ada@example.org), 36, a
//                          mathematician writing on engines and poetry. We met
//                          on 10 July 1843."
//   extract-fields -m SmolLM3-3B-Q4_K_M.gguf < letter.txt
//
// The schema below mirrors struct Contact. GenerateParams::json_schema makes
// every token the model may pick keep the text a prefix of a document the
// schema accepts, so a run that ends with StopReason::eos is valid JSON of that
// shape: nlohmann-json parses it into the struct with no retry loop and no
// "please answer in JSON" prompt engineering. The bounds (maxLength, maxItems,
// an enum, an integer range) keep a weak or confused model from rambling
// inside a field. With the demo model (random weights, the default without -m)
// the values are gibberish but still parse; with real weights they are the
// text's facts.
#include <smol/smol.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/smol_options.hpp"

struct Contact {
    std::string name;
    std::optional<std::string> email;  // not every text has one: not required
    int age = 0;
    std::string role;  // one of the enum's values
    std::vector<std::string> skills;
    std::string met_on;  // YYYY-MM-DD
};

// The properties come in the order the model writes them: a name first gives
// it something easy to copy before the fields that need judgement.
const char* const kContactSchema = R"({
  "type": "object",
  "properties": {
    "name":   {"type": "string", "minLength": 1, "maxLength": 40},
    "email":  {"type": "string", "maxLength": 60},
    "age":    {"type": "integer", "minimum": 0, "maximum": 130},
    "role":   {"enum": ["engineer", "scientist", "artist", "manager", "other"]},
    "skills": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 5},
    "met_on": {"type": "string", "format": "date"}
  },
  "required": ["name", "age", "role", "skills", "met_on"]
})";

void from_json(const nlohmann::json& j, Contact& c) {
    j.at("name").get_to(c.name);
    if (j.contains("email")) c.email = j["email"].get<std::string>();
    j.at("age").get_to(c.age);
    j.at("role").get_to(c.role);
    j.at("skills").get_to(c.skills);
    j.at("met_on").get_to(c.met_on);
}

int main(int argc, char** argv) {
    std::string model_path, text;
    smol::GenerateParams params;
    params.max_tokens = 256;
    params.temperature = 0;  // extraction wants the likeliest reading, not variety

    smol_cli::Parser cli("extract-fields",
                         "Extracts a contact (name, email, age, role, skills, date) from free text "
                         "into a C++ struct,\nthrough a JSON Schema constrained generation.");
    cli.option("-m, --model", model_path, "MODEL",
               "GGUF file (default: the demo model the build makes)");
    cli.option("-n", params.max_tokens, "N", "most tokens for the JSON (default 256)");
    cli.option("--temp", params.temperature, "T", "temperature (default 0: greedy)");
    cli.option("--seed", params.seed, "S", "sampling seed (default 0)");
    cli.option("--text", text, "TEXT", "the text (default: read stdin)");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    if (text.empty()) text.assign(std::istreambuf_iterator<char>(std::cin), {});

    try {
        if (model_path.empty()) {
            model_path = smol_examples::demo_model_path();
            std::fprintf(stderr,
                         "extract-fields: no -m given, using the demo model %s (RANDOM weights: "
                         "the fields are gibberish)\n",
                         model_path.c_str());
        }
        smol::Generator gen(smol::Model::load(model_path));

        params.json_schema = kContactSchema;
        // The JSON must be the first thing the model writes: no <think> block.
        params.chat.enable_thinking = false;
        // At most one space or newline between tokens: room for 16 spaces of
        // indentation lets a weak model spend its token budget on whitespace.
        params.json_schema_options.max_indent = 0;
        const smol::GenerateResult r =
            gen.chat({{"system", "Extract the contact described by the user's text as JSON."},
                      {"user", text}},
                     params);
        std::fprintf(stderr, "extract-fields: model output: %s\n", r.text.c_str());
        // Any other stop (max_tokens) leaves a valid but unfinished prefix.
        if (r.stop_reason != smol::StopReason::eos) {
            std::fprintf(stderr, "extract-fields: the JSON did not finish (%s); raise -n\n",
                         smol::to_string(r.stop_reason));
            return 1;
        }

        const Contact c = nlohmann::json::parse(r.text).get<Contact>();
        std::printf("name:   %s\n", c.name.c_str());
        std::printf("email:  %s\n", c.email ? c.email->c_str() : "(none)");
        std::printf("age:    %d\n", c.age);
        std::printf("role:   %s\n", c.role.c_str());
        std::printf("skills:");
        for (const std::string& s : c.skills) std::printf(" [%s]", s.c_str());
        std::printf("\nmet on: %s\n", c.met_on.c_str());
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "extract-fields: error (%s): %s\n", smol::to_string(e.kind()),
                     e.what());
        return 1;
    } catch (const std::exception& e) {  // nlohmann-json: only a bug in the schema gets here
        std::fprintf(stderr, "extract-fields: %s\n", e.what());
        return 1;
    }
}
