// Special tokens in a text: SpecialMatcher, a radix tree of the special
// texts that finds which of them start at a place, and SpecialTokens, which
// chooses the occurrences a Tokenizer (text/tokenizer.hpp) encodes as single
// ids, as llama.cpp does: each special, longest first, claims its leftmost
// non-overlapping occurrences in the text that no longer special has claimed.
#pragma once

#include "../../detail/abi.hpp"
#include "../../detail/unit_vector.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../error.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// The special-token texts, for finding which of them start at a place in a
// text. A radix tree: a byte trie whose chains of single children are merged
// into one edge labelled by a view into a token text (so into the file). Its
// size is O(number of specials) however long they are; a node per byte
// (~100 bytes of heap per byte of text) let one 16 MB special take 1.6 GB.
// A lookup at one place costs the length of the special prefix that the text
// follows there: a byte or two for real vocabularies (the Llama-3 specials
// all start with "<|"), but a text repeating a long special's prefix at many
// places costs (places x prefix length), as the byte trie did.
class SpecialMatcher {
public:
    // texts[order]: the special texts (none empty) in priority order. A text
    // listed twice answers as its first order. ErrorKind::internal for an
    // empty text or one of 4 GiB or more (label sizes are 32-bit).
    Status build(const smol::detail::UnitVector<std::string_view>& texts) {
        nodes_.assign(1, Node{nullptr, 0, -1, 0, 0});
        first_bytes_.assign(1, 0);
        shorter_.assign(texts.size(), -1);
        root_.fill(-1);
        for (const std::string_view text : texts)
            if (text.empty() || text.size() >= (size_t(1) << 32))
                return Status(ErrorKind::internal, "tokenizer: a special text of " +
                                                       std::to_string(text.size()) + " bytes");
        // Sorted, the texts below a node are a contiguous range, so the tree
        // grows breadth first with each node's children side by side.
        std::vector<uint32_t> sorted(texts.size());
        for (size_t k = 0; k < sorted.size(); ++k) sorted[k] = uint32_t(k);
        std::sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t b) {
            const int c = texts[a].compare(texts[b]);
            return c != 0 ? c < 0 : a < b;
        });
        std::vector<Range> ranges{Range{0, sorted.size(), 0, -1}};
        for (size_t node = 0; node < nodes_.size(); ++node)
            add_children(node, texts, sorted, ranges);
        return {};
    }

    // Whether some special starts with byte c: a filter before longest_at.
    bool may_start(unsigned char c) const noexcept { return root_[c] >= 0; }

    // The order of the longest special that text[pos..] starts with and that
    // eligible(order) accepts, or -1.
    template <class Eligible>
    int32_t longest_at(std::string_view text, size_t pos, Eligible eligible) const {
        int32_t best = -1;
        int32_t node = root_[static_cast<unsigned char>(text[pos])];
        for (size_t at = pos; node >= 0;) {  // at: where the node's label starts in text
            const Node& n = nodes_[size_t(node)];
            if (text.size() - at < n.label_size || !label_matches(n, text.data() + at)) break;
            at += n.label_size;
            if (n.order >= 0 && eligible(n.order)) best = n.order;
            if (at == text.size()) break;
            node = child(n, static_cast<unsigned char>(text[at]));
        }
        return best;
    }

    // The order of the longest special that is a proper prefix of special
    // `order`, or -1: the next candidate at a place where `order` matched.
    int32_t shorter(int32_t order) const noexcept { return shorter_[size_t(order)]; }

    size_t node_count() const noexcept { return nodes_.size(); }
    size_t memory_bytes() const noexcept {
        return nodes_.capacity() * sizeof(Node) + first_bytes_.capacity() +
               shorter_.capacity() * sizeof(int32_t) + sizeof(root_);
    }

