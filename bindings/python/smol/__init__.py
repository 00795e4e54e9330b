"""smol from Python: SmolLM3 GGUF inference through the C ABI (include/smol/smol.h).

Pure ctypes, nothing to compile or pip-install: put bindings/python on
PYTHONPATH, build the shared library (cmake --build build --target smol_shared),
and the package finds it (smol/_native.py says where it looks).

    import smol
    model = smol.Model("model.gguf")
    gen = model.generator()
    print(gen.generate("Once upon a time", max_tokens=32, temperature=0).text)
    for piece in gen.stream("Once upon a time", max_tokens=32):
        print(piece, end="", flush=True)
    reply = gen.chat([{"role": "user", "content": "Hi!"}], enable_thinking=False)

Threads: a Model may be shared by any number of Generators on any threads; a
Generator is used by one thread at a time, but cancel() may be called from any
thread (the native call releases the GIL while it runs). Errors are smol.Error
(with .kind: "io", "format", "invalid_argument", ...).
"""

import ctypes
import json
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional

from . import _native
from ._native import lib

__all__ = ["Error", "Model", "Generator", "Batcher", "AsyncGeneration", "Result", "Stream",
           "version", "build_info"]

STOP_REASONS = ["eos", "max_tokens", "stop_string", "cancelled", "context_full"]
DEVICES = {"cpu": 0, "cuda": 1, "auto": 2}
KV_TYPES = {"f32": 0, "f16": 1, "q8_0": 2}
CONTEXT_POLICIES = {"stop": 0, "shift": 1}


class Error(Exception):
    """A failed smol call: .code (the smol_status number), .kind ("io", ...), .message."""

    def __init__(self, code: int, message: str):
        self.code = code
        self.kind = lib.smol_status_name(code).decode()
        self.message = message
        super().__init__(f"{self.kind}: {message}")


def _raise_last():
    raise Error(lib.smol_last_error(), lib.smol_last_error_message().decode("utf-8", "replace"))


def _check(handle):
    if not handle:
        _raise_last()
    return handle


def version() -> str:
    return lib.smol_version().decode()


def build_info() -> str:
    return lib.smol_build_info().decode()


def _utf8(text: str) -> bytes:
    # Lone surrogates pass through, so the library reports them as bad UTF-8
    # (with the byte offset) instead of Python failing here.
    return text.encode("utf-8", "surrogatepass")


@dataclass
class Result:
    text: str
    reasoning: str
    answer: str
    tokens: List[int]
    stop_reason: str  # "eos", "max_tokens", "stop_string", "cancelled", "context_full"
    matched_stop: str
    tool_calls: List[Dict[str, Any]]  # [{"name", "arguments" (dict or None), "text", "error"}]
    n_prompt_tokens: int
    n_reused_tokens: int
    prefill_ms: float
    decode_ms: float
    # context_policy="shift": tokens this call left out of the context or
    # erased from it, and the prompt's share of them.
    n_discarded_tokens: int = 0
    n_prompt_discarded_tokens: int = 0

    @property
    def n_prefilled_tokens(self) -> int:
        """The prompt tokens actually run: less what the cache held and what a shift left out."""
        return self.n_prompt_tokens - self.n_reused_tokens - self.n_prompt_discarded_tokens


def _string(pointer, length) -> str:
    return ctypes.string_at(pointer, length).decode("utf-8", "replace") if length else ""


def _take_result(pointer) -> Result:
    """A Result from a smol_result*, which it frees."""
    _check(pointer)
    try:
        r = pointer.contents
        return Result(
            text=_string(r.text, r.text_length),
            reasoning=_string(r.reasoning, r.reasoning_length),
            answer=_string(r.answer, r.answer_length),
            tokens=r.tokens[:r.n_tokens],
            stop_reason=STOP_REASONS[r.stop_reason],
            matched_stop=r.matched_stop.decode("utf-8", "replace"),
            tool_calls=json.loads(r.tool_calls_json.decode("utf-8", "replace")),
            n_prompt_tokens=r.n_prompt_tokens,
            n_reused_tokens=r.n_reused_tokens,
            prefill_ms=r.prefill_ms,
            decode_ms=r.decode_ms,
            n_discarded_tokens=r.n_discarded_tokens,
            n_prompt_discarded_tokens=r.n_prompt_discarded_tokens,
        )
    finally:
        lib.smol_result_free(pointer)


