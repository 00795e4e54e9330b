"""smol from Python: SmolLM3 GGUF inference through the C ABI (include/smol/smol.h).

Pure ctypes over libsmol: `pip install ./bindings/python` bundles the library
(setup.py says where it gets it), or put bindings/python on PYTHONPATH beside a
build of it (smol/_native.py says where it looks).

    import smol
    with smol.Model("model.gguf") as model, model.generator() as gen:
        print(gen.generate("Once upon a time", max_tokens=32, temperature=0).text)
        for piece in gen.stream("Once upon a time", max_tokens=32):
            print(piece, end="", flush=True)
        reply = gen.chat([{"role": "user", "content": "Hi!"}], enable_thinking=False)

Threads: a Model may be shared by any number of Generators on any threads; a
Generator is used by one thread at a time, but cancel() may be called from any
thread (the native call releases the GIL while it runs). Errors are smol.Error
with .kind, a smol.ErrorKind (the C++ smol::Error and smol::ErrorKind); an
exception raised by a callback of yours (on_text, logits_hook, progress) stops
the run and comes out of the call that ran it, as in C++. Model, Generator,
Batcher, Stream and AsyncGeneration are context managers: `with` closes them.
"""

import ctypes
import enum
import json
import os
import queue
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Type, TypeVar, Union)

from . import _native
from ._native import lib

__all__ = ["Error", "ErrorKind", "Model", "Generator", "Batcher", "AsyncGeneration", "Result",
           "Stream", "version", "build_info", "library_path"]

STOP_REASONS = ["eos", "max_tokens", "stop_string", "cancelled", "context_full"]
DEVICES = {"cpu": 0, "cuda": 1, "auto": 2}
KV_TYPES = {"f32": 0, "f16": 1, "q8_0": 2}
CONTEXT_POLICIES = {"stop": 0, "shift": 1}
TUNE_MODES = {"auto": 0, "on": 1, "off": 2}
KERNEL_PARAMS = ("pace_steps", "interleaved_prefetch", "stored_prefetch", "decode_chunks",
                 "codebook_gathers")


# A piece callback: return False to stop the run.
OnText = Callable[[str], Optional[bool]]
# A chat message: {"role", "content", "model_output"?} or (role, content[, model_output]).
Message = Union[Mapping[str, Any], Tuple[str, str], Tuple[str, str, bool]]
_Self = TypeVar("_Self")


class ErrorKind(str, enum.Enum):
    """What went wrong: the C++ smol::ErrorKind. A str, so e.kind == "io" also holds."""

    IO = "io"  # file missing, unreadable, not mappable
    FORMAT = "format"  # malformed or truncated GGUF or session bytes
    UNSUPPORTED = "unsupported"  # valid, but not implemented (e.g. cuda in a CPU build)
    SHAPE = "shape"  # a tensor whose shape disagrees with the config
    MISSING = "missing"  # a required key or tensor is absent
    TYPE = "type"  # a metadata value of the wrong type
    INVALID_ARGUMENT = "invalid_argument"  # bad option, bad UTF-8, ...
    OUT_OF_RANGE = "out_of_range"  # a prompt or session longer than the context
    CANCELLED = "cancelled"  # a load cancelled by its progress callback
    INTERNAL = "internal"  # a bug in smol: please report it
    RESOURCE = "resource"  # past the memory budget, or out of memory

    def __str__(self) -> str:
        return self.value


class Error(Exception):
    """A failed smol call (the C++ smol::Error): .kind (an ErrorKind), .message,
    .code (the C ABI's smol_status number)."""

    code: int
    kind: ErrorKind
    message: str

    def __init__(self, code: int, message: str):
        self.code = code
        name = lib.smol_status_name(code).decode()
        # A status newer than this package: internal, with its name kept in the message.
        self.kind = ErrorKind(name) if name in ErrorKind._value2member_map_ else \
            ErrorKind.INTERNAL
        if self.kind.value != name:
            message = f"[{name}] {message}"
        self.message = message
        super().__init__(f"{self.kind.value}: {message}")


def _raise_last() -> None:
    raise Error(lib.smol_last_error(), lib.smol_last_error_message().decode("utf-8", "replace"))


def _check(handle):
    if not handle:
        _raise_last()
    return handle


