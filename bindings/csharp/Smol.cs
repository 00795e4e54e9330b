// smol for C# (Unity, Godot C#, .NET, Mono): P/Invoke over the C ABI
// (include/smol/smol.h) of the native library smol (libsmol.so, smol.dll,
// libsmol.dylib). One file: drop it into a project with the native library.
//
//   using (var model = new Smol.Model("model.gguf"))
//   using (var gen = new Smol.Generator(model)) {
//       var p = new Smol.GenerateParams { MaxTokens = 64, Temperature = 0 };
//       var r = gen.Generate("Once upon a time", p, piece => { Console.Write(piece); return true; });
//   }
//
// Strings cross as UTF-8 (marshalled by hand, so any Mono/.NET/IL2CPP profile
// works). Callbacks are static methods marked [MonoPInvokeCallback] (IL2CPP
// compiles them ahead of time) that find the managed delegate through a
// GCHandle passed as the C user data. Errors are SmolException (Code, Message).
// Threads: a Model may be shared by generators on any threads; a Generator is
// used by one thread at a time, but Cancel() works from any thread; a game
// loop uses GenerateAsync + Poll() each frame.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;

#if !UNITY_5_3_OR_NEWER
namespace AOT {
// Unity defines this attribute; IL2CPP looks it up by name. Defined here for
// plain Mono/.NET builds.
[AttributeUsage(AttributeTargets.Method)]
public sealed class MonoPInvokeCallbackAttribute : Attribute {
    public MonoPInvokeCallbackAttribute(Type type) {}
}
}
#endif

namespace Smol {

public enum Status {
    Ok = 0, Io = 1, Format = 2, Unsupported = 3, Shape = 4, Missing = 5, Type = 6,
    InvalidArgument = 7, OutOfRange = 8, Cancelled = 9, Internal = 10, Resource = 11
}
public enum Device { Cpu = 0, Cuda = 1, Auto = 2 }
// Q8_0: 53 % of F16's bytes, CPU only.
public enum KVType { F32 = 0, F16 = 1, Q8_0 = 2 }
// Stop: a prompt longer than the context throws and a full context ends the run;
// Shift: the oldest tokens after the first NKeep (Chat: the oldest turns after the
// system message) leave the context instead.
public enum ContextPolicy { Stop = 0, Shift = 1 }
public enum StopReason { Eos = 0, MaxTokens = 1, StopString = 2, Cancelled = 3, ContextFull = 4 }
// The kernels' tuning at load: Auto measures models of at least 256 MiB of weights.
public enum TuneMode { Auto = 0, On = 1, Off = 2 }

public sealed class SmolException : Exception {
    public readonly Status Code;
    public SmolException(Status code, string message) : base(code + ": " + message) { Code = code; }
}

public struct ChatMessage {
    public string Role, Content;
    public bool ModelOutput;  // an assistant reply verbatim (Result.Text)
    public ChatMessage(string role, string content, bool modelOutput = false) {
        Role = role; Content = content; ModelOutput = modelOutput;
    }
}

public struct Tool {
    public string Name, Description, Parameters;  // Parameters: JSON Schema text
}

public sealed class LoadOptions {
    public int Threads = 0;  // 0: hardware threads, capped at physical cores
    public Device Device = Device.Cpu;
    public int CudaDevice = 0;
    public ulong MemoryBudget = 0;
    public bool InterleaveWeights = true;
    public string Cpu = null;  // kernel level name; null: automatic
    public Func<float, bool> Progress;  // false cancels the load
    public TuneMode Tune = TuneMode.Auto;
    public string TuneFile = null;  // where tuned kernel settings are remembered; null: none
    public KernelParams KernelParams = null;  // pins the kernel settings instead of tuning
}

// The kernels' speed-only settings (C++ kernels::KernelParams, same defaults):
// each one of its candidates (kernels/kernel_set.hpp).
public sealed class KernelParams {
    public long PaceSteps = 60, InterleavedPrefetch = 8192, StoredPrefetch = 4096, DecodeChunks = 8,
        CodebookGathers = 0;
}

// How a Batcher schedules (C++ BatcherOptions); unset fields keep the library's defaults.
public sealed class BatcherOptions {
    public long? MaxBatch, PrefillShared, PrefillAlone;
    public double? MaxStepSlowdown, GatherMs, GatherFraction;
}

public sealed class GeneratorOptions {
    public long NCtx = 0;  // 0: min(4096, the model's)
    public KVType KVType = KVType.F16;
    public long PrefillChunk = 0;
    public Batcher Batcher;
    public ContextPolicy ContextPolicy = ContextPolicy.Stop;
    public long NKeep = 0;  // with Shift: leading tokens never dropped
}

// Unset fields keep the library's defaults (smol_params_init_sized).
public sealed class GenerateParams {
    public double? Temperature, TopP, MinP, RepeatPenalty, PresencePenalty, FrequencyPenalty;
    public long? TopK, PenaltyLastN, MaxTokens;
    public ulong? Seed;
    public string[] Stop;
    public bool IgnoreEos, PromptAsText, ParseSpecialInContent, ConstrainToolCalls;
    public bool AddGenerationPrompt = true;
    public bool? EnableThinking;
    public string Today, Grammar, JsonSchema;
    public Tool[] Tools;
    public string[] XmlTools, PythonTools;  // the chat template's raw tool lists
    // DRY: the repetition penalty on extended repeats; null: the defaults
    // (DrySequenceBreakers null: the library's; empty: none).
    public double? DryMultiplier, DryBase;
    public long? DryAllowedLength, DryPenaltyLastN;
    public string[] DrySequenceBreakers;
    // XTC: with this probability, drop the likeliest tokens above the threshold.
    public double? XtcProbability, XtcThreshold;
    // Lookup decoding: drafts from the context, the same tokens as plain decoding.
    public bool? Lookup;  // null: automatic (on where it never loses)
    public long? LookupK, LookupMaxNgram;
}

public sealed class Result {
    public string Text, Reasoning, Answer, MatchedStop, ToolCallsJson;
    public int[] Tokens;
    public StopReason StopReason;
    public long PromptTokens, ReusedTokens;
    public double PrefillMs, DecodeMs;
    // ContextPolicy.Shift: tokens this call left out of the context or erased
    // from it, and the prompt's share of them.
    public long DiscardedTokens, PromptDiscardedTokens;
    // Forward passes after the prefill and, with Lookup, the drafts they ran and kept.
    public long DecodeSteps, DraftedTokens, AcceptedDrafts;
    // The prompt tokens actually run: less what the cache held and what a shift left out.
    public long PrefilledTokens { get { return PromptTokens - ReusedTokens - PromptDiscardedTokens; } }
}

internal static class Native {
    const string Lib = "smol";

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate int PieceFn(IntPtr piece, UIntPtr length, IntPtr userData);
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate int ProgressFn(float progress, IntPtr userData);