_PARAM_NAMES = {
    "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
    "frequency_penalty", "penalty_last_n", "seed", "logit_bias", "logits_hook", "max_tokens",
    "stop", "ignore_eos", "prompt_as_text", "add_generation_prompt", "enable_thinking", "today",
    "tools", "parse_special_in_content", "grammar", "json_schema", "json_max_indent",
    "json_max_integer_digits", "json_max_fraction_digits", "json_max_exponent_digits",
    "json_max_any_depth", "constrain_tool_calls"
}


class _Params:
    """A smol_params and the buffers it points into (kept alive as long as this)."""

    def __init__(self, kwargs: Dict[str, Any]):
        unknown = set(kwargs) - _PARAM_NAMES
        if unknown:
            raise TypeError("unknown generation parameter(s): " + ", ".join(sorted(unknown)))
        p = _native.Params()
        lib.smol_params_init(ctypes.byref(p))
        self.keep = []
        self.has_callbacks = False
        for name, value in kwargs.items():
            if name == "stop":
                if isinstance(value, str):
                    value = [value]
                array = (ctypes.c_char_p * max(1, len(value)))(*[_utf8(s) for s in value])
                self.keep.append(array)
                p.stop = ctypes.cast(array, ctypes.POINTER(ctypes.c_char_p))
                p.n_stop = len(value)
            elif name == "logit_bias":
                items = list(value.items())
                array = (_native.LogitBias * max(1, len(items)))(*items)
                self.keep.append(array)
                p.logit_bias = ctypes.cast(array, ctypes.POINTER(_native.LogitBias))
                p.n_logit_bias = len(items)
            elif name == "logits_hook":
                hook = value

                def call(logits, n_vocab, _user, hook=hook):
                    hook(logits, n_vocab)

                fn = _native.LOGITS_FN(call)
                self.keep.append(fn)
                self.has_callbacks = True
                p.logits_hook = fn
            elif name == "tools":
                tools = []
                for tool in value:
                    parameters = tool.get("parameters")
                    if parameters is not None and not isinstance(parameters, str):
                        parameters = json.dumps(parameters)
                    tools.append((_utf8(tool["name"]), _utf8(tool.get("description", "")),
                                  _utf8(parameters) if parameters is not None else None))
                array = (_native.Tool * max(1, len(tools)))(*tools)
                self.keep.append(array)
                p.tools = ctypes.cast(array, ctypes.POINTER(_native.Tool))
                p.n_tools = len(tools)
            elif name == "enable_thinking":
                p.enable_thinking = -1 if value is None else int(bool(value))
            elif name in ("today", "grammar", "json_schema"):
                setattr(p, name, None if value is None else _utf8(value))
            elif name in ("ignore_eos", "prompt_as_text", "add_generation_prompt",
                          "parse_special_in_content", "constrain_tool_calls"):
                setattr(p, name, int(bool(value)))
            else:
                setattr(p, name, value)
        self.struct = p

    def ref(self):
        return ctypes.byref(self.struct)


class _Messages:
    def __init__(self, messages):
        items = []
        for m in messages:
            if isinstance(m, dict):
                items.append((_utf8(m["role"]), _utf8(m["content"]),
                              int(bool(m.get("model_output", False)))))
            else:  # (role, content) or (role, content, model_output)
                items.append((_utf8(m[0]), _utf8(m[1]), int(bool(m[2])) if len(m) > 2 else 0))
        self.array = (_native.Message * max(1, len(items)))(*items)
        self.count = len(items)


def _piece_callback(on_text: Callable[[str], Any]):
    """A smol_piece_fn over on_text(piece) (whose False stops the run)."""

    def call(piece, length, _user):
        try:
            keep_going = on_text(ctypes.string_at(piece, length).decode("utf-8", "replace"))
            return 0 if keep_going is False else 1
        except BaseException:  # an exception cannot cross the C frames: stop the run
            return 0

    return _native.PIECE_FN(call)