private:
    struct Node {
        const char* label;  // the edge into the node: the bytes after the parent's path
        uint32_t label_size;
        int32_t order;         // the special whose text ends here, or -1
        uint32_t first_child;  // children: nodes_[first_child, + child_count), by first byte
        uint32_t child_count;
    };
    struct Range {      // of a node, while building
        size_t lo, hi;  // its texts: sorted[lo, hi)
        size_t depth;   // the length of its path
        int32_t above;  // the order ending nearest above it, or -1
    };

    void add_children(size_t node, const smol::detail::UnitVector<std::string_view>& texts,
                      const std::vector<uint32_t>& sorted, std::vector<Range>& ranges) {
        const Range range = ranges[node];  // a copy: ranges grows below
        size_t lo = range.lo;
        int32_t above = range.above;
        if (lo < range.hi && texts[sorted[lo]].size() == range.depth) {
            // Equal texts sort by order, so the first is the one that answers.
            nodes_[node].order = int32_t(sorted[lo]);
            shorter_[sorted[lo]] = above;
            above = int32_t(sorted[lo]);
            while (lo < range.hi && texts[sorted[lo]].size() == range.depth) ++lo;
        }
        nodes_[node].first_child = uint32_t(nodes_.size());
        while (lo < range.hi) {
            const std::string_view first = texts[sorted[lo]];
            const unsigned char byte = static_cast<unsigned char>(first[range.depth]);
            const size_t end =
                size_t(std::partition_point(
                           sorted.begin() + long(lo), sorted.begin() + long(range.hi),
                           [&](uint32_t k) {
                               return static_cast<unsigned char>(texts[k][range.depth]) == byte;
                           }) -
                       sorted.begin());
            // The edge runs to the end of the group's common prefix: that of
            // its first and last text, as the group is sorted.
            const std::string_view last = texts[sorted[end - 1]];
            size_t common = range.depth + 1;
            while (common < first.size() && common < last.size() && first[common] == last[common])
                ++common;
            if (node == 0) root_[byte] = int32_t(nodes_.size());
            nodes_.push_back(
                Node{first.data() + range.depth, uint32_t(common - range.depth), -1, 0, 0});
            first_bytes_.push_back(byte);
            ranges.push_back(Range{lo, end, common, above});
            lo = end;
        }
        nodes_[node].child_count = uint32_t(nodes_.size() - nodes_[node].first_child);
    }

    static bool label_matches(const Node& n, const char* text) noexcept {
        if (n.label_size > 16) return std::memcmp(text, n.label, n.label_size) == 0;
        for (uint32_t k = 0; k < n.label_size; ++k)  // most labels are short: a loop beats a call
            if (text[k] != n.label[k]) return false;
        return true;
    }
    int32_t child(const Node& n, unsigned char c) const noexcept {
        const unsigned char* bytes = first_bytes_.data() + n.first_child;
        if (n.child_count <= 16) {
            for (uint32_t k = 0; k < n.child_count; ++k)
                if (bytes[k] == c) return int32_t(n.first_child + k);
            return -1;
        }
        const unsigned char* it = std::lower_bound(bytes, bytes + n.child_count, c);
        return it != bytes + n.child_count && *it == c
                   ? int32_t(n.first_child + uint32_t(it - bytes))
                   : -1;
    }

    std::vector<Node> nodes_;  // nodes_[0]: the root, empty label
    std::vector<unsigned char>
        first_bytes_;               // first byte of each node's label: a child scan reads one array
    std::vector<int32_t> shorter_;  // by order (see shorter())
    std::array<int32_t, 256> root_{};  // first byte -> child of the root, or -1
};

// The special tokens of a vocabulary in priority order (longest text first)
// and the matcher over their texts.
class SpecialTokens {
public:
    // ids[order]: the special tokens in priority order; texts[order]: their
    // texts (views into the file), none empty.
    Status build(std::vector<int32_t> ids, smol::detail::UnitVector<std::string_view> texts) {
        ids_ = std::move(ids);
        texts_ = std::move(texts);
        return matcher_.build(texts_);
    }

    bool empty() const noexcept { return ids_.empty(); }
    size_t size() const noexcept { return ids_.size(); }
    size_t matcher_nodes() const noexcept { return matcher_.node_count(); }
    size_t matcher_bytes() const noexcept { return matcher_.memory_bytes(); }
    size_t memory_bytes() const noexcept {
        return ids_.capacity() * sizeof(int32_t) + texts_.capacity() * sizeof(std::string_view) +
               matcher_bytes();
    }

