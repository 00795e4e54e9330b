// TextQueue: hands streamed text from one producer thread (an async
// generation's worker) to one consumer thread (a game loop's poll()) without a
// lock, so the consumer can never be stalled by a producer that was preempted
// mid-append (with a lower-priority worker, that would be priority inversion).
//
// An unbounded single-producer / single-consumer list with a dummy head node:
// push() links a new node after the tail and publishes it with a release
// store; pop_all() follows the links with acquire loads, concatenating and
// freeing the nodes it passes. Each side touches only its own end.
#pragma once

#include "abi.hpp"

#include <atomic>
#include <string>
#include <string_view>
#include <utility>

SMOL_NAMESPACE_BEGIN
namespace detail {

class TextQueue {
public:
    TextQueue() : head_(new Node), tail_(head_) {}
    ~TextQueue() {
        while (head_) {
            Node* next = head_->next.load(std::memory_order_relaxed);
            delete head_;
            head_ = next;
        }
    }
    TextQueue(const TextQueue&) = delete;
    TextQueue& operator=(const TextQueue&) = delete;

    // Producer side.
    void push(std::string_view text) {
        Node* node = new Node;
        node->text.assign(text.data(), text.size());
        tail_->next.store(node, std::memory_order_release);
        tail_ = node;
    }

    // Consumer side: everything pushed so far (that this thread can see).
    std::string pop_all() {
        std::string out;
        for (Node* next = head_->next.load(std::memory_order_acquire); next;
             next = head_->next.load(std::memory_order_acquire)) {
            if (out.empty())
                out = std::move(next->text);
            else
                out += next->text;
            delete head_;  // the old dummy; `next` becomes the new one
            head_ = next;
        }
        return out;
    }

private:
    struct Node {
        std::atomic<Node*> next{nullptr};
        std::string text;
    };
    Node* head_;  // consumer's: the dummy before the first unread node
    Node* tail_;  // producer's: the last node pushed
};

}  // namespace detail
SMOL_NAMESPACE_END