    [StructLayout(LayoutKind.Sequential)]
    internal struct LoadOptions {
        public ulong size; public long n_threads, device, cuda_device; public ulong memory_budget;
        public long interleave_weights; public IntPtr cpu, progress, progress_user_data, log,
            log_user_data;
        public long tune; public IntPtr tune_file; public long pin_kernel_params, kernel_pace_steps,
            kernel_interleaved_prefetch, kernel_stored_prefetch, kernel_decode_chunks,
            kernel_codebook_gathers;
    }
    [StructLayout(LayoutKind.Sequential)]
    internal struct BatcherOptions {
        public ulong size; public long max_batch, prefill_shared; public double max_step_slowdown;
        public long prefill_alone; public double gather_ms, gather_fraction;
    }
    [StructLayout(LayoutKind.Sequential)]
    internal struct GeneratorOptions {
        public ulong size; public long n_ctx, kv_type, prefill_chunk;
        public IntPtr batcher, log, log_user_data, on_worker_start, worker_start_user_data;
        public long context_policy, n_keep;
    }
    [StructLayout(LayoutKind.Sequential)]
    internal struct Params {
        public ulong size; public double temperature; public long top_k;
        public double top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
        public long penalty_last_n; public ulong seed;
        public IntPtr logit_bias; public long n_logit_bias;
        public IntPtr logits_hook, logits_hook_user_data;
        public long max_tokens; public IntPtr stop; public long n_stop;
        public long ignore_eos, prompt_as_text, add_generation_prompt, enable_thinking;
        public IntPtr today, tools; public long n_tools, parse_special_in_content;
        public IntPtr grammar, json_schema;
        public long json_max_indent, json_max_integer_digits, json_max_fraction_digits,
            json_max_exponent_digits, json_max_any_depth, constrain_tool_calls;
        public double dry_multiplier, dry_base; public long dry_allowed_length, dry_penalty_last_n;
        public IntPtr dry_sequence_breakers; public long n_dry_sequence_breakers;
        public double xtc_probability, xtc_threshold;
        public long lookup, lookup_k, lookup_max_ngram;
        public IntPtr xml_tools; public long n_xml_tools;
        public IntPtr python_tools; public long n_python_tools;
    }
    [StructLayout(LayoutKind.Sequential)]
    internal struct CResult {
        public ulong size; public IntPtr text; public ulong text_length;
        public IntPtr reasoning; public ulong reasoning_length; public IntPtr answer;
        public ulong answer_length; public IntPtr tool_calls_json, matched_stop, tokens;
        public ulong n_tokens; public long stop_reason; public ulong n_prompt_tokens,
            n_reused_tokens; public double prefill_ms, decode_ms;
        public ulong n_discarded_tokens, n_prompt_discarded_tokens;
        public ulong n_decode_steps, n_drafted_tokens, n_accepted_drafts;
    }

    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_last_error();
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_last_error_message();
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_version();
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_build_info();
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_load_options_init_sized(ref LoadOptions o, UIntPtr size);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_model_load(byte[] path, ref LoadOptions o);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_model_free(IntPtr model);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_model_identity(IntPtr model);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern UIntPtr smol_model_n_vocab(IntPtr model);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_model_tuning(IntPtr model);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_detokenize(IntPtr model, int[] ids, UIntPtr n, int renderSpecial, out UIntPtr length);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_string_free(IntPtr text);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_batcher_options_init_sized(ref BatcherOptions o, UIntPtr size);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_batcher_new_with_options(IntPtr model, ref BatcherOptions o);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_batcher_new(IntPtr model);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_batcher_free(IntPtr batcher);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_generator_options_init_sized(ref GeneratorOptions o, UIntPtr size);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_generator_new(IntPtr model, ref GeneratorOptions o);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_generator_free(IntPtr gen);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_generator_fork(IntPtr gen);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_reset(IntPtr gen);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_cancel(IntPtr gen);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern UIntPtr smol_generator_n_cached(IntPtr gen);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_generator_cache_memory(IntPtr gen, out ulong owned, out ulong shared);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern UIntPtr smol_generator_n_history(IntPtr gen);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_generator_history(IntPtr gen, out UIntPtr n);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_erase(IntPtr gen, UIntPtr first, UIntPtr count);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_tokens_free(IntPtr tokens);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_params_init_sized(ref Params p, UIntPtr size);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_result_free(IntPtr result);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_generate(IntPtr gen, byte[] prompt, ref Params p, PieceFn onPiece, IntPtr userData);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_generate_tokens(IntPtr gen, int[] ids, UIntPtr n, ref Params p, PieceFn onPiece, IntPtr userData);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_chat(IntPtr gen, IntPtr messages, UIntPtr n, ref Params p, PieceFn onPiece, IntPtr userData);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_tokenize(IntPtr gen, byte[] prompt, int asText, out UIntPtr n);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_tokenize_chat(IntPtr gen, IntPtr messages, UIntPtr n, ref Params p, out UIntPtr nTokens);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_render_chat(IntPtr gen, IntPtr messages, UIntPtr n, ref Params p, out UIntPtr length);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_generate_async(IntPtr gen, byte[] prompt, ref Params p);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_chat_async(IntPtr gen, IntPtr messages, UIntPtr n, ref Params p);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_async_poll(IntPtr run, out UIntPtr length);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_async_done(IntPtr run);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_async_cancel(IntPtr run);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_async_wait(IntPtr run);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_async_free(IntPtr run);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr smol_session_save(IntPtr gen, out UIntPtr size);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int smol_session_restore(IntPtr gen, byte[] data, UIntPtr size);
    [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void smol_bytes_free(IntPtr bytes);

    // The option structs filled through smol_*_init_sized at this binding's
    // size of them (Marshal.SizeOf, the marshalled size), so a newer library
    // writes no more than the struct declared here.
    static UIntPtr SizeOf<T>() { return (UIntPtr)(ulong)Marshal.SizeOf(typeof(T)); }
    internal static void Init(ref LoadOptions o) {
        if (smol_load_options_init_sized(ref o, SizeOf<LoadOptions>()) != 0) throw LastError();
    }
    internal static void Init(ref BatcherOptions o) {
        if (smol_batcher_options_init_sized(ref o, SizeOf<BatcherOptions>()) != 0) throw LastError();
    }
    internal static void Init(ref GeneratorOptions o) {
        if (smol_generator_options_init_sized(ref o, SizeOf<GeneratorOptions>()) != 0) throw LastError();
    }
    internal static void Init(ref Params p) {
        if (smol_params_init_sized(ref p, SizeOf<Params>()) != 0) throw LastError();
    }

    internal static byte[] Utf8(string s) {
        if (s == null) return null;
        var bytes = new byte[Encoding.UTF8.GetByteCount(s) + 1];
        Encoding.UTF8.GetBytes(s, 0, s.Length, bytes, 0);
        return bytes;
    }
    internal static string FromUtf8(IntPtr p, long length) {
        if (p == IntPtr.Zero || length <= 0) return "";
        var bytes = new byte[length];
        Marshal.Copy(p, bytes, 0, (int)length);
        return Encoding.UTF8.GetString(bytes);
    }
    internal static string FromUtf8(IntPtr p) {
        if (p == IntPtr.Zero) return "";
        int n = 0;
        while (Marshal.ReadByte(p, n) != 0) ++n;
        return FromUtf8(p, n);
    }
    internal static SmolException LastError() {
        return new SmolException((Status)smol_last_error(), FromUtf8(smol_last_error_message()));
    }
    internal static IntPtr Check(IntPtr handle) {
        if (handle == IntPtr.Zero) throw LastError();
        return handle;
    }
    // A library-allocated int32 array (smol_tokens_free) as a managed copy.
    internal static int[] TakeTokens(IntPtr ids, UIntPtr n) {
        Check(ids);
        try {
            var tokens = new int[(long)n.ToUInt64()];
            if (tokens.Length > 0) Marshal.Copy(ids, tokens, 0, tokens.Length);
            return tokens;
        } finally {
            smol_tokens_free(ids);
        }
    }
    // A library-allocated string (smol_string_free) as bytes.
    internal static byte[] TakeBytes(IntPtr text, UIntPtr length) {
        Check(text);
        try {
            var bytes = new byte[(long)length.ToUInt64()];
            if (bytes.Length > 0) Marshal.Copy(text, bytes, 0, bytes.Length);
            return bytes;
        } finally {
            smol_string_free(text);
        }
    }

    // Callbacks: static, marked for IL2CPP, the managed target in a GCHandle.
    internal static readonly PieceFn PieceThunk = OnPiece;
    internal static readonly ProgressFn ProgressThunk = OnProgress;

    [AOT.MonoPInvokeCallback(typeof(PieceFn))]
    static int OnPiece(IntPtr piece, UIntPtr length, IntPtr userData) {
        try {
            var callback = (Func<string, bool>)GCHandle.FromIntPtr(userData).Target;
            return callback(FromUtf8(piece, (long)length.ToUInt64())) ? 1 : 0;
        } catch (Exception) {
            return 0;  // an exception cannot cross the native frames: stop the run
        }
    }
    [AOT.MonoPInvokeCallback(typeof(ProgressFn))]
    static int OnProgress(float progress, IntPtr userData) {
        try {
            var callback = (Func<float, bool>)GCHandle.FromIntPtr(userData).Target;
            return callback(progress) ? 1 : 0;
        } catch (Exception) {
            return 0;
        }
    }

    internal static Result TakeResult(IntPtr pointer) {
        Check(pointer);
        try {
            var r = (CResult)Marshal.PtrToStructure(pointer, typeof(CResult));
            var tokens = new int[r.n_tokens];
            if (r.n_tokens > 0) Marshal.Copy(r.tokens, tokens, 0, tokens.Length);
            return new Result {
                Text = FromUtf8(r.text, (long)r.text_length),
                Reasoning = FromUtf8(r.reasoning, (long)r.reasoning_length),
                Answer = FromUtf8(r.answer, (long)r.answer_length),
                ToolCallsJson = FromUtf8(r.tool_calls_json),
                MatchedStop = FromUtf8(r.matched_stop),
                Tokens = tokens,
                StopReason = (StopReason)r.stop_reason,
                PromptTokens = (long)r.n_prompt_tokens,
                ReusedTokens = (long)r.n_reused_tokens,
                PrefillMs = r.prefill_ms,
                DecodeMs = r.decode_ms,
                DiscardedTokens = (long)r.n_discarded_tokens,
                PromptDiscardedTokens = (long)r.n_prompt_discarded_tokens,
                DecodeSteps = (long)r.n_decode_steps,
                DraftedTokens = (long)r.n_drafted_tokens,
                AcceptedDrafts = (long)r.n_accepted_drafts,
            };
        } finally {
            smol_result_free(pointer);
        }
    }
}

// Unmanaged copies of strings and arrays that a native struct points to, freed together.
internal sealed class NativeMemory : IDisposable {
    readonly List<IntPtr> blocks = new List<IntPtr>();
    public IntPtr String(string s) {
        if (s == null) return IntPtr.Zero;
        var bytes = Native.Utf8(s);
        return Bytes(bytes);
    }
    public IntPtr Bytes(byte[] bytes) {
        IntPtr p = Marshal.AllocHGlobal(bytes.Length);
        blocks.Add(p);
        Marshal.Copy(bytes, 0, p, bytes.Length);
        return p;
    }
    public IntPtr Pointers(IntPtr[] pointers) {
        IntPtr p = Marshal.AllocHGlobal(IntPtr.Size * Math.Max(1, pointers.Length));
        blocks.Add(p);
        for (int i = 0; i < pointers.Length; ++i) Marshal.WriteIntPtr(p, i * IntPtr.Size, pointers[i]);
        return p;
    }
    public IntPtr Messages(ChatMessage[] messages) {
        // smol_message: role, content (pointers), model_output (int64).
        int stride = 2 * IntPtr.Size + 8;
        IntPtr p = Marshal.AllocHGlobal(stride * Math.Max(1, messages.Length));
        blocks.Add(p);
        for (int i = 0; i < messages.Length; ++i) {
            Marshal.WriteIntPtr(p, i * stride, String(messages[i].Role));
            Marshal.WriteIntPtr(p, i * stride + IntPtr.Size, String(messages[i].Content));
            Marshal.WriteInt64(p, i * stride + 2 * IntPtr.Size, messages[i].ModelOutput ? 1 : 0);
        }
        return p;
    }
    public void Dispose() {
        foreach (IntPtr p in blocks) Marshal.FreeHGlobal(p);
        blocks.Clear();
    }

