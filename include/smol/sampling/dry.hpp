// DRY ("don't repeat yourself"): a penalty on every token that would extend
// a sequence already repeated in the recent history, with llama.cpp's
// definition (there ported from koboldcpp).
//
// Over the last dry_penalty_last_n tokens t[0, W) of the history (0: off,
// -1: all of it), for each earlier position i < W - 1 let
//   n_i = the length of the longest common suffix of t[0, i] and t[0, W),
// capped at the repetition limit below. When n_i >= allowed_length, emitting
// t[i + 1] next would make that repeat one token longer, so t[i + 1] loses
//   multiplier * base^(n - allowed_length)
// from its logit, n the largest such n_i for that token (the exponent is
// capped so the power stays a finite float). Nothing happens when W <=
// allowed_length.
//
// Sequence breakers (strings, default "\n" ":" "\"" "*") cut repeats: the
// repetition limit is the number of tokens after the last breaker in the
// window, so a repeat never spans one, and a token whose text contains a
// breaker is never penalized. Breakers are strings, tokens are ids: a
// DryBreakers table, built once from the vocabulary, maps them. A token whose
// text contains a breaker string is a breaker on its own; a token whose text
// ends with a proper prefix of a breaker (" <" or "<|" for the breaker "<|>")
// is the head of one when the encoding of the breaker's rest ("|>" or ">",
// cut to kMaxTailTokens tokens) follows it. Both as in llama.cpp.
//
// Cost per sampled token: O(W) (a Z-function over the reversed window) plus a
// binary search per window token while looking for the last breaker.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"

SMOL_NAMESPACE_BEGIN

// Which token sequences break a DRY repeat. Immutable once built; share it.
class DryBreakers {
public:
    // Caps that bound the table's time and memory whatever the caller passes
    // (SamplingParams::dry_sequence_breakers): more breakers than
    // kMaxBreakers is an error (Sampler::validate); each breaker is cut to its
    // first kMaxBreakerBytes bytes and each encoded rest to kMaxTailTokens
    // tokens (llama.cpp's cuts); empty breakers are skipped.
    static constexpr size_t kMaxBreakers = 64;
    static constexpr size_t kMaxBreakerBytes = 40;
    static constexpr size_t kMaxTailTokens = 20;

    // piece(id, out): sets out to token id's bytes (special tokens as
    // written). encode(text, out): appends text's ids, special tokens not
    // parsed (a Tokenizer: try_encode(text, false, out)). Cost: one pass over
    // the vocabulary's pieces per breaker, and at most kMaxBreakerBytes
    // encodings per breaker. Errors: invalid_argument for too many breakers,
    // and what encode returns.
    using PieceFn = std::function<void(int32_t id, std::string& out)>;
    using EncodeFn = std::function<Status(std::string_view text, std::vector<int32_t>& out)>;
    static Expected<DryBreakers> build(int32_t n_vocab, const PieceFn& piece,
                                       const EncodeFn& encode,
                                       const std::vector<std::string>& breakers) {
        if (breakers.size() > kMaxBreakers)
            return ErrorInfo{
                ErrorKind::invalid_argument,
                "SamplingParams::dry_sequence_breakers: " + std::to_string(breakers.size()) +
                    " breakers, more than " + std::to_string(kMaxBreakers)};
        DryBreakers table;
        if (n_vocab <= 0) return table;
        std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
        bool have_pieces = false;
        std::vector<int32_t> rest;
        for (const std::string& full : breakers) {
            const std::string_view breaker =
                std::string_view(full).substr(0, std::min(full.size(), kMaxBreakerBytes));
            if (breaker.empty()) continue;
            if (!have_pieces) {
                for (int32_t id = 0; id < n_vocab; ++id) piece(id, pieces[size_t(id)]);
                have_pieces = true;
            }
            // The encodings of breaker[cut, end), stored once each when first
            // needed and shared by every head that ends with breaker[0, cut).
            std::vector<Entry> rests(breaker.size(), Entry{-1, 0, 0});
            for (int32_t id = 0; id < n_vocab; ++id) {
                const std::string& word = pieces[size_t(id)];
                if (word.find(breaker) != std::string::npos) {
                    table.entries_.push_back({id, 0, 0});
                    continue;
                }
                // Every start where the word's end is a proper prefix of the breaker.
                for (size_t pos = word.find(breaker[0]); pos != std::string::npos;
                     pos = word.find(breaker[0], pos + 1)) {
                    const size_t cut = word.size() - pos;
                    if (cut >= breaker.size()) continue;  // would contain it: handled above
                    if (word.compare(pos, cut, breaker.data(), cut) != 0) continue;
                    Entry& tail = rests[cut];
                    if (tail.head < 0) {
                        rest.clear();
                        SMOL_TRY(encode(breaker.substr(cut), rest));
                        if (rest.size() > kMaxTailTokens) rest.resize(kMaxTailTokens);
                        tail = {0, uint32_t(table.tokens_.size()), uint32_t(rest.size())};
                        table.tokens_.insert(table.tokens_.end(), rest.begin(), rest.end());
                    }
                    table.entries_.push_back({id, tail.offset, tail.length});
                }
            }
        }
        table.finish();
        return table;
    }

