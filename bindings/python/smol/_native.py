"""ctypes declarations of include/smol/smol.h, and how the library is found.

The shared library (libsmol.so, smol.dll, libsmol.dylib; CMake target
smol::shared) is looked for, first found wins:
  1. the path in the environment variable SMOL_LIBRARY;
  2. beside this package (where `pip install bindings/python` puts it, or
     wherever it was copied);
  3. only when this package sits in smol's source tree (bindings/python/smol):
     the tree's build folders (<repo>/build, then <repo>/build-*/, newest first);
  4. the system's library path (ctypes.util.find_library("smol")).
library_path is the one loaded.
"""

import ctypes
import ctypes.util
import glob
import os
import sys

from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint8, c_uint64, c_void_p)
from typing import List, Optional, Tuple

if sys.platform == "win32":
    LIBRARY_NAMES = ["smol.dll", "libsmol.dll"]
elif sys.platform == "darwin":
    LIBRARY_NAMES = ["libsmol.dylib"]
else:
    LIBRARY_NAMES = ["libsmol.so"]


def source_tree() -> Optional[str]:
    """smol's source tree when this package is its bindings/python/smol, else None.
    An installed package (site-packages/smol) has no such tree above it, and
    guessing build folders there would load whatever happens to lie around."""
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    marker = os.path.join(repo, "include", "smol", "smol.h")
    return repo if os.path.exists(marker) else None


