// The C ABI's outputs: a GenerateResult as a smol_result with the storage its
// pointers point into, tool calls as JSON, the piece callback's forwarding,
// and the malloc'd copies handed to the caller.
// Part of the C ABI's one source file: only src/smol_c.cpp includes it, so
// its helpers stay in an unnamed namespace of that unit.
#pragma once

#include <smol/smol.h>
#include <smol/smol.hpp>
#include <smol/detail/json.hpp>

#include "errors.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// A JSON string literal (the library's own quoting: detail/json.hpp).
void append_json_string(std::string& out, const std::string& text) {
    out += smol::detail::json::quote(text);
}

std::string tool_calls_json(const std::vector<smol::ToolCall>& calls) {
    std::string out = "[";
    for (size_t i = 0; i < calls.size(); ++i) {
        const smol::ToolCall& call = calls[i];
        out += i ? ",{\"name\":" : "{\"name\":";
        append_json_string(out, call.name);
        // ToolCall::arguments is compact JSON text when the call parsed.
        out += ",\"arguments\":";
        out += call.arguments.empty() ? "null" : call.arguments;
        out += ",\"text\":";
        append_json_string(out, call.text);
        out += ",\"error\":";
        append_json_string(out, call.error);
        out += '}';
    }
    return out + "]";
}

// A smol_result and the storage its pointers point into. The C struct comes
// first, so the pointer handed out is also the box's.
struct ResultData {
    smol::GenerateResult result;
    std::string tool_calls;
};
struct ResultBox {
    smol_result c;
    ResultData* data;
};
static_assert(std::is_standard_layout<ResultBox>::value, "ResultBox is cast from its first member");

smol_result* to_result(smol::GenerateResult result) {
    auto data = std::make_unique<ResultData>();
    data->result = std::move(result);
    data->tool_calls = tool_calls_json(data->result.tool_calls);
    const smol::GenerateResult& r = data->result;
    auto box = std::make_unique<ResultBox>();
    smol_result& c = box->c;
    c.size = sizeof(smol_result);
    c.text = r.text.c_str();
    c.text_length = r.text.size();
    c.reasoning = r.reasoning.c_str();
    c.reasoning_length = r.reasoning.size();
    c.answer = r.answer.c_str();
    c.answer_length = r.answer.size();
    c.tool_calls_json = data->tool_calls.c_str();
    c.matched_stop = r.matched_stop.c_str();
    c.tokens = r.tokens.data();
    c.n_tokens = r.tokens.size();
    c.stop_reason = int64_t(r.stop_reason);
    c.n_prompt_tokens = r.n_prompt_tokens;
    c.n_reused_tokens = r.n_reused_tokens;
    c.prefill_ms = r.prefill_ms;
    c.decode_ms = r.decode_ms;
    c.n_discarded_tokens = r.n_discarded_tokens;
    c.n_prompt_discarded_tokens = r.n_prompt_discarded_tokens;
    c.n_decode_steps = r.n_decode_steps;
    c.n_drafted_tokens = r.n_drafted_tokens;
    c.n_accepted_drafts = r.n_accepted_drafts;
    box->data = data.release();
    return &box.release()->c;
}

// A TokenCallback over a C piece callback: each piece NUL-terminated in a
// buffer reused across the run.
struct PieceForwarder {
    smol_piece_fn fn;
    void* user_data;
    std::string buffer;
    bool operator()(std::string_view piece) {
        buffer.assign(piece.data(), piece.size());
        return fn(buffer.c_str(), buffer.size(), user_data) != 0;
    }
};

template <class Run>
smol_result* run_with_callback(smol_piece_fn on_piece, void* user_data, Run&& run) {
    smol::TokenCallback callback;
    PieceForwarder forwarder{on_piece, user_data, {}};
    if (on_piece) callback = std::ref(forwarder);
    return to_result(run(callback));
}

// A NUL-terminated malloc'd copy of text (freed by smol_string_free).
char* copy_string(const std::string& text, size_t* length) {
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (!out) throw std::bad_alloc();
    std::memcpy(out, text.data(), text.size());
    out[text.size()] = '\0';
    if (length) *length = text.size();
    return out;
}

template <class T>
T* copy_out(const std::vector<T>& values) {
    // malloc, so that an empty result is still a pointer the caller frees.
    T* out = static_cast<T*>(std::malloc(std::max<size_t>(1, values.size() * sizeof(T))));
    if (!out) throw std::bad_alloc();
    if (!values.empty()) std::memcpy(out, values.data(), values.size() * sizeof(T));
    return out;
}

}  // namespace
