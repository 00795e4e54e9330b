// npc-demo: a 60 fps game loop in which several NPCs share one model and talk
// through the async API. Every NPC is a fork of one generator that prefilled
// the shared system prompt, so each NPC's first line only prefills its own
// message. The game thread never decodes: each frame it starts requests,
// polls new text and renders it; generation runs on worker threads.
//
// At the end it prints the frame times over the run (work per frame, and the
// interval between frame starts), with generation running the whole time.
// Goal: no frame over 20 ms.
//
// The generation threads run at a lower priority (GeneratorOptions::
// on_worker_start; Linux: nice 10) so the game thread wins its core back at
// once; --no-nice turns that off for comparison.
//
//   npc-demo [-m MODEL] [--npcs N] [--frames N] [-t THREADS] [-n TOKENS] [--pause FRAMES]
//            [--no-nice] [--baseline] [--verbose]          (npc-demo --help says what each does)
#include <smol/smol.hpp>
#include <smol/generator.hpp>

#include "common/cli.hpp"
#include "common/smol_options.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
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

struct Npc {
    std::string name;
    smol::Generator generator;
    std::vector<smol::ChatMessage> conversation;
    smol::AsyncGeneration speaking;
    std::string bubble;  // text shown above the NPC this frame
    int next_line_frame = 0;
    size_t lines = 0;
    size_t tokens = 0;
};

double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const size_t index = size_t(std::ceil(p * double(values.size()))) - 1;
    return values[std::min(index, values.size() - 1)];
}