def library_candidates() -> List[str]:
    """The paths tried, in order (the system search comes last, by name)."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    if os.environ.get("SMOL_LIBRARY"):
        out.append(os.environ["SMOL_LIBRARY"])
    out += [os.path.join(here, name) for name in LIBRARY_NAMES]
    repo = source_tree()
    if repo is not None:
        builds = [os.path.join(repo, "build")]
        builds += sorted(glob.glob(os.path.join(repo, "build-*")), key=os.path.getmtime,
                         reverse=True)
        for folder in builds:
            out += [os.path.join(folder, name) for name in LIBRARY_NAMES]
    return out


def load_library() -> Tuple[ctypes.CDLL, str]:
    """The library and its path; OSError naming every place tried."""
    tried = []
    for path in library_candidates():
        if os.path.exists(path):
            return ctypes.CDLL(path), path
        tried.append(path)
    found = ctypes.util.find_library("smol")
    if found:
        return ctypes.CDLL(found), found
    raise OSError("smol: the shared library (libsmol) was not found. Install the package "
                  "with pip (pip install ./bindings/python builds or bundles it), or build "
                  "it (cmake -S . -B build && cmake --build build --target smol_shared) "
                  "and set SMOL_LIBRARY to its path. Tried: " + ", ".join(tried))


PROGRESS_FN = CFUNCTYPE(c_int, c_float, c_void_p)
LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
PIECE_FN = CFUNCTYPE(c_int, POINTER(ctypes.c_char), c_size_t, c_void_p)
LOGITS_FN = CFUNCTYPE(None, POINTER(c_float), c_size_t, c_void_p)
WORKER_START_FN = CFUNCTYPE(None, c_void_p)


class LoadOptions(Structure):
    _fields_ = [("size", c_uint64), ("n_threads", c_int64), ("device", c_int64),
                ("cuda_device", c_int64), ("memory_budget", c_uint64),
                ("interleave_weights", c_int64), ("cpu", c_char_p), ("progress", PROGRESS_FN),
                ("progress_user_data", c_void_p), ("log", LOG_FN), ("log_user_data", c_void_p),
                ("tune", c_int64), ("tune_file", c_char_p), ("pin_kernel_params", c_int64),
                ("kernel_pace_steps", c_int64), ("kernel_interleaved_prefetch", c_int64),
                ("kernel_stored_prefetch", c_int64), ("kernel_decode_chunks", c_int64),
                ("kernel_codebook_gathers", c_int64)]


class GeneratorOptions(Structure):
    _fields_ = [("size", c_uint64), ("n_ctx", c_int64), ("kv_type", c_int64),
                ("prefill_chunk", c_int64), ("batcher", c_void_p), ("log", LOG_FN),
                ("log_user_data", c_void_p), ("on_worker_start", WORKER_START_FN),
                ("worker_start_user_data", c_void_p), ("context_policy", c_int64),
                ("n_keep", c_int64)]


class BatcherOptions(Structure):
    _fields_ = [("size", c_uint64), ("max_batch", c_int64), ("prefill_shared", c_int64),
                ("max_step_slowdown", c_double), ("prefill_alone", c_int64),
                ("gather_ms", c_double), ("gather_fraction", c_double)]


class LogitBias(Structure):
    _fields_ = [("token", c_int32), ("bias", c_float)]


class Tool(Structure):
    _fields_ = [("name", c_char_p), ("description", c_char_p), ("parameters", c_char_p)]


class Params(Structure):
    _fields_ = [("size", c_uint64), ("temperature", c_double), ("top_k", c_int64),
                ("top_p", c_double), ("min_p", c_double), ("repeat_penalty", c_double),
                ("presence_penalty", c_double), ("frequency_penalty", c_double),
                ("penalty_last_n", c_int64), ("seed", c_uint64),
                ("logit_bias", POINTER(LogitBias)), ("n_logit_bias", c_int64),
                ("logits_hook", LOGITS_FN), ("logits_hook_user_data", c_void_p),
                ("max_tokens", c_int64), ("stop", POINTER(c_char_p)), ("n_stop", c_int64),
                ("ignore_eos", c_int64), ("prompt_as_text", c_int64),
                ("add_generation_prompt", c_int64), ("enable_thinking", c_int64),
                ("today", c_char_p), ("tools", POINTER(Tool)), ("n_tools", c_int64),
                ("parse_special_in_content", c_int64), ("grammar", c_char_p),
                ("json_schema", c_char_p), ("json_max_indent", c_int64),
                ("json_max_integer_digits", c_int64), ("json_max_fraction_digits", c_int64),
                ("json_max_exponent_digits", c_int64), ("json_max_any_depth", c_int64),
                ("constrain_tool_calls", c_int64), ("dry_multiplier", c_double),
                ("dry_base", c_double), ("dry_allowed_length", c_int64),
                ("dry_penalty_last_n", c_int64), ("dry_sequence_breakers", POINTER(c_char_p)),
                ("n_dry_sequence_breakers", c_int64), ("xtc_probability", c_double),
                ("xtc_threshold", c_double), ("lookup", c_int64), ("lookup_k", c_int64),
                ("lookup_max_ngram", c_int64), ("xml_tools", POINTER(c_char_p)),
                ("n_xml_tools", c_int64), ("python_tools", POINTER(c_char_p)),
                ("n_python_tools", c_int64)]


class Message(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p), ("model_output", c_int64)]


class CResult(Structure):
    _fields_ = [("size", c_uint64), ("text", c_void_p), ("text_length", c_uint64),
                ("reasoning", c_void_p), ("reasoning_length", c_uint64), ("answer", c_void_p),
                ("answer_length", c_uint64), ("tool_calls_json", c_char_p),
                ("matched_stop", c_char_p), ("tokens", POINTER(c_int32)), ("n_tokens", c_uint64),
                ("stop_reason", c_int64), ("n_prompt_tokens", c_uint64),
                ("n_reused_tokens", c_uint64), ("prefill_ms", c_double), ("decode_ms", c_double),
                ("n_discarded_tokens", c_uint64), ("n_prompt_discarded_tokens", c_uint64),
                ("n_decode_steps", c_uint64), ("n_drafted_tokens", c_uint64),
                ("n_accepted_drafts", c_uint64)]


def declare(lib):
    """Argument and result types of every entry point."""
    h = c_void_p
    table = {
        "smol_last_error": (c_int, []),
        "smol_last_error_message": (c_char_p, []),
        "smol_status_name": (c_char_p, [c_int]),
        "smol_version": (c_char_p, []),
        "smol_build_info": (c_char_p, []),
        "smol_load_options_init_sized": (c_int, [POINTER(LoadOptions), c_size_t]),
        "smol_model_load": (h, [c_char_p, POINTER(LoadOptions)]),
        "smol_model_load_memory": (h, [c_void_p, c_size_t, POINTER(LoadOptions)]),
        "smol_model_free": (None, [h]),
        "smol_model_identity": (c_char_p, [h]),
        "smol_model_cpu_level": (c_char_p, [h]),
        "smol_model_device": (c_int, [h]),
        "smol_model_n_vocab": (c_size_t, [h]),
        "smol_model_n_ctx_train": (c_size_t, [h]),
        "smol_model_tuning": (c_char_p, [h]),
        "smol_detokenize": (c_void_p, [h, POINTER(c_int32), c_size_t, c_int, POINTER(c_size_t)]),
        "smol_string_free": (None, [c_void_p]),
        "smol_batcher_options_init_sized": (c_int, [POINTER(BatcherOptions), c_size_t]),
        "smol_batcher_new": (h, [h]),
        "smol_batcher_new_with_options": (h, [h, POINTER(BatcherOptions)]),
        "smol_batcher_free": (None, [h]),
        "smol_generator_options_init_sized": (c_int, [POINTER(GeneratorOptions), c_size_t]),
        "smol_generator_new": (h, [h, POINTER(GeneratorOptions)]),
        "smol_generator_free": (None, [h]),
        "smol_generator_fork": (h, [h]),
        "smol_reset": (c_int, [h]),
        "smol_cancel": (None, [h]),
        "smol_generator_n_ctx": (c_size_t, [h]),
        "smol_generator_n_cached": (c_size_t, [h]),
        "smol_generator_cache_memory": (c_int, [h, POINTER(c_uint64), POINTER(c_uint64)]),
        "smol_generator_n_history": (c_size_t, [h]),
        "smol_generator_history": (POINTER(c_int32), [h, POINTER(c_size_t)]),
        "smol_erase": (c_int, [h, c_size_t, c_size_t]),
        "smol_params_init_sized": (c_int, [POINTER(Params), c_size_t]),
        "smol_result_free": (None, [POINTER(CResult)]),
        "smol_generate": (POINTER(CResult), [h, c_char_p, POINTER(Params), PIECE_FN, c_void_p]),
        "smol_generate_tokens": (POINTER(CResult), [h, POINTER(c_int32), c_size_t,
                                                    POINTER(Params), PIECE_FN, c_void_p]),
        "smol_chat": (POINTER(CResult),
                      [h, POINTER(Message), c_size_t, POINTER(Params), PIECE_FN, c_void_p]),
        "smol_generate_async": (h, [h, c_char_p, POINTER(Params)]),
        "smol_chat_async": (h, [h, POINTER(Message), c_size_t, POINTER(Params)]),
        "smol_async_poll": (c_void_p, [h, POINTER(c_size_t)]),
        "smol_async_done": (c_int, [h]),
        "smol_async_cancel": (None, [h]),
        "smol_async_wait": (POINTER(CResult), [h]),
        "smol_async_free": (None, [h]),
        "smol_session_save": (POINTER(c_uint8), [h, POINTER(c_size_t)]),
        "smol_session_restore": (c_int, [h, c_void_p, c_size_t]),
        "smol_bytes_free": (None, [POINTER(c_uint8)]),
        "smol_tokenize": (POINTER(c_int32), [h, c_char_p, c_int, POINTER(c_size_t)]),
        "smol_tokens_free": (None, [POINTER(c_int32)]),
        "smol_tokenize_chat": (POINTER(c_int32), [h, POINTER(Message), c_size_t, POINTER(Params),
                                                  POINTER(c_size_t)]),
        "smol_render_chat": (c_void_p, [h, POINTER(Message), c_size_t, POINTER(Params),
                                        POINTER(c_size_t)]),
    }
    for name, (restype, argtypes) in table.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_lib, library_path = load_library()
lib = declare(_lib)
