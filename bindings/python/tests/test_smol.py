"""The Python binding on the tiny fixture: the C++ API's greedy text, streaming,
chat, cancel from another thread, an async run polled to completion, handles
that keep what they need alive, sessions, erase and context shift, errors. Run: PYTHONPATH=bindings/python SMOL_FIXTURES=... python3 -m pytest
bindings/python/tests (ctest does, with SMOL_LIBRARY and SMOL_EXPECTED_GREEDY)."""

import gc
import os
import threading
import time
import weakref

import pytest

import smol

# The reference run of tests/c_abi/test_c_abi_parity.cpp, which writes the C++
# API's greedy text to $SMOL_EXPECTED_GREEDY.
PROMPT = "Once upon a time"
TOKENS = 24


def fixture_path(name):
    folder = os.environ.get("SMOL_FIXTURES") or os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "..", "shared", "fixtures")
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        if os.environ.get("SMOL_REQUIRE_FIXTURES") == "1":
            pytest.fail(f"fixture '{path}' is missing and SMOL_REQUIRE_FIXTURES=1")
        pytest.skip(f"fixture '{path}' not found (set SMOL_FIXTURES)")
    return path


@pytest.fixture(scope="module")
def model():
    return smol.Model(fixture_path("tiny-q4km.gguf"), n_threads=2)


def test_version_and_build_info():
    assert smol.version() == "0.1.0" or smol.version()
    assert smol.version() in smol.build_info()


def test_structs_filled_at_this_packages_size():
    """The binding fills its structs through smol_*_init_sized with its own
    ctypes.sizeof, so an older package's smaller struct is never written past
    its end by a newer library (a guard after it survives)."""
    import ctypes
    from smol import _native

    class OlderParams(ctypes.Structure):  # an older package's smol_params
        _fields_ = [("size", ctypes.c_uint64), ("temperature", ctypes.c_double),
                    ("top_k", ctypes.c_int64)]

    class Guarded(ctypes.Structure):
        _fields_ = [("params", OlderParams), ("guard", ctypes.c_ubyte * 64)]

    lib = smol.lib
    current = smol._init_struct(lib.smol_params_init_sized, _native.Params())
    assert current.size == ctypes.sizeof(_native.Params)
    g = Guarded()
    ctypes.memset(ctypes.byref(g), 0xA5, ctypes.sizeof(g))
    init = lib.smol_params_init_sized
    assert init(ctypes.cast(ctypes.byref(g.params), ctypes.POINTER(_native.Params)),
                ctypes.sizeof(OlderParams)) == 0
    assert g.params.size == ctypes.sizeof(OlderParams)
    assert (g.params.temperature, g.params.top_k) == (current.temperature, current.top_k)
    assert list(g.guard) == [0xA5] * 64
    with pytest.raises(smol.Error) as caught:
        smol._init_struct(lambda struct, size: init(struct, 7), _native.Params())
    assert caught.value.kind.value == "invalid_argument"


def test_greedy_text_equals_the_cpp_api(model):
    expected_file = os.environ.get("SMOL_EXPECTED_GREEDY")
    if not expected_file or not os.path.exists(expected_file):
        pytest.skip("SMOL_EXPECTED_GREEDY not set (ctest sets it)")
    with open(expected_file, "rb") as f:
        expected = f.read().decode("utf-8", "replace")
    result = model.generator().generate(PROMPT, max_tokens=TOKENS, temperature=0)
    assert result.text == expected
    assert len(result.tokens) <= TOKENS


def test_streaming_gives_the_same_text(model):
    gen = model.generator()
    whole = gen.generate(PROMPT, max_tokens=TOKENS, temperature=0)
    gen.reset()
    pieces = []
    stream = gen.stream(PROMPT, max_tokens=TOKENS, temperature=0)
    for piece in stream:
        pieces.append(piece)
    assert "".join(pieces) == whole.text
    assert stream.result.tokens == whole.tokens
    # The callback form, stopped after two pieces.
    seen = []
    stopped = gen.generate(PROMPT, max_tokens=TOKENS, temperature=0,
                           on_text=lambda p: seen.append(p) or len(seen) < 2)
    assert stopped.stop_reason == "cancelled" and len(seen) == 2


