// smol-bench: end-to-end speed of a GGUF model, in the spirit of llama-bench.
// This file: the command line and the order of the tests; each test lives in
// its own file (speed.cpp: load, ttft, pp, tg, memory, roofline; ops.cpp;
// parallel.cpp; json_schema.cpp; step_rows.cpp; check_prompt.cpp; context.cpp;
// lookup.cpp).
//
//   smol-bench [-m MODEL] [-p 512] [-n 128] [-d DEPTH] [-t THREADS] [-r 3] [-c CTX]
//              [--chunk N] [--ttft-tokens 16] [--no-bandwidth] [--ops STEPS] [--cpu LEVEL]
//              [--tune auto|on|off] [--kernel-params P,I,S,C] [--tune-times]
//              [--device cpu|cuda|auto] [--kv-type f16|f32|q8_0] [--parallel N[,N...]]
//              [--parallel-arrival [--arrival-tokens 512]] [--json-schema FILE] [--lookup K]
//              [--json]
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
// (target: >= 0.95). The masks start cold in the first run.
//
// --npcs N: a village sharing one prefix (npcs.cpp's top comment): one
// generator prefills --npc-prefix tokens, N - 1 fork() it, each then prefills
// --npc-own tokens; the peak RSS against file + prefix + N x own + 150 MiB and
// each NPC's own and shared cache bytes (--npc-no-share: N separate prefills).
//
// --lookup K: lookup decoding (GenerateParams::lookup) with K drafts per step:
// one verify step of K + 1 rows against a one-token step on the backend
// (target for K = 4: <= 1.3x), then -n-token greedy decodes through
// smol::Generator, plain, with n-gram drafts, with every draft right and with
// every draft wrong (forced through LookupParams::draft_hook), alternated -r
// times: decode t/s, the ratio to plain (targets: all wrong >= 0.98, all
// right >= 2.5), tokens per decode step, drafts accepted (lookup.cpp).
//
// --ops N adds an op-by-op profile of N decode steps (CPU only): the timing
// zones inside the forward pass (ForwardZone, model/smollm3.hpp), per step: ms,
// share of the step, and GB/s of weights for the zones that multiply.
//
// The kernels' speed-only settings (kernels::KernelParams) are printed after
// the backend line, with how they were chosen (tuned at load, and in how long:
// part of the load time; or why the defaults were kept); --tune-times adds the
// tuner's speed for each candidate (the mean of its faster half of samples)
// and every sample's. --tune and
// --kernel-params set LoadOptions::tune and LoadOptions::kernel_params.
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
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "bench.hpp"
#include "common/cli.hpp"
#include "common/smol_options.hpp"

using namespace smol_bench;