    public Native.Params Params(GenerateParams g) {
        var p = new Native.Params();
        Native.Init(ref p);
        if (g == null) return p;
        if (g.Temperature.HasValue) p.temperature = g.Temperature.Value;
        if (g.TopK.HasValue) p.top_k = g.TopK.Value;
        if (g.TopP.HasValue) p.top_p = g.TopP.Value;
        if (g.MinP.HasValue) p.min_p = g.MinP.Value;
        if (g.RepeatPenalty.HasValue) p.repeat_penalty = g.RepeatPenalty.Value;
        if (g.PresencePenalty.HasValue) p.presence_penalty = g.PresencePenalty.Value;
        if (g.FrequencyPenalty.HasValue) p.frequency_penalty = g.FrequencyPenalty.Value;
        if (g.PenaltyLastN.HasValue) p.penalty_last_n = g.PenaltyLastN.Value;
        if (g.Seed.HasValue) p.seed = g.Seed.Value;
        if (g.MaxTokens.HasValue) p.max_tokens = g.MaxTokens.Value;
        if (g.Stop != null) {
            var stops = new IntPtr[g.Stop.Length];
            for (int i = 0; i < stops.Length; ++i) stops[i] = String(g.Stop[i]);
            p.stop = Pointers(stops);
            p.n_stop = stops.Length;
        }
        p.ignore_eos = g.IgnoreEos ? 1 : 0;
        p.prompt_as_text = g.PromptAsText ? 1 : 0;
        p.add_generation_prompt = g.AddGenerationPrompt ? 1 : 0;
        p.enable_thinking = g.EnableThinking.HasValue ? (g.EnableThinking.Value ? 1 : 0) : -1;
        p.today = String(g.Today);
        if (g.Tools != null) {
            var fields = new IntPtr[3 * g.Tools.Length];  // smol_tool: three pointers
            for (int i = 0; i < g.Tools.Length; ++i) {
                fields[3 * i] = String(g.Tools[i].Name);
                fields[3 * i + 1] = String(g.Tools[i].Description);
                fields[3 * i + 2] = String(g.Tools[i].Parameters);
            }
            p.tools = Pointers(fields);
            p.n_tools = g.Tools.Length;
        }
        p.parse_special_in_content = g.ParseSpecialInContent ? 1 : 0;
        p.grammar = String(g.Grammar);
        p.json_schema = String(g.JsonSchema);
        p.constrain_tool_calls = g.ConstrainToolCalls ? 1 : 0;
        if (g.XmlTools != null) { p.xml_tools = Strings(g.XmlTools); p.n_xml_tools = g.XmlTools.Length; }
        if (g.PythonTools != null) {
            p.python_tools = Strings(g.PythonTools);
            p.n_python_tools = g.PythonTools.Length;
        }
        if (g.DryMultiplier.HasValue) p.dry_multiplier = g.DryMultiplier.Value;
        if (g.DryBase.HasValue) p.dry_base = g.DryBase.Value;
        if (g.DryAllowedLength.HasValue) p.dry_allowed_length = g.DryAllowedLength.Value;
        if (g.DryPenaltyLastN.HasValue) p.dry_penalty_last_n = g.DryPenaltyLastN.Value;
        if (g.DrySequenceBreakers != null) {
            p.dry_sequence_breakers = Strings(g.DrySequenceBreakers);
            p.n_dry_sequence_breakers = g.DrySequenceBreakers.Length;
        }
        if (g.XtcProbability.HasValue) p.xtc_probability = g.XtcProbability.Value;
        if (g.XtcThreshold.HasValue) p.xtc_threshold = g.XtcThreshold.Value;
        if (g.Lookup.HasValue) p.lookup = g.Lookup.Value ? 1 : 0;
        if (g.LookupK.HasValue) p.lookup_k = g.LookupK.Value;
        if (g.LookupMaxNgram.HasValue) p.lookup_max_ngram = g.LookupMaxNgram.Value;
        return p;
    }
    // A (const char* const*) array of UTF-8 copies.
    IntPtr Strings(string[] strings) {
        var pointers = new IntPtr[strings.Length];
        for (int i = 0; i < strings.Length; ++i) pointers[i] = String(strings[i]);
        return Pointers(pointers);
    }
}

public static class Library {
    public static string Version { get { return Native.FromUtf8(Native.smol_version()); } }
    public static string BuildInfo { get { return Native.FromUtf8(Native.smol_build_info()); } }
}

public sealed class Model : IDisposable {
    internal IntPtr Handle;
    public Model(string path, LoadOptions options = null) {
        options = options ?? new LoadOptions();
        var o = new Native.LoadOptions();
        Native.Init(ref o);
        o.n_threads = options.Threads;
        o.device = (long)options.Device;
        o.cuda_device = options.CudaDevice;
        o.memory_budget = options.MemoryBudget;
        o.interleave_weights = options.InterleaveWeights ? 1 : 0;
        o.tune = (long)options.Tune;
        if (options.KernelParams != null) {
            o.pin_kernel_params = 1;
            o.kernel_pace_steps = options.KernelParams.PaceSteps;
            o.kernel_interleaved_prefetch = options.KernelParams.InterleavedPrefetch;
            o.kernel_stored_prefetch = options.KernelParams.StoredPrefetch;
            o.kernel_decode_chunks = options.KernelParams.DecodeChunks;
            o.kernel_codebook_gathers = options.KernelParams.CodebookGathers;
        }
        using (var memory = new NativeMemory()) {
            o.cpu = memory.String(options.Cpu);
            o.tune_file = memory.String(options.TuneFile);
            GCHandle progress = default(GCHandle);
            if (options.Progress != null) {
                progress = GCHandle.Alloc(options.Progress);
                o.progress = Marshal.GetFunctionPointerForDelegate(Native.ProgressThunk);
                o.progress_user_data = GCHandle.ToIntPtr(progress);
            }
            try {
                Handle = Native.Check(Native.smol_model_load(Native.Utf8(path), ref o));
            } finally {
                if (progress.IsAllocated) progress.Free();
            }
        }
    }
    public string Identity { get { return Native.FromUtf8(Native.smol_model_identity(Handle)); } }
    public long VocabSize { get { return (long)Native.smol_model_n_vocab(Handle).ToUInt64(); } }
    // The kernel settings the load chose and why ("... (tuned in 180 ms)" or "... (not tuned: ...)").
    public string Tuning { get { return Native.FromUtf8(Native.smol_model_tuning(Handle)); } }
    // The text of token ids (special tokens as their text unless renderSpecial is
    // false). Ids may end inside a UTF-8 character: DetokenizeBytes gives the
    // bytes as they are, Detokenize decodes them (a partial character as U+FFFD).
    public byte[] DetokenizeBytes(int[] ids, bool renderSpecial = true) {
        UIntPtr length;
        return Native.TakeBytes(Native.smol_detokenize(Handle, ids, (UIntPtr)ids.Length,
                                                       renderSpecial ? 1 : 0, out length), length);
    }
    public string Detokenize(int[] ids, bool renderSpecial = true) {
        return Encoding.UTF8.GetString(DetokenizeBytes(ids, renderSpecial));
    }
    public void Dispose() {
        // Generators keep the weights alive on their own.
        if (Handle != IntPtr.Zero) Native.smol_model_free(Handle);
        Handle = IntPtr.Zero;
    }
}

public sealed class Batcher : IDisposable {
    internal IntPtr Handle;
    public Batcher(Model model, BatcherOptions options = null) {
        var o = new Native.BatcherOptions();
        Native.Init(ref o);
        if (options != null) {
            if (options.MaxBatch.HasValue) o.max_batch = options.MaxBatch.Value;
            if (options.PrefillShared.HasValue) o.prefill_shared = options.PrefillShared.Value;
            if (options.MaxStepSlowdown.HasValue) o.max_step_slowdown = options.MaxStepSlowdown.Value;
            if (options.PrefillAlone.HasValue) o.prefill_alone = options.PrefillAlone.Value;
            if (options.GatherMs.HasValue) o.gather_ms = options.GatherMs.Value;
            if (options.GatherFraction.HasValue) o.gather_fraction = options.GatherFraction.Value;
        }
        Handle = Native.Check(Native.smol_batcher_new_with_options(model.Handle, ref o));
    }
    public void Dispose() {
        if (Handle != IntPtr.Zero) Native.smol_batcher_free(Handle);
        Handle = IntPtr.Zero;
    }
}

public sealed class Generator : IDisposable {
    IntPtr handle;
    Generator(IntPtr h) { handle = h; }
    public Generator(Model model, GeneratorOptions options = null) {
        options = options ?? new GeneratorOptions();
        var o = new Native.GeneratorOptions();
        Native.Init(ref o);
        o.n_ctx = options.NCtx;
        o.kv_type = (long)options.KVType;
        o.prefill_chunk = options.PrefillChunk;
        if (options.Batcher != null) o.batcher = options.Batcher.Handle;
        o.context_policy = (long)options.ContextPolicy;
        o.n_keep = options.NKeep;
        handle = Native.Check(Native.smol_generator_new(model.Handle, ref o));
    }