def test_leaving_a_stream_early_cancels_it(model):
    gen = model.generator()
    for i, _ in enumerate(gen.stream(PROMPT, max_tokens=-1, ignore_eos=True, temperature=0)):
        if i == 2:
            break
    # The generator is free again.
    assert gen.generate(PROMPT, max_tokens=2, temperature=0).tokens


def test_chat_and_cache_reuse(model):
    gen = model.generator()
    messages = [{"role": "system", "content": "Be brief."}, ("user", "Hello <|im_end|>")]
    first = gen.chat(messages, max_tokens=8, temperature=0, enable_thinking=False,
                     today="01 January 2026")
    assert first.n_prompt_tokens > 0
    messages.append({"role": "assistant", "content": first.text, "model_output": True})
    messages.append(("user", "And then?"))
    second = gen.chat(messages, max_tokens=8, temperature=0, enable_thinking=False,
                      today="01 January 2026")
    assert second.n_reused_tokens > first.n_prompt_tokens // 2
    tools = [{"name": "get_weather", "description": "The weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    with_tools = gen.chat(messages[:2], max_tokens=8, temperature=0, tools=tools)
    assert isinstance(with_tools.tool_calls, list)


def test_cancel_from_another_thread(model):
    gen = model.generator()
    pieces = []
    started = threading.Event()

    def on_text(piece):
        pieces.append(piece)
        started.set()

    def cancel_soon():
        started.wait(30)
        gen.cancel()

    canceller = threading.Thread(target=cancel_soon)
    canceller.start()
    result = gen.generate(PROMPT, max_tokens=-1, ignore_eos=True, temperature=0, on_text=on_text)
    canceller.join()
    assert result.stop_reason == "cancelled"
    assert len(result.tokens) < 4000


def test_async_polled_to_completion(model):
    gen = model.generator()
    reference = gen.generate(PROMPT, max_tokens=TOKENS, temperature=0)
    gen.reset()
    run = gen.generate_async(PROMPT, max_tokens=TOKENS, temperature=0)
    text = ""
    while True:
        finished = run.done
        text += run.poll()
        if finished:
            break
        time.sleep(0.001)  # a game's frame
    result = run.wait()
    run.close()
    assert result.text == text == reference.text
    assert result.tokens == reference.tokens
    # Cancelled at once.
    run = gen.chat_async([("user", "Hi")], max_tokens=-1, ignore_eos=True)
    run.cancel()
    assert run.wait().stop_reason == "cancelled"
    run.close()


def test_async_on_a_temporary_generator(model):
    # Nothing but the handle refers to the generator: freeing a generator
    # cancels its run, so the handle must keep it alive. The collection makes a
    # missing reference fail every time (CPython frees it even without).
    run = smol.Generator(model).generate_async(PROMPT, max_tokens=TOKENS, temperature=0,
                                               ignore_eos=True)
    gc.collect()
    result = run.wait()
    assert result.stop_reason != "cancelled"
    assert result.stop_reason == "max_tokens" and len(result.tokens) == TOKENS
    run.close()
    chat = model.generator().chat_async([("user", "Hi")], max_tokens=4, temperature=0,
                                        ignore_eos=True, enable_thinking=False)
    gc.collect()
    reply = chat.wait()
    assert reply.stop_reason == "max_tokens" and len(reply.tokens) == 4
    chat.close()


def test_batcher_keeps_a_memory_model(model):
    # A model loaded from bytes reads them as long as the native model lives,
    # and a batcher keeps the native model alive: it must keep the Python
    # Model (which holds the bytes) alive too.
    with open(fixture_path("tiny-q4km.gguf"), "rb") as f:
        from_memory = smol.Model(data=f.read())
    alive = weakref.ref(from_memory)
    batcher = smol.Batcher(from_memory)
    del from_memory
    gc.collect()
    assert alive() is not None
    gen = alive().generator(batcher=batcher)
    assert len(gen.generate(PROMPT, max_tokens=4, temperature=0, ignore_eos=True).tokens) == 4


def test_sessions_fork_tokenize(model):
    gen = model.generator(n_ctx=256)
    first = gen.generate(PROMPT, max_tokens=8, temperature=0)
    saved = gen.save_session()
    other = model.generator(n_ctx=256)
    other.restore_session(saved)
    assert other.n_cached == gen.n_cached
    again = other.generate(PROMPT, max_tokens=8, temperature=0)
    assert again.tokens == first.tokens
    assert again.n_reused_tokens == again.n_prompt_tokens - 1
    owned, shared = gen.cache_memory()
    assert owned > 0 and shared == 0
    fork = gen.fork()
    assert fork.n_cached == gen.n_cached
    # The fork shares the parent's cache blocks until either writes them.
    assert fork.cache_memory() == (0, owned)
    assert gen.cache_memory() == (0, owned)
    q8 = model.generator(n_ctx=256, kv_type="q8_0")
    assert q8.generate(PROMPT, max_tokens=4, temperature=0).tokens
    assert 0 < q8.cache_memory()[0] < owned
    with pytest.raises(smol.Error) as error:
        other.restore_session(saved[: len(saved) // 2])
    assert error.value.kind == "format"
    assert gen.tokenize("<|im_start|>")[0] == 128011
    assert len(gen.tokenize("<|im_start|>", as_text=True)) > 1
    # Tokenize rejects what generate rejects (a lone surrogate is bad UTF-8).
    for as_text in (False, True):
        with pytest.raises(smol.Error) as error:
            gen.tokenize("abc\udcffdef", as_text=as_text)
        assert error.value.kind == "invalid_argument" and "UTF-8" in error.value.message


def test_erase_and_history(model):
    gen = model.generator(n_ctx=256)
    prompt = "The blacksmith said hello to the traveller."
    first = gen.generate(prompt, max_tokens=8, temperature=0)
    before = gen.history
    assert len(before) == first.n_prompt_tokens + len(first.tokens)
    assert before[first.n_prompt_tokens:] == first.tokens
    # Erasing the generated tail rewinds: the prompt again reuses the cache.
    gen.erase(first.n_prompt_tokens, len(first.tokens))
    assert gen.history == before[:first.n_prompt_tokens]
    assert gen.n_cached == first.n_prompt_tokens
    again = gen.generate(prompt, max_tokens=8, temperature=0)
    assert again.tokens == first.tokens
    assert again.n_reused_tokens == again.n_prompt_tokens - 1
    cached = gen.n_cached
    gen.erase(3, 5)
    assert gen.history == before[:3] + before[8:]
    assert gen.n_cached == cached - 5
    with pytest.raises(smol.Error) as error:
        gen.erase(2, len(gen.history))
    assert error.value.kind == "out_of_range"
    assert gen.history == before[:3] + before[8:]
    # From inside a run: refused, the run goes on.
    kinds = []

    def erase_inside(_piece):
        try:
            gen.erase(0, 1)
        except smol.Error as e:
            kinds.append(e.kind)

    gen.generate(prompt, max_tokens=2, temperature=0, on_text=erase_inside)
    assert kinds and set(kinds) == {"invalid_argument"}
    with pytest.raises(ValueError):
        gen.erase(-1, 1)


def test_context_shift(model):
    prompt = "Once upon a time, in a village by the sea, there lived"
    gen = model.generator(n_ctx=64, context_policy="shift", n_keep=4)
    r = gen.generate(prompt, max_tokens=150, ignore_eos=True, temperature=0)
    assert r.stop_reason == "max_tokens" and len(r.tokens) == 150
    assert r.n_discarded_tokens > 0 and r.n_prompt_discarded_tokens == 0
    assert len(gen.history) <= 64
    assert gen.history[:4] == gen.tokenize(prompt)[:4]
    stop = model.generator(n_ctx=64)
    r = stop.generate(prompt, max_tokens=150, ignore_eos=True, temperature=0)
    assert r.stop_reason == "context_full" and r.n_discarded_tokens == 0
    # A prompt longer than the context: an error with stop, cut with shift.
    long_prompt = "The smith hammered the red iron until it rang. " * 12
    with pytest.raises(smol.Error) as error:
        stop.generate(long_prompt, max_tokens=4, temperature=0)
    assert error.value.kind == "out_of_range"
    r = gen.generate(long_prompt, max_tokens=4, temperature=0)
    assert r.n_prompt_tokens > 64 and r.n_prompt_discarded_tokens > 0
    assert 0 < r.n_prefilled_tokens <= 64
    with pytest.raises(ValueError):
        model.generator(context_policy="wrap")
    with pytest.raises(smol.Error) as error:
        model.generator(n_keep=-1)
    assert error.value.kind == "invalid_argument"


def test_errors(model):
    with pytest.raises(smol.Error) as error:
        smol.Model("/nonexistent.gguf")
    assert error.value.kind == "io" and "/nonexistent.gguf" in error.value.message
    with pytest.raises(smol.Error) as error:
        smol.Model(fixture_path("tiny-q4km.gguf"), device="cuda")
    assert error.value.kind == "unsupported"
    with pytest.raises(smol.Error) as error:
        smol.Model(fixture_path("tiny-q4km.gguf"), progress=lambda f: False)
    assert error.value.kind == "cancelled"
    with pytest.raises(smol.Error) as error:
        model.generator(n_ctx=10**9)
    assert error.value.kind == "invalid_argument"
    gen = model.generator()
    with pytest.raises(smol.Error) as error:
        gen.generate("bad \udcff text", max_tokens=2)
    assert error.value.kind == "invalid_argument" and "UTF-8" in error.value.message
    with pytest.raises(smol.Error):
        gen.generate("x", grammar="root ::= (")
    with pytest.raises(TypeError):
        gen.generate("x", max_tokenz=3)
    # A grammar and a logit bias take effect.
    assert gen.generate("Answer:", grammar='root ::= "yes" | "no"', temperature=0,
                        max_tokens=8).text in ("yes", "no")
    assert gen.generate(PROMPT, logit_bias={42: 100.0}, temperature=0, max_tokens=2,
                        ignore_eos=True).tokens == [42, 42]


def test_load_from_memory(model):
    with open(fixture_path("tiny-q4km.gguf"), "rb") as f:
        data = f.read()
    from_memory = smol.Model(data=data)
    assert from_memory.identity == model.identity
    assert from_memory.n_vocab == 128256 and from_memory.device == "cpu"


def test_with_blocks_close_everything(model):
    path = fixture_path("tiny-q4km.gguf")
    with smol.Model(path, n_threads=1) as m, m.generator(n_ctx=128) as gen, \
            smol.Batcher(m) as batcher:
        assert not m.closed and not gen.closed and not batcher.closed
        with gen.generate_async(PROMPT, max_tokens=-1, ignore_eos=True) as run:
            assert not run.closed
        # Leaving the block cancelled the run and freed the handle: the
        # generator takes the next run at once.
        assert run.closed
        with gen.stream(PROMPT, max_tokens=-1, ignore_eos=True) as stream:
            assert next(iter(stream))
        assert gen.generate(PROMPT, max_tokens=2, temperature=0).tokens
    for closed in (m, gen, batcher):
        assert closed.closed
        closed.close()  # twice: nothing
    # A closed object refuses, as a closed file does, instead of answering 0 or "".
    for use in (lambda: m.n_vocab, lambda: m.generator(), lambda: gen.n_ctx,
                lambda: gen.generate(PROMPT), lambda: gen.history, lambda: smol.Batcher(m),
                lambda: run.poll(), lambda: run.wait()):
        with pytest.raises(ValueError, match="closed"):
            use()
    gen.cancel()  # any thread, any time: never raises


def test_callback_exceptions_leave_the_call(model):
    class Stop(Exception):
        pass

    gen = model.generator()

    def on_text(_piece):
        raise Stop("from on_text")

    with pytest.raises(Stop, match="from on_text"):
        gen.generate(PROMPT, max_tokens=-1, ignore_eos=True, on_text=on_text)
    calls = []

    def hook(_logits, _n_vocab):
        calls.append(1)
        raise Stop("from the hook")

    with pytest.raises(Stop, match="from the hook"):
        gen.chat([("user", "Hi")], max_tokens=-1, ignore_eos=True, logits_hook=hook)
    assert len(calls) == 1  # the run stopped at the first exception
    run = gen.generate_async(PROMPT, max_tokens=-1, ignore_eos=True, logits_hook=hook)
    with pytest.raises(Stop, match="from the hook"):
        run.wait()
    run.close()
    # A stream raises its run's error where the iteration ends.
    with pytest.raises(smol.Error) as error:
        for _ in gen.stream(PROMPT, grammar="root ::= ("):
            pass
    assert error.value.kind == smol.ErrorKind.INVALID_ARGUMENT
    # The generator is free and consistent after each.
    assert len(gen.generate(PROMPT, max_tokens=3, ignore_eos=True).tokens) == 3

    def progress(_fraction):
        raise Stop("from progress")

    with pytest.raises(Stop, match="from progress"):
        smol.Model(fixture_path("tiny-q4km.gguf"), progress=progress)


def test_iteration_and_error_kinds(model):
    gen = model.generator()
    stream = gen.stream(PROMPT, max_tokens=6, temperature=0, ignore_eos=True)
    pieces = list(stream)
    assert len(stream.result.tokens) == 6 and "".join(pieces) == stream.result.text
    assert list(stream) == []  # one pass, as a file or a generator
    with pytest.raises(smol.Error) as error:
        smol.Model("/nonexistent.gguf")
    assert error.value.kind is smol.ErrorKind.IO and error.value.kind == "io"
    assert str(error.value).startswith("io: ")
    assert {k.value for k in smol.ErrorKind} >= {"io", "format", "cancelled", "resource"}


# A prompt whose greedy continuation repeats: what DRY penalizes and lookup drafts from.
REPEATS = "one two three four, one two three four, one two three four, one two"


def test_dry_xtc_lookup_change_what_they_should(model):
    gen = model.generator()
    greedy = dict(max_tokens=48, temperature=0, ignore_eos=True, lookup=False)

    def run(**params):
        gen.reset()
        return gen.generate(REPEATS, **params)

    plain = run(**greedy)
    assert len(plain.tokens) == 48 and plain.n_drafted_tokens == 0
    # DRY penalizes the repeats: other tokens; its window off: the same ones.
    assert run(dry_multiplier=4, **greedy).tokens != plain.tokens
    assert run(dry_multiplier=4, dry_penalty_last_n=0, **greedy).tokens == plain.tokens
    assert run(dry_multiplier=4, dry_sequence_breakers=[], **greedy).tokens != plain.tokens
    with pytest.raises(smol.Error) as e:
        run(dry_allowed_length=0, **greedy)
    assert e.value.kind == "invalid_argument"
    # XTC on a seeded sampled run: other tokens; a threshold above 0.5 turns it off.
    sampled = dict(max_tokens=48, temperature=1.0, top_k=0, top_p=1.0, min_p=0, seed=7,
                   ignore_eos=True)
    base = run(**sampled)
    assert run(xtc_probability=1.0, xtc_threshold=0.01, **sampled).tokens != base.tokens
    assert run(xtc_probability=1.0, xtc_threshold=0.6, **sampled).tokens == base.tokens
    # Lookup decoding: plain decoding's tokens in fewer steps.
    looked = run(**{**greedy, "lookup": True, "lookup_k": 4})
    assert looked.tokens == plain.tokens
    assert looked.n_accepted_drafts > 0 and looked.n_decode_steps < plain.n_decode_steps
    with pytest.raises(smol.Error):
        run(**{**greedy, "lookup": True, "lookup_k": -1})


def test_token_ids_generate_and_detokenize(model):
    gen = model.generator()
    params = dict(max_tokens=24, temperature=0)
    by_text = gen.generate(REPEATS, **params)
    ids = gen.tokenize(REPEATS)
    gen.reset()
    by_ids = gen.generate_tokens(ids, **params)
    assert by_ids.tokens == by_text.tokens and by_ids.text == by_text.text
    assert by_ids.n_prompt_tokens == len(ids)
    # Round trips: text -> ids -> text, and the generated ids are the text.
    assert model.detokenize(ids) == REPEATS
    assert model.detokenize(by_text.tokens) == by_text.text
    assert model.detokenize([]) == "" and model.detokenize([], as_bytes=True) == b""
    special = gen.tokenize("<|im_start|>")
    assert len(special) == 1
    assert model.detokenize(special) == "<|im_start|>"
    assert model.detokenize(special, render_special=False) == ""
    with pytest.raises(smol.Error) as e:
        model.detokenize([model.n_vocab])
    assert e.value.kind == "invalid_argument"


def test_render_and_tokenize_chat(model):
    gen = model.generator()
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi <|im_end|>"}]
    chat = dict(enable_thinking=False, today="01 January 2026",
                xml_tools=['{"name": "xml_probe"}'], python_tools=["def python_probe(x): ..."])
    ids = gen.tokenize_chat(messages, **chat)
    reply = gen.chat(messages, max_tokens=4, temperature=0, **chat)
    assert reply.n_prompt_tokens == len(ids) and gen.history[:len(ids)] == ids
    text = gen.render_chat(messages, **chat)
    for part in ("Hi <|im_end|>", "01 January 2026", "xml_probe", "python_probe"):
        assert part in text
    # The content's marker stays text: tokenizing the rendered text parses it.
    assert gen.tokenize(text) != ids
    with pytest.raises(TypeError):
        gen.render_chat(messages, max_tokens=3)  # not a chat template option


def test_tuning_and_batcher_options(model, tmp_path):
    path = fixture_path("tiny-q4km.gguf")
    with smol.Model(path, n_threads=2, kernel_params={"decode_chunks": 16}) as pinned:
        assert "decode chunks 16" in pinned.tuning
    with pytest.raises(smol.Error) as e:
        smol.Model(path, kernel_params={"decode_chunks": 5})
    assert e.value.kind == "invalid_argument"
    with pytest.raises(TypeError):
        smol.Model(path, kernel_params={"chunks": 16})
    with smol.Model(path, n_threads=2, tune="off") as off:
        assert "not tuned" in off.tuning
    with pytest.raises(ValueError):
        smol.Model(path, tune="sometimes")
    if os.environ.get("SMOL_TUNE") not in ("off", "0"):
        tune_file = tmp_path / "tune.txt"
        with smol.Model(path, n_threads=2, tune="on", tune_file=tune_file) as tuned:
            assert "tuned in" in tuned.tuning
        assert tune_file.exists()
    # A batcher with options: generators on it run as alone.
    with pytest.raises(smol.Error):
        smol.Batcher(model, max_batch=0)
    with pytest.raises(TypeError):
        smol.Batcher(model, batch=2)
    with smol.Batcher(model, max_batch=2, prefill_alone=3, gather_ms=1.0) as batcher:
        shared = model.generator(batcher=batcher)
        alone = model.generator()
        assert shared.generate(PROMPT, max_tokens=8, temperature=0).tokens == \
            alone.generate(PROMPT, max_tokens=8, temperature=0).tokens


def test_public_api_is_typed_and_documented():
    import inspect
    import typing

    assert smol.__version__ == smol.version()
    assert os.path.exists(smol.library_path)
    for name in smol.__all__:
        obj = getattr(smol, name)
        if not inspect.isclass(obj) and not inspect.isfunction(obj):
            continue
        assert obj.__doc__, f"smol.{name} has no docstring"
        members = [(name, obj)] if inspect.isfunction(obj) else [
            (f"{name}.{m}", f) for m, f in vars(obj).items()
            if not m.startswith("_") and (inspect.isfunction(f) or isinstance(f, property))]
        for qualified, member in members:
            function = member.fget if isinstance(member, property) else member
            assert function.__doc__, f"smol.{qualified} has no docstring"
            hints = typing.get_type_hints(function)  # the forward references resolve
            assert "return" in hints, f"smol.{qualified} has no return type"
    # PEP 561: type checkers read the package's hints.
    assert os.path.exists(os.path.join(os.path.dirname(smol.__file__), "py.typed"))



def test_the_installed_package_stands_alone():
    # Set by the python_installed ctest: these tests must have run on the
    # package pip put into that venv, with the libsmol it bundled (not the
    # source tree's package, nor a library found through SMOL_LIBRARY).
    venv = os.environ.get("SMOL_EXPECT_INSTALLED_IN")
    if not venv:
        pytest.skip("SMOL_EXPECT_INSTALLED_IN not set (the python_installed ctest sets it)")
    from importlib import metadata

    venv = os.path.realpath(venv)
    package = os.path.dirname(os.path.realpath(smol.__file__))
    assert package.startswith(venv + os.sep), package
    assert os.path.dirname(os.path.realpath(smol.library_path)) == package
    assert metadata.version("smol") == smol.version() == smol.__version__