def _init_struct(init: Callable[..., int], struct: Any) -> Any:
    """Fills a ctypes option struct with the library's defaults through its
    smol_*_init_sized, at this package's size of the struct: a newer library
    then writes no more than the struct this package declares."""
    if init(ctypes.byref(struct), ctypes.sizeof(struct)) != 0:
        _raise_last()
    return struct


def version() -> str:
    """The library's version ("0.1.0")."""
    return lib.smol_version().decode()


def build_info() -> str:
    """The library's version, compiler and kernel levels, in one line."""
    return lib.smol_build_info().decode()


# The path of the libsmol this package loaded (smol/_native.py says where it looks).
library_path: str = _native.library_path
__version__: str = version()


def _utf8(text: str) -> bytes:
    # Lone surrogates pass through, so the library reports them as bad UTF-8
    # (with the byte offset) instead of Python failing here.
    return text.encode("utf-8", "surrogatepass")


@dataclass
class Result:
    """What a run produced (the C++ GenerateResult)."""

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
    # Forward passes after the prefill and, with lookup=True, the drafts they
    # ran and how many were accepted.
    n_decode_steps: int = 0
    n_drafted_tokens: int = 0
    n_accepted_drafts: int = 0

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
            n_decode_steps=r.n_decode_steps,
            n_drafted_tokens=r.n_drafted_tokens,
            n_accepted_drafts=r.n_accepted_drafts,
        )
    finally:
        lib.smol_result_free(pointer)


_PARAM_NAMES = {
    "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
    "frequency_penalty", "penalty_last_n", "seed", "logit_bias", "logits_hook", "max_tokens",
    "stop", "ignore_eos", "prompt_as_text", "add_generation_prompt", "enable_thinking", "today",
    "tools", "parse_special_in_content", "grammar", "json_schema", "json_max_indent",
    "json_max_integer_digits", "json_max_fraction_digits", "json_max_exponent_digits",
    "json_max_any_depth", "constrain_tool_calls", "dry_multiplier", "dry_base",
    "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability",
    "xtc_threshold", "lookup", "lookup_k", "lookup_max_ngram", "xml_tools", "python_tools"
}
# What render_chat() and tokenize_chat() take: the chat template's options.
_CHAT_PARAM_NAMES = {
    "add_generation_prompt", "enable_thinking", "today", "tools", "xml_tools", "python_tools",
    "parse_special_in_content"
}
# The string-list parameters, each with its count field.
_STRING_LISTS = {"stop": "n_stop", "dry_sequence_breakers": "n_dry_sequence_breakers",
                 "xml_tools": "n_xml_tools", "python_tools": "n_python_tools"}


