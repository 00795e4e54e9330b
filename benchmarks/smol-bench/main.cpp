// smol-bench: end-to-end speed of a GGUF model, in the spirit of llama-bench.
//
//   smol-bench [-m MODEL] [-p 512] [-n 128] [-d DEPTH] [-t THREADS] [-r 3] [-c CTX]
//              [--chunk N] [--ttft-tokens 16] [--no-bandwidth] [--ops STEPS] [--cpu LEVEL]
//              [--device cpu|cuda|auto] [--parallel N[,N...]] [--parallel-arrival
//              [--arrival-tokens 512]] [--json-schema FILE] [--json]
//   smol-bench -m MODEL --check-prompt TEXT [-n N] [-t THREADS] [--json]
//
// What it measures (each test repeated -r times: mean and standard deviation):
//   pp<P>  prefill of P random token ids (fixed seed) from an empty cache, one
//          forward call with the default chunking: P / seconds.
//   tg<N>  N tokens generated one at a time, greedy argmax over the full
//          vocabulary logits each step, after a 1-token prompt or after DEPTH
//          tokens of context (-d; that prefill is done once and not timed):
//          N / seconds.
// Also: load time (Model::load), time to first token for a 16-token prompt in
// a fresh process (load + prefill + argmax; the first forward pass also pages
// the mapped weights in), peak RSS (VmHWM, read before the bandwidth test,
// which allocates 1 GiB of its own), file and KV cache sizes, and the
// roofline: a memory-read bandwidth test (1 GiB, the same thread count, best
// of 3) against the bytes one decode step must read (weights + KV cache).
//
// --check-prompt TEXT runs TEXT (special tokens parsed; BOS only when the file
// asks, like smol-generate) through the model, then greedy decoding for -n
// tokens (stopping after an end-of-generation token, like smol-generate), and
// prints the prompt and generated ids; with --json one line
// {"prompt_ids": [...], "generated_ids": [...]}, comparable with
// `smol-generate -m MODEL -p TEXT -n N --temp 0 --json`.
//
// Without -m it runs the demo model the build makes (random weights).
//
// --parallel N[,N...] ("many NPCs at the speed of one"), after the tests above:
// for each N, N smol::Generators sharing one smol::Batcher (max_batch at least
// N), each with its own 24-token prompt (random ids), generate -n tokens
// (greedy, ignore_eos) at once, one thread each, released together. Per run:
//   aggregate t/s  tokens stamped by all generators while all N were decoding
//                  (from the moment the last one got its first token, i.e. all
//                  prefills are over, to the moment the first one got its last)
//                  / the length of that window;
//   token gap      every generator's time between consecutive tokens (stamped
//                  by GenerateParams::logits_hook, which runs right after the
//                  forward pass that made the token's logits), pooled: p50, p99;
//   rows/step      the batcher's rows per forward pass after every prefill.
// Each figure: median of -r runs, with min and max. tg1 is one generator
// without a batcher, measured the same way; the target for N is
// 0.8 x min(N x tg1, pp) (pp: the pp test's mean, when it ran: -p > 0).
//
// --parallel-arrival: 3 generators share a batcher and decode; once each has
// 16 tokens, a 4th gets a --arrival-tokens prompt (default 512). Reports the
// decoders' median token gap before it arrived, their worst gap that overlaps
// its prefill (target: worst <= 2 x median) and its time to first token.
//
// --step-rows N[,N...]: one batched decode step straight on the backend, N
// sequences (each after its own 64-token prompt) of one token each: the step's
// time (median of -r x 8 steps, with min) and rows per second. Shows what a
// step of N rows costs against one of fewer: the batcher's fuel, and the stair
// past each multiple of Backend::batch_rows() (printed).
//
// --json-schema FILE: the end-to-end cost of structured output. One
// smol::Generator, greedy, -n tokens: a free run (ignore_eos) and a run with
// the schema (GenerateParams::json_schema; it ends when the document is
// complete), alternating -r times; decode t/s of each and their ratio
// (issue 17's target: >= 0.95). The masks start cold in the first run.
//
// --ops N adds an op-by-op profile of N decode steps (see profile_ops; CPU only).
//
// --device picks the backend (LoadOptions::device): every timed forward runs
// through the model's backend (model/backend.hpp), so `--device cuda` times the
// GPU with the same tests; the memory roofline is the CPU's and is skipped there.
//
// --json (benchmark mode) prints one JSON object on the last line:
// pp_tokens_per_s, pp_stddev, tg_tokens_per_s, tg_stddev, load_ms, peak_rss_mb,
// ttft_ms, threads, n_prompt, n_gen, depth (and a few more fields); with
// --parallel a "parallel" object (tg1_tokens_per_s, and per N in "results":
// aggregate_tokens_per_s, token_gap_p50_ms, token_gap_p99_ms, rows_per_step as
// {median, min, max, runs}, target_tokens_per_s, target_met), with
// --parallel-arrival a "parallel_arrival" object, with --step-rows a "step_rows" array
// ({rows, step_ms {median, min, max, runs}, rows_per_s}).
#include <smol/smol.hpp>
#include <smol/kernels/bandwidth.hpp>
#include <smol/model/model.hpp>
#include <smol/sampling/sampler.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#endif

#include "common/cli.hpp"
#include "common/smol_options.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Stats {
    double mean = 0, stddev = 0;
};

Stats stats_of(const std::vector<double>& values) {
    Stats s;
    if (values.empty()) return s;
    for (double v : values) s.mean += v;
    s.mean /= double(values.size());
    if (values.size() > 1) {
        double sq = 0;
        for (double v : values) sq += (v - s.mean) * (v - s.mean);
        s.stddev = std::sqrt(sq / double(values.size() - 1));
    }
    return s;
}

// Peak resident set in MiB: VmHWM where /proc has it, else getrusage.
double peak_rss_mib() {
#if defined(__linux__)
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmHWM:", 0) == 0)
            return double(std::strtoull(line.c_str() + 6, nullptr, 10)) / 1024.0;
    }
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) == 0)
        return double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
#endif
    return 0;
}

double current_rss_mib() {
#if defined(__linux__)
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0)
            return double(std::strtoull(line.c_str() + 6, nullptr, 10)) / 1024.0;
    }
#endif
    return 0;
}

// CPU seconds (user + system) this process has used so far.
double process_cpu_seconds() {
#if defined(__linux__)
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) == 0)
        return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
#endif
    return 0;
}

std::string load_average() {
#if defined(__linux__)
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    if (in >> a >> b >> c) return a + " " + b + " " + c;
#endif
    return "?";
}

std::string human_bytes(double bytes) {
    char buf[64];
    if (bytes >= 1024.0 * 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else
        std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
    return buf;
}

// Bytes a decode step reads from weights: every tensor except the token
// embedding, which contributes one row, unless it is also the (tied) LM head.
double weight_bytes_per_token(const smol::gguf::File& file) {
    bool separate_head = false;
    for (const auto& t : file.tensors())
        if (t.name == "output.weight") separate_head = true;
    double bytes = 0;
    for (const auto& t : file.tensors()) {
        if (t.name == "token_embd.weight" && separate_head)
            bytes += double(t.n_bytes) / double(std::max<uint64_t>(1, t.rows()));
        else
            bytes += double(t.n_bytes);
    }
    return bytes;
}

double parameter_count(const smol::gguf::File& file) {
    double n = 0;
    for (const auto& t : file.tensors()) n += double(t.n_elements);
    return n;
}

int32_t argmax(const std::vector<float>& logits) {
    return smol::greedy_token(logits.data(), logits.size());
}

std::string join_ids(const std::vector<int32_t>& ids) {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ' ';
        out += std::to_string(ids[i]);
    }
    return out;
}

// --- --ops: where a decode step's time goes, op by op ---------------------------
//
// Runs `steps` decode-shaped passes over every layer with the model's own
// weights, pool and kernels (random activations, so no attention), timing each
// op on its own: activation quantization, each weight matrix kind, rmsnorm,
// SwiGLU, the LM head. All layers are walked in order, so every matrix is read
// from DRAM as in a real decode step (the weights are far larger than the
// caches). Then times whole forward() decode steps at the same depth; the
// difference is attention, RoPE, KV stores and the pool's barriers between ops.
struct OpTime {
    std::string name;
    double ms = 0;     // per step
    double bytes = 0;  // weight bytes read per step
};