    // onText gets each piece of text; return false to stop (StopReason.Cancelled).
    public Result Generate(string prompt, GenerateParams parameters = null,
                           Func<string, bool> onText = null) {
        using (var memory = new NativeMemory()) {
            var p = memory.Params(parameters);
            return WithCallback(onText, (fn, user) =>
                Native.smol_generate(handle, Native.Utf8(prompt), ref p, fn, user));
        }
    }
    public Result Chat(ChatMessage[] messages, GenerateParams parameters = null,
                       Func<string, bool> onText = null) {
        using (var memory = new NativeMemory()) {
            var p = memory.Params(parameters);
            IntPtr m = memory.Messages(messages);
            return WithCallback(onText, (fn, user) =>
                Native.smol_chat(handle, m, (UIntPtr)messages.Length, ref p, fn, user));
        }
    }
    // Completes a prompt given as token ids (no BOS added), e.g. Tokenize's, edited.
    public Result GenerateTokens(int[] ids, GenerateParams parameters = null,
                                 Func<string, bool> onText = null) {
        using (var memory = new NativeMemory()) {
            var p = memory.Params(parameters);
            return WithCallback(onText, (fn, user) =>
                Native.smol_generate_tokens(handle, ids, (UIntPtr)ids.Length, ref p, fn, user));
        }
    }
    // The ids Generate(prompt) would run (control tokens parsed unless asText).
    public int[] Tokenize(string prompt, bool asText = false) {
        UIntPtr n;
        return Native.TakeTokens(Native.smol_tokenize(handle, Native.Utf8(prompt), asText ? 1 : 0, out n), n);
    }
    // The exact ids and text Chat(messages, parameters) would run (the chat
    // template's options of parameters: tools, thinking, date, ...); the text's
    // markers in contents are text, so tokenizing it would give other ids.
    public int[] TokenizeChat(ChatMessage[] messages, GenerateParams parameters = null) {
        using (var memory = new NativeMemory()) {
            var p = memory.Params(parameters);
            IntPtr m = memory.Messages(messages);
            UIntPtr n;
            return Native.TakeTokens(
                Native.smol_tokenize_chat(handle, m, (UIntPtr)messages.Length, ref p, out n), n);
        }
    }
    public string RenderChat(ChatMessage[] messages, GenerateParams parameters = null) {
        using (var memory = new NativeMemory()) {
            var p = memory.Params(parameters);
            IntPtr m = memory.Messages(messages);
            UIntPtr length;
            return Encoding.UTF8.GetString(Native.TakeBytes(
                Native.smol_render_chat(handle, m, (UIntPtr)messages.Length, ref p, out length), length));
        }
    }
    delegate IntPtr Run(Native.PieceFn fn, IntPtr userData);
    static Result WithCallback(Func<string, bool> onText, Run run) {
        if (onText == null) return Native.TakeResult(run(null, IntPtr.Zero));
        GCHandle target = GCHandle.Alloc(onText);
        try {
            return Native.TakeResult(run(Native.PieceThunk, GCHandle.ToIntPtr(target)));
        } finally {
            target.Free();
        }
    }

