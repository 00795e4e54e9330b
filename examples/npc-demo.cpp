// npc-demo: a 60 fps game loop in which several NPCs share one model and talk
// through the async API. Every NPC is a fork of one generator that prefilled
// the shared world prompt, so each NPC's first line only prefills its own
// message, and the NPCs hold that prompt's keys and values once: a fork shares
// the cache's blocks until it writes them (model/kv_blocks.hpp). The caches are
// q8_0 by default (--kv-type). It prints each NPC's own and shared cache bytes.
// The game thread never decodes: each frame it starts requests, polls new text
// and renders it; generation runs on worker threads.
//
// The NPCs share one smol::Batcher (generation/batcher.hpp), so while several
// of them talk their decode steps run as one forward pass, and each talks at
// nearly the speed of one; --no-batch gives every NPC its own passes (they
// then take turns on the model's thread pool), for comparison. Each NPC's text
// is printed as it streams, a line at a time, prefixed with its name (--quiet:
// not at all).
//
// At the end it prints the frame times over the run (work per frame, and the
// interval between frame starts), with generation running the whole time;
// goal: no frame over 20 ms. Then the generation figures: aggregate tokens/s
// (all NPCs' tokens over the time during which at least one was generating),
// and per NPC its token latency (time between consecutive tokens of a line,
// p50 / p99) and the latency of a line's first token (the player's message
// prefilled, and waiting for shared steps).
//
// The generation threads run at a lower priority (GeneratorOptions::
// on_worker_start; Linux: nice 10) so the game thread wins its core back at
// once; --no-nice turns that off for comparison.
//
//   npc-demo [-m MODEL] [--npcs N] [--frames N] [-t THREADS] [-n TOKENS] [--pause FRAMES]
//            [--kv-type TYPE] [--no-nice] [--no-batch] [--quiet] [--baseline] [--verbose]
//                                                          (npc-demo --help says what each does)
#include <smol/smol.hpp>

#include "common/cli.hpp"
#include "common/smol_options.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

// When each token of one line arrived. Written by the NPC's worker (the
// line's logits hook runs once per token, right after the forward pass that
// made it) and read by the game thread only once the line is done().
struct LineTimes {
    Clock::time_point asked;
    std::vector<Clock::time_point> tokens;
};

struct Npc {
    std::string name;
    smol::Generator generator;
    std::vector<smol::ChatMessage> conversation;
    smol::AsyncGeneration speaking;
    std::string bubble;  // text shown above the NPC this frame
    int next_line_frame = 0;
    size_t lines = 0;
    size_t tokens = 0;
    std::shared_ptr<LineTimes> line_times;  // of the line being spoken
    std::string unprinted;                  // streamed text not yet printed (no full line yet)
    std::vector<double> gaps_ms;            // between consecutive tokens of a line, all lines
    std::vector<double> first_token_ms;     // asked .. first token, per line
};

// A line's tokens into its NPC's figures; returns the line's busy interval.
std::pair<Clock::time_point, Clock::time_point> account_line(Npc& npc, const LineTimes& times) {
    const auto ms = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
    };
    npc.tokens += times.tokens.size();
    if (times.tokens.empty()) return {times.asked, times.asked};
    npc.first_token_ms.push_back(ms(times.asked, times.tokens.front()));
    for (size_t k = 1; k < times.tokens.size(); ++k)
        npc.gaps_ms.push_back(ms(times.tokens[k - 1], times.tokens[k]));
    return {times.asked, times.tokens.back()};
}

// Prints an NPC's streamed text a line at a time, "Name  | text", wrapped at
// spaces, so that NPCs talking at once show as interleaved lines.
class Transcript {
public:
    Transcript(bool enabled, size_t name_width) : enabled_(enabled), name_width_(name_width) {}