def _load_options(n_threads, device, cuda_device, memory_budget, interleave_weights, cpu,
                  progress, log, keep):
    o = _native.LoadOptions()
    lib.smol_load_options_init(ctypes.byref(o))
    o.n_threads = n_threads
    if device not in DEVICES:
        raise ValueError(f"device must be one of {sorted(DEVICES)}, not {device!r}")
    o.device = DEVICES[device]
    o.cuda_device = cuda_device
    o.memory_budget = memory_budget
    o.interleave_weights = int(bool(interleave_weights))
    if cpu is not None:
        o.cpu = cpu.encode()
    if progress is not None:
        fn = _native.PROGRESS_FN(lambda value, _user: 0 if progress(value) is False else 1)
        keep.append(fn)
        o.progress = fn
    if log is not None:
        fn = _native.LOG_FN(lambda level, message, _user: log(level, message.decode(
            "utf-8", "replace")))
        keep.append(fn)
        o.log = fn
    return o


class Model:
    """A loaded GGUF file, immutable and shared by any number of generators.

    Model(path) or Model(data=bytes); options as the C++ LoadOptions: n_threads,
    device ("cpu", "cuda", "auto"), cuda_device, memory_budget,
    interleave_weights, cpu (a kernel level name), progress(fraction) -> False
    cancels, log(level, message)."""

    def __init__(self, path: Optional[str] = None, *, data: Optional[bytes] = None,
                 n_threads: int = 0, device: str = "cpu", cuda_device: int = 0,
                 memory_budget: int = 0, interleave_weights: bool = True,
                 cpu: Optional[str] = None, progress=None, log=None):
        self._handle = None
        keep = []
        options = _load_options(n_threads, device, cuda_device, memory_budget,
                                interleave_weights, cpu, progress, log, keep)
        if (path is None) == (data is None):
            raise TypeError("Model needs a path or data=, not both")
        if path is not None:
            self._data = None
            self._handle = _check(lib.smol_model_load(_utf8(str(path)), ctypes.byref(options)))
        else:
            # The library reads the buffer for the model's whole life.
            self._data = ctypes.create_string_buffer(bytes(data), len(data))
            self._handle = _check(lib.smol_model_load_memory(self._data, len(data),
                                                             ctypes.byref(options)))

    @property
    def identity(self) -> str:
        return lib.smol_model_identity(self._handle).decode()

    @property
    def cpu_level(self) -> str:
        return lib.smol_model_cpu_level(self._handle).decode()

    @property
    def device(self) -> str:
        return {v: k for k, v in DEVICES.items()}[lib.smol_model_device(self._handle)]

    @property
    def n_vocab(self) -> int:
        return lib.smol_model_n_vocab(self._handle)

    @property
    def n_ctx_train(self) -> int:
        return lib.smol_model_n_ctx_train(self._handle)

    def generator(self, **options) -> "Generator":
        return Generator(self, **options)

    def close(self):
        # Generators keep the weights alive on their own.
        if self._handle:
            lib.smol_model_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Batcher:
    """Generators given one batcher decode in shared forward passes."""

    def __init__(self, model: Model):
        self._handle = None
        # The native batcher keeps the native model alive, so it needs what that
        # model needs: a Model(data=...) reads its Python buffer for as long as
        # the native model lives, and collecting the Model would free it.
        self.model = model
        self._handle = _check(lib.smol_batcher_new(model._handle))

    def close(self):
        if self._handle:
            lib.smol_batcher_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()