    // Runs on the generator's worker thread: Poll() each frame.
    public AsyncGeneration GenerateAsync(string prompt, GenerateParams parameters = null) {
        using (var memory = new NativeMemory()) {  // the library copies the parameters
            var p = memory.Params(parameters);
            return new AsyncGeneration(
                this, Native.Check(Native.smol_generate_async(handle, Native.Utf8(prompt), ref p)));
        }
    }
    public AsyncGeneration ChatAsync(ChatMessage[] messages, GenerateParams parameters = null) {
        using (var memory = new NativeMemory()) {
            var p = memory.Params(parameters);
            IntPtr m = memory.Messages(messages);
            return new AsyncGeneration(this, Native.Check(
                Native.smol_chat_async(handle, m, (UIntPtr)messages.Length, ref p)));
        }
    }

    // Any thread: stops the run in progress.
    public void Cancel() { Native.smol_cancel(handle); }
    public void Reset() { if (Native.smol_reset(handle) != 0) throw Native.LastError(); }
    public Generator Fork() { return new Generator(Native.Check(Native.smol_generator_fork(handle))); }
    public long CachedTokens { get { return (long)Native.smol_generator_n_cached(handle).ToUInt64(); } }
    // The KV cache's bytes held by this generator alone, and shared with its forks (a fork
    // shares the cache's blocks until it writes them; shared bytes count in each fork, held once).
    public ulong CacheOwnedBytes { get { ulong owned, shared; MemoryOf(out owned, out shared); return owned; } }
    public ulong CacheSharedBytes { get { ulong owned, shared; MemoryOf(out owned, out shared); return shared; } }
    void MemoryOf(out ulong owned, out ulong shared) {
        if (Native.smol_generator_cache_memory(handle, out owned, out shared) != 0) throw Native.LastError();
    }
    public long HistoryLength { get { return (long)Native.smol_generator_n_history(handle).ToUInt64(); } }
    // The ids of the last run's prompt and generated tokens, as the cache holds them.
    public int[] History() {
        UIntPtr n;
        IntPtr ids = Native.Check(Native.smol_generator_history(handle, out n));
        try {
            var history = new int[(long)n.ToUInt64()];
            if (history.Length > 0) Marshal.Copy(ids, history, 0, history.Length);
            return history;
        } finally {
            Native.smol_tokens_free(ids);
        }
    }
    // Removes history tokens [first, first + count) and their cache entries (the
    // later ones move down; nothing is prefilled again). Past the history:
    // Status.OutOfRange; from inside a run's callback: Status.InvalidArgument.
    public void Erase(long first, long count) {
        if (first < 0 || count < 0) throw new ArgumentOutOfRangeException("first and count must not be negative");
        if (Native.smol_erase(handle, (UIntPtr)(ulong)first, (UIntPtr)(ulong)count) != 0)
            throw Native.LastError();
    }