// Stand-in for the game's own per-frame work (physics, AI, rendering): a
// fixed amount of arithmetic.
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
    int n_threads = std::max(1, int(std::thread::hardware_concurrency()) - 1);  // leave a core to the game
    bool verbose = false;
    smol_cli::Parser cli("npc-demo",
                         "A 60 fps game loop in which NPCs that share one model talk through the async API;\n"
                         "prints the frame times at the end.");
    cli.option("-m, --model", model_path, "MODEL", "GGUF file (default: the demo model the build makes)");
    cli.option("--npcs", n_npcs, "N", "NPCs (default 3)").at_least(1);
    cli.option("--frames", n_frames, "N", "frames to run (default 600, 10 s)").at_least(1);
    cli.option("-t, --threads", n_threads, "THREADS", "model threads (default: one core less than the machine's)").at_least(1);
    cli.option("-n", max_tokens, "TOKENS", "most tokens per NPC line (default 96)");
    cli.option("--pause", pause_frames, "FRAMES", "frames between an NPC's lines (default 6)").at_least(0);
    cli.flag("--no-nice", nice_workers, "run the generation threads at normal priority", false);
    cli.flag("--baseline", baseline, "the same loop without generation: the machine's own noise");
    cli.flag("--verbose", verbose, "print every NPC line");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    try {
        if (model_path.empty()) {
            model_path = smol_examples::demo_model_path();
            std::fprintf(stderr, "npc-demo: using the demo model %s (RANDOM weights: NPC lines are gibberish)\n",
                         model_path.c_str());
        }
        smol::LoadOptions load_options;
        load_options.n_threads = n_threads;
        auto model = smol::Model::load(model_path, load_options);

        // One generator prefills the shared system prompt; every NPC forks it.
        const std::vector<smol::ChatMessage> shared = {
            {"system",
             "You are a villager in a small medieval town. Stay in character, answer in one or two "
             "short sentences, and never mention that you are an AI."}};
        smol::GenerateParams params;
        params.max_tokens = max_tokens;
        params.temperature = 0.8f;
        params.chat.enable_thinking = false;
        params.chat.today = "21 November 2026";
        params.stop = {"\n\n"};
        smol::ChatOptions prefill_options = params.chat;
        prefill_options.add_generation_prompt = false;

        smol::GeneratorOptions options;
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
        const double prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - prefill_start).count();
        std::fprintf(stderr,
                     "npc-demo: %s; %d model threads; workers %s; shared prompt %zu tokens prefilled in %.1f ms\n",
                     smol::build_info_string().c_str(), n_threads, nice_workers ? "niced" : "not niced", prefilled,
                     prefill_ms);

        const char* names[] = {"Blacksmith", "Baker", "Guard", "Innkeeper", "Farmer", "Bard", "Priest", "Merchant"};
        const char* lines[] = {"Good morning! What are you working on?", "Any news from the road?",
                               "Have you seen anything strange lately?", "What would you sell me for two coins?"};
        std::vector<Npc> npcs;
        for (int i = 0; i < n_npcs; ++i) {
            Npc npc{names[i % 8], base.fork(), shared, {}, {}, 0, 0, 0};
            npc.next_line_frame = i * 20;  // staggered first lines
            npcs.push_back(std::move(npc));
        }

        const auto frame_period = std::chrono::microseconds(16667);
        std::vector<double> work_ms, interval_ms;
        work_ms.reserve(size_t(n_frames));
        interval_ms.reserve(size_t(n_frames));
        double world = 0;
        double worst_start_ms = 0, worst_poll_ms = 0;  // the API calls alone
        auto since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
        size_t frames_generating = 0;
        auto next_frame = Clock::now();
        auto previous_start = next_frame;
        for (int frame = 0; frame < n_frames; ++frame) {
            std::this_thread::sleep_until(next_frame);
            const auto start = Clock::now();
            if (frame > 0) interval_ms.push_back(std::chrono::duration<double, std::milli>(start - previous_start).count());
            previous_start = start;

            bool any_generating = false;
            for (size_t i = 0; i < npcs.size(); ++i) {
                Npc& npc = npcs[i];
                if (npc.speaking.valid()) {
                    const auto poll_start = Clock::now();
                    npc.bubble += npc.speaking.poll();
                    worst_poll_ms = std::max(worst_poll_ms, since(poll_start));
                    if (npc.speaking.done()) {
                        npc.bubble += npc.speaking.poll();
                        const smol::GenerateResult r = npc.speaking.wait();  // ready: does not block
                        npc.tokens += r.tokens.size();
                        ++npc.lines;
                        npc.conversation.push_back({"assistant", r.answer});
                        if (verbose)
                            std::printf("[frame %d] %s: %s\n", frame, npc.name.c_str(), npc.bubble.c_str());
                        npc.speaking = smol::AsyncGeneration();
                        npc.next_line_frame = frame + pause_frames;
                    } else {
                        any_generating = true;
                    }
                } else if (!baseline && frame >= npc.next_line_frame) {
                    // The player says something; keep the conversation short.
                    if (npc.conversation.size() > 7) npc.conversation.resize(1);
                    npc.conversation.push_back({"user", lines[(npc.lines + i) % 4]});
                    npc.bubble.clear();
                    const auto start_call = Clock::now();
                    npc.speaking = npc.generator.chat_async(npc.conversation, params);
                    worst_start_ms = std::max(worst_start_ms, since(start_call));
                    any_generating = true;
                }
            }
            if (any_generating) ++frames_generating;
            world += simulate_world(frame);

            work_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
            next_frame += frame_period;
            if (next_frame < Clock::now()) next_frame = Clock::now();  // fell behind: do not burst
        }
        for (Npc& npc : npcs) npc.speaking.cancel();

        size_t total_tokens = 0, total_lines = 0;
        for (const Npc& npc : npcs) {
            total_tokens += npc.tokens;
            total_lines += npc.lines;
        }
        const double max_work = *std::max_element(work_ms.begin(), work_ms.end());
        const double max_interval = interval_ms.empty() ? 0 : *std::max_element(interval_ms.begin(), interval_ms.end());
        const long over_20 = std::count_if(work_ms.begin(), work_ms.end(), [](double ms) { return ms > 20.0; });
        std::printf("npc-demo: %d frames, %d NPCs, generation running in %zu frames; %zu lines, %zu tokens\n",
                    n_frames, n_npcs, frames_generating, total_lines, total_tokens);
        std::printf("frame time (work per frame): max %.3f ms, p99 %.3f ms, frames over 20 ms: %ld\n", max_work,
                    percentile(work_ms, 0.99), over_20);
        std::printf("frame interval (target 16.667 ms): max %.3f ms, p99 %.3f ms\n", max_interval,
                    percentile(interval_ms, 0.99));
        std::printf("API calls on the game thread: chat_async max %.3f ms, poll max %.3f ms\n", worst_start_ms,
                    worst_poll_ms);
        if (world == 12345.678) std::printf(" ");  // keeps the simulated work from being optimized away
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "npc-demo: error (%s): %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    }
}