class Generator:
    """One conversation: a KV cache and its history (the C++ smol::Generator).

    Options: n_ctx (0: min(4096, the model's)), kv_type ("f16", "f32", "q8_0": 53 % of F16's bytes, CPU only),
    prefill_chunk, batcher, log(level, message), context_policy ("stop": a
    prompt longer than n_ctx is an error and a full context ends the run;
    "shift": the oldest tokens after the first n_keep, in chat() the oldest
    turns after the system message, leave the context instead), n_keep.
    Generation parameters are
    keyword arguments named as the C++ GenerateParams / smol_params fields
    (temperature, top_k, max_tokens, stop, seed, grammar, json_schema, tools,
    enable_thinking, ...)."""

    def __init__(self, model: Model, *, n_ctx: int = 0, kv_type: str = "f16",
                 prefill_chunk: int = 0, batcher: Optional[Batcher] = None, log=None,
                 context_policy: str = "stop", n_keep: int = 0, _handle=None):
        self._handle = None
        self._keep = []
        self.model = model
        if _handle is not None:
            self._handle = _handle
            return
        o = _native.GeneratorOptions()
        lib.smol_generator_options_init(ctypes.byref(o))
        o.n_ctx = n_ctx
        if kv_type not in KV_TYPES:
            raise ValueError(f"kv_type must be one of {sorted(KV_TYPES)}, not {kv_type!r}")
        o.kv_type = KV_TYPES[kv_type]
        o.prefill_chunk = prefill_chunk
        if context_policy not in CONTEXT_POLICIES:
            raise ValueError(f"context_policy must be one of {sorted(CONTEXT_POLICIES)}, "
                             f"not {context_policy!r}")
        o.context_policy = CONTEXT_POLICIES[context_policy]
        o.n_keep = n_keep
        if batcher is not None:
            o.batcher = batcher._handle
            self._keep.append(batcher)
        if log is not None:
            fn = _native.LOG_FN(lambda level, message, _user: log(level, message.decode(
                "utf-8", "replace")))
            self._keep.append(fn)  # called for the generator's whole life
            o.log = fn
        self._handle = _check(lib.smol_generator_new(model._handle, ctypes.byref(o)))

    def generate(self, prompt: str, *, on_text: Optional[Callable[[str], Any]] = None,
                 **params) -> Result:
        """Completes prompt; on_text(piece) gets each piece (return False to stop)."""
        p = _Params(params)
        callback = _piece_callback(on_text) if on_text else _native.PIECE_FN()
        return _take_result(lib.smol_generate(self._handle, _utf8(prompt), p.ref(), callback,
                                              None))

    def chat(self, messages, *, on_text: Optional[Callable[[str], Any]] = None,
             **params) -> Result:
        """The assistant's reply to messages ([{"role", "content"}] or (role, content))."""
        p = _Params(params)
        m = _Messages(messages)
        callback = _piece_callback(on_text) if on_text else _native.PIECE_FN()
        return _take_result(lib.smol_chat(self._handle, m.array, m.count, p.ref(), callback,
                                          None))

    def stream(self, prompt: str, **params) -> "Stream":
        """Iterates over the pieces of generate(prompt); .result holds the Result after."""
        return Stream(self, lambda on_text: self.generate(prompt, on_text=on_text, **params))

    def stream_chat(self, messages, **params) -> "Stream":
        return Stream(self, lambda on_text: self.chat(messages, on_text=on_text, **params))

    def generate_async(self, prompt: str, **params) -> "AsyncGeneration":
        p = _Params(params)
        handle = _check(lib.smol_generate_async(self._handle, _utf8(prompt), p.ref()))
        return AsyncGeneration(self, handle, p)

    def chat_async(self, messages, **params) -> "AsyncGeneration":
        p = _Params(params)
        m = _Messages(messages)
        handle = _check(lib.smol_chat_async(self._handle, m.array, m.count, p.ref()))
        return AsyncGeneration(self, handle, p)

    def cancel(self):
        """Stops the run in progress; any thread."""
        lib.smol_cancel(self._handle)

    def reset(self):
        if lib.smol_reset(self._handle) != 0:
            _raise_last()

    def fork(self) -> "Generator":
        handle = _check(lib.smol_generator_fork(self._handle))
        out = Generator(self.model, _handle=handle)
        out._keep = list(self._keep)
        return out

    def save_session(self) -> bytes:
        size = ctypes.c_size_t(0)
        data = _check(lib.smol_session_save(self._handle, ctypes.byref(size)))
        try:
            return ctypes.string_at(data, size.value)
        finally:
            lib.smol_bytes_free(data)

    def restore_session(self, data: bytes):
        if lib.smol_session_restore(self._handle, data, len(data)) != 0:
            _raise_last()

    def tokenize(self, prompt: str, as_text: bool = False) -> List[int]:
        """The ids generate(prompt, prompt_as_text=as_text) would run; text that
        generate() refuses (bad UTF-8) raises the same Error here."""
        n = ctypes.c_size_t(0)
        ids = _check(lib.smol_tokenize(self._handle, _utf8(prompt), int(as_text),
                                       ctypes.byref(n)))
        try:
            return ids[:n.value]
        finally:
            lib.smol_tokens_free(ids)

    @property
    def n_ctx(self) -> int:
        return lib.smol_generator_n_ctx(self._handle)

    @property
    def n_cached(self) -> int:
        return lib.smol_generator_n_cached(self._handle)

    def cache_memory(self) -> tuple:
        """(owned, shared): the KV cache's bytes held by this generator alone,
        and shared with its forks (a fork shares the cache's blocks until it
        writes them; shared bytes are counted in each fork, held once)."""
        owned, shared = ctypes.c_uint64(0), ctypes.c_uint64(0)
        if lib.smol_generator_cache_memory(self._handle, ctypes.byref(owned),
                                           ctypes.byref(shared)) != 0:
            _raise_last()
        return owned.value, shared.value

    @property
    def history(self) -> List[int]:
        """The ids of the last run's prompt and generated tokens, as the cache holds them."""
        n = ctypes.c_size_t(0)
        ids = _check(lib.smol_generator_history(self._handle, ctypes.byref(n)))
        try:
            return ids[:n.value]
        finally:
            lib.smol_tokens_free(ids)

    def erase(self, first: int, count: int):
        """Removes history tokens [first, first + count) and their cache entries (the
        later ones move down, nothing is prefilled again). Past the history: Error
        "out_of_range"; from inside a run's callback: "invalid_argument"."""
        if first < 0 or count < 0:
            raise ValueError("erase: first and count must not be negative")
        if lib.smol_erase(self._handle, first, count) != 0:
            _raise_last()

    def close(self):
        if self._handle:
            lib.smol_generator_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Stream:
    """The pieces of one run as an iterator: the run goes on a thread, the
    pieces come through a queue. Leaving the loop early cancels the run."""

    _END = object()

    def __init__(self, generator: Generator, run):
        self.result: Optional[Result] = None
        self._generator = generator
        self._queue: "queue.Queue" = queue.Queue()
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._work, args=(run,), daemon=True)
        self._thread.start()

    def _work(self, run):
        try:
            self.result = run(self._queue.put)
        except BaseException as e:  # handed to the iterating thread
            self._error = e
        finally:
            self._queue.put(self._END)

    def __iter__(self) -> Iterator[str]:
        try:
            while True:
                piece = self._queue.get()
                if piece is self._END:
                    break
                yield piece
        finally:
            if self._thread.is_alive():
                self._generator.cancel()
            self._thread.join()
        if self._error is not None:
            raise self._error