    public byte[] SaveSession() {
        UIntPtr size;
        IntPtr data = Native.Check(Native.smol_session_save(handle, out size));
        try {
            var bytes = new byte[(long)size.ToUInt64()];
            Marshal.Copy(data, bytes, 0, bytes.Length);
            return bytes;
        } finally {
            Native.smol_bytes_free(data);
        }
    }
    public void RestoreSession(byte[] bytes) {
        if (Native.smol_session_restore(handle, bytes, (UIntPtr)bytes.Length) != 0)
            throw Native.LastError();
    }

    public void Dispose() {
        if (handle != IntPtr.Zero) Native.smol_generator_free(handle);
        handle = IntPtr.Zero;
    }
}

public sealed class AsyncGeneration : IDisposable {
    IntPtr handle;
    // The generator the run is on (Dispose it when done with a temporary one).
    // Freeing a generator cancels its run, so the handle keeps it reachable:
    // after `new Generator(model).GenerateAsync(...)` nothing else refers to it.
    // Generator has no finalizer, so today a collection would only leak it; the
    // reference keeps a finalizer added later (as Python's __del__ frees its
    // generator) from ending the run.
    public readonly Generator Generator;
    internal AsyncGeneration(Generator generator, IntPtr h) { Generator = generator; handle = h; }
    // The text produced since the last poll ("" if none); never blocks.
    public string Poll() {
        UIntPtr length;
        IntPtr text = Native.smol_async_poll(handle, out length);
        return Native.FromUtf8(text, (long)length.ToUInt64());
    }
    public bool Done { get { return Native.smol_async_done(handle) != 0; } }
    public void Cancel() { Native.smol_async_cancel(handle); }
    public Result Wait() { return Native.TakeResult(Native.smol_async_wait(handle)); }
    // Cancels a run still going.
    public void Dispose() {
        if (handle != IntPtr.Zero) Native.smol_async_free(handle);
        handle = IntPtr.Zero;
    }
}

}  // namespace Smol