class _CallbackError:
    """The first exception a callback of the caller's raised. It cannot cross the
    C frames, so the callback stops the run and the call that ran it raises the
    exception afterwards: a Python exception leaves generate() as a C++ one
    leaves Generator::generate()."""

    def __init__(self, generator_handle=None):
        self.error: Optional[BaseException] = None
        self.generator_handle = generator_handle

    def record(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        if self.generator_handle:
            # A hook that cannot stop the run itself (logits_hook) stops it so.
            lib.smol_cancel(self.generator_handle)

    def raise_if_any(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error


class _Params:
    """A smol_params and the buffers it points into (kept alive as long as this)."""

    def __init__(self, kwargs: Dict[str, Any], generator_handle=None, allowed=_PARAM_NAMES):
        unknown = set(kwargs) - allowed
        if unknown:
            raise TypeError("unknown generation parameter(s): " + ", ".join(sorted(unknown)))
        p = _native.Params()
        _init_struct(lib.smol_params_init_sized, p)
        self.keep = []
        self.has_callbacks = False
        self.errors = _CallbackError(generator_handle)
        for name, value in kwargs.items():
            if name in _STRING_LISTS:
                if isinstance(value, str):
                    value = [value]
                array = (ctypes.c_char_p * max(1, len(value)))(*[_utf8(s) for s in value])
                self.keep.append(array)
                setattr(p, name, ctypes.cast(array, ctypes.POINTER(ctypes.c_char_p)))
                setattr(p, _STRING_LISTS[name], len(value))
            elif name == "logit_bias":
                items = list(value.items())
                array = (_native.LogitBias * max(1, len(items)))(*items)
                self.keep.append(array)
                p.logit_bias = ctypes.cast(array, ctypes.POINTER(_native.LogitBias))
                p.n_logit_bias = len(items)
            elif name == "logits_hook":
                hook = value
                errors = self.errors

                def call(logits, n_vocab, _user, hook=hook):
                    if errors.error is not None:
                        return  # the run is being cancelled
                    try:
                        hook(logits, n_vocab)
                    except BaseException as e:
                        errors.record(e)

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
            elif name in ("enable_thinking", "lookup"):
                setattr(p, name, -1 if value is None else int(bool(value)))
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


def _piece_callback(on_text: Optional[OnText], errors: _CallbackError):
    """A smol_piece_fn over on_text(piece) (whose False stops the run); an
    exception stops the run and goes to errors."""
    if on_text is None:
        return _native.PIECE_FN()

    def call(piece, length, _user):
        try:
            keep_going = on_text(ctypes.string_at(piece, length).decode("utf-8", "replace"))
            return 0 if keep_going is False else 1
        except BaseException as e:
            errors.record(e)
            return 0

    return _native.PIECE_FN(call)


def _load_options(n_threads, device, cuda_device, memory_budget, interleave_weights, cpu,
                  progress, log, keep, errors: _CallbackError, tune="auto", tune_file=None,
                  kernel_params=None):
    o = _native.LoadOptions()
    _init_struct(lib.smol_load_options_init_sized, o)
    o.n_threads = n_threads
    if device not in DEVICES:
        raise ValueError(f"device must be one of {sorted(DEVICES)}, not {device!r}")
    o.device = DEVICES[device]
    o.cuda_device = cuda_device
    o.memory_budget = memory_budget
    o.interleave_weights = int(bool(interleave_weights))
    if cpu is not None:
        o.cpu = cpu.encode()
    if tune not in TUNE_MODES:
        raise ValueError(f"tune must be one of {sorted(TUNE_MODES)}, not {tune!r}")
    o.tune = TUNE_MODES[tune]
    if tune_file is not None:
        o.tune_file = _utf8(os.fspath(tune_file))
    if kernel_params is not None:
        unknown = set(kernel_params) - set(KERNEL_PARAMS)
        if unknown:
            raise TypeError("unknown kernel_params key(s): " + ", ".join(sorted(unknown)))
        o.pin_kernel_params = 1
        for key, value in kernel_params.items():  # the keys left out keep their defaults
            setattr(o, "kernel_" + key, value)
    if progress is not None:

        def call(value, _user):
            try:
                return 0 if progress(value) is False else 1
            except BaseException as e:
                errors.record(e)
                return 0

        fn = _native.PROGRESS_FN(call)
        keep.append(fn)
        o.progress = fn
    if log is not None:
        fn = _native.LOG_FN(lambda level, message, _user: log(level, message.decode(
            "utf-8", "replace")))
        keep.append(fn)
        o.log = fn
    return o


class _Closable:
    """close() on leaving a `with` block, and on collection. Using a closed
    object raises ValueError, as a closed Python file does (the C ABI would
    quietly answer 0 or "" for a NULL handle)."""

    _handle: Any = None

    def close(self) -> None:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        """Whether close() was called (or construction failed)."""
        return not self._handle

    def _live(self):
        if not self._handle:
            raise ValueError(f"operation on a closed smol.{type(self).__name__}")
        return self._handle

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], traceback: Optional[TracebackType]) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class Model(_Closable):
    """A loaded GGUF file, immutable and shared by any number of generators
    (the C++ smol::Model).

    Model(path) or Model(data=bytes); options as the C++ LoadOptions: n_threads,
    device ("cpu", "cuda", "auto"), cuda_device, memory_budget,
    interleave_weights, cpu (a kernel level name), tune ("auto", "on", "off"),
    tune_file (where tuned kernel settings are remembered), kernel_params (a dict
    of pace_steps, interleaved_prefetch, stored_prefetch, decode_chunks,
    codebook_gathers: pins
    them instead of tuning; keys left out keep their defaults),
    progress(fraction) -> False cancels (Error "cancelled"; an exception it
    raises comes out of Model()), log(level, message). Raises Error (kind "io",
    "format", ...)."""

    def __init__(self, path: Optional[Union[str, "os.PathLike[str]"]] = None, *,
                 data: Optional[bytes] = None, n_threads: int = 0, device: str = "cpu",
                 cuda_device: int = 0, memory_budget: int = 0,
                 interleave_weights: bool = True, cpu: Optional[str] = None,
                 progress: Optional[Callable[[float], Optional[bool]]] = None,
                 log: Optional[Callable[[int, str], None]] = None, tune: str = "auto",
                 tune_file: Optional[Union[str, "os.PathLike[str]"]] = None,
                 kernel_params: Optional[Mapping[str, int]] = None):
        self._handle = None
        keep: List[Any] = []
        errors = _CallbackError()
        options = _load_options(n_threads, device, cuda_device, memory_budget,
                                interleave_weights, cpu, progress, log, keep, errors, tune,
                                tune_file, kernel_params)
        if (path is None) == (data is None):
            raise TypeError("Model needs a path or data=, not both")
        if path is not None:
            self._data = None
            handle = lib.smol_model_load(_utf8(os.fspath(path)), ctypes.byref(options))
        else:
            # The library reads the buffer for the model's whole life.
            self._data = ctypes.create_string_buffer(bytes(data), len(data))
            handle = lib.smol_model_load_memory(self._data, len(data), ctypes.byref(options))
        if not handle:
            errors.raise_if_any()  # the progress callback's own exception first
        self._handle = _check(handle)

    @property
    def identity(self) -> str:
        """A string naming the file's contents (architecture, sizes, types)."""
        return lib.smol_model_identity(self._live()).decode()

    @property
    def cpu_level(self) -> str:
        """The kernel level the CPU code runs at ("avx2", "neon", ...)."""
        return lib.smol_model_cpu_level(self._live()).decode()

    @property
    def device(self) -> str:
        """Where the weights are: "cpu" or "cuda"."""
        return {v: k for k, v in DEVICES.items()}[lib.smol_model_device(self._live())]

    @property
    def n_vocab(self) -> int:
        """The vocabulary's size."""
        return lib.smol_model_n_vocab(self._live())

    @property
    def n_ctx_train(self) -> int:
        """The context length the model was trained for."""
        return lib.smol_model_n_ctx_train(self._live())

    @property
    def tuning(self) -> str:
        """The kernel settings the load chose and why ("pace 60, ... (tuned in
        180 ms)" or "... (not tuned: <reason>)")."""
        return lib.smol_model_tuning(self._live()).decode()

    def detokenize(self, ids: Sequence[int], *, render_special: bool = True,
                   as_bytes: bool = False) -> Union[str, bytes]:
        """The text of token ids (the C++ Tokenizer::decode): special tokens as
        their text, or left out without render_special. The bytes need not be
        whole UTF-8 (ids may end inside a character): as_bytes=True returns
        them as they are, else a str with such bytes as U+FFFD. An id outside
        the vocabulary raises Error "invalid_argument"."""
        array = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        n = ctypes.c_size_t(0)
        text = _check(lib.smol_detokenize(self._live(), array, len(ids), int(render_special),
                                          ctypes.byref(n)))
        try:
            data = ctypes.string_at(text, n.value)
        finally:
            lib.smol_string_free(text)
        return data if as_bytes else data.decode("utf-8", "replace")

    def generator(self, **options: Any) -> "Generator":
        """A new Generator on this model; options as Generator()."""
        return Generator(self, **options)

    def close(self) -> None:
        """Lets go of the model; its generators keep the weights alive on their
        own. Called by `with` and on collection; closing twice does nothing."""
        if self._handle:
            lib.smol_model_free(self._handle)
            self._handle = None