class AsyncGeneration:
    """A run on the generator's worker thread: poll() each frame, cancel(), wait().
    .generator is the generator it runs on, kept alive by the handle."""

    def __init__(self, generator: Generator, handle, params: _Params):
        self._handle = handle
        self._params = params  # its callbacks must live as long as the run
        # The generator the run is on. Freeing a generator cancels its run, so
        # the handle keeps it alive: in model.generator().generate_async(...)
        # nothing else refers to the generator, and collecting it would end the
        # run at once, "cancelled" with no tokens. (A Stream keeps its
        # generator the same way.)
        self.generator = generator

    def poll(self) -> str:
        """The text produced since the last poll ("" if none); never blocks."""
        n = ctypes.c_size_t(0)
        text = lib.smol_async_poll(self._handle, ctypes.byref(n))
        return ctypes.string_at(text, n.value).decode("utf-8", "replace") if n.value else ""

    @property
    def done(self) -> bool:
        return bool(lib.smol_async_done(self._handle))

    def cancel(self):
        lib.smol_async_cancel(self._handle)

    def wait(self) -> Result:
        """Blocks until the run ends (releasing the GIL); raises its error."""
        return _take_result(lib.smol_async_wait(self._handle))

    def close(self):
        if self._handle:
            if self._params.has_callbacks and not self.done:
                # The worker may still call a callback of ours: let it stop first.
                lib.smol_async_cancel(self._handle)
                lib.smol_result_free(lib.smol_async_wait(self._handle))
            lib.smol_async_free(self._handle)  # cancels a run still going
            self._handle = None

    def __del__(self):
        self.close()