    // Number of (head, tail) sequences.
    size_t size() const noexcept { return entries_.size(); }

    // True when id's text contains a breaker (then DRY never penalizes it).
    bool is_single_token(int32_t id) const {
        const auto range = heads(id);
        return range.first != range.second && range.first->length == 0;  // empty tails sort first
    }

    // The tails of the breakers headed by id: each the tokens that must follow
    // it. An empty tail: id is a breaker by itself.
    std::vector<std::vector<int32_t>> tails(int32_t id) const {
        std::vector<std::vector<int32_t>> out;
        const auto range = heads(id);
        for (auto it = range.first; it != range.second; ++it)
            out.emplace_back(tokens_.begin() + it->offset,
                             tokens_.begin() + it->offset + it->length);
        return out;
    }

    // For the token window[w - 1 - i] (i tokens before the newest): the
    // length of the longest tail of a breaker it heads that follows it in the
    // window (window[w - i, w - i + length)), or -1 when none does.
    int longest_match_at(const int32_t* window, size_t w, size_t i) const {
        const auto range = heads(window[w - 1 - i]);
        int longest = -1;
        for (auto it = range.first; it != range.second; ++it) {
            const size_t length = it->length;
            if (int(length) <= longest || length > i) continue;
            if (std::equal(tokens_.begin() + it->offset, tokens_.begin() + it->offset + length,
                           window + (w - i)))
                longest = int(length);
        }
        return longest;
    }

private:
    struct Entry {
        int32_t head;
        uint32_t offset, length;  // the tail: tokens_[offset, offset + length)
    };

    std::pair<std::vector<Entry>::const_iterator, std::vector<Entry>::const_iterator> heads(
        int32_t id) const {
        return std::equal_range(entries_.begin(), entries_.end(), Entry{id, 0, 0},
                                [](const Entry& a, const Entry& b) { return a.head < b.head; });
    }

    // Sorts by head, empty tails first, and drops duplicate (head, tail) pairs.
    void finish() {
        auto tail = [&](const Entry& e) { return tokens_.begin() + e.offset; };
        std::sort(entries_.begin(), entries_.end(), [&](const Entry& a, const Entry& b) {
            if (a.head != b.head) return a.head < b.head;
            if (a.length != b.length) return a.length < b.length;
            return std::lexicographical_compare(tail(a), tail(a) + a.length, tail(b),
                                                tail(b) + b.length);
        });
        entries_.erase(std::unique(entries_.begin(), entries_.end(),
                                   [&](const Entry& a, const Entry& b) {
                                       return a.head == b.head && a.length == b.length &&
                                              std::equal(tail(a), tail(a) + a.length, tail(b));
                                   }),
                       entries_.end());
    }