class Batcher(_Closable):
    """Generators given one batcher decode in shared forward passes (the C++
    smol::Batcher). Generators keep their batcher alive. Options as the C++
    BatcherOptions (same defaults): max_batch, prefill_shared,
    max_step_slowdown, prefill_alone, gather_ms, gather_fraction."""

    def __init__(self, model: Model, **options: Any):
        self._handle = None
        # The native batcher keeps the native model alive, so it needs what that
        # model needs: a Model(data=...) reads its Python buffer for as long as
        # the native model lives, and collecting the Model would free it.
        self.model = model
        o = _native.BatcherOptions()
        _init_struct(lib.smol_batcher_options_init_sized, o)
        known = {name for name, _ in _native.BatcherOptions._fields_} - {"size"}
        unknown = set(options) - known
        if unknown:
            raise TypeError("unknown batcher option(s): " + ", ".join(sorted(unknown)))
        for name, value in options.items():
            setattr(o, name, value)
        self._handle = _check(lib.smol_batcher_new_with_options(model._live(), ctypes.byref(o)))

    def close(self) -> None:
        """Lets go of the batcher (its generators keep it alive)."""
        if self._handle:
            lib.smol_batcher_free(self._handle)
            self._handle = None


class Generator(_Closable):
    """One conversation: a KV cache and its history (the C++ smol::Generator).

    Options: n_ctx (0: min(4096, the model's)), kv_type ("f16", "f32", "q8_0": 53 % of F16's bytes, CPU only),
    prefill_chunk, batcher, log(level, message), context_policy ("stop": a
    prompt longer than n_ctx is an error and a full context ends the run;
    "shift": the oldest tokens after the first n_keep, in chat() the oldest
    turns after the system message, leave the context instead), n_keep.
    Generation parameters are
    keyword arguments named as the C++ GenerateParams / smol_params fields
    (temperature, top_k, max_tokens, stop, seed, grammar, json_schema, tools,
    enable_thinking, dry_multiplier, dry_sequence_breakers, xtc_probability,
    lookup, lookup_k, xml_tools, python_tools, ...)."""

    def __init__(self, model: Model, *, n_ctx: int = 0, kv_type: str = "f16",
                 prefill_chunk: int = 0, batcher: Optional[Batcher] = None,
                 log: Optional[Callable[[int, str], None]] = None,
                 context_policy: str = "stop", n_keep: int = 0, _handle: Any = None):
        self._handle = None
        self._keep: List[Any] = []
        self.model = model
        if _handle is not None:
            self._handle = _handle
            return
        o = _native.GeneratorOptions()
        _init_struct(lib.smol_generator_options_init_sized, o)
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
            o.batcher = batcher._live()
            self._keep.append(batcher)
        if log is not None:
            fn = _native.LOG_FN(lambda level, message, _user: log(level, message.decode(
                "utf-8", "replace")))
            self._keep.append(fn)  # called for the generator's whole life
            o.log = fn
        self._handle = _check(lib.smol_generator_new(model._live(), ctypes.byref(o)))

    def generate(self, prompt: str, *, on_text: Optional[OnText] = None,
                 **params: Any) -> Result:
        """Completes prompt (the C++ Generator::generate); on_text(piece) gets
        each piece as it is decoded (return False to stop: stop_reason
        "cancelled"). Raises Error, or what on_text or logits_hook raised."""
        p = _Params(params, self._live())
        callback = _piece_callback(on_text, p.errors)
        result = _take_result(lib.smol_generate(self._handle, _utf8(prompt), p.ref(), callback,
                                                None))
        p.errors.raise_if_any()
        return result

    def generate_tokens(self, ids: Sequence[int], *, on_text: Optional[OnText] = None,
                        **params: Any) -> Result:
        """Completes a prompt given as token ids (the C++ Generator::generate_tokens;
        no BOS added), e.g. tokenize()'s or tokenize_chat()'s, edited; otherwise
        as generate()."""
        p = _Params(params, self._live())
        array = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        callback = _piece_callback(on_text, p.errors)
        result = _take_result(lib.smol_generate_tokens(self._handle, array, len(ids), p.ref(),
                                                       callback, None))
        p.errors.raise_if_any()
        return result

    def chat(self, messages: Sequence[Message], *, on_text: Optional[OnText] = None,
             **params: Any) -> Result:
        """The assistant's reply to messages ([{"role", "content"}] or (role,
        content) pairs, through the model's chat template); otherwise as generate()."""
        p = _Params(params, self._live())
        m = _Messages(messages)
        callback = _piece_callback(on_text, p.errors)
        result = _take_result(lib.smol_chat(self._handle, m.array, m.count, p.ref(), callback,
                                            None))
        p.errors.raise_if_any()
        return result

    def stream(self, prompt: str, **params: Any) -> "Stream":
        """Iterates over the pieces of generate(prompt); .result holds the Result after."""
        self._live()
        return Stream(self, lambda on_text: self.generate(prompt, on_text=on_text, **params))

    def stream_chat(self, messages: Sequence[Message], **params: Any) -> "Stream":
        """Iterates over the pieces of chat(messages); .result holds the Result after."""
        self._live()
        return Stream(self, lambda on_text: self.chat(messages, on_text=on_text, **params))

    def generate_async(self, prompt: str, **params: Any) -> "AsyncGeneration":
        """Starts generate(prompt) on the generator's worker thread and returns at once."""
        p = _Params(params, self._live())
        handle = _check(lib.smol_generate_async(self._handle, _utf8(prompt), p.ref()))
        return AsyncGeneration(self, handle, p)

    def chat_async(self, messages: Sequence[Message], **params: Any) -> "AsyncGeneration":
        """Starts chat(messages) on the generator's worker thread and returns at once."""
        p = _Params(params, self._live())
        m = _Messages(messages)
        handle = _check(lib.smol_chat_async(self._handle, m.array, m.count, p.ref()))
        return AsyncGeneration(self, handle, p)

    def cancel(self) -> None:
        """Stops the run in progress; any thread. Nothing when none runs (or closed)."""
        lib.smol_cancel(self._handle)

    def reset(self) -> None:
        """Forgets the conversation (history and cache)."""
        if lib.smol_reset(self._live()) != 0:
            _raise_last()

    def fork(self) -> "Generator":
        """A new generator with this one's history, sharing its cache blocks
        until either writes them."""
        handle = _check(lib.smol_generator_fork(self._live()))
        out = Generator(self.model, _handle=handle)
        out._keep = list(self._keep)
        return out

    def save_session(self) -> bytes:
        """The history and cache as bytes, for restore_session()."""
        size = ctypes.c_size_t(0)
        data = _check(lib.smol_session_save(self._live(), ctypes.byref(size)))
        try:
            return ctypes.string_at(data, size.value)
        finally:
            lib.smol_bytes_free(data)

    def restore_session(self, data: bytes) -> None:
        """Replaces the history and cache with save_session()'s bytes (Error
        "format" for bytes that are not one, "out_of_range" if too long)."""
        if lib.smol_session_restore(self._live(), data, len(data)) != 0:
            _raise_last()

    def tokenize(self, prompt: str, as_text: bool = False) -> List[int]:
        """The ids generate(prompt, prompt_as_text=as_text) would run; text that
        generate() refuses (bad UTF-8) raises the same Error here."""
        n = ctypes.c_size_t(0)
        ids = _check(lib.smol_tokenize(self._live(), _utf8(prompt), int(as_text),
                                       ctypes.byref(n)))
        try:
            return ids[:n.value]
        finally:
            lib.smol_tokens_free(ids)

    def tokenize_chat(self, messages: Sequence[Message], **chat: Any) -> List[int]:
        """The exact ids chat(messages, **chat) would run: control tokens only
        where the template wrote them. Takes the chat template's options
        (add_generation_prompt, enable_thinking, today, tools, xml_tools,
        python_tools, parse_special_in_content)."""
        p = _Params(chat, self._live(), _CHAT_PARAM_NAMES)
        m = _Messages(messages)
        n = ctypes.c_size_t(0)
        ids = _check(lib.smol_tokenize_chat(self._handle, m.array, m.count, p.ref(),
                                            ctypes.byref(n)))
        try:
            return ids[:n.value]
        finally:
            lib.smol_tokens_free(ids)

    def render_chat(self, messages: Sequence[Message], **chat: Any) -> str:
        """The exact text chat(messages, **chat) would run, for showing or
        logging (its ids are tokenize_chat()'s: tokenizing this text would parse
        marker text in contents as control tokens). Options as tokenize_chat()."""
        p = _Params(chat, self._live(), _CHAT_PARAM_NAMES)
        m = _Messages(messages)
        n = ctypes.c_size_t(0)
        text = _check(lib.smol_render_chat(self._handle, m.array, m.count, p.ref(),
                                           ctypes.byref(n)))
        try:
            return ctypes.string_at(text, n.value).decode("utf-8")
        finally:
            lib.smol_string_free(text)

    @property
    def n_ctx(self) -> int:
        """The context's size in tokens."""
        return lib.smol_generator_n_ctx(self._live())

    @property
    def n_cached(self) -> int:
        """The tokens the cache holds."""
        return lib.smol_generator_n_cached(self._live())

    def cache_memory(self) -> Tuple[int, int]:
        """(owned, shared): the KV cache's bytes held by this generator alone,
        and shared with its forks (a fork shares the cache's blocks until it
        writes them; shared bytes are counted in each fork, held once)."""
        owned, shared = ctypes.c_uint64(0), ctypes.c_uint64(0)
        if lib.smol_generator_cache_memory(self._live(), ctypes.byref(owned),
                                           ctypes.byref(shared)) != 0:
            _raise_last()
        return owned.value, shared.value

    @property
    def history(self) -> List[int]:
        """The ids of the last run's prompt and generated tokens, as the cache holds them."""
        n = ctypes.c_size_t(0)
        ids = _check(lib.smol_generator_history(self._live(), ctypes.byref(n)))
        try:
            return ids[:n.value]
        finally:
            lib.smol_tokens_free(ids)

    def erase(self, first: int, count: int) -> None:
        """Removes history tokens [first, first + count) and their cache entries (the
        later ones move down, nothing is prefilled again). Past the history: Error
        "out_of_range"; from inside a run's callback: "invalid_argument"."""
        if first < 0 or count < 0:
            raise ValueError("erase: first and count must not be negative")
        if lib.smol_erase(self._live(), first, count) != 0:
            _raise_last()

    def close(self) -> None:
        """Frees the generator (cancelling a run still going). Called by `with`
        and on collection; closing twice does nothing."""
        if self._handle:
            lib.smol_generator_free(self._handle)
            self._handle = None