    void said(const std::string& who, const std::string& to, const std::string& text) {
        if (enabled_)
            std::printf("%*s > %s: %s\n", int(name_width_), who.c_str(), to.c_str(), text.c_str());
    }
    void stream(Npc& npc, std::string_view piece) {
        if (!enabled_) return;
        for (char c : piece) {
            if (c == '\n') {
                print(npc.name, npc.unprinted);
                npc.unprinted.clear();
                continue;
            }
            // The demo model's random text has control bytes; keep the terminal sane.
            npc.unprinted += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
        }
        // Columns are characters, not bytes (UTF-8 continuation bytes take none).
        while (true) {
            size_t end = 0, columns = 0;
            while (end < npc.unprinted.size() && columns <= kWidth) {
                columns += (static_cast<unsigned char>(npc.unprinted[end]) & 0xC0) != 0x80;
                ++end;
            }
            if (columns <= kWidth) break;
            --end;  // the first byte of character kWidth + 1: the line ends before it
            size_t cut = npc.unprinted.rfind(' ', end);
            size_t skip = 1;
            if (cut == std::string::npos || cut == 0) {  // no space: cut between characters
                cut = end;
                skip = 0;
            }
            print(npc.name, npc.unprinted.substr(0, cut));
            npc.unprinted.erase(0, cut + skip);
        }
    }
    void end_of_line(Npc& npc, const char* why) {
        if (!enabled_) return;
        npc.unprinted += why;
        print(npc.name, npc.unprinted);
        npc.unprinted.clear();
    }
    void flush() {
        if (enabled_ && printed_) std::fflush(stdout);
        printed_ = false;
    }

private:
    static constexpr size_t kWidth = 72;
    void print(const std::string& name, const std::string& text) {
        std::printf("%-*s | %s\n", int(name_width_), name.c_str(), text.c_str());
        printed_ = true;
    }
    bool enabled_;
    size_t name_width_;
    bool printed_ = false;
};

// Length of the union of [begin, end] intervals: the time during which at
// least one NPC was generating.
double busy_seconds(std::vector<std::pair<Clock::time_point, Clock::time_point>> spans) {
    std::sort(spans.begin(), spans.end());
    double seconds = 0;
    bool open = false;
    Clock::time_point begin, end;
    for (const auto& [b, e] : spans) {
        if (open && b <= end) {
            end = std::max(end, e);
            continue;
        }
        if (open) seconds += std::chrono::duration<double>(end - begin).count();
        begin = b;
        end = e;
        open = true;
    }
    if (open) seconds += std::chrono::duration<double>(end - begin).count();
    return seconds;
}

double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const size_t index = size_t(std::ceil(p * double(values.size()))) - 1;
    return values[std::min(index, values.size() - 1)];
}

// Stand-in for the game's own per-frame work (physics, AI, rendering): a
// fixed amount of arithmetic.
// The world every NPC knows: prefilled once, then shared by the forks.
const char* const kWorld =
    "You are a villager in Elder Ford, a small medieval town where two rivers meet. Stay in "
    "character, answer in one or two short sentences, and never mention that you are an AI.\n"
    "The town: a stone bridge crosses the larger river; the mill on the smaller one turns day and "
    "night. The market fills the square on the first day of each week. The inn, the Crooked "
    "Heron, is kept by a widow named Marta who waters her ale. The smithy stands by the north "
    "gate; the smith, Oswin, is mending the baron's armour before the spring tournament. The "
    "chapel bell cracked in the winter frost and nobody can afford to recast it.\n"
    "The people: Father Aldric keeps the chapel and the town's only books. The guard captain, "
    "Berta, distrusts strangers since the granary fire last autumn. The baker, Hugh, rises before "
    "dawn and gossips with everyone. Children say a wolf with one white paw walks the far bank "
    "at night.\n"
    "The news: a merchant caravan from the coast is three days late. The baron has raised the "
    "bridge toll to two pennies. Travellers speak of soldiers gathering beyond the hills, and of a "
    "peddler who sells maps to a ruined abbey in the marsh.";

// Each cache's bytes held alone and shared (Generator::cache_memory): the
// world prompt's blocks are held once, whatever the number of NPCs.
void print_cache_memory(const char* when, const smol::Generator& base,
                        const std::vector<Npc>& npcs) {
    auto mib = [](uint64_t bytes) { return double(bytes) / (1024.0 * 1024.0); };
    uint64_t owned = 0;
    for (const Npc& npc : npcs) owned += npc.generator.cache_memory().owned;
    const smol::CacheMemory world = base.cache_memory();
    std::printf(
        "KV cache %s: the world prompt's blocks %.2f MiB held once (the forks share "
        "them); the NPCs' own %.2f MiB in all\n",
        when, mib(world.owned + world.shared), mib(owned));
    for (const Npc& npc : npcs) {
        const smol::CacheMemory m = npc.generator.cache_memory();
        std::printf("  %-10s %5zu positions: own %7.2f MiB, shared %7.2f MiB\n", npc.name.c_str(),
                    npc.generator.n_cached(), mib(m.owned), mib(m.shared));
    }
}