void profile_ops(const smol::Model& model, smol::KVCache& kv, size_t depth, int steps,
                 const smol::ForwardOptions& forward_options) {
    const smol::Config& c = model.config();
    const smol::Weights& weights = model.weights();
    smol::ThreadPool& pool = model.thread_pool();
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto random_vector = [&](size_t n) {
        std::vector<float> v(n);
        for (auto& x : v) x = normal(rng);
        return v;
    };
    const std::vector<float> hidden_in = random_vector(c.hidden), q_in = random_vector(c.q_dim()),
                             ffn_in = random_vector(c.ffn);
    std::vector<float> normed(c.hidden), out(std::max({c.q_dim(), c.ffn, c.vocab_size, c.hidden})),
        out2(c.ffn), out3(c.ffn);
    smol::QuantizedInput input;

    enum { quantize, rmsnorm, q, k, v, o, gate, up, down, swiglu, lm_head, n_ops };
    std::vector<OpTime> ops(n_ops);
    const char* names[n_ops] = {"quantize activations (4/layer + head)",
                                "rmsnorm (2/layer + head)",
                                "attn_q",
                                "attn_k",
                                "attn_v",
                                "attn_output",
                                "ffn_gate",
                                "ffn_up",
                                "ffn_down",
                                "swiglu",
                                "LM head"};
    for (int i = 0; i < n_ops; ++i) ops[size_t(i)].name = names[i];
    OpTime qkv_batch{"attn_q+k+v as one matmul_batch", 0, 0},
        gate_up_batch{"ffn_gate+up as one matmul_batch", 0, 0};

    auto timed = [](auto&& f) {
        const auto start = Clock::now();
        f();
        return ms_since(start);
    };
    auto time_matmul = [&](OpTime& op, const smol::WeightMatrix& w, const std::vector<float>& x) {
        input.quantize(w.type, x.data(), 1, w.cols, &pool);
        op.ms += timed([&] { smol::matmul(w, input, out.data(), w.rows, pool); });
        op.bytes += double(w.row_bytes) * double(w.rows);
    };
    for (int step = -1; step < steps; ++step) {  // step -1: an untimed warm-up pass
        if (step == 0) {
            for (OpTime& op : ops) op.ms = op.bytes = 0;
            qkv_batch.ms = qkv_batch.bytes = gate_up_batch.ms = gate_up_batch.bytes = 0;
        }
        for (size_t l = 0; l < c.n_layers; ++l) {
            const smol::LayerWeights& lw = weights.layers[l];
            ops[rmsnorm].ms += timed([&] {
                smol::rmsnorm(hidden_in.data(), lw.attn_norm.data(), normed.data(), c.hidden,
                              c.rms_eps);
            });
            ops[quantize].ms +=
                timed([&] { input.quantize(lw.attn_q.type, normed.data(), 1, c.hidden, &pool); });
            if (step % 2 == 0) {
                time_matmul(ops[q], lw.attn_q, normed);
                time_matmul(ops[k], lw.attn_k, normed);
                time_matmul(ops[v], lw.attn_v, normed);
            } else {
                const smol::WeightMatrix &wq = lw.attn_q, &wk = lw.attn_k, &wv = lw.attn_v;
                if (smol::activation_type_for(wq.type) == smol::activation_type_for(wk.type) &&
                    smol::activation_type_for(wq.type) == smol::activation_type_for(wv.type)) {
                    input.quantize(wq.type, normed.data(), 1, c.hidden, &pool);
                    const smol::MatmulJob jobs[3] = {{wq, out.data(), wq.rows},
                                                     {wk, out2.data(), wk.rows},
                                                     {wv, out3.data(), wv.rows}};
                    qkv_batch.ms += timed([&] { smol::matmul_batch(jobs, 3, input, pool); });
                    qkv_batch.bytes += double(wq.row_bytes * wq.rows + wk.row_bytes * wk.rows +
                                              wv.row_bytes * wv.rows);
                }
            }
            ops[quantize].ms += timed(
                [&] { input.quantize(lw.attn_output.type, q_in.data(), 1, c.q_dim(), &pool); });
            time_matmul(ops[o], lw.attn_output, q_in);
            ops[rmsnorm].ms += timed([&] {
                smol::rmsnorm(hidden_in.data(), lw.ffn_norm.data(), normed.data(), c.hidden,
                              c.rms_eps);
            });
            ops[quantize].ms +=
                timed([&] { input.quantize(lw.ffn_gate.type, normed.data(), 1, c.hidden, &pool); });
            if (step % 2 == 0) {
                time_matmul(ops[gate], lw.ffn_gate, normed);
                time_matmul(ops[up], lw.ffn_up, normed);
            } else {
                const smol::WeightMatrix &wg = lw.ffn_gate, &wu = lw.ffn_up;
                if (smol::activation_type_for(wg.type) == smol::activation_type_for(wu.type)) {
                    input.quantize(wg.type, normed.data(), 1, c.hidden, &pool);
                    const smol::MatmulJob jobs[2] = {{wg, out2.data(), wg.rows},
                                                     {wu, out3.data(), wu.rows}};
                    gate_up_batch.ms += timed([&] { smol::matmul_batch(jobs, 2, input, pool); });
                    gate_up_batch.bytes += double(wg.row_bytes * wg.rows + wu.row_bytes * wu.rows);
                }
            }
            ops[swiglu].ms +=
                timed([&] { smol::swiglu(out2.data(), out3.data(), out2.data(), c.ffn); });
            ops[quantize].ms +=
                timed([&] { input.quantize(lw.ffn_down.type, ffn_in.data(), 1, c.ffn, &pool); });
            time_matmul(ops[down], lw.ffn_down, ffn_in);
        }
        ops[rmsnorm].ms += timed([&] {
            smol::rmsnorm(hidden_in.data(), weights.output_norm.data(), normed.data(), c.hidden,
                          c.rms_eps);
        });
        ops[quantize].ms +=
            timed([&] { input.quantize(weights.lm_head.type, normed.data(), 1, c.hidden, &pool); });
        time_matmul(ops[lm_head], weights.lm_head, normed);
    }

    // Whole decode steps at the same depth, for the remainder.
    std::vector<float> logits(c.vocab_size);
    kv.truncate(std::min(kv.size(), depth));
    const size_t base = kv.size();
    int32_t token = 1;
    model.forward(&token, 1, base, kv, logits.data(), forward_options);  // warm-up
    const auto start = Clock::now();
    for (int step = 0; step < steps; ++step) {
        model.forward(&token, 1, base + size_t(step), kv, logits.data(), forward_options);
        token = smol::greedy_token(logits.data(), logits.size());
    }
    const double step_ms = ms_since(start) / steps;
    kv.truncate(base);

    // q/k/v and gate/up were timed separately on even steps only (batched on odd ones).
    const int even_steps = (steps + 1) / 2, odd_steps = steps / 2;
    double parts_ms = 0;
    std::printf("\nop profile (%d decode steps, %d threads, context %zu; per step):\n", steps,
                pool.size(), base);
    std::printf("| op | ms/step | %% of forward | GB/s |\n|---|---|---|---|\n");
    for (int i = 0; i < n_ops; ++i) {
        OpTime& op = ops[size_t(i)];
        const bool split = i == q || i == k || i == v || i == gate || i == up;
        const int n = split ? even_steps : steps;
        if (n == 0) continue;
        op.ms /= n;
        op.bytes /= n;
        parts_ms += op.ms;
        if (op.bytes > 0)
            std::printf("| %s | %.2f | %.1f | %.1f |\n", op.name.c_str(), op.ms,
                        100.0 * op.ms / step_ms, op.bytes / (op.ms / 1000.0) / 1e9);
        else
            std::printf("| %s | %.2f | %.1f | |\n", op.name.c_str(), op.ms,
                        100.0 * op.ms / step_ms);
    }
    std::printf("| sum of the ops above | %.2f | %.1f | |\n", parts_ms, 100.0 * parts_ms / step_ms);
    std::printf("| forward() decode step (measured) | %.2f | 100 | |\n", step_ms);
    std::printf("| remainder: attention, RoPE, KV store, embedding, barriers | %.2f | %.1f | |\n",
                step_ms - parts_ms, 100.0 * (step_ms - parts_ms) / step_ms);
    for (OpTime* op : {&qkv_batch, &gate_up_batch}) {
        if (odd_steps == 0 || op->bytes == 0) continue;
        op->ms /= odd_steps;
        op->bytes /= odd_steps;
        std::printf("| (alternative) %s | %.2f | %.1f | %.1f |\n", op->name.c_str(), op->ms,
                    100.0 * op->ms / step_ms, op->bytes / (op->ms / 1000.0) / 1e9);
    }
    // The cost of one pool job by itself (wake-up + barrier), back to back as in a decode step.
    if (pool.size() > 1) {
        std::vector<double> us;
        std::atomic<int> sink{0};
        for (int i = 0; i < 5000; ++i) {
            const auto t0 = Clock::now();
            pool.run([&](int thread, int) { sink.fetch_add(thread, std::memory_order_relaxed); });
            us.push_back(ms_since(t0) * 1000.0);
        }
        std::sort(us.begin(), us.end());
        double total = 0;
        for (double u : us) total += u;
        std::printf(
            "| (pool) empty ThreadPool::run, 5000 back to back: mean %.1f us, p50 %.1f, p99 %.1f, "
            "max %.0f us | | | |\n",
            total / double(us.size()), us[us.size() / 2], us[us.size() * 99 / 100], us.back());
    }
    if (parts_ms > step_ms)
        std::printf(
            "(the ops timed one by one took longer than whole steps: each separate pool job pays\n"
            " a wake-up and barrier that whole steps overlap; the profile is meant for large "
            "models)\n");
}

