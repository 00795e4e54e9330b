// Loading a Tokenizer (text/tokenizer.hpp) from a GGUF file: the model and
// pre-tokenizer type, the token texts and types, the text -> id index, the
// byte tokens, the merges (resolved to ids in blocks whose lookups overlap),
// the special ids and the special-token matcher. Every error names the key at
// fault; a hash table that some file makes probe past detail::kMaxProbeSlots
// under every seed is refused. Included at the end of text/tokenizer.hpp.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../detail/seeded_hash.hpp"
#include "../../error.hpp"
#include "../../gguf/gguf.hpp"
#include "../tokenizer.hpp"
#include "bpe.hpp"
#include "byte_level.hpp"
#include "special_tokens.hpp"
#include "token_index.hpp"

SMOL_NAMESPACE_BEGIN

inline Status Tokenizer::load() {
    const gguf::File& f = *file_;
    const std::string where = "tokenizer: " + f.source() + ": ";

    SMOL_TRY_ASSIGN(const auto model, f.try_find<std::string>("tokenizer.ggml.model"));
    if (!model) return Status(ErrorKind::missing, where + "missing key 'tokenizer.ggml.model'");
    if (*model != "gpt2")
        return Status(ErrorKind::unsupported,
                      where + "tokenizer.ggml.model '" + *model +
                          "' is not supported (smol reads byte-level BPE, 'gpt2')");
    SMOL_TRY_ASSIGN(const auto pre, f.try_find<std::string>("tokenizer.ggml.pre"));
    if (!pre) return Status(ErrorKind::missing, where + "missing key 'tokenizer.ggml.pre'");
    pre_type_ = *pre;
    if (pre_type_ == "smaug-bpe") {
        whole_word_first_ = false;
    } else if (pre_type_ == "llama-bpe" || pre_type_ == "llama3" || pre_type_ == "llama-v3") {
        whole_word_first_ = true;
    } else {
        return Status(ErrorKind::unsupported,
                      where + "tokenizer.ggml.pre '" + pre_type_ +
                          "' is not supported (smol implements smaug-bpe, llama-bpe, "
                          "llama3)");
    }

    SMOL_TRY_ASSIGN(texts_, f.try_get<std::vector<std::string_view>>("tokenizer.ggml.tokens"));
    if (texts_.empty()) return Status(ErrorKind::format, where + "tokenizer.ggml.tokens is empty");
    if (texts_.size() >= size_t(INT32_MAX))
        return Status(ErrorKind::format, where + "tokenizer.ggml.tokens is too large");
    SMOL_TRY(load_types(where));
    SMOL_TRY(index_.build(texts_, where));

    // Byte tokens: the starting symbols of BPE.
    const auto& map = detail::ByteLevelMap::get();
    for (int b = 0; b < 256; ++b)
        byte_tokens_[size_t(b)] = index_.find(map.byte_to_utf8[size_t(b)]);

    SMOL_TRY(load_merges(where));
    SMOL_TRY(load_special_ids(where));
    return load_specials();
}

inline Status Tokenizer::load_types(const std::string& where) {
    const size_t n = texts_.size();
    const gguf::Value* v = file_->find_value("tokenizer.ggml.token_type");
    if (!v) {
        types_.assign(n, uint8_t(TokenType::normal));
        return {};
    }
    if (v->type() != gguf::ValueType::array)
        return Status(ErrorKind::type, where + "tokenizer.ggml.token_type is not an array");
    if (v->as_array().size() != n)
        return Status(ErrorKind::format, where + "tokenizer.ggml.token_type has " +
                                             std::to_string(v->as_array().size()) +
                                             " entries but tokenizer.ggml.tokens has " +
                                             std::to_string(n));
    SMOL_TRY_ASSIGN(const auto raw,
                    file_->try_get<std::vector<int32_t>>("tokenizer.ggml.token_type"));
    types_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        if (raw[i] < 0 || raw[i] > 6)
            return Status(ErrorKind::format,
                          where + "tokenizer.ggml.token_type[" + std::to_string(i) +
                              "] = " + std::to_string(raw[i]) + " (expected 0..6)");
        types_[i] = uint8_t(raw[i]);
    }
    return {};
}

// bos/eos/eot/pad and the ids that end generation.
inline Status Tokenizer::load_special_ids(const std::string& where) {
    const int64_t n = int64_t(texts_.size());
    auto special_id = [&](const char* key, std::optional<int32_t>& out) -> Status {
        SMOL_TRY_ASSIGN(const auto id, file_->try_find<int64_t>(key));
        if (!id) return {};
        if (*id < 0 || *id >= n)
            return Status(ErrorKind::format, where + key + " = " + std::to_string(*id) +
                                                 " is outside the vocabulary of " +
                                                 std::to_string(n) + " tokens");
        out = int32_t(*id);
        return {};
    };
    SMOL_TRY(special_id("tokenizer.ggml.bos_token_id", bos_));
    SMOL_TRY(special_id("tokenizer.ggml.eos_token_id", eos_));
    SMOL_TRY(special_id("tokenizer.ggml.eot_token_id", eot_));
    SMOL_TRY(special_id("tokenizer.ggml.padding_token_id", pad_));
    SMOL_TRY_ASSIGN(const auto add_bos, file_->try_find<bool>("tokenizer.ggml.add_bos_token"));
    add_bos_ = add_bos.value_or(false);

    end_ids_.clear();
    auto add_end = [&](std::optional<int32_t> id) {
        if (id && !is_end_of_generation(*id)) end_ids_.push_back(*id);
    };
    add_end(eos_);
    add_end(eot_);
    for (const char* text : {"<|im_end|>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>"})
        add_end(token_id(text));
    return {};
}

