// StopStringMatcher: finds stop strings in streamed text whose pieces may split
// a stop string anywhere (across tokens). Text that could still turn out to be
// the start of a stop string is held back; everything else is released at
// once, so a caller streams as early as possible and never shows a stop string.
//
//   push("Hello\nUs") -> "Hello"      ("\nUs" may start "\nUser:")
//   push("er: hi")    -> ""           matched() == true, the stop string and
//                                     what follows it are dropped
//   (no match)  finish() -> the held-back tail
#pragma once

#include "abi.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

SMOL_NAMESPACE_BEGIN
namespace detail {

class StopStringMatcher {
public:
    StopStringMatcher() = default;
    // Empty stop strings are ignored (they would match everywhere).
    explicit StopStringMatcher(const std::vector<std::string>& stops) {
        for (const auto& s : stops)
            if (!s.empty()) stops_.push_back(s);
        for (const auto& s : stops_) longest_ = std::max(longest_, s.size());
    }

    // Feeds the next piece; returns the text that is now safe to emit. After a
    // match it returns the text before the stop string and ignores later input.
    std::string push(std::string_view piece) {
        if (matched_) return {};
        held_.append(piece.data(), piece.size());
        if (stops_.empty()) return std::exchange(held_, std::string());

        // Earliest occurrence of any stop string (the longest on a tie).
        size_t best_pos = std::string::npos;
        size_t best_index = 0;
        for (size_t i = 0; i < stops_.size(); ++i) {
            const size_t pos = held_.find(stops_[i]);
            if (pos == std::string::npos) continue;
            if (pos < best_pos ||
                (pos == best_pos && stops_[i].size() > stops_[best_index].size())) {
                best_pos = pos;
                best_index = i;
            }
        }
        if (best_pos != std::string::npos) {
            matched_ = true;
            matched_index_ = best_index;
            std::string out = held_.substr(0, best_pos);
            held_.clear();
            return out;
        }
        // Hold the longest tail that is a proper prefix of some stop string.
        const size_t keep = held_tail_length();
        std::string out = held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
    }

    // End of input without a match: releases what was held back.
    std::string finish() { return std::exchange(held_, std::string()); }

    bool matched() const noexcept { return matched_; }
    // The stop string that matched (empty when none did).
    const std::string& matched_string() const noexcept {
        static const std::string none;
        return matched_ ? stops_[matched_index_] : none;
    }
    // Bytes currently held back.
    size_t held_size() const noexcept { return held_.size(); }

    void reset() {
        held_.clear();
        matched_ = false;
        matched_index_ = 0;
    }

private:
    size_t held_tail_length() const {
        const size_t max_tail = std::min(held_.size(), longest_ - 1);
        for (size_t tail = max_tail; tail > 0; --tail) {
            const std::string_view suffix(held_.data() + held_.size() - tail, tail);
            for (const auto& s : stops_)
                if (s.size() > tail && std::string_view(s).substr(0, tail) == suffix) return tail;
        }
        return 0;
    }

    std::vector<std::string> stops_;
    size_t longest_ = 0;
    std::string held_;
    bool matched_ = false;
    size_t matched_index_ = 0;
};

}  // namespace detail
SMOL_NAMESPACE_END