// --- --parallel and --parallel-arrival: generators sharing one smol::Batcher ---

// The figures are medians over the repetitions, with their range.
struct Spread {
    double median = 0, min = 0, max = 0;
};

Spread spread_of(std::vector<double> values) {
    Spread s;
    if (values.empty()) return s;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    s.median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
    s.min = values.front();
    s.max = values.back();
    return s;
}

// Nearest rank: the smallest value with at least p of the values at or below it.
double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const size_t rank = size_t(std::ceil(p * double(values.size())));
    return values[std::min(values.size() - 1, rank > 0 ? rank - 1 : 0)];
}

double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

nlohmann::json spread_json(const Spread& s, const std::vector<double>& runs) {
    return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"runs", runs}};
}

// Holds every generator thread until all of them are ready, so that they all
// start within microseconds of each other (thread creation is not timed).
class StartLine {
public:
    explicit StartLine(size_t threads) : threads_(threads) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        ++arrived_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return go_; });
    }
    Clock::time_point release() {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return arrived_ == threads_; });
        go_ = true;
        changed_.notify_all();
        return Clock::now();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    size_t threads_, arrived_ = 0;
    bool go_ = false;
};

// Greedy and past end-of-generation, so that every generator makes exactly
// max_tokens tokens; the hook stamps each token. GenerateParams::logits_hook
// runs once per generated token, right after the forward pass that produced
// that token's logits (the first one: after the prefill), so consecutive stamps
// are the per-token latency the generator saw, waiting for shared steps included.
smol::GenerateParams stamping_params(long max_tokens, std::function<void()> on_token) {
    smol::GenerateParams params;
    params.temperature = 0;
    params.max_tokens = int(max_tokens);
    params.ignore_eos = true;
    params.logits_hook = [on_token = std::move(on_token)](float*, size_t) { on_token(); };
    return params;
}

constexpr size_t kParallelPromptTokens = 24;

// Each generator gets its own short prompt (random ids, one per generator), so
// no two share a prefix or a sequence of tokens.
std::vector<std::vector<int32_t>> parallel_prompts(size_t count, size_t vocab) {
    std::mt19937_64 rng(4321);
    std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab) - 1);
    std::vector<std::vector<int32_t>> prompts(count, std::vector<int32_t>(kParallelPromptTokens));
    for (auto& prompt : prompts)
        for (auto& id : prompt) id = pick(rng);
    return prompts;
}

// One repetition of N concurrent generations.
struct ParallelRun {
    // Decode throughput while all N decode: from the moment the last generator
    // got its first token (every prefill is over) to the moment the first one
    // got its last token (none has finished), the tokens all generators
    // produced in that window over its length.
    double aggregate_tps = 0;
    bool overlapped = true;       // false: no such window; then all tokens after each first
                                  // one, over first first token .. last last token
    std::vector<double> gaps_ms;  // every generator's gaps between consecutive tokens
    // Batcher counters from the moment every generator had its first token to
    // the end (the steps that ran only decode rows; no batcher: 0).
    double rows_per_step = 0;
    size_t widest = 0;
};