double simulate_world(int frame) {
    double x = frame;
    for (int i = 0; i < 20000; ++i) x = std::sin(x) * 0.5 + 1.0;
    return x;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path;
    int n_npcs = 3, n_frames = 600, max_tokens = 96, pause_frames = 6;
    bool nice_workers = true;
    bool baseline = false;  // --baseline: the same loop with no generation (machine noise)
    int n_threads =
        std::max(1, int(std::thread::hardware_concurrency()) - 1);  // leave a core to the game
    bool verbose = false;
    bool batch = true;
    bool quiet = false;
    smol::GeneratorOptions options;
    options.kv_type = smol::KVType::q8_0;
    smol_cli::Parser cli(
        "npc-demo",
        "A 60 fps game loop in which NPCs that share one model (and, unless --no-batch, its\n"
        "forward passes) talk through the async API; prints their text as it streams, then the\n"
        "frame times, the aggregate tokens/s and each NPC's token latency.");
    cli.option("-m, --model", model_path, "MODEL",
               "GGUF file (default: the demo model the build makes)");
    cli.option("--npcs", n_npcs, "N", "NPCs (default 3)").at_least(1);
    cli.option("--frames", n_frames, "N", "frames to run (default 600, 10 s)").at_least(1);
    cli.option("-t, --threads", n_threads, "THREADS",
               "model threads (default: one core less than the machine's)")
        .at_least(1);
    cli.option("-n", max_tokens, "TOKENS", "most tokens per NPC line (default 96)");
    cli.option("--pause", pause_frames, "FRAMES", "frames between an NPC's lines (default 6)")
        .at_least(0);
    smol_examples::add_kv_type_option(
        cli, options.kv_type,
        "KV cache element type: q8_0 (default here: 53 % of F16's bytes), f16, f32");
    cli.flag("--no-nice", nice_workers, "run the generation threads at normal priority", false);
    cli.flag("--no-batch", batch, "every NPC runs its own forward passes (no shared smol::Batcher)",
             false);
    cli.flag("--quiet", quiet, "do not print the NPCs' text as it streams");
    cli.flag("--baseline", baseline, "the same loop without generation: the machine's own noise");
    cli.flag("--verbose", verbose, "print every NPC line");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    try {
        if (model_path.empty()) {
            model_path = smol_examples::demo_model_path();
            std::fprintf(
                stderr,
                "npc-demo: using the demo model %s (RANDOM weights: NPC lines are gibberish)\n",
                model_path.c_str());
        }
        smol::LoadOptions load_options;
        load_options.n_threads = n_threads;
        auto model = smol::Model::load(model_path, load_options);

        // One generator prefills the shared world prompt; every NPC forks it.
        const std::vector<smol::ChatMessage> shared = {{"system", kWorld}};
        smol::GenerateParams params;
        params.max_tokens = max_tokens;
        params.temperature = 0.8f;
        params.chat.enable_thinking = false;
        params.chat.today = "21 November 2026";
        params.stop = {"\n\n"};
        smol::ChatOptions prefill_options = params.chat;
        prefill_options.add_generation_prompt = false;

        // Every NPC is a fork of `base`, and a fork keeps its options: one batcher for all.
        if (batch) options.batcher = std::make_shared<smol::Batcher>(model);
        if (nice_workers) {
            options.on_worker_start = [] {
#if defined(__linux__)
                // Per-thread on Linux. SCHED_BATCH: a woken worker does not
                // preempt the thread that woke it (the game thread, in
                // chat_async); nice 10: the game thread wins the core back.
                sched_param param{};
                param.sched_priority = 0;
                pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
                setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), 10);
#endif
            };
        }
        smol::Generator base(model, options);
        const auto prefill_start = Clock::now();
        const size_t prefilled = base.prefill_chat(shared, prefill_options);
        const double prefill_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - prefill_start).count();
        std::fprintf(stderr,
                     "npc-demo: %s; %d model threads; workers %s; %s; shared prompt %zu tokens "
                     "prefilled in %.1f ms\n",
                     smol::build_info_string().c_str(), n_threads,
                     nice_workers ? "niced" : "not niced",
                     batch ? "NPCs share forward passes (smol::Batcher)"
                           : "every NPC runs its own passes (--no-batch)",
                     prefilled, prefill_ms);

        const char* names[] = {"Blacksmith", "Baker", "Guard",  "Innkeeper",
                               "Farmer",     "Bard",  "Priest", "Merchant"};
        const char* lines[] = {"Good morning! What are you working on?", "Any news from the road?",
                               "Have you seen anything strange lately?",
                               "What would you sell me for two coins?"};
        std::vector<Npc> npcs;
        size_t name_width = 6;  // "Player"
        for (int i = 0; i < n_npcs; ++i) {
            Npc npc{names[i % 8], base.fork(), shared, {}, {}, 0, 0, 0, nullptr, {}, {}, {}};
            npc.next_line_frame = i * 20;  // staggered first lines
            name_width = std::max(name_width, npc.name.size());
            npcs.push_back(std::move(npc));
        }
        print_cache_memory("after forking", base, npcs);
        Transcript transcript(!quiet && !baseline, name_width);
        std::vector<std::pair<Clock::time_point, Clock::time_point>>
            busy;  // each line: asked .. last token

        const auto frame_period = std::chrono::microseconds(16667);
        std::vector<double> work_ms, interval_ms;
        work_ms.reserve(size_t(n_frames));
        interval_ms.reserve(size_t(n_frames));
        double world = 0;
        double worst_start_ms = 0, worst_poll_ms = 0;  // the API calls alone
        auto since = [](Clock::time_point t) {
            return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
        };
        size_t frames_generating = 0;
        auto next_frame = Clock::now();
        auto previous_start = next_frame;
        for (int frame = 0; frame < n_frames; ++frame) {
            std::this_thread::sleep_until(next_frame);
            const auto start = Clock::now();
            if (frame > 0)
                interval_ms.push_back(
                    std::chrono::duration<double, std::milli>(start - previous_start).count());
            previous_start = start;

            bool any_generating = false;
            for (size_t i = 0; i < npcs.size(); ++i) {
                Npc& npc = npcs[i];
                if (npc.speaking.valid()) {
                    const auto poll_start = Clock::now();
                    std::string piece = npc.speaking.poll();
                    worst_poll_ms = std::max(worst_poll_ms, since(poll_start));
                    if (npc.speaking.done()) {
                        piece += npc.speaking.poll();
                        npc.bubble += piece;
                        transcript.stream(npc, piece);
                        const smol::GenerateResult r =
                            npc.speaking.wait();  // ready: does not block
                        transcript.end_of_line(
                            npc, r.stop_reason == smol::StopReason::max_tokens ? " [...]" : "");
                        busy.push_back(account_line(npc, *npc.line_times));
                        npc.line_times.reset();
                        ++npc.lines;
                        npc.conversation.push_back({"assistant", r.answer, true});
                        if (verbose)
                            std::printf("[frame %d] %s: %s\n", frame, npc.name.c_str(),
                                        npc.bubble.c_str());
                        npc.speaking = smol::AsyncGeneration();
                        npc.next_line_frame = frame + pause_frames;
                    } else {
                        npc.bubble += piece;
                        transcript.stream(npc, piece);
                        any_generating = true;
                    }
                } else if (!baseline && frame >= npc.next_line_frame) {
                    // The player says something; keep the conversation short. Player
                    // lines are contents: chat_async reads them as text, never as
                    // control tokens (parse_special_in_content stays off).
                    if (npc.conversation.size() > 7) npc.conversation.resize(1);
                    npc.conversation.push_back({"user", lines[(npc.lines + i) % 4]});
                    npc.bubble.clear();
                    transcript.said("Player", npc.name, npc.conversation.back().content);
                    auto times = std::make_shared<LineTimes>();
                    smol::GenerateParams line_params = params;
                    line_params.logits_hook = [times](float*, size_t) {
                        times->tokens.push_back(Clock::now());
                    };
                    const auto start_call = Clock::now();
                    times->asked = start_call;
                    npc.speaking =
                        npc.generator.chat_async(npc.conversation, std::move(line_params));
                    worst_start_ms = std::max(worst_start_ms, since(start_call));
                    npc.line_times = std::move(times);
                    any_generating = true;
                }
            }
            transcript.flush();
            if (any_generating) ++frames_generating;
            world += simulate_world(frame);

            work_ms.push_back(
                std::chrono::duration<double, std::milli>(Clock::now() - start).count());
            next_frame += frame_period;
            if (next_frame < Clock::now()) next_frame = Clock::now();  // fell behind: do not burst
        }
        // Lines still being spoken: stop them, and count what they made.
        for (Npc& npc : npcs) npc.speaking.cancel();
        for (Npc& npc : npcs) {
            if (!npc.speaking.valid()) continue;
            npc.speaking.wait();
            busy.push_back(account_line(npc, *npc.line_times));
        }

        size_t total_tokens = 0, total_lines = 0;
        for (const Npc& npc : npcs) {
            total_tokens += npc.tokens;
            total_lines += npc.lines;
        }
        const double max_work = *std::max_element(work_ms.begin(), work_ms.end());
        const double max_interval =
            interval_ms.empty() ? 0 : *std::max_element(interval_ms.begin(), interval_ms.end());
        const long over_20 =
            std::count_if(work_ms.begin(), work_ms.end(), [](double ms) { return ms > 20.0; });
        std::printf(
            "npc-demo: %d frames, %d NPCs, generation running in %zu frames; %zu lines, %zu "
            "tokens\n",
            n_frames, n_npcs, frames_generating, total_lines, total_tokens);
        std::printf(
            "frame time (work per frame): max %.3f ms, p99 %.3f ms, frames over 20 ms: %ld\n",
            max_work, percentile(work_ms, 0.99), over_20);
        std::printf("frame interval (target 16.667 ms): max %.3f ms, p99 %.3f ms\n", max_interval,
                    percentile(interval_ms, 0.99));
        std::printf("API calls on the game thread: chat_async max %.3f ms, poll max %.3f ms\n",
                    worst_start_ms, worst_poll_ms);
        if (total_tokens > 0) {
            const double seconds = busy_seconds(busy);
            std::printf(
                "generation (%s): %zu tokens in %.2f s during which an NPC was generating = %.1f "
                "tokens/s "
                "aggregate\n",
                batch ? "shared batcher" : "--no-batch", total_tokens, seconds,
                seconds > 0 ? double(total_tokens) / seconds : 0.0);
            if (options.batcher) {
                const smol::Batcher::Stats stats = options.batcher->stats();
                std::printf(
                    "batcher: %llu forward passes, %.2f NPCs and %.1f rows per pass on average, "
                    "widest %zu "
                    "NPCs\n",
                    static_cast<unsigned long long>(stats.steps),
                    stats.steps ? double(stats.requests) / double(stats.steps) : 0.0,
                    stats.steps ? double(stats.rows) / double(stats.steps) : 0.0, stats.widest);
            }
            std::printf(
                "| NPC | lines | tokens | token latency p50 ms | p99 ms | first token p50 ms | max "
                "ms |\n"
                "|---|---|---|---|---|---|---|\n");
            for (const Npc& npc : npcs) {
                const double first_max =
                    npc.first_token_ms.empty()
                        ? 0
                        : *std::max_element(npc.first_token_ms.begin(), npc.first_token_ms.end());
                std::printf("| %s | %zu | %zu | %.2f | %.2f | %.1f | %.1f |\n", npc.name.c_str(),
                            npc.lines, npc.tokens, percentile(npc.gaps_ms, 0.50),
                            percentile(npc.gaps_ms, 0.99), percentile(npc.first_token_ms, 0.50),
                            first_max);
            }
        }
        print_cache_memory("at the end", base, npcs);
        if (world == 12345.678)
            std::printf(" ");  // keeps the simulated work from being optimized away
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "npc-demo: error (%s): %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    }
}