    // The special tokens in `text` as (byte offset, id), in text order: each
    // token, longest first, claims its leftmost non-overlapping occurrences
    // within the text no longer token has claimed. Only tokens whose id
    // eligible(id) accepts take part.
    template <class Eligible>
    std::vector<std::pair<size_t, int32_t>> find(std::string_view text,
                                                 Eligible eligible_id) const {
        auto eligible = [&](int32_t order) { return eligible_id(ids_[size_t(order)]); };
        std::vector<Candidate> found = longest(text, eligible);
        // Usually no two overlap, and then each claims its place: a shorter
        // candidate there lies inside it, and it overlaps nothing else.
        for (size_t i = 1; i < found.size(); ++i)
            if (found[i].start < found[i - 1].start + length(found[i - 1].order))
                return claim(std::move(found), eligible);
        std::vector<std::pair<size_t, int32_t>> chosen;  // (start, id) in text order
        chosen.reserve(found.size());
        for (const Candidate& c : found) chosen.push_back({c.start, ids_[size_t(c.order)]});
        return chosen;
    }

private:
    struct Candidate {
        int32_t order;  // index in ids_ (longest first)
        size_t start;
    };
    size_t length(int32_t order) const noexcept { return texts_[size_t(order)].size(); }

    // The longest eligible special at each place, in text order. Only the
    // longest is kept: the shorter ones there are its prefixes
    // (SpecialMatcher::shorter), visited only if it loses. So at most one
    // entry per byte of text, however the specials nest.
    template <class Eligible>
    std::vector<Candidate> longest(std::string_view text, Eligible eligible) const {
        std::vector<Candidate> found;
        for (size_t pos = 0; pos < text.size(); ++pos) {
            if (!matcher_.may_start(static_cast<unsigned char>(text[pos]))) continue;
            const int32_t order = matcher_.longest_at(text, pos, eligible);
            if (order >= 0) found.push_back({order, pos});
        }
        return found;
    }

    // The claiming when spans overlap: every occurrence, taken in order of
    // (order, start), claims its span unless that overlaps one claimed
    // before. The occurrences at one place are visited lazily, longest first:
    // the heap holds the next one of each place, so memory stays one entry per
    // place even when specials nest ("<", "<<", "<<<", ...).
    template <class Eligible>
    std::vector<std::pair<size_t, int32_t>> claim(std::vector<Candidate> heap,
                                                  Eligible eligible) const {
        auto later = [](const Candidate& a, const Candidate& b) {
            return a.order != b.order ? a.order > b.order : a.start > b.start;
        };
        std::make_heap(heap.begin(), heap.end(), later);
        std::map<size_t, std::pair<size_t, int32_t>> claimed;  // start -> (end, id)
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            Candidate c = heap.back();
            heap.pop_back();
            auto next = claimed.lower_bound(c.start);
            // Inside a claimed span: every candidate at this place overlaps it.
            if (next != claimed.begin() && std::prev(next)->second.first > c.start) continue;
            const size_t room = next == claimed.end() ? ~size_t(0) : next->first - c.start;
            if (length(c.order) <= room) {
                claimed.emplace_hint(
                    next, c.start,
                    std::make_pair(c.start + length(c.order), ids_[size_t(c.order)]));
                continue;
            }
            // Too long for the room before the next claimed span, as is every
            // candidate here until one fits; that one waits its turn (others
            // of lower order may claim first).
            int32_t order = matcher_.shorter(c.order);
            while (order >= 0 && (length(order) > room || !eligible(order)))
                order = matcher_.shorter(order);
            if (order < 0) continue;
            heap.push_back({order, c.start});
            std::push_heap(heap.begin(), heap.end(), later);
        }
        std::vector<std::pair<size_t, int32_t>> chosen;
        chosen.reserve(claimed.size());
        for (const auto& [start, span] : claimed) chosen.push_back({start, span.second});
        return chosen;
    }

    std::vector<int32_t> ids_;
    smol::detail::UnitVector<std::string_view> texts_;
    SpecialMatcher matcher_;
};

}  // namespace detail
SMOL_NAMESPACE_END