ParallelRun run_parallel(std::vector<std::unique_ptr<smol::Generator>>& generators,
                         const std::vector<std::vector<int32_t>>& prompts, long n_gen,
                         smol::Batcher* batcher) {
    const size_t n = generators.size();
    std::vector<std::vector<Clock::time_point>> stamps(n);
    for (auto& s : stamps) s.reserve(size_t(n_gen));
    std::atomic<size_t> started{0};
    smol::Batcher::Stats at_decode;  // written by the hook of the last generator to start decoding
    std::vector<std::exception_ptr> errors(n);
    std::vector<size_t> produced(n, 0);
    StartLine start(n);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) {
        generators[i]->reset();
        threads.emplace_back([&, i] {
            const smol::GenerateParams params = stamping_params(n_gen, [&, i] {
                stamps[i].push_back(Clock::now());
                if (stamps[i].size() == 1 && started.fetch_add(1) + 1 == n && batcher)
                    at_decode = batcher->stats();
            });
            start.arrive_and_wait();
            try {
                produced[i] = generators[i]->generate_tokens(prompts[i], params).tokens.size();
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    }
    start.release();
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    for (size_t i = 0; i < n; ++i)
        if (produced[i] != size_t(n_gen) || stamps[i].size() != size_t(n_gen))
            throw std::runtime_error("--parallel: a generator made " + std::to_string(produced[i]) +
                                     " of " + std::to_string(n_gen) + " tokens");

    ParallelRun run;
    Clock::time_point all_decoding = stamps[0].front(), first_done = stamps[0].back();
    Clock::time_point earliest = stamps[0].front(), latest = stamps[0].back();
    for (const auto& s : stamps) {
        all_decoding = std::max(all_decoding, s.front());
        first_done = std::min(first_done, s.back());
        earliest = std::min(earliest, s.front());
        latest = std::max(latest, s.back());
        for (size_t k = 1; k < s.size(); ++k) run.gaps_ms.push_back(ms_between(s[k - 1], s[k]));
    }
    size_t in_window = 0;
    for (const auto& s : stamps)
        for (const auto& t : s) in_window += t > all_decoding && t <= first_done;
    if (first_done > all_decoding && in_window > 0) {
        run.aggregate_tps = double(in_window) / (ms_between(all_decoding, first_done) / 1000.0);
    } else {
        run.overlapped = false;
        run.aggregate_tps = double(n * size_t(n_gen - 1)) / (ms_between(earliest, latest) / 1000.0);
    }
    if (batcher) {
        const smol::Batcher::Stats end = batcher->stats();
        const uint64_t steps = end.steps - at_decode.steps;
        if (steps > 0) run.rows_per_step = double(end.rows - at_decode.rows) / double(steps);
        run.widest = end.widest;
    }
    return run;
}

// One repetition of "a prompt arrives while 3 others decode".
struct ArrivalRun {
    double ttft_ms = 0;        // the new prompt: submitted .. its first token
    double median_gap_ms = 0;  // the decoders' gaps that ended before it was submitted (pooled)
    double worst_gap_ms = 0;   // the decoders' largest gap that overlaps its prefill
    size_t tokens_during = 0;  // decoder tokens stamped during its prefill
    bool complete = true;      // every decoder was still decoding when its prefill ended
    // The batcher's steps from its submission to its first token, and their rows.
    uint64_t steps = 0, rows = 0;
};

constexpr size_t kArrivalDecoders = 3;
constexpr size_t kArrivalWarmTokens = 16;  // each decoder's tokens before the prompt arrives

ArrivalRun run_arrival(std::vector<std::unique_ptr<smol::Generator>>& decoders,
                       smol::Generator& newcomer, const std::vector<std::vector<int32_t>>& prompts,
                       const std::vector<int32_t>& long_prompt, long decoder_tokens,
                       smol::Batcher& batcher) {
    const size_t n = decoders.size();
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::vector<Clock::time_point>> stamps(n);  // guarded by mutex until the join
    std::vector<bool> finished(n, false);
    std::vector<std::exception_ptr> errors(n);
    StartLine start(n);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) {
        decoders[i]->reset();
        threads.emplace_back([&, i] {
            const smol::GenerateParams params = stamping_params(decoder_tokens, [&, i] {
                const auto now = Clock::now();
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    stamps[i].push_back(now);
                }
                changed.notify_all();
            });
            start.arrive_and_wait();
            try {
                decoders[i]->generate_tokens(prompts[i], params);
            } catch (...) {
                errors[i] = std::current_exception();
            }
            {
                std::lock_guard<std::mutex> lock(mutex);
                finished[i] = true;
            }
            changed.notify_all();
        });
    }
    // Every decoder has `tokens` stamps, or has stopped.
    auto wait_for_tokens = [&](auto tokens_needed) {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] {
            for (size_t i = 0; i < n; ++i)
                if (!finished[i] && stamps[i].size() < tokens_needed(i)) return false;
            return true;
        });
    };
    newcomer.reset();
    start.release();
    wait_for_tokens([](size_t) { return kArrivalWarmTokens; });

    std::optional<Clock::time_point> first_token;
    smol::Batcher::Stats at_first_token;
    const smol::Batcher::Stats at_submit = batcher.stats();
    const auto submitted = Clock::now();
    const smol::GenerateParams params = stamping_params(1, [&] {
        if (first_token) return;
        first_token = Clock::now();
        at_first_token = batcher.stats();
    });
    std::exception_ptr newcomer_error;
    try {
        newcomer.generate_tokens(long_prompt, params);
    } catch (...) {
        newcomer_error = std::current_exception();
    }
    // A few more tokens each, so that the gap in which the prefill ended is complete.
    if (first_token) {
        std::vector<size_t> need(n);
        {
            std::lock_guard<std::mutex> lock(mutex);
            for (size_t i = 0; i < n; ++i) need[i] = stamps[i].size() + 2;
        }
        wait_for_tokens([&](size_t i) { return need[i]; });
    }
    for (auto& d : decoders) d->cancel();
    for (auto& t : threads) t.join();
    if (newcomer_error) std::rethrow_exception(newcomer_error);
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    if (!first_token)
        throw std::runtime_error("--parallel-arrival: the new prompt produced no token");

    ArrivalRun run;
    run.ttft_ms = ms_between(submitted, *first_token);
    run.steps = at_first_token.steps - at_submit.steps;
    run.rows = at_first_token.rows - at_submit.rows;
    std::vector<double> before;
    for (const auto& s : stamps) {
        if (s.empty() || s.back() < *first_token) run.complete = false;
        for (size_t k = 1; k < s.size(); ++k) {
            const double gap = ms_between(s[k - 1], s[k]);
            if (s[k] <= submitted)
                before.push_back(gap);
            else if (s[k - 1] < *first_token)
                run.worst_gap_ms = std::max(run.worst_gap_ms, gap);
            run.tokens_during += s[k] > submitted && s[k] <= *first_token;
        }
    }
    run.median_gap_ms = percentile(before, 0.5);
    return run;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path;
    std::optional<std::string> check_prompt;
    bool json = false, bandwidth = true, interleave = true;
    long op_steps = 0;
    long n_prompt = 512, n_gen = 128, depth = 0, repeats = 3, n_ctx_arg = 0, chunk = 0,
         ttft_tokens = 16;
    int n_threads = 0;
    smol::CpuLevel cpu = smol::CpuLevel::automatic;
    smol::Device device = smol::Device::cpu;
    std::vector<long> parallel, step_rows;
    bool arrival = false;
    long arrival_tokens = 512;
    std::string json_schema_path;

    smol_cli::Parser cli(
        "smol-bench",
        "End-to-end speed of a GGUF model: prefill (pp) and generation (tg) tokens/s, load time,\n"
        "time to first token, memory and the memory-bandwidth roofline.");
    cli.option("-m, --model", model_path, "MODEL",
               "GGUF file (default: the demo model the build makes)");
    cli.option("-p, --n-prompt", n_prompt, "N",
               "prompt tokens for the prefill test (default 512; 0: skip)")
        .at_least(0);
    cli.option("-n, --n-gen", n_gen, "N", "tokens for the generation test (default 128; 0: skip)")
        .at_least(0);
    cli.option("-d, --depth", depth, "N",
               "context depth before the generation test (prefilled once, not timed)")
        .at_least(0);
    cli.option("-t, --threads", n_threads, "N", "threads (default: physical cores)").at_least(0);
    cli.option("-r, --repetitions", repeats, "N", "repetitions of each test (default 3)")
        .at_least(1);
    cli.option("-c, --ctx", n_ctx_arg, "N",
               "KV cache positions (default: enough for the tests, at least 4096)")
        .at_least(0);
    cli.option("--chunk", chunk, "N", "prefill tokens per pass (default: the model's)").at_least(0);
    cli.option("--ttft-tokens", ttft_tokens, "N",
               "prompt tokens of the time-to-first-token test (default 16)")
        .at_least(1);
    cli.flag("--no-bandwidth", bandwidth, "skip the memory-bandwidth roofline", false);
    cli.flag("--no-interleave", interleave,
             "keep the weights as stored (LoadOptions::interleave_weights = false)", false);
    smol_examples::add_cpu_option(cli, cpu);
    smol_examples::add_device_option(cli, device);
    cli.option("--ops", op_steps, "N",
               "also time each op of N decode-shaped passes (op profile, CPU only)")
        .at_least(0);
    cli.option("--check-prompt", check_prompt, "TEXT",
               "instead of the benchmark: greedy ids for TEXT (prompt, then -n tokens),\n"
               "comparable with smol-generate -p TEXT --temp 0 --json");
    // "N[,N...]": counts from 1 to 256.
    auto counts = [](std::vector<long>& into) {
        return [&into](const std::string& list) {
            into.clear();
            size_t start = 0;
            while (start <= list.size()) {
                const size_t comma = std::min(list.find(',', start), list.size());
                const std::string item = list.substr(start, comma - start);
                char* end = nullptr;
                const long n = std::strtol(item.c_str(), &end, 10);
                if (item.empty() || *end != '\0' || n < 1 || n > 256)
                    throw smol_cli::BadValue(
                        "expects counts from 1 to 256 separated by commas, not '" + list + "'");
                into.push_back(n);
                start = comma + 1;
            }
        };
    };
    cli.option("--parallel", counts(parallel), "N[,N...]",
               "also: N generators sharing one smol::Batcher, each a 24-token prompt then -n\n"
               "tokens at once: aggregate decode t/s, token gap p50/p99, rows per step,\n"
               "against tg1 (one generator, no batcher) and the target 0.8 x min(N x tg1, pp)");
    cli.flag("--parallel-arrival", arrival,
             "also: 3 generators decode and a 4th gets a long prompt: their worst token gap\n"
             "during its prefill against their median gap (target <= 2x), its first token");
    cli.option("--arrival-tokens", arrival_tokens, "N",
               "prompt tokens of the 4th generator (default 512)")
        .at_least(1);
    cli.option("--step-rows", counts(step_rows), "N[,N...]",
               "also: one batched decode step of N one-token sequences, timed on the backend:\n"
               "ms per step and rows/s (the cost of a step's width)");
    cli.option("--json-schema", json_schema_path, "FILE",
               "also: -n-token greedy decodes through smol::Generator with this JSON Schema\n"
               "and without, interleaved -r times: decode t/s of each and their ratio");
    cli.flag("--json", json, "also print the results as one JSON line");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    if (model_path.empty()) {
        model_path = smol_examples::demo_model_path();
        std::fprintf(stderr, "smol-bench: using the demo model %s (random weights)\n",
                     model_path.c_str());
    }
    if ((!parallel.empty() || arrival) && n_gen < 2) {
        std::fprintf(
            stderr,
            "smol-bench: --parallel and --parallel-arrival need -n 2 or more (token gaps)\n");
        return 2;
    }

    try {
        smol::LoadOptions load_options;
        load_options.n_threads = n_threads;
        load_options.cpu = cpu;
        load_options.device = device;
        load_options.interleave_weights = interleave;
        smol_examples::log_device_choice(load_options);
        smol::ForwardOptions forward_options;
        forward_options.chunk_size = size_t(chunk);
        // One forward through the model's backend: tokens at start.. into cache, last logits.
        auto run = [&](const smol::Model& model, smol::BackendCache& cache, const int32_t* tokens,
                       size_t n, size_t start, std::vector<float>& out) {
            smol::Segment segment;
            segment.tokens = tokens;
            segment.n_tokens = n;
            segment.start = start;
            segment.cache = &cache;
            segment.logits = out.data();
            model.backend().forward(segment, forward_options);
        };

        // --- greedy check mode: the ids smol-generate --temp 0 would produce ---
        if (check_prompt) {
            auto model = smol::Model::load(model_path, load_options);
            const smol::Tokenizer& tokenizer = model->tokenizer();
            std::vector<int32_t> prompt;
            if (tokenizer.add_bos() && tokenizer.bos_id()) prompt.push_back(*tokenizer.bos_id());
            tokenizer.encode(*check_prompt, /*parse_special=*/true, prompt);
            if (prompt.empty())
                throw std::invalid_argument("--check-prompt: the text has no tokens");
            const size_t need = prompt.size() + size_t(n_gen);
            const auto cache = model->backend().make_cache(
                n_ctx_arg
                    ? size_t(n_ctx_arg)
                    : std::min(
                          model->config().context_length,
                          std::max(std::min<size_t>(4096, model->config().context_length), need)));
            smol::BackendCache& kv = *cache;
            std::vector<float> logits(model->config().vocab_size);
            run(*model, kv, prompt.data(), prompt.size(), 0, logits);
            std::vector<int32_t> generated;
            while (generated.size() < size_t(n_gen)) {
                const int32_t token = argmax(logits);
                generated.push_back(token);
                if (tokenizer.is_end_of_generation(token) || kv.size() >= kv.n_ctx()) break;
                if (generated.size() >= size_t(n_gen)) break;
                run(*model, kv, &token, 1, kv.size(), logits);
            }
            if (json) {
                nlohmann::json out;
                out["prompt_ids"] = prompt;
                out["generated_ids"] = generated;
                std::printf("%s\n", out.dump().c_str());
            } else {
                std::printf("prompt ids (%zu): %s\n", prompt.size(), join_ids(prompt).c_str());
                std::printf("generated ids (%zu): %s\n", generated.size(),
                            join_ids(generated).c_str());
            }
            return 0;
        }

        const std::string load_before = load_average();

        // --- load + time to first token (fresh process: the first forward pass pages the weights
        // in) ---
        const auto t_load = Clock::now();
        auto model = smol::Model::load(model_path, load_options);
        const double load_ms = ms_since(t_load);
        size_t interleaved_bytes = 0;
        for (const smol::LayerWeights& layer : model->weights().layers)
            for (const smol::WeightMatrix* w :
                 {&layer.attn_q, &layer.attn_k, &layer.attn_v, &layer.attn_output, &layer.ffn_gate,
                  &layer.ffn_up, &layer.ffn_down})
                if (w->interleaved_rows > 0) interleaved_bytes += w->rows * w->row_bytes;
        const std::string interleaved_note =
            interleaved_bytes > 0
                ? "incl. interleaving " + std::to_string(interleaved_bytes >> 20) + " MiB"
                : std::string("weights as stored");
        const smol::Config& config = model->config();
        const size_t vocab = config.vocab_size;
        const int threads = model->thread_pool().size();

        const size_t tg_context = size_t(std::max(depth, 1L)) + size_t(n_gen);
        size_t needed = std::max({size_t(n_prompt), tg_context, size_t(ttft_tokens)});
        size_t n_ctx = n_ctx_arg ? size_t(n_ctx_arg)
                                 : std::max(std::min<size_t>(4096, config.context_length), needed);
        n_ctx = std::min(n_ctx, config.context_length);
        if (needed > n_ctx)
            throw std::invalid_argument("the tests need " + std::to_string(needed) +
                                        " positions, the cache has " + std::to_string(n_ctx) +
                                        " (model context " + std::to_string(config.context_length) +
                                        ")");
        const auto cache = model->backend().make_cache(n_ctx);
        smol::BackendCache& kv = *cache;
        const bool on_cpu = model->device() == smol::Device::cpu;
        std::vector<float> logits(vocab);

        std::mt19937_64 rng(1234);
        std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab) - 1);
        auto random_ids = [&](size_t n) {
            std::vector<int32_t> ids(n);
            for (auto& id : ids) id = pick(rng);
            return ids;
        };

        const std::vector<int32_t> ttft_prompt = random_ids(size_t(ttft_tokens));
        const auto t_first = Clock::now();
        run(*model, kv, ttft_prompt.data(), ttft_prompt.size(), 0, logits);
        const int32_t first_token = argmax(logits);
        const double first_ms = ms_since(t_first);
        const double ttft_ms = load_ms + first_ms;
        // Warm-up: one decode step, so the tests below start from a warm pool.
        run(*model, kv, &first_token, 1, kv.size(), logits);

        // --- pp: prefill from an empty cache ---
        // CPU share: process CPU time / (wall time x threads). Below ~100% the OS
        // gave our threads less than their cores (a shared machine); spinning
        // workers count as busy, so 100% does not mean useful work.
        std::vector<double> pp_rates;
        double pp_cpu = 0, pp_wall = 0, tg_cpu = 0, tg_wall = 0;
        if (n_prompt > 0) {
            const std::vector<int32_t> prompt = random_ids(size_t(n_prompt));
            for (long r = 0; r < repeats; ++r) {
                const double cpu0 = process_cpu_seconds();
                const auto start = Clock::now();
                run(*model, kv, prompt.data(), prompt.size(), 0, logits);
                (void)argmax(logits);
                const double seconds = ms_since(start) / 1000.0;
                pp_rates.push_back(double(n_prompt) / seconds);
                pp_wall += seconds;
                pp_cpu += process_cpu_seconds() - cpu0;
            }
        }

        // --- tg: greedy decode after a 1-token prompt or DEPTH tokens (prefilled once) ---
        std::vector<double> tg_rates;
        double depth_prefill_ms = 0;
        const size_t context = size_t(std::max(depth, 1L));
        if (n_gen > 0) {
            const std::vector<int32_t> prefix = random_ids(context);
            const auto start = Clock::now();
            run(*model, kv, prefix.data(), prefix.size(), 0, logits);
            depth_prefill_ms = ms_since(start);
            const int32_t after_prefix = argmax(logits);
            for (long r = 0; r < repeats; ++r) {
                kv.truncate(context);
                int32_t token = after_prefix;
                const double cpu0 = process_cpu_seconds();
                const auto t0 = Clock::now();
                for (long i = 0; i < n_gen; ++i) {
                    run(*model, kv, &token, 1, kv.size(), logits);
                    token = argmax(logits);
                }
                const double seconds = ms_since(t0) / 1000.0;
                tg_rates.push_back(double(n_gen) / seconds);
                tg_wall += seconds;
                tg_cpu += process_cpu_seconds() - cpu0;
            }
        }

        const double peak_mib = peak_rss_mib();
        const double rss_mib = current_rss_mib();
        const std::string load_after = load_average();

        const Stats pp = stats_of(pp_rates), tg = stats_of(tg_rates);
        const double file_bytes = double(model->file().size());
        // F16 everywhere (the default of both backends' caches).
        const double kv_bytes = double(kv.n_ctx()) * 2.0 * double(config.n_layers) *
                                double(config.n_kv_heads) * double(config.head_dim) * 2.0;
        const double kv_bytes_per_position = kv_bytes / double(kv.n_ctx());
        const double weight_bytes = weight_bytes_per_token(model->file());
        // KV read per step at the middle of the generation test.
        const double kv_read = kv_bytes_per_position * (double(context) + double(n_gen) / 2.0);
        const double bytes_per_token = weight_bytes + kv_read;

        double bandwidth_gbs = 0;
        if (bandwidth && n_gen > 0 && on_cpu)
            bandwidth_gbs = smol::measure_read_bandwidth(model->kernels(), threads);
        const double roofline_tps = bandwidth_gbs > 0 ? bandwidth_gbs * 1e9 / bytes_per_token : 0;

        // --- human output ---
        const std::string model_name = model_path.substr(model_path.find_last_of('/') + 1);
        const double params = parameter_count(model->file());
        std::printf("model: %s (%s, %.2f %s params, %zu layers, hidden %zu, vocab %zu)\n",
                    model_name.c_str(), human_bytes(file_bytes).c_str(),
                    params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M",
                    config.n_layers, config.hidden, vocab);
        std::printf(
            "backend: %s | threads: %d | kernels: %s (best %s) | repetitions: %ld | KV cache: %zu "
            "positions "
            "F16, %s | load average %s -> %s\n",
            model->backend().name().c_str(), threads, smol::cpu_level_name(model->cpu_level()),
            smol::cpu_level_name(smol::best_cpu_level()), repeats, kv.n_ctx(),
            human_bytes(kv_bytes).c_str(), load_before.c_str(), load_after.c_str());
        auto cpu_share = [&](double cpu, double wall) {
            return wall > 0 ? 100.0 * cpu / (wall * threads) : 0.0;
        };
        std::printf(
            "\n| model | size | threads | test | t/s | CPU share |\n|---|---|---|---|---|---|\n");
        char test[64];
        if (!pp_rates.empty()) {
            std::snprintf(test, sizeof test, "pp%ld", n_prompt);
            std::printf("| %s | %s | %d | %s | %.2f ± %.2f | %.0f%% |\n", model_name.c_str(),
                        human_bytes(file_bytes).c_str(), threads, test, pp.mean, pp.stddev,
                        cpu_share(pp_cpu, pp_wall));
        }
        if (!tg_rates.empty()) {
            if (depth > 0)
                std::snprintf(test, sizeof test, "tg%ld @ d%ld", n_gen, depth);
            else
                std::snprintf(test, sizeof test, "tg%ld", n_gen);
            std::printf("| %s | %s | %d | %s | %.2f ± %.2f | %.0f%% |\n", model_name.c_str(),
                        human_bytes(file_bytes).c_str(), threads, test, tg.mean, tg.stddev,
                        cpu_share(tg_cpu, tg_wall));
        }
        auto print_runs = [](const char* what, const std::vector<double>& rates) {
            if (rates.size() < 2) return;
            std::printf("%s runs (t/s):", what);
            for (double r : rates) std::printf(" %.2f", r);
            std::printf("\n");
        };
        print_runs("pp", pp_rates);
        print_runs("tg", tg_rates);
        std::printf(
            "\nload: %.1f ms (%s) | time to first token (%ld-token prompt, incl. load): %.1f ms "
            "(prefill + argmax %.1f ms)\n",
            load_ms, interleaved_note.c_str(), ttft_tokens, ttft_ms, first_ms);
        if (depth > 0)
            std::printf("depth prefill (%ld tokens, untimed in tg): %.1f ms = %.2f tok/s\n", depth,
                        depth_prefill_ms, double(depth) / (depth_prefill_ms / 1000.0));
        std::printf(
            "memory: peak RSS %.1f MiB (now %.1f MiB) | file %.1f MiB + KV %.1f MiB (allocated; "
            "touched "
            "only as filled) = %.1f MiB\n",
            peak_mib, rss_mib, file_bytes / 1048576.0, kv_bytes / 1048576.0,
            (file_bytes + kv_bytes) / 1048576.0);
        if (bandwidth_gbs > 0) {
            std::printf(
                "roofline: read bandwidth %.1f GB/s (%d threads, 1 GiB, best of 3) / %.1f MB per "
                "token "
                "(weights %.1f + KV %.1f) = %.2f tok/s; tg = %.0f%% of it\n",
                bandwidth_gbs, threads, bytes_per_token / 1e6, weight_bytes / 1e6, kv_read / 1e6,
                roofline_tps, 100.0 * tg.mean / roofline_tps);
        }
        if (op_steps > 0 && on_cpu)
            profile_ops(*model, static_cast<smol::KVCache&>(kv), context, int(op_steps),
                        forward_options);
        else if (op_steps > 0)
            std::printf("--ops: the op profile times the CPU kernels; skipped on %s\n",
                        model->backend().name().c_str());
        std::fflush(stdout);

        // --- --parallel: N generators on the model, sharing one Batcher ---
        // Through smol::Generator (sampling, text, the batcher), unlike pp/tg
        // above, which call the backend directly; tg1 is measured the same way
        // so that the comparison is like for like.
        nlohmann::json parallel_json, arrival_json, schema_json;
        const double pp_rate = pp_rates.empty() ? 0 : pp.mean;
        char pp_name[32];
        std::snprintf(pp_name, sizeof pp_name, "pp%ld", n_prompt);
        auto make_generator = [&](std::shared_ptr<smol::Batcher> batcher, size_t positions) {
            smol::GeneratorOptions options;
            options.n_ctx = std::min(positions, config.context_length);
            options.batcher = std::move(batcher);
            return std::make_unique<smol::Generator>(model, options);
        };
        if (!parallel.empty()) {
            const size_t widest_n = size_t(*std::max_element(parallel.begin(), parallel.end()));
            const std::vector<std::vector<int32_t>> prompts = parallel_prompts(widest_n, vocab);
            const size_t positions = kParallelPromptTokens + size_t(n_gen);

            // tg1: one generator alone, without a batcher.
            std::vector<double> tg1_runs;
            {
                std::vector<std::unique_ptr<smol::Generator>> alone;
                alone.push_back(make_generator(nullptr, positions));
                for (long r = 0; r < repeats; ++r)
                    tg1_runs.push_back(run_parallel(alone, prompts, n_gen, nullptr).aggregate_tps);
            }
            const Spread tg1 = spread_of(tg1_runs);

            std::printf(
                "\nparallel decode: N generators sharing one smol::Batcher, each a different "
                "%zu-token prompt "
                "(random ids), then %ld greedy tokens (ignore_eos), started together; median of "
                "%ld runs "
                "[min-max]\n",
                kParallelPromptTokens, n_gen, repeats);
            std::printf(
                "  aggregate t/s: tokens all generators made while all N were decoding (from the "
                "last one's "
                "first token to the first one's last token) / that time; prefill excluded\n");
            std::printf(
                "  token gap: time between consecutive tokens of one generator (every generator's, "
                "pooled); "
                "rows/step: the batcher's rows per forward pass after every prefill\n");
            std::printf(
                "  target: 0.8 x min(N x tg1, %s), tg1 = one generator alone, no batcher, measured "
                "the same "
                "way%s\n",
                pp_name, pp_rate > 0 ? "" : " (pp not measured in this run: 0.8 x N x tg1)");
            std::printf(
                "\n| N | aggregate t/s | per generator t/s | token gap p50 ms | token gap p99 ms | "
                "rows/step | "
                "target t/s | met |\n|---|---|---|---|---|---|---|---|\n");
            auto range = [](const Spread& s, const char* format) {
                char a[32], b[32], c[32], out[112];
                std::snprintf(a, sizeof a, format, s.median);
                std::snprintf(b, sizeof b, format, s.min);
                std::snprintf(c, sizeof c, format, s.max);
                std::snprintf(out, sizeof out, "%s [%s-%s]", a, b, c);
                return std::string(out);
            };
            std::printf("| 1 (tg1, no batcher) | %s | %s | | | | | |\n", range(tg1, "%.2f").c_str(),
                        range(tg1, "%.2f").c_str());

            nlohmann::json results = nlohmann::json::array();
            std::string not_overlapped;  // the Ns for which some run had no all-decoding window
            for (const long n : parallel) {
                smol::BatcherOptions batcher_options;
                batcher_options.max_batch = std::max(batcher_options.max_batch, size_t(n));
                auto batcher = std::make_shared<smol::Batcher>(model, batcher_options);
                std::vector<std::unique_ptr<smol::Generator>> generators;
                for (long i = 0; i < n; ++i)
                    generators.push_back(make_generator(batcher, positions));
                std::vector<double> rates, p50s, p99s, rows;
                size_t widest = 0;
                bool overlapped = true;
                for (long r = 0; r < repeats; ++r) {
                    const ParallelRun run = run_parallel(generators, prompts, n_gen, batcher.get());
                    rates.push_back(run.aggregate_tps);
                    p50s.push_back(percentile(run.gaps_ms, 0.50));
                    p99s.push_back(percentile(run.gaps_ms, 0.99));
                    rows.push_back(run.rows_per_step);
                    widest = std::max(widest, run.widest);
                    overlapped = overlapped && run.overlapped;
                }
                const Spread rate = spread_of(rates), p50 = spread_of(p50s), p99 = spread_of(p99s),
                             row = spread_of(rows);
                const double ideal = double(n) * tg1.median;
                const double target = 0.8 * (pp_rate > 0 ? std::min(ideal, pp_rate) : ideal);
                const bool met = rate.median >= target;
                const Spread per_generator{rate.median / double(n), rate.min / double(n),
                                           rate.max / double(n)};
                std::printf("| %ld | %s | %s | %s | %s | %s | %.2f | %s |\n", n,
                            range(rate, "%.2f").c_str(), range(per_generator, "%.2f").c_str(),
                            range(p50, "%.2f").c_str(), range(p99, "%.2f").c_str(),
                            range(row, "%.1f").c_str(), target, met ? "yes" : "no");
                if (!overlapped)
                    not_overlapped += (not_overlapped.empty() ? "" : ", ") + std::to_string(n);
                results.push_back({{"n", n},
                                   {"max_batch", batcher_options.max_batch},
                                   {"aggregate_tokens_per_s", spread_json(rate, rates)},
                                   {"token_gap_p50_ms", spread_json(p50, p50s)},
                                   {"token_gap_p99_ms", spread_json(p99, p99s)},
                                   {"rows_per_step", spread_json(row, rows)},
                                   {"widest_step", widest},
                                   {"all_decoding_window", overlapped},
                                   {"target_tokens_per_s", target},
                                   {"target_met", met}});
            }
            if (pp_rate > 0)
                std::printf("(%s = %.2f t/s: the prefill rate bounds what any batch can reach)\n",
                            pp_name, pp_rate);
            if (!not_overlapped.empty())
                std::printf(
                    "(N = %s: in some run the generators never all decoded at once (a generator "
                    "finished before "
                    "the last one started); there aggregate t/s is all tokens after each one's "
                    "first / first "
                    "first token .. last last token)\n",
                    not_overlapped.c_str());
            const smol::BatcherOptions defaults;
            parallel_json = {
                {"prompt_tokens", kParallelPromptTokens},
                {"n_gen", n_gen},
                {"tg1_tokens_per_s", spread_json(tg1, tg1_runs)},
                {"pp_tokens_per_s", pp_rate > 0 ? nlohmann::json(pp_rate) : nlohmann::json()},
                {"prefill_shared", defaults.prefill_shared},
                {"results", results}};
            std::fflush(stdout);
        }

        // --- --parallel-arrival: a long prompt arrives while 3 generators decode ---
        if (arrival) {
            const size_t long_tokens = size_t(arrival_tokens);
            if (long_tokens + 1 > config.context_length)
                throw std::invalid_argument("--arrival-tokens: the model's context is " +
                                            std::to_string(config.context_length) + " positions");
            const std::vector<std::vector<int32_t>> prompts =
                parallel_prompts(kArrivalDecoders + 1, vocab);
            const std::vector<int32_t> long_prompt = random_ids(long_tokens);
            auto batcher = std::make_shared<smol::Batcher>(model);
            const smol::BatcherOptions& bo = batcher->options();
            // Enough tokens for the decoders to outlast the prefill even if every one
            // of its steps produced two decoder tokens; they are cancelled once it is over.
            const size_t prefill_steps = (long_tokens + bo.prefill_shared - 1) / bo.prefill_shared;
            const long decoder_tokens = long(kArrivalWarmTokens + 4 * prefill_steps + 64);
            std::vector<std::unique_ptr<smol::Generator>> decoders;
            for (size_t i = 0; i < kArrivalDecoders; ++i)
                decoders.push_back(
                    make_generator(batcher, kParallelPromptTokens + size_t(decoder_tokens)));
            const auto newcomer = make_generator(batcher, long_tokens + 1);
            std::vector<double> ttfts, medians, worsts, ratios;
            long met_runs = 0;
            bool complete = true;
            size_t tokens_during = 0;
            std::vector<double> steps, rows_per_step;
            for (long r = 0; r < repeats; ++r) {
                const ArrivalRun run = run_arrival(decoders, *newcomer, prompts, long_prompt,
                                                   decoder_tokens, *batcher);
                ttfts.push_back(run.ttft_ms);
                medians.push_back(run.median_gap_ms);
                worsts.push_back(run.worst_gap_ms);
                const double ratio =
                    run.median_gap_ms > 0 ? run.worst_gap_ms / run.median_gap_ms : 0;
                ratios.push_back(ratio);
                met_runs += ratio <= 2.0;
                complete = complete && run.complete;
                tokens_during = std::max(tokens_during, run.tokens_during);
                steps.push_back(double(run.steps));
                rows_per_step.push_back(run.steps ? double(run.rows) / double(run.steps) : 0.0);
            }
            const Spread ttft = spread_of(ttfts), median = spread_of(medians),
                         worst = spread_of(worsts), ratio = spread_of(ratios),
                         step = spread_of(steps), row = spread_of(rows_per_step);
            std::printf(
                "\nprompt arrival: %zu generators decode (%zu-token prompts, greedy) sharing one "
                "smol::Batcher "
                "(max_batch %zu, prefill_shared %zu); once each has %zu tokens a 4th gets a "
                "%zu-token prompt; "
                "median of %ld runs [min-max]\n",
                kArrivalDecoders, kParallelPromptTokens, bo.max_batch, bo.prefill_shared,
                kArrivalWarmTokens, long_tokens, repeats);
            std::printf("\n| figure | median | min | max |\n|---|---|---|---|\n");
            std::printf(
                "| decoders' median token gap before the prompt (ms) | %.2f | %.2f | %.2f |\n",
                median.median, median.min, median.max);
            std::printf(
                "| decoders' worst token gap overlapping its prefill (ms) | %.2f | %.2f | %.2f |\n",
                worst.median, worst.min, worst.max);
            std::printf("| worst / median (target <= 2) | %.2f | %.2f | %.2f |\n", ratio.median,
                        ratio.min, ratio.max);
            std::printf("| the 4th's time to first token (ms) | %.1f | %.1f | %.1f |\n",
                        ttft.median, ttft.min, ttft.max);
            std::printf("| batcher steps during its prefill | %.0f | %.0f | %.0f |\n", step.median,
                        step.min, step.max);
            std::printf("| rows per step during its prefill | %.1f | %.1f | %.1f |\n", row.median,
                        row.min, row.max);
            std::printf(
                "target worst <= 2 x median: met in %ld of %ld runs; decoders made up to %zu "
                "tokens during "
                "the prefill",
                met_runs, repeats, tokens_during);
            if (pp_rate > 0)
                std::printf("; alone, %zu tokens at the %s rate take about %.1f ms", long_tokens,
                            pp_name, 1000.0 * double(long_tokens) / pp_rate);
            std::printf("\n");
            if (!complete)
                std::printf(
                    "(a decoder ran out of tokens before the prefill ended: the worst gap covers "
                    "part of it)\n");
            arrival_json = {{"decoders", kArrivalDecoders},
                            {"prompt_tokens", long_tokens},
                            {"warm_tokens", kArrivalWarmTokens},
                            {"median_gap_ms", spread_json(median, medians)},
                            {"worst_gap_ms", spread_json(worst, worsts)},
                            {"worst_over_median", spread_json(ratio, ratios)},
                            {"ttft_ms", spread_json(ttft, ttfts)},
                            {"prefill_steps", spread_json(step, steps)},
                            {"prefill_rows_per_step", spread_json(row, rows_per_step)},
                            {"target_met_runs", met_runs},
                            {"complete", complete}};
            std::fflush(stdout);
        }

        // --- --json-schema: the cost of structured output, end to end ---
        // One generator, the same prompt, greedy; the free run ignores eos and
        // makes -n tokens, the constrained one stops when the document is
        // complete (or at -n). Decode t/s counts sampling, masks and forward
        // passes (GenerateResult::decode_ms); runs alternate so drift cancels.
        if (!json_schema_path.empty() && n_gen > 0) {
            std::ifstream in(json_schema_path, std::ios::binary);
            if (!in) throw std::invalid_argument("--json-schema: cannot read " + json_schema_path);
            const std::string schema((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
            smol::GeneratorOptions options;
            options.n_ctx = std::min(size_t(64 + n_gen), config.context_length);
            smol::Generator gen(model, options);
            const std::string prompt = "Describe a person as JSON:";
            std::vector<double> free_rates, schema_rates, schema_tokens;
            int schema_complete = 0;
            for (long r = 0; r < repeats; ++r) {
                for (int constrained = 0; constrained < 2; ++constrained) {
                    smol::GenerateParams p;
                    p.temperature = 0;
                    p.max_tokens = int(n_gen);
                    if (constrained) {
                        p.json_schema = schema;
                    } else {
                        p.ignore_eos = true;
                    }
                    const smol::GenerateResult result = gen.generate(prompt, p);
                    if (constrained) {
                        schema_rates.push_back(result.decode_tokens_per_s());
                        schema_tokens.push_back(double(result.tokens.size()));
                        schema_complete += result.stop_reason == smol::StopReason::eos;
                    } else {
                        free_rates.push_back(result.decode_tokens_per_s());
                    }
                }
            }
            const Stats free_stats = stats_of(free_rates), schema_stats = stats_of(schema_rates);
            const double ratio = free_stats.mean > 0 ? schema_stats.mean / free_stats.mean : 0;
            std::printf(
                "\njson schema decode (%s, greedy, %ld runs each, interleaved):\n"
                "  free   %8.2f ± %.2f t/s (%ld tokens, ignore_eos)\n"
                "  schema %8.2f ± %.2f t/s (%.0f tokens on average, %d/%ld complete)\n"
                "  ratio  %8.3f (target >= 0.95)\n",
                json_schema_path.c_str(), repeats, free_stats.mean, free_stats.stddev, n_gen,
                schema_stats.mean, schema_stats.stddev, stats_of(schema_tokens).mean,
                schema_complete, repeats, ratio);
            schema_json = {{"free_tokens_per_s", free_stats.mean},
                           {"schema_tokens_per_s", schema_stats.mean},
                           {"ratio", ratio},
                           {"free_runs", free_rates},
                           {"schema_runs", schema_rates},
                           {"schema_tokens", schema_tokens}};
            std::fflush(stdout);
        }

        // --- --step-rows: one batched decode step of N rows, on the backend ---
        nlohmann::json step_rows_json;
        if (!step_rows.empty()) {
            constexpr size_t kStepPrompt = 64, kStepsPerRun = 8;
            std::printf(
                "\nbatched decode steps on the backend: N sequences, each after a %zu-token "
                "prompt, one token each; median of %ld x %zu steps [min-max]; the "
                "backend's row group (batch_rows): %zu\n\n",
                kStepPrompt, repeats, kStepsPerRun, model->backend().batch_rows());
            std::printf("| rows | step ms | rows/s |\n|---|---|---|\n");
            step_rows_json = nlohmann::json::array();
            for (const long n_rows : step_rows) {
                const size_t n = size_t(n_rows);
                const size_t positions = kStepPrompt + size_t(repeats) * kStepsPerRun + 1;
                std::vector<std::unique_ptr<smol::BackendCache>> caches;
                std::vector<std::vector<float>> step_logits(n, std::vector<float>(vocab));
                for (size_t i = 0; i < n; ++i) {
                    caches.push_back(model->backend().make_cache(positions));
                    const std::vector<int32_t> prompt = random_ids(kStepPrompt);
                    run(*model, *caches[i], prompt.data(), prompt.size(), 0, step_logits[i]);
                }
                const std::vector<int32_t> next = random_ids(n);
                std::vector<smol::Segment> segments(n);
                std::vector<double> step_ms;
                for (size_t step = 0; step < size_t(repeats) * kStepsPerRun; ++step) {
                    for (size_t i = 0; i < n; ++i) {
                        segments[i].tokens = &next[i];
                        segments[i].n_tokens = 1;
                        segments[i].start = caches[i]->size();
                        segments[i].cache = caches[i].get();
                        segments[i].logits = step_logits[i].data();
                    }
                    const auto t0 = Clock::now();
                    model->backend().forward(segments.data(), n, forward_options);
                    step_ms.push_back(ms_between(t0, Clock::now()));
                }
                const Spread ms = spread_of(step_ms);
                std::printf("| %zu | %.2f [%.2f-%.2f] | %.1f |\n", n, ms.median, ms.min, ms.max,
                            1000.0 * double(n) / ms.median);
                step_rows_json.push_back({{"rows", n},
                                          {"step_ms", spread_json(ms, step_ms)},
                                          {"rows_per_s", 1000.0 * double(n) / ms.median}});
            }
            std::fflush(stdout);
        }

        if (json) {
            nlohmann::json out;
            out["pp_tokens_per_s"] = pp.mean;
            out["pp_stddev"] = pp.stddev;
            out["tg_tokens_per_s"] = tg.mean;
            out["tg_stddev"] = tg.stddev;
            out["load_ms"] = load_ms;
            out["peak_rss_mb"] = peak_mib;
            out["ttft_ms"] = ttft_ms;
            out["threads"] = threads;
            out["kernels"] = smol::cpu_level_name(model->cpu_level());
            out["device"] = smol::device_name(model->device());
            out["backend"] = model->backend().name();
            out["n_prompt"] = n_prompt;
            out["n_gen"] = n_gen;
            out["depth"] = depth;
            out["repetitions"] = repeats;
            out["file_mb"] = file_bytes / 1048576.0;
            out["kv_cache_mb"] = kv_bytes / 1048576.0;
            out["bandwidth_gb_per_s"] = bandwidth_gbs;
            out["bytes_per_token"] = bytes_per_token;
            out["roofline_tokens_per_s"] = roofline_tps;
            out["pp_cpu_share"] = cpu_share(pp_cpu, pp_wall) / 100.0;
            out["tg_cpu_share"] = cpu_share(tg_cpu, tg_wall) / 100.0;
            out["pp_runs"] = pp_rates;
            out["tg_runs"] = tg_rates;
            if (!parallel_json.is_null()) out["parallel"] = parallel_json;
            if (!arrival_json.is_null()) out["parallel_arrival"] = arrival_json;
            if (!schema_json.is_null()) out["json_schema"] = schema_json;
            if (!step_rows_json.is_null()) out["step_rows"] = step_rows_json;
            std::printf("%s\n", out.dump().c_str());
        }
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "smol-bench: error (%s): %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-bench: %s\n", e.what());
        return 1;
    }
}
