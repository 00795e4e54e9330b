// libFuzzer target for the chat template renderers and the reasoning splitter.
// The input is decoded into a conversation:
//   byte 0: bit 0 add_generation_prompt; bits 1-2 enable_thinking
//           (0 undefined, 1 true, 2 false); bit 3 adds an xml tool, bit 4 a
//           python tool
//   rest:   messages separated by 0x1E; each message's first byte picks the
//           role (system, user, assistant, tool, or an unknown one)
// Both renderers (SmolLM3 and ChatML) and split_reasoning run on it; they must
// not crash, and what they return must keep the structure they promise.
#include <smol/text/chat_template.hpp>

#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t flags = data[0];
    smol::ChatTemplateOptions options;
    options.add_generation_prompt = flags & 1;
    const int thinking = (flags >> 1) & 3;
    if (thinking == 1) options.enable_thinking = true;
    if (thinking == 2) options.enable_thinking = false;
    options.today = "01 January 2025";  // never the clock: runs must repeat
    if (flags & 8) options.xml_tools.push_back("{\"name\": \"get_weather\"}");
    if (flags & 16) options.python_tools.push_back("def get_weather(city: str) -> str: ...");

    static const char* const kRoles[5] = {"system", "user", "assistant", "tool", "narrator"};
    std::vector<smol::ChatMessage> messages;
    const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
    size_t start = 0;
    while (start <= body.size()) {
        size_t end = body.find('\x1e', start);
        if (end == std::string::npos) end = body.size();
        if (end > start) {
            const uint8_t role = uint8_t(body[start]);
            messages.push_back({kRoles[role % 5], body.substr(start + 1, end - start - 1)});
        }
        start = end + 1;
    }

    const std::string smol_prompt = smol::render_smollm3_chat(messages, options);
    if (smol_prompt.rfind("<|im_start|>", 0) != 0) __builtin_trap();
    const std::string chatml = smol::render_chatml(messages, options);
    for (const auto& m : messages)
        if (chatml.find(m.content) == std::string::npos) __builtin_trap();
    if (options.add_generation_prompt) {
        const std::string tail = "<|im_start|>assistant\n";
        if (chatml.size() < tail.size() ||
            chatml.compare(chatml.size() - tail.size(), tail.size(), tail) != 0)
            __builtin_trap();
    }
    (void)smol::detect_chat_format(body);
    const auto split = smol::split_reasoning(body);
    if (split.reasoning.size() + split.answer.size() > body.size()) __builtin_trap();
    (void)smol::split_reasoning(smol_prompt);
    return 0;
}