class Stream:
    """The pieces of one run as an iterator: the run goes on a thread, the
    pieces come through a queue. Leaving the loop early, close() or the end of
    a `with` block cancels the run. The run's error (Error, or what a callback
    raised) is raised where the iteration ends; .result is the Result after a
    complete one. One pass: iterating again yields nothing."""

    _END = object()

    def __init__(self, generator: Generator, run: Callable[[OnText], Result]):
        self.result: Optional[Result] = None
        self._generator = generator
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._error: Optional[BaseException] = None
        self._finished = False
        self._thread = threading.Thread(target=self._work, args=(run,), daemon=True)
        self._thread.start()

    def _work(self, run: Callable[[OnText], Result]) -> None:
        try:
            self.result = run(self._queue.put)
        except BaseException as e:  # handed to the iterating thread
            self._error = e
        finally:
            self._queue.put(self._END)

    def __iter__(self) -> Iterator[str]:
        # A generator function, so that a loop left early (break, an exception)
        # runs the finally below when the loop drops it: the run is cancelled
        # then, not when the Stream itself is collected.
        if self._finished:
            return
        try:
            while True:
                piece = self._queue.get()
                if piece is self._END:
                    break
                yield piece
        finally:
            self.close()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self) -> None:
        """Cancels the run if it is still going and waits for its thread."""
        if self._finished:
            return
        self._finished = True
        if self._thread.is_alive():
            self._generator.cancel()
        self._thread.join()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], traceback: Optional[TracebackType]) -> None:
        self.close()


