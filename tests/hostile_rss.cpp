// The memory bound on hostile files, checked on the real programs: for each
// file of a generated hostile set, smol-inspect and a load by smol-generate
// run as child processes; each must end (a 30 s limit, generous: a hang is
// what it catches, not a slow run), must not die of a signal, and must peak
// below 2 x the file size + 200 MB of resident memory (wait4's ru_maxrss).
// Run by ctest in the plain Release build only: sanitizers inflate memory.
// The files are written by a child (`--write`), so that the checking process
// stays small: a forked child's peak counts what its parent held at the fork.
//   hostile_rss SMOL_INSPECT SMOL_GENERATE FIXTURES_DIR WORK_DIR
#include <smol/smol.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/hostile_files.hpp"

namespace {

using smol_test::Bytes;
using smol_test::File;
using smol_test::RawGguf;

struct Outcome {
    bool finished = false;
    int signal = 0;  // the signal that ended it, 0 if it exited
    int exit_code = 0;
    long peak_kb = 0;
};

// Runs argv with stdout/stderr to /dev/null; kills it after `limit`.
Outcome run(const std::vector<std::string>& argv, std::chrono::seconds limit) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::dup2(null, 2);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    Outcome out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    rusage usage{};
    for (;;) {
        const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
        if (done == pid) break;
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::wait4(pid, &status, 0, &usage);
            return out;  // not finished
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    out.finished = true;
    out.peak_kb = usage.ru_maxrss;
    if (WIFSIGNALED(status))
        out.signal = WTERMSIG(status);
    else
        out.exit_code = WEXITSTATUS(status);
    return out;
}

void save(const std::string& path, const Bytes& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// The hostile set, each file from one failure class of the audit.
const char* const kNames[] = {"layers-4M",  "layers-2G",   "kv-wrap",
                              "context-2G", "special-16M", "keys-at-limit",
                              "array-60M",  "key-16M",     "tensor-bytes-wrap"};

std::vector<std::pair<std::string, Bytes>> hostile_set(const std::string& fixtures) {
    std::vector<std::pair<std::string, Bytes>> set;
    const auto tiny = File::open(fixtures + "/tiny-q4km.gguf");
    const auto vocab = File::open(fixtures + "/vocab-llama-bpe.gguf");
    set.emplace_back("layers-4M", smol_test::with_u32(*tiny, "smollm3.block_count", 1u << 22));
    set.emplace_back("layers-2G", smol_test::with_u32(*tiny, "smollm3.block_count", 1u << 31));
    set.emplace_back("kv-wrap", smol_test::kv_wrap_model(*vocab));
    set.emplace_back("context-2G", smol_test::with_u32(*tiny, "smollm3.context_length", 1u << 31));
    {
        // A control token of 16 MiB (the special-token matcher's input).
        Bytes big(size_t(16) << 20, 'a');
        set.emplace_back(
            "special-16M",
            smol_test::rebuild(*tiny, [&](RawGguf& raw, const smol::gguf::KeyValue& kv) {
                if (kv.key != "tokenizer.ggml.tokens") return false;
                std::vector<std::string_view> tokens = kv.value.as_array().strings();
                const std::string text = "<|" + std::string(big.begin(), big.end()) + "|>";
                tokens[128010] = text;  // a reserved control token
                Bytes b;
                smol_test::append_le<uint32_t>(b, uint32_t(smol::gguf::ValueType::string));
                smol_test::append_le<uint64_t>(b, tokens.size());
                for (auto t : tokens) smol_test::put_string(b, t);
                raw.raw(kv.key, smol::gguf::ValueType::array, b);
                return true;
            }));
    }
    {
        RawGguf raw;
        char key[16];
        for (uint64_t i = 0; i < smol::gguf::kMaxMetadataKeys; ++i) {
            std::snprintf(key, sizeof key, "k%07llu", static_cast<unsigned long long>(i));
            raw.u32(key, uint32_t(i));
        }
        set.emplace_back("keys-at-limit", raw.build());
    }
    set.emplace_back(
        "array-60M",
        RawGguf().str("general.architecture", "smollm3").u8_array("big", 60000000, 7).build());
    set.emplace_back("key-16M", RawGguf().u32(std::string(size_t(16) << 20, 'k'), 1).build());
    set.emplace_back("tensor-bytes-wrap",
                     RawGguf()
                         .str("general.architecture", "smollm3")
                         .tensor("token_embd.weight", smol::GGMLType::F32, {1u << 31, 1u << 31})
                         .build(Bytes(64, 0)));
    return set;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr,
                     "usage: hostile_rss SMOL_INSPECT SMOL_GENERATE FIXTURES_DIR WORK_DIR\n");
        return 2;
    }
    const std::string inspect = argv[1], generate = argv[2], work = argv[4];
    std::string fixtures = argv[3];
    if (const char* env = std::getenv("SMOL_FIXTURES")) fixtures = env;
    struct stat st {};
    if (::stat((fixtures + "/tiny-q4km.gguf").c_str(), &st) != 0) {
        const char* required = std::getenv("SMOL_REQUIRE_FIXTURES");
        std::printf("hostile_rss: fixtures not found in %s: %s\n", fixtures.c_str(),
                    required && std::string(required) == "1" ? "FAIL (SMOL_REQUIRE_FIXTURES=1)"
                                                             : "skipped");
        return required && std::string(required) == "1" ? 1 : 0;
    }
    ::mkdir(work.c_str(), 0755);
    if (inspect == "--write") {  // the child: write the set and exit
        for (const auto& [name, bytes] : hostile_set(fixtures))
            save(work + "/" + name + ".gguf", bytes);
        return 0;
    }
    const Outcome written =
        run({argv[0], "--write", "-", fixtures, work}, std::chrono::seconds(300));
    if (!written.finished || written.signal || written.exit_code) {
        std::printf("hostile_rss: writing the hostile files failed\n");
        return 1;
    }
    int failures = 0;
    std::printf("%-18s %10s  %-13s %8s %10s %10s\n", "file", "MiB", "program", "exit", "peak MiB",
                "bound MiB");
    for (const std::string name : kNames) {
        const std::string path = work + "/" + name + ".gguf";
        struct stat file {};
        if (::stat(path.c_str(), &file) != 0) {
            std::printf("hostile_rss: %s was not written  FAIL\n", path.c_str());
            ++failures;
            continue;
        }
        const uint64_t size = uint64_t(file.st_size);
        const long bound_kb = long(2 * size / 1024) + 200 * 1024;
        const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
            {"smol-inspect", {inspect, path}},
            {"smol-generate", {generate, "-m", path, "-t", "1", "-p", "hi", "-n", "1"}},
        };
        for (const auto& [program, args] : runs) {
            const Outcome o = run(args, std::chrono::seconds(30));
            const bool ok = o.finished && o.signal == 0 && o.peak_kb < bound_kb;
            failures += !ok;
            char exit_text[32];
            if (!o.finished)
                std::snprintf(exit_text, sizeof exit_text, "HANG");
            else if (o.signal)
                std::snprintf(exit_text, sizeof exit_text, "sig %d", o.signal);
            else
                std::snprintf(exit_text, sizeof exit_text, "%d", o.exit_code);
            std::printf("%-18s %10.1f  %-13s %8s %10.1f %10.1f%s\n", name.c_str(),
                        double(size) / (1 << 20), program.c_str(), exit_text,
                        double(o.peak_kb) / 1024, double(bound_kb) / 1024, ok ? "" : "  FAIL");
        }
        std::remove(path.c_str());
    }
    std::printf("hostile_rss: %s\n", failures ? "FAILED" : "all within bounds");
    return failures ? 1 : 0;
}
