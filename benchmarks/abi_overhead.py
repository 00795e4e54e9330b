#!/usr/bin/env python3
"""Python streaming against C, per generated token (issue 43, item 6).

Alternates two kinds of process, pair by pair (the order flips every pair):
  C:      bench_abi_overhead --only c (streaming smol_generate from C);
  Python: this script with --child (the package's Generator.stream(), and
          Generator.generate(on_text=...) to tell the stream's thread and
          queue from the ctypes callback itself).
Each process loads the same tiny .gguf with 1 thread, warms up, times only its
generate calls and prints the median of its runs; the parent takes the
per-pair differences. A tiny model's step is near the noise of a shared
machine, hence the pairs and the median with its spread rather than two means.
Printed, never asserted.

  python3 benchmarks/abi_overhead.py --build build [--pairs 200] [--runs 5]
      [--warmup 2] [--tokens 64]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "Once upon a time"  # as bench_abi_overhead.cpp


def child(args):
    sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
    import smol

    model = smol.Model(args.model, n_threads=1)
    gen = smol.Generator(model)
    params = dict(max_tokens=args.tokens, temperature=0, seed=1, ignore_eos=True)

    def stream():
        n = 0
        s = gen.stream(PROMPT, **params)
        for piece in s:
            n += len(piece)
        return s.result

    def callback():
        pieces = []
        return gen.generate(PROMPT, on_text=pieces.append, **params)

    def timed(run):
        gen.reset()  # not timed, as in the C program
        t0 = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - t0
        if len(result.tokens) != args.tokens:
            raise SystemExit(f"generated {len(result.tokens)} tokens, not {args.tokens}")
        return seconds * 1e6 / args.tokens

    for _ in range(args.warmup):
        timed(stream)
        timed(callback)
    s_us, c_us = [], []
    for i in range(args.runs):
        order = (stream, callback) if i % 2 == 0 else (callback, stream)
        for run in order:
            (s_us if run is stream else c_us).append(timed(run))
    print(f"py_stream_us_per_token {statistics.median(s_us):.4f}")
    print(f"py_callback_us_per_token {statistics.median(c_us):.4f}")


def parse_figures(text):
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].endswith("_us_per_token"):
            out[parts[0]] = float(parts[1])
    return out


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def summary(name, values):
    q = statistics.quantiles(values, n=4, method="inclusive")
    print(f"{name:<26} median {q[1]:9.3f}  p25 {q[0]:9.3f}  p75 {q[2]:9.3f}  "
          f"min {min(values):9.3f}  max {max(values):9.3f} us/token")
    return q


def parent(args):
    bench = os.path.join(args.build, "benchmarks", "bench_abi_overhead")
    library = os.path.join(args.build, "libsmol.so")
    for path in (bench, library):
        if not os.path.exists(path):
            raise SystemExit(f"{path} not found: build bench_abi_overhead and smol_shared")
    env = dict(os.environ, SMOL_LIBRARY=os.path.abspath(library))
    common = ["--runs", str(args.runs), "--warmup", str(args.warmup),
              "--tokens", str(args.tokens)]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        subprocess.run([bench, "--write-model", model], check=True)
        c_cmd = [bench, "--only", "c", "--model", model] + common
        py_cmd = [sys.executable, os.path.abspath(__file__), "--child", "--model", model] + common
        print(f"abi_overhead: {args.pairs} pairs, {args.runs} timed runs of {args.tokens} "
              f"tokens per process (median), 1 thread; python {sys.version.split()[0]}")
        print(f"load average before: {load_average()}")
        rows = []
        for i in range(args.pairs):
            figures = {}
            for cmd in ((c_cmd, py_cmd) if i % 2 == 0 else (py_cmd, c_cmd)):
                done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
                figures.update(parse_figures(done.stdout))
            rows.append(figures)
        print(f"load average after: {load_average()}")
    c = [r["c_us_per_token"] for r in rows]
    stream = [r["py_stream_us_per_token"] for r in rows]
    callback = [r["py_callback_us_per_token"] for r in rows]
    summary("C smol_generate", c)
    summary("Python stream()", stream)
    summary("Python generate(on_text)", callback)
    print()
    for name, values in (("stream - C", stream), ("generate(on_text) - C", callback)):
        diffs = [v - w for v, w in zip(values, c)]
        q = summary(name + " (per pair)", diffs)
        # A distribution-free 95 % interval for the median (as the C++ program).
        ranked = sorted(diffs)
        half = 0.98 * len(ranked) ** 0.5
        lo = ranked[max(0, int(len(ranked) / 2 - half))]
        hi = ranked[min(len(ranked) - 1, int(len(ranked) / 2 + half))]
        print(f"{name}: median {q[1]:.3f} us/token (95 % interval {lo:.3f} .. {hi:.3f}), "
              f"IQR {q[2] - q[0]:.3f} "
              f"(p25 {q[0]:.3f}, p75 {q[2]:.3f}); slower than C in "
              f"{sum(d > 0 for d in diffs)} of {len(diffs)} pairs")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="the CMake build folder")
    p.add_argument("--pairs", type=int, default=200)
    p.add_argument("--runs", type=int, default=5, help="timed runs per process")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs per process first")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