class AsyncGeneration(_Closable):
    """A run on the generator's worker thread (the C++ AsyncGeneration): poll()
    each frame, cancel(), wait(). .generator is the generator it runs on, kept
    alive by the handle. close() (or the end of a `with` block) cancels a run
    still going and frees the handle."""

    def __init__(self, generator: Generator, handle: Any, params: _Params):
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
        text = lib.smol_async_poll(self._live(), ctypes.byref(n))
        return ctypes.string_at(text, n.value).decode("utf-8", "replace") if n.value else ""

    @property
    def done(self) -> bool:
        """Whether the run has ended (then wait() returns at once)."""
        return bool(lib.smol_async_done(self._live()))

    def cancel(self) -> None:
        """Asks the run to stop; it ends "cancelled" soon after. Any thread."""
        lib.smol_async_cancel(self._handle)

    def wait(self) -> Result:
        """Blocks until the run ends (releasing the GIL) and returns its Result;
        raises its Error, or what its logits_hook raised."""
        result = _take_result(lib.smol_async_wait(self._live()))
        self._params.errors.raise_if_any()
        return result

    def close(self) -> None:
        """Cancels the run if it is still going and frees the handle; twice: nothing."""
        if self._handle:
            if self._params.has_callbacks and not self.done:
                # The worker may still call a callback of ours: let it stop first.
                lib.smol_async_cancel(self._handle)
                lib.smol_result_free(lib.smol_async_wait(self._handle))
            lib.smol_async_free(self._handle)  # cancels a run still going
            self._handle = None