    std::vector<Entry> entries_;   // sorted by head, then tail
    std::vector<int32_t> tokens_;  // the tails, one after another (shared by entries)
};

namespace detail {

// Buffers apply_dry reuses between calls.
struct DryScratch {
    std::vector<int32_t> reversed;                 // the window, newest first
    std::vector<int> z;                            // Z-function of `reversed`
    std::vector<std::pair<int32_t, int>> repeats;  // (next token, repeat length)
};

// The DRY penalty (see the top of this file) on logits[n_vocab] from the
// history's last `last_n` tokens (-1: all), breakers may be null (none).
// Does nothing when multiplier == 0, base < 1 or last_n == 0 (llama.cpp's
// "off" values); allowed_length >= 1 (Sampler::validate). History ids outside [0, n_vocab) take
// part in matching but are never penalized.
inline void apply_dry(float* logits, size_t n_vocab, const int32_t* history, size_t n_history,
                      float multiplier, float base, int allowed_length, int last_n,
                      const DryBreakers* breakers, DryScratch& scratch) {
    if (multiplier == 0.0f || !(base >= 1.0f) || last_n == 0) return;
    const size_t w = last_n < 0 ? n_history : std::min(n_history, size_t(last_n));
    if (w == 0 || w <= size_t(std::max(allowed_length, 0))) return;
    const int32_t* window = history + (n_history - w);

    // The repetition limit: no repeat may reach back over the newest breaker.
    size_t limit = w;
    if (breakers != nullptr && breakers->size() > 0) {
        for (size_t i = 0; i < w; ++i) {
            const int match = breakers->longest_match_at(window, w, i);
            if (match >= 0) {
                limit = i - size_t(match);
                break;
            }
        }
    }
    if (limit < size_t(std::max(allowed_length, 0))) return;

    // z[k]: the longest common prefix of the reversed window and its suffix
    // at k, i.e. how far the tokens ending at w - 1 - k repeat the window's
    // end. The standard linear Z-function.
    std::vector<int32_t>& s = scratch.reversed;
    s.assign(window, window + w);
    std::reverse(s.begin(), s.end());
    std::vector<int>& z = scratch.z;
    z.assign(w, 0);
    size_t left = 0, right = 0;  // the rightmost match box [left, right)
    for (size_t k = 1; k < w; ++k) {
        size_t n = 0;
        if (k < right) n = std::min(right - k, size_t(z[k - left]));
        while (k + n < w && s[n] == s[k + n]) ++n;
        z[k] = int(n);
        if (k + n > right) {
            left = k;
            right = k + n;
        }
    }

    // The token after each repeat long enough, with its longest repeat.
    auto& repeats = scratch.repeats;
    repeats.clear();
    for (size_t k = 1; k < w; ++k) {
        const int length = int(std::min(size_t(z[k]), limit));
        if (length < allowed_length) continue;
        const int32_t next = window[w - k];  // follows the repeat ending at w - 1 - k
        if (next >= 0 && size_t(next) < n_vocab) repeats.emplace_back(next, length);
    }
    std::sort(repeats.begin(), repeats.end());

    // Caps the exponent so base^exponent stays below FLT_MAX (llama.cpp's cap).
    const float float_max_log = 88.7228391f;
    const int max_exponent = base > 1.000001f ? int(float_max_log / std::log(base)) : 0;
    for (size_t r = 0; r < repeats.size(); ++r) {
        const int32_t id = repeats[r].first;
        if (r + 1 < repeats.size() && repeats[r + 1].first == id) continue;  // its longest is last
        if (breakers != nullptr && breakers->is_single_token(id)) continue;
        int exponent = repeats[r].second - allowed_length;
        if (max_exponent > 0 && exponent > max_exponent) exponent = max_exponent;
        const float penalty =
            static_cast<float>(double(multiplier) * std::pow(double(base), exponent));
        logits[id] -= penalty;
    }
}

}  // namespace detail

SMOL_NAMESPACE_END