// Special tokens, longest first (ties by id), for step 1 of encode.
inline Status Tokenizer::load_specials() {
    std::vector<int32_t> ids;
    has_user_defined_ = false;
    for (size_t id = 0; id < texts_.size(); ++id) {
        if (!is_special_type(types_[id]) || texts_[id].empty()) continue;
        has_user_defined_ |= types_[id] == uint8_t(TokenType::user_defined);
        ids.push_back(int32_t(id));
    }
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return texts_[size_t(a)].size() > texts_[size_t(b)].size();
    });
    smol::detail::UnitVector<std::string_view> texts;
    texts.reserve(ids.size());
    for (int32_t id : ids) texts.push_back(texts_[size_t(id)]);
    return specials_.build(std::move(ids), std::move(texts));
}

inline Status Tokenizer::load_merges(const std::string& where) {
    if (!file_->has("tokenizer.ggml.merges"))
        return Status(ErrorKind::missing, where + "missing key 'tokenizer.ggml.merges'");
    SMOL_TRY_ASSIGN(const auto merges,
                    file_->try_get<std::vector<std::string_view>>("tokenizer.ggml.merges"));
    for (unsigned attempt = 0; attempt < detail::kHashSeedAttempts; ++attempt) {
        merges_.reset(merges.size(), attempt);
        SMOL_TRY_ASSIGN(const bool inserted, insert_merges(merges, where));
        if (inserted && merges_.seal()) return {};
    }
    return Status(ErrorKind::format,
                  where +
                      "tokenizer.ggml.merges: under every hash seed tried, some lookup "
                      "would read more than " +
                      std::to_string(detail::kMaxProbeSlots) +
                      " slots (merge pairs that collide: a crafted file?)");
}

// Resolves each merge to ids and inserts it; false as soon as an insert
// probes past the bound (load_merges then tries the next seed).
inline Expected<bool> Tokenizer::insert_merges(const std::vector<std::string_view>& merges,
                                               const std::string& where) {
    // Three table lookups per merge, 280k merges: memory-bound. Work in
    // blocks: split and hash a block, prefetch its slots, then resolve it,
    // so the cache misses of a block overlap instead of queueing.
    struct Parsed {
        std::string_view left, right;
        uint64_t left_hash, right_hash, joined_hash;
        int32_t left_id, right_id, merged;
    };
    const detail::SeededTextHash& hash = index_.hasher();
    constexpr size_t kBlock = 32;
    Parsed block[kBlock];
    for (size_t first = 0; first < merges.size(); first += kBlock) {
        const size_t count = std::min(kBlock, merges.size() - first);
        for (size_t k = 0; k < count; ++k) {
            const size_t rank = first + k;
            const std::string_view m = merges[rank];
            // "left right": byte-level spellings never contain a space (0x20
            // is spelled U+0120), so the one space separates the two sides.
            const size_t space = m.find(' ');
            if (space == std::string_view::npos || space == 0 || space + 1 == m.size() ||
                m.find(' ', space + 1) != std::string_view::npos)
                return ErrorInfo{ErrorKind::format, where + "tokenizer.ggml.merges[" +
                                                        std::to_string(rank) + "] = '" +
                                                        std::string(m.substr(0, 64)) +
                                                        "' is not of the form 'left right'"};
            Parsed& p = block[k];
            p.left = m.substr(0, space);
            p.right = m.substr(space + 1);
            const uint64_t left_state = hash.extend(hash.start(), p.left);
            p.left_hash = hash.finish(left_state);
            p.right_hash = hash(p.right);
            p.joined_hash = hash.finish(hash.extend(left_state, p.right));
            index_.prefetch(p.left_hash);
            index_.prefetch(p.right_hash);
            index_.prefetch(p.joined_hash);
        }
        for (size_t k = 0; k < count; ++k) {
            Parsed& p = block[k];
            p.left_id = index_.find(p.left, p.left_hash);
            p.right_id = index_.find(p.right, p.right_hash);
            p.merged = index_.find_concat(p.left, p.right, p.joined_hash);
            if (p.left_id >= 0 && p.right_id >= 0) merges_.prefetch(p.left_id, p.right_id);
        }
        for (size_t k = 0; k < count; ++k) {
            const Parsed& p = block[k];
            // A merge whose sides or result are not tokens can never apply to
            // token symbols: skip it (real vocabularies have none).
            if (p.left_id < 0 || p.right_id < 0 || p.merged < 0) continue;
            if (!merges_.insert(p.left_id, p.right_id, {uint32_t(first + k), p.merged}))
                return false;
        }
    }
    return true;
}

SMOL_NAMESPACE_END
