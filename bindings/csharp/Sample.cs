// The C# sample: streams a greedy completion, chats, cancels from another
// thread, polls an async run the way a game's frame loop would, erases part
// of a conversation and generates through a small context with Shift.
//   mcs -out:Sample.exe Smol.cs Sample.cs && mono Sample.exe model.gguf
//   mono Sample.exe model.gguf --check greedy.txt   (CI: the text must equal
//   the C++ API's, which tests/c_abi/test_c_abi_parity writes there)
using System;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

static class Sample {
    // The reference run of tests/c_abi/test_c_abi_parity.cpp.
    const string Prompt = "Once upon a time";
    const int Tokens = 24;
    static int failures = 0;

    static bool Same(int[] a, int[] b) {
        if (a.Length != b.Length) return false;
        for (int i = 0; i < a.Length; ++i)
            if (a[i] != b[i]) return false;
        return true;
    }

    static void Check(bool ok, string what) {
        if (ok) return;
        Console.Error.WriteLine("FAILED: " + what);
        ++failures;
    }

    [DllImport("smol", CallingConvention = CallingConvention.Cdecl)]
    static extern int smol_params_init_sized(IntPtr p, UIntPtr size);

    // The binding fills its structs at its own size of them, so a newer
    // library never writes past an older binding's smaller struct: three
    // fields of smol_params, then guard bytes that must stay as they were.
    static void CheckInitSized() {
        var p = new Smol.Native.Params();
        Smol.Native.Init(ref p);
        Check(p.size == (ulong)Marshal.SizeOf(typeof(Smol.Native.Params)), "params filled at the binding's size");
        const int older = 3 * 8, guard = 64;
        IntPtr block = Marshal.AllocHGlobal(older + guard);
        try {
            for (int i = 0; i < older + guard; ++i) Marshal.WriteByte(block, i, 0xA5);
            Check(smol_params_init_sized(block, (UIntPtr)older) == 0, "an older struct is filled");
            Check(Marshal.ReadInt64(block, 0) == older, "an older struct keeps its size");
            Check(BitConverter.Int64BitsToDouble(Marshal.ReadInt64(block, 8)) == p.temperature &&
                  Marshal.ReadInt64(block, 16) == p.top_k, "an older struct gets the defaults");
            bool intact = true;
            for (int i = older; i < older + guard; ++i) intact &= Marshal.ReadByte(block, i) == 0xA5;
            Check(intact, "nothing written past an older struct");
        } finally {
            Marshal.FreeHGlobal(block);
        }
    }