namespace {

// The command line into `args`; an exit code when the program should stop
// there (--help, a bad value).
std::optional<int> parse_command_line(int argc, char** argv, Options& args) {
    smol_cli::Parser cli(
        "smol-bench",
        "End-to-end speed of a GGUF model: prefill (pp) and generation (tg) tokens/s, load time,\n"
        "time to first token, memory and the memory-bandwidth roofline.");
    cli.option("-m, --model", args.model_path, "MODEL",
               "GGUF file (default: the demo model the build makes)");
    cli.option("-p, --n-prompt", args.n_prompt, "N",
               "prompt tokens for the prefill test (default 512; 0: skip)")
        .at_least(0);
    cli.option("-n, --n-gen", args.n_gen, "N",
               "tokens for the generation test (default 128; 0: skip)")
        .at_least(0);
    cli.option("-d, --depth", args.depth, "N",
               "context depth before the generation test (prefilled once, not timed)")
        .at_least(0);
    cli.option("-t, --threads", args.n_threads, "N", "threads (default: physical cores)")
        .at_least(0);
    cli.option("-r, --repetitions", args.repeats, "N", "repetitions of each test (default 3)")
        .at_least(1);
    cli.option("-c, --ctx", args.n_ctx, "N",
               "KV cache positions (default: enough for the tests, at least 4096)")
        .at_least(0);
    cli.option("--chunk", args.chunk, "N", "prefill tokens per pass (default: the model's)")
        .at_least(0);
    cli.option("--ttft-tokens", args.ttft_tokens, "N",
               "prompt tokens of the time-to-first-token test (default 16)")
        .at_least(1);
    cli.flag("--no-bandwidth", args.bandwidth, "skip the memory-bandwidth roofline", false);
    cli.flag("--no-interleave", args.interleave,
             "keep the weights as stored (LoadOptions::interleave_weights = false)", false);
    smol_examples::add_cpu_option(cli, args.cpu);
    smol_examples::add_device_option(cli, args.device);
    smol_examples::add_kv_type_option(cli, args.kv_type);
    cli.option("--ops", args.op_steps, "N",
               "also: N decode steps timed op by op, by the forward pass's timing zones (CPU only)")
        .at_least(0);
    cli.option(
        "--tune",
        [&args](const std::string& mode) {
            if (mode == "auto")
                args.tune = smol::TuneMode::automatic;
            else if (mode == "on")
                args.tune = smol::TuneMode::on;
            else if (mode == "off")
                args.tune = smol::TuneMode::off;
            else
                throw smol_cli::BadValue("expected auto, on or off, not '" + mode + "'");
        },
        "MODE",
        "the kernels' self-tuning at load (LoadOptions::tune): auto (default: models of\n"
        "256 MiB and more), on, off (the defaults; SMOL_TUNE=off does the same)");
    cli.option(
        "--kernel-params",
        [&args](const std::string& list) {
            // Four values, or five with the codebook gathers.
            long v[5] = {0, 0, 0, 0, smol::kernels::KernelParams{}.codebook_gathers};
            size_t start = 0, n = 0;
            while (n < 5) {
                const size_t comma = std::min(list.find(',', start), list.size());
                const std::string item = list.substr(start, comma - start);
                char* end = nullptr;
                v[n++] = std::strtol(item.c_str(), &end, 10);
                if (item.empty() || *end != '\0')
                    throw smol_cli::BadValue(
                        "expects PACE,IPREFETCH,SPREFETCH,CHUNKS[,GATHERS], not '" + list + "'");
                if (comma == list.size()) break;
                start = comma + 1;
            }
            if (n < 4 || start > list.size() || list.find(',', start) != std::string::npos)
                throw smol_cli::BadValue(
                    "expects PACE,IPREFETCH,SPREFETCH,CHUNKS[,GATHERS], not '" + list + "'");
            smol::kernels::KernelParams p;
            p.pace_steps = int(v[0]);
            p.interleaved_prefetch = int(v[1]);
            p.stored_prefetch = int(v[2]);
            p.decode_chunks = int(v[3]);
            p.codebook_gathers = int(v[4]);
            if (!smol::kernels::valid_kernel_params(p))
                throw smol_cli::BadValue(
                    "'" + list +
                    "' names a value that is not a candidate (pace 0/30/60, "
                    "prefetch 4096/8192/12288, 2048/4096/8192, chunks 4/8/16, gathers 0/1)");
            args.kernel_params = p;
        },
        "P,I,S,C[,G]",
        "pins the kernels' speed-only settings (LoadOptions::kernel_params): one-token\n"
        "pacing steps, interleaved prefetch bytes, stored prefetch bytes, decode chunks\n"
        "per thread, codebook gathers (0/1); e.g. 60,8192,4096,8,0 (the defaults)");
    cli.flag("--tune-times", args.tune_times, "print the tuner's time per candidate");
    cli.option("--check-prompt", args.check_prompt, "TEXT",
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
    cli.option("--parallel", counts(args.parallel), "N[,N...]",
               "also: N generators sharing one smol::Batcher, each a 24-token prompt then -n\n"
               "tokens at once: aggregate decode t/s, token gap p50/p99, rows per step,\n"
               "against tg1 (one generator, no batcher) and the target 0.8 x min(N x tg1, pp)");
    cli.flag("--parallel-arrival", args.arrival,
             "also: 3 generators decode and a 4th gets a long prompt: their worst token gap\n"
             "during its prefill against their median gap (target <= 2x), its first token");
    cli.option("--arrival-tokens", args.arrival_tokens, "N",
               "prompt tokens of the 4th generator (default 512)")
        .at_least(1);
    cli.option("--step-rows", counts(args.step_rows), "N[,N...]",
               "also: one batched decode step of N one-token sequences, timed on the backend:\n"
               "ms per step and rows/s (the cost of a step's width)");
    cli.option("--json-schema", args.json_schema_path, "FILE",
               "also: -n-token greedy decodes through smol::Generator with this JSON Schema\n"
               "and without, interleaved -r times: decode t/s of each and their ratio");
    cli.option("--shift", args.shift_positions, "N",
               "also: erase the oldest N/2 of N cached positions (ContextPolicy::shift's\n"
               "operation) against a prefill of N/2 tokens, alternated -r times")
        .at_least(0);
    cli.option("--chat-turns", args.chat_turns, "T",
               "also: a T-turn chat with ContextPolicy::shift at -c (default context),\n"
               "replies of -n tokens: mean prefill per turn before and after the first shift")
        .at_least(0);
    cli.option("--npcs", args.npcs, "N",
               "also: N NPCs sharing one prefix: one generator prefills --npc-prefix tokens,\n"
               "N - 1 fork() it, each prefills --npc-own tokens: peak RSS against\n"
               "file + prefix + N x own + 150 MiB, each one's own and shared cache bytes")
        .at_least(0);
    cli.option("--npc-prefix", args.npc_prefix, "N", "the NPCs' shared prefix (default 1500)")
        .at_least(1);
    cli.option("--npc-own", args.npc_own, "N", "each NPC's own tokens (default 2500)").at_least(1);
    cli.flag("--npc-no-share", args.npc_share,
             "every NPC prefills the prefix itself (no fork): the unshared figure", false);
    cli.option("--lookup", args.lookup, "K",
               "also: lookup decoding with K drafts per step: one verify step (K + 1 rows)\n"
               "against a one-token step, and -n-token greedy decodes plain, with n-gram\n"
               "drafts, all drafts right and all wrong: t/s, tokens per step, acceptance")
        .at_least(0);
    cli.flag("--json", args.json, "also print the results as one JSON line");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    if (args.model_path.empty()) {
        args.model_path = smol_examples::demo_model_path();
        std::fprintf(stderr, "smol-bench: using the demo model %s (random weights)\n",
                     args.model_path.c_str());
    }
    if ((!args.parallel.empty() || args.arrival) && args.n_gen < 2) {
        std::fprintf(
            stderr,
            "smol-bench: --parallel and --parallel-arrival need -n 2 or more (token gaps)\n");
        return 2;
    }
    return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
    Options args;
    if (const auto exit_code = parse_command_line(argc, argv, args)) return *exit_code;
    try {
        smol::LoadOptions load_options;
        load_options.n_threads = args.n_threads;
        load_options.cpu = args.cpu;
        load_options.device = args.device;
        load_options.interleave_weights = args.interleave;
        load_options.tune = args.tune;
        load_options.kernel_params = args.kernel_params;
        smol_examples::log_device_choice(load_options);
        smol::ForwardOptions forward_options;
        forward_options.chunk_size = size_t(args.chunk);

        if (args.check_prompt) return smol_bench::check_prompt(args, load_options, forward_options);

        SpeedResults speed = measure_speed(args, load_options, forward_options);
        const std::shared_ptr<const smol::Model>& model = speed.model;
        if (args.op_steps > 0 && model->device() == smol::Device::cpu)
            profile_ops(*model, static_cast<smol::KVCache&>(*speed.cache), speed.context,
                        int(args.op_steps), forward_options);
        else if (args.op_steps > 0)
            std::printf("--ops: the op profile times the CPU kernels; skipped on %s\n",
                        model->backend().name().c_str());
        std::fflush(stdout);

        const double pp_rate = speed.pp_rates.empty() ? 0 : speed.pp.mean;
        nlohmann::json parallel_json, arrival_json, schema_json, step_rows_json, shift_json,
            chat_json;
        if (!args.parallel.empty()) parallel_json = parallel_decode(args, model, pp_rate);
        if (args.arrival) arrival_json = prompt_arrival(args, model, pp_rate, *speed.ids);
        if (!args.json_schema_path.empty() && args.n_gen > 0)
            schema_json = json_schema_cost(args, model);
        if (!args.step_rows.empty())
            step_rows_json = smol_bench::step_rows(args, model, forward_options, *speed.ids);
        if (args.shift_positions > 0)
            shift_json = smol_bench::shift_cost(args, model, forward_options, *speed.ids);
        if (args.chat_turns > 0) chat_json = smol_bench::chat_turns(args, model);
        nlohmann::json npcs_json;
        if (args.npcs > 0) npcs_json = smol_bench::npc_village(args, model, *speed.ids);
        nlohmann::json lookup_json;
        if (args.lookup > 0)
            lookup_json = smol_bench::lookup_cost(args, model, forward_options, *speed.ids);

        if (args.json) {
            nlohmann::json out;
            out["pp_tokens_per_s"] = speed.pp.mean;
            out["pp_stddev"] = speed.pp.stddev;
            out["tg_tokens_per_s"] = speed.tg.mean;
            out["tg_stddev"] = speed.tg.stddev;
            out["load_ms"] = speed.load_ms;
            out["peak_rss_mb"] = speed.peak_mib;
            out["ttft_ms"] = speed.ttft_ms;
            out["threads"] = model->thread_pool().size();
            out["kernels"] = smol::cpu_level_name(model->cpu_level());
            const smol::kernels::TuneReport& tuning = model->tuning();
            const smol::kernels::KernelParams& params = model->kernels().params;
            out["kernel_params"] = {{"pace_steps", params.pace_steps},
                                    {"interleaved_prefetch", params.interleaved_prefetch},
                                    {"stored_prefetch", params.stored_prefetch},
                                    {"decode_chunks", params.decode_chunks},
                                    {"codebook_gathers", params.codebook_gathers}};
            out["tuned"] = tuning.tuned;
            out["tune_ms"] = tuning.seconds * 1000.0;
            if (!tuning.tuned) out["tune_skipped"] = tuning.skipped;
            out["device"] = smol::device_name(model->device());
            out["backend"] = model->backend().name();
            out["n_prompt"] = args.n_prompt;
            out["n_gen"] = args.n_gen;
            out["depth"] = args.depth;
            out["repetitions"] = args.repeats;
            out["file_mb"] = speed.file_bytes / 1048576.0;
            out["kv_cache_mb"] = speed.kv_bytes / 1048576.0;
            out["kv_type"] = smol::kv_type_name(args.kv_type);
            out["bandwidth_gb_per_s"] = speed.bandwidth_gbs;
            out["bytes_per_token"] = speed.bytes_per_token;
            out["roofline_tokens_per_s"] = speed.roofline_tps;
            out["pp_cpu_share"] = speed.pp_cpu_share / 100.0;
            out["tg_cpu_share"] = speed.tg_cpu_share / 100.0;
            out["pp_runs"] = speed.pp_rates;
            out["tg_runs"] = speed.tg_rates;
            if (!parallel_json.is_null()) out["parallel"] = parallel_json;
            if (!arrival_json.is_null()) out["parallel_arrival"] = arrival_json;
            if (!schema_json.is_null()) out["json_schema"] = schema_json;
            if (!step_rows_json.is_null()) out["step_rows"] = step_rows_json;
            if (!shift_json.is_null()) out["shift"] = shift_json;
            if (!chat_json.is_null()) out["chat_turns"] = chat_json;
            if (!npcs_json.is_null()) out["npcs"] = npcs_json;
            if (!lookup_json.is_null()) out["lookup"] = lookup_json;
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