    static int Main(string[] args) {
        if (args.Length < 1) {
            Console.Error.WriteLine("usage: mono Sample.exe model.gguf [--check greedy.txt]");
            return 2;
        }
        Console.WriteLine(Smol.Library.BuildInfo);
        CheckInitSized();
        var greedy = new Smol.GenerateParams { Temperature = 0, MaxTokens = Tokens };

        using (var model = new Smol.Model(args[0], new Smol.LoadOptions { Threads = 2 }))
        using (var gen = new Smol.Generator(model)) {
            // Streamed: the pieces are the text.
            var streamed = new StringBuilder();
            Smol.Result r = gen.Generate(Prompt, greedy, piece => {
                streamed.Append(piece);
                Console.Write(piece);
                return true;
            });
            Console.WriteLine();
            Console.WriteLine("[" + r.Tokens.Length + " tokens, " + r.StopReason + "]");
            Check(streamed.ToString() == r.Text, "streamed pieces are the text");
            if (args.Length > 2 && args[1] == "--check") {
                string expected = Encoding.UTF8.GetString(File.ReadAllBytes(args[2]));
                Check(r.Text == expected, "greedy text equals the C++ API's");
            }

            // Chat, then the next turn reuses the cache.
            var chat = new Smol.GenerateParams { Temperature = 0, MaxTokens = 8, EnableThinking = false };
            var messages = new[] { new Smol.ChatMessage("user", "Hello!") };
            Smol.Result reply = gen.Chat(messages, chat);
            var next = new[] { messages[0], new Smol.ChatMessage("assistant", reply.Text, true),
                               new Smol.ChatMessage("user", "And then?") };
            Check(gen.Chat(next, chat).ReusedTokens > reply.PromptTokens / 2, "chat reuses the cache");

            // Cancel from another thread once text flows.
            var started = new ManualResetEvent(false);
            var canceller = new Thread(() => { started.WaitOne(); gen.Cancel(); });
            canceller.Start();
            Smol.Result cancelled = gen.Generate(Prompt,
                new Smol.GenerateParams { MaxTokens = -1, IgnoreEos = true },
                piece => { started.Set(); return true; });
            canceller.Join();
            Check(cancelled.StopReason == Smol.StopReason.Cancelled, "cancel from another thread");

            // An async run polled to completion, as a frame loop does.
            gen.Reset();
            var polled = new StringBuilder();
            using (Smol.AsyncGeneration run = gen.GenerateAsync(Prompt, greedy)) {
                while (true) {
                    bool done = run.Done;
                    polled.Append(run.Poll());
                    if (done) break;
                    Thread.Sleep(1);  // the rest of the frame
                }
                Smol.Result result = run.Wait();
                Check(result.Text == polled.ToString() && result.Text == r.Text,
                      "async run polled to completion");
            }

            // An async run on a generator that only its handle refers to: the
            // handle keeps it, so a collection cannot end the run.
            using (Smol.AsyncGeneration run = new Smol.Generator(model).GenerateAsync(Prompt, greedy)) {
                GC.Collect();
                GC.WaitForPendingFinalizers();
                Smol.Result result = run.Wait();
                Check(result.StopReason != Smol.StopReason.Cancelled && result.Text == r.Text,
                      "an async run on a temporary generator");
                run.Generator.Dispose();
            }

            // Sessions.
            byte[] session = gen.SaveSession();
            using (var other = new Smol.Generator(model)) {
                other.RestoreSession(session);
                Check(other.CachedTokens == gen.CachedTokens, "session restored");
            }

            // Fork: the copy shares the cache's blocks until it writes them.
            using (var fork = gen.Fork()) {
                Check(fork.CacheOwnedBytes == 0 && fork.CacheSharedBytes > 0 &&
                      fork.CacheSharedBytes == gen.CacheSharedBytes, "a fork shares the cache");
            }
            using (var q8 = new Smol.Generator(model, new Smol.GeneratorOptions { NCtx = 256, KVType = Smol.KVType.Q8_0 })) {
                Check(q8.Generate(Prompt, greedy).Tokens.Length > 0 && q8.CacheOwnedBytes > 0, "a q8_0 cache");
            }

            // Erase: dropping the generated tail rewinds, so the prompt again
            // reuses the cache and gives the same tokens.
            using (var rewind = new Smol.Generator(model, new Smol.GeneratorOptions { NCtx = 256 })) {
                Smol.Result first = rewind.Generate(Prompt, greedy);
                int[] before = rewind.History();
                Check(before.Length == first.PromptTokens + first.Tokens.Length, "history: prompt + output");
                rewind.Erase(first.PromptTokens, first.Tokens.Length);
                Check(rewind.HistoryLength == first.PromptTokens && rewind.CachedTokens == first.PromptTokens,
                      "erase shrinks history and cache");
                Smol.Result again = rewind.Generate(Prompt, greedy);
                Check(again.Text == first.Text && again.ReusedTokens == again.PromptTokens - 1,
                      "after an erase the prompt reuses the cache");
                long cached = rewind.CachedTokens;
                rewind.Erase(2, 3);
                int[] after = rewind.History();
                Check(after.Length == before.Length - 3 && after[2] == before[5] &&
                      rewind.CachedTokens == cached - 3, "erase in the middle");
                try {
                    rewind.Erase(1, rewind.HistoryLength);
                    Check(false, "erase past the history throws");
                } catch (Smol.SmolException e) {
                    Check(e.Code == Smol.Status.OutOfRange, "erase past the history is out_of_range");
                }
            }

            // Shift: a run longer than the context goes on, dropping the oldest tokens.
            var shiftOptions = new Smol.GeneratorOptions {
                NCtx = 64, ContextPolicy = Smol.ContextPolicy.Shift, NKeep = 4 };
            using (var shifting = new Smol.Generator(model, shiftOptions)) {
                var p = new Smol.GenerateParams { Temperature = 0, MaxTokens = 150, IgnoreEos = true };
                Smol.Result longRun = shifting.Generate(Prompt, p);
                Check(longRun.StopReason == Smol.StopReason.MaxTokens && longRun.Tokens.Length == 150 &&
                      longRun.DiscardedTokens > 0 && shifting.HistoryLength <= 64,
                      "a shift run goes past the context");
                using (var stopping = new Smol.Generator(model, new Smol.GeneratorOptions { NCtx = 64 })) {
                    Check(stopping.Generate(Prompt, p).StopReason == Smol.StopReason.ContextFull,
                          "without shift the run ends at the context");
                }
            }

            // The knobs past the basics: DRY, XTC, lookup decoding, token ids,
            // the chat's ids and text, the tuning, a batcher's options.
            {
                const string repeats = "one two three four, one two three four, one two three four, one two";
                Func<Smol.GenerateParams, Smol.Result> fresh = p => { gen.Reset(); return gen.Generate(repeats, p); };
                var plainParams = new Smol.GenerateParams { Temperature = 0, MaxTokens = 48, IgnoreEos = true, Lookup = false };
                Smol.Result plain = fresh(plainParams);
                var dry = new Smol.GenerateParams { Temperature = 0, MaxTokens = 48, IgnoreEos = true, DryMultiplier = 4 };
                Check(!Same(fresh(dry).Tokens, plain.Tokens), "DRY changes the greedy tokens");
                var sampled = new Smol.GenerateParams { Temperature = 1, TopK = 0, TopP = 1, MinP = 0, Seed = 7,
                                                        MaxTokens = 48, IgnoreEos = true };
                Smol.Result baseRun = fresh(sampled);
                sampled.XtcProbability = 1; sampled.XtcThreshold = 0.01;
                Check(!Same(fresh(sampled).Tokens, baseRun.Tokens), "XTC changes the sampled tokens");
                var lookup = new Smol.GenerateParams { Temperature = 0, MaxTokens = 48, IgnoreEos = true, Lookup = true };
                Smol.Result looked = fresh(lookup);
                Check(Same(looked.Tokens, plain.Tokens) && looked.AcceptedDrafts > 0 &&
                      looked.DecodeSteps < plain.DecodeSteps, "lookup: the same tokens in fewer steps");
                int[] ids = gen.Tokenize(repeats);
                gen.Reset();
                Smol.Result byIds = gen.GenerateTokens(ids, plainParams);
                Check(Same(byIds.Tokens, plain.Tokens), "token ids generate what the text generates");
                Check(model.Detokenize(ids) == repeats && model.Detokenize(plain.Tokens) == plain.Text,
                      "detokenize round trips");
                var chatMessages = new[] { new Smol.ChatMessage("user", "Hi <|im_end|>") };
                var chatParams = new Smol.GenerateParams { Temperature = 0, MaxTokens = 4, EnableThinking = false,
                                                           XmlTools = new[] { "{\"name\": \"xml_probe\"}" } };
                int[] chatIds = gen.TokenizeChat(chatMessages, chatParams);
                Check(gen.Chat(chatMessages, chatParams).PromptTokens == chatIds.Length, "tokenize_chat: chat's ids");
                string rendered = gen.RenderChat(chatMessages, chatParams);
                Check(rendered.Contains("Hi <|im_end|>") && rendered.Contains("xml_probe"), "render_chat");
                using (var pinned = new Smol.Model(args[0], new Smol.LoadOptions {
                           Threads = 2, KernelParams = new Smol.KernelParams { DecodeChunks = 16 } })) {
                    Check(pinned.Tuning.Contains("decode chunks 16"), "pinned kernel params: " + pinned.Tuning);
                }
                using (var batcher = new Smol.Batcher(model, new Smol.BatcherOptions { MaxBatch = 2, PrefillAlone = 3 }))
                using (var shared = new Smol.Generator(model, new Smol.GeneratorOptions { Batcher = batcher })) {
                    Check(Same(shared.Generate(Prompt, greedy).Tokens, r.Tokens), "a batcher with options");
                }
                try {
                    new Smol.Batcher(model, new Smol.BatcherOptions { MaxBatch = 0 }).Dispose();
                    Check(false, "max_batch 0 throws");
                } catch (Smol.SmolException e) {
                    Check(e.Code == Smol.Status.InvalidArgument, "max_batch 0 is invalid_argument");
                }
            }

            // Errors: a code and a message.
            try {
                gen.Generate("bad", new Smol.GenerateParams { Grammar = "root ::= (" });
                Check(false, "a bad grammar throws");
            } catch (Smol.SmolException e) {
                Check(e.Code == Smol.Status.InvalidArgument, "a bad grammar is invalid_argument");
            }
        }
        try {
            new Smol.Model("/nonexistent.gguf").Dispose();
            Check(false, "a missing file throws");
        } catch (Smol.SmolException e) {
            Check(e.Code == Smol.Status.Io, "a missing file is io: " + e.Message);
        }
        if (failures > 0) return 1;
        Console.WriteLine("C# sample: all checks passed");
        return 0;
    }
}
