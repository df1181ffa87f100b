"""A GGUF chat model run by torch: the packaged SmolLM2-135M-Instruct's weights de-quantized by
transformers' GGUF loader, the prompt evaluated under bf16 autocast, the answer decoded in fp32.

Why beside llama.cpp (`llama_cpp`): the xllamacpp wheel is built for AVX2 at most, so on a CPU
with AMX or AVX-512 it evaluates a ~900-token SciFact prompt at ~170 tokens/s, while torch's
bf16 matrix products (oneDNN) evaluate it 5-10x faster. Decoding one token at a time is a chain
of small products where autocast costs more than it saves, so the KV cache is cast to fp32 and
the answer decoded in fp32. The weights are the same Q4_1 file, de-quantized to fp32: the
answers are close to llama.cpp's but not the same (llama.cpp also quantizes activations).

Decoding one answer alone is bound by per-step overhead (~40-55 ms a token for a 135M model on
2 cores), so `decode_batch` answers are decoded together: each prompt is evaluated alone (no
padding), then the prompts' caches are left-padded into one preallocated cache and every step
computes one token of each answer (~9 ms a token at 16). An answer then depends on the prompts
beside it only through the rounding of the batched products; the batches are fixed by the
sorted query sample and `decode_batch`, so a run is reproducible, and `decode_batch: 1`
decodes each answer alone.

The verdict constraint (`constrain_verdict`, prompt claim_verdict) is greedy decoding restricted
to the token sequences of "SUPPORTED.", "CONTRADICTED." and "NOT ENOUGH INFORMATION." until one
is complete, then free: the grammar llama.cpp applies (VERDICT_GRAMMAR), token by token.
Deterministic for a given thread count and batch: no sampling at temperature 0, and a seeded
generator per request otherwise.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragrig.generate.base import Generation, Request
from ragrig.generate.prompt import VERDICT_LABELS, chat_messages, read_completion
from ragrig.weights.models import resolve_model
from ragrig.weights.precision import resolve_precision

PRECISIONS = ("bf16", "fp32")
# Where a GGUF file's de-quantized weights and converted tokenizer are kept (load_gguf): this
# variable, else $XDG_CACHE_HOME/ragrig/gguf, else ~/.cache/ragrig/gguf.
CACHE_ENV = "RAGRIG_GGUF_CACHE"


def gguf_cache_dir(path: Path) -> Path:
    """The folder of one GGUF file's conversion: named by the file's sha256 and the
    transformers version that converted it, so a changed file or loader never reads it."""
    import os

    import transformers

    from ragrig.core.io import file_sha256

    root = (
        os.environ.get(CACHE_ENV)
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragrig" / "gguf"
    )
    return Path(root) / f"{path.stem}-{file_sha256(path)[:16]}-tf{transformers.__version__}"


def _converted(cache: Path) -> bool:
    """True when `cache` holds a finished conversion (written whole: atomic_dir)."""
    return (cache / "config.json").is_file() and (cache / "tokenizer.json").is_file()


def _save_converted(model: Any, tokenizer: Any, folder: Path) -> None:
    """The de-quantized model as a plain checkpoint: its configs without the GGUF quantization
    record (transformers refuses save_pretrained on a model loaded from GGUF), its tensors as
    safetensors (tied ones once), the tokenizer as converted."""
    import json

    from safetensors.torch import save_model

    config = model.config.to_dict()
    config.pop("quantization_config", None)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    model.generation_config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"))
    tokenizer.save_pretrained(folder)


def load_gguf_tokenizer(path: Path) -> Any:
    """The tokenizer load_gguf gives, without the model: from the conversion cache when the
    file was converted (`ragrig prepare`), else parsed from the GGUF file itself."""
    from transformers import AutoTokenizer

    cache = gguf_cache_dir(path)
    if _converted(cache):
        try:
            return AutoTokenizer.from_pretrained(cache)
        except OSError:  # renamed away mid-read by a process writing the same conversion
            pass
    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def load_gguf(path: Path) -> tuple[Any, Any]:
    """(tokenizer, fp32 model in eval mode) of a GGUF chat model. transformers' GGUF loader
    parses the file's metadata three times in pure Python and maps its tensor names layer by
    layer: ~40 s for the 135M SmolLM2 on a 2-core AVX2 EPYC, for a 2 s de-quantization. So the
    first load saves its result (safetensors weights, tokenizer.json, configs) to
    gguf_cache_dir, written to a temporary sibling and renamed whole, and every later load
    reads that (the same tensors, bit for bit). A cache that cannot be written (a read-only
    home) only costs the next load its time."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragrig.core.io import atomic_dir

    cache = gguf_cache_dir(path)
    if _converted(cache):
        try:
            tokenizer = AutoTokenizer.from_pretrained(cache)
            model = AutoModelForCausalLM.from_pretrained(cache, dtype=torch.float32)
            return tokenizer, model.eval()
        except OSError:  # renamed away mid-read by a process writing the same conversion
            pass
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    try:
        if not (cache / "config.json").is_file():  # another process may have written it since
            with atomic_dir(cache) as tmp:
                _save_converted(model, tokenizer, tmp)
    except OSError:  # a read-only home, or another process's clean-up of a temporary folder
        pass
    return tokenizer, model


def prepare(model: str) -> tuple[Path, bool]:
    """Convert `model`'s GGUF file into its cache folder now unless it is there: (the folder,
    whether this call converted it). `make setup` runs it (`ragrig prepare`), so that a first
    run's generate stage does not spend ~20-40 s converting."""
    path = Path(resolve_model(model))
    cache = gguf_cache_dir(path)
    if _converted(cache):
        return cache, False
    load_gguf(path)
    return cache, True


def _shared(a: list[int], b: list[int]) -> int:
    """How many leading tokens `a` and `b` have in common."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def timed_generation(response: dict[str, Any]) -> Generation:
    """A response's answer with `seconds`: its prompt pass plus its (share of) decoding."""
    t = response["timings"]
    return replace(read_completion(response), seconds=(t["prompt_ms"] + t["predicted_ms"]) / 1000)


class TorchGgufGenerator:
    def __init__(
        self,
        model: str,
        system_prompt: str,
        n_ctx: int = 2048,
        max_tokens: int = 128,
        temperature: float = 0.0,
        seed: int = 0,
        threads: int = 2,
        prompt: str = "answer",
        constrain_verdict: bool = False,
        prefill_precision: str = "bf16",
        stop: tuple[str, ...] = (),
        decode_batch: int = 16,
        reuse_prefix: bool = True,
    ):
        import torch
        from transformers.utils import logging as hf_logging

        if prefill_precision not in PRECISIONS:
            raise ValueError(f"prefill_precision must be one of {PRECISIONS}")
        if decode_batch < 1:
            raise ValueError(f"decode_batch must be at least 1, not {decode_batch}")
        torch.set_num_threads(threads)
        path = Path(resolve_model(model))
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the loader's de-quantizing bars and deprecation notes
        hf_logging.disable_progress_bar()
        try:
            self.tokenizer, self.model = load_gguf(path)
        finally:
            hf_logging.set_verbosity(verbosity)
            hf_logging.enable_progress_bar()
        eos = self.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.eos.add(self.tokenizer.eos_token_id)
        self.eos_id = min(self.eos)
        self.batch_size = decode_batch  # answers decoded together (generate_many)
        self.model_name = model
        self.system_prompt = system_prompt
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.prompt = prompt
        self.prefill_precision = prefill_precision
        self.stop = list(stop)
        self.reuse_prefix = reuse_prefix
        self._head: tuple[list[int], list[tuple[Any, Any]]] | None = None  # ids, their K/V
        self._last: tuple[list[int], list[tuple[Any, Any]]] | None = None  # the last prompt's
        # prompts kept whole (keep_prompts): a later identical prompt starts from its keys/values
        self._kept: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()
        self.keep = 0
        self.tokens_reused = 0  # prompt tokens whose keys and values came from a shared prefix
        self.verdicts: list[list[int]] = []
        if constrain_verdict and prompt == "claim_verdict":
            self.verdicts = [
                self.tokenizer.encode(f"{label}.", add_special_tokens=False)
                for label in VERDICT_LABELS
            ]

    @classmethod
    def from_config(cls, cfg: Any, seed: int = 0, threads: int = 2) -> TorchGgufGenerator:
        return cls(
            cfg.model,
            cfg.system_prompt,
            cfg.n_ctx,
            cfg.max_tokens,
            cfg.temperature,
            seed,
            threads,
            cfg.prompt,
            cfg.constrain_verdict,
            resolve_precision(cfg.prefill_precision),
            tuple(cfg.stop),
            cfg.decode_batch,
            cfg.reuse_prefix,
        )

    def keep_prompts(self, n: int) -> None:
        """Keep the keys and values of the last `n` prompts evaluated (0: none, the default).
        A later prompt identical to a kept one evaluates only its last token: the samples of a
        batch's answers (self-consistency), drawn after the batch, cost no second prompt pass.
        Each kept prompt holds its cache (layers x 2 x kv heads x head dim a token) until it is
        among the `n` oldest; keep_prompts(0) lets them go."""
        self.keep = max(int(n), 0)
        while len(self._kept) > self.keep:
            self._kept.popitem(last=False)

    def _allowed(self, generated: list[int]) -> list[int] | None:
        """The tokens the verdict constraint allows next; None once a verdict is complete."""
        if not self.verdicts:
            return None
        n = len(generated)
        live = [v for v in self.verdicts if v[: min(n, len(v))] == generated[: len(v)]]
        if any(len(v) <= n for v in live):
            return None
        return sorted({v[n] for v in live})

    def _prompt_ids(self, question: str, passages: list[str]) -> list[int]:
        messages = chat_messages(self.system_prompt, question, passages, self.prompt)
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        if not isinstance(ids, list):  # a BatchEncoding in some transformers versions
            ids = list(ids["input_ids"])
        return ids

    def _head_kv(self) -> tuple[list[int], list[tuple[Any, Any]]]:
        """The tokens every prompt begins with (those two unlike prompts share: the system turn
        and the user turn's opening, up to the first passage's text) and their keys and values,
        evaluated once. The keys and values of a position depend only on the tokens up to it,
        so a prompt that begins with these tokens needs only the rest evaluated."""
        import torch

        if self._head is None:
            one = self._prompt_ids("a", ["b"])
            two = self._prompt_ids("z?", ["(y)"])
            head = one[: _shared(one, two)]
            with torch.autocast("cpu", torch.bfloat16, enabled=self.prefill_precision == "bf16"):
                out = self.model(input_ids=torch.tensor([head]), use_cache=True, logits_to_keep=1)
            self._head = head, [(layer.keys, layer.values) for layer in out.cache.layers]
        return self._head

    def _prefill(self, ids: list[int]) -> tuple[list[tuple[Any, Any]], Any]:
        """The prompt's forward pass alone (no padding: exactly what a batch of one sees): its
        per-layer fp32 keys and values, and the logits of its last position.

        With `reuse_prefix`, the pass starts after the longest prefix the prompt shares with
        the head every prompt begins with (_head_kv), with the prompt evaluated just before
        it (the lost-in-the-middle probe's orders of one query's passages share the system
        turn and their first passage) or with a kept prompt it equals (keep_prompts), from
        that prefix's keys and values: a position's keys
        and values depend only on the tokens up to it. The same prompts in the same order give
        the same answers; on SciFact's sample the answers equal those of full passes
        (docs/benchmarks.md §17)."""
        import torch
        from transformers import DynamicCache

        if len(ids) + self.max_tokens > self.n_ctx:
            raise ValueError(
                f"prompt of {len(ids)} tokens + max_tokens {self.max_tokens} exceeds n_ctx "
                f"{self.n_ctx}"
            )
        start, source, kwargs = 0, None, {}
        if self.reuse_prefix:
            head, head_kv = self._head_kv()
            if ids[: len(head)] == head:
                start, source = len(head), head_kv
            if self._last is not None:
                shared = _shared(ids, self._last[0])
                if shared > start:
                    start, source = shared, self._last[1]
            kept = self._kept.get(tuple(ids)) if self._kept else None
            if kept is not None:
                start, source = len(ids), kept
            start = min(start, len(ids) - 1)  # at least the last token evaluated: its logits
        if source is not None and start > 0:
            cache = DynamicCache()
            for layer, (keys, values) in enumerate(source):
                cache.update(keys[:, :, :start], values[:, :, :start], layer)
            kwargs = {"cache": cache}
        else:
            start = 0
        self.tokens_reused += start
        with torch.autocast("cpu", torch.bfloat16, enabled=self.prefill_precision == "bf16"):
            # logits of the last position only: the vocabulary product of 49k x 576 at every
            # prompt position would be a tenth of the prompt's work
            out = self.model(
                input_ids=torch.tensor([ids[start:]]), use_cache=True, logits_to_keep=1, **kwargs
            )
        raw = [(layer.keys, layer.values) for layer in out.cache.layers]
        if self.reuse_prefix:
            self._last = (ids, raw)
            if self.keep:
                self._kept[tuple(ids)] = raw
                self._kept.move_to_end(tuple(ids))
                while len(self._kept) > self.keep:
                    self._kept.popitem(last=False)
        return [(k.float(), v.float()) for k, v in raw], out.logits[0, -1].float()

    def _decode_batch(
        self,
        prompts: list[list[int]],
        temperatures: list[float],
        seeds: list[int],
        limits: list[int] | None = None,
    ):
        """Prompts evaluated one by one, then their answers decoded together, one token of each
        per step: the prompts' caches left-padded into one preallocated cache, each answer with
        its own positions and mask, so that padding never enters an answer; answer i stops at
        `limits[i]` tokens (default max_tokens for all), the batch when all have. Returns per prompt
        (generated token ids, finish reason, stop-cut text or None, prompt seconds) or the
        exception its prompt raised, and the decoding's wall seconds."""
        import torch
        from transformers import StaticCache

        results: list[Any] = [None] * len(prompts)
        live, caches, logits = [], [], []
        for i, ids in enumerate(prompts):
            t0 = time.perf_counter()
            try:
                kv, last = self._prefill(ids)
            except Exception as exc:
                results[i] = exc
                continue
            live.append(i)
            caches.append(kv)
            logits.append(last)
            results[i] = time.perf_counter() - t0
        if not live:
            return results, 0.0
        t0 = time.perf_counter()
        lens = [len(prompts[i]) for i in live]
        width, n = max(lens), len(live)
        cache = StaticCache(config=self.model.config, max_cache_len=width + self.max_tokens)
        for layer in range(len(caches[0])):
            keys0, values0 = caches[0][layer]
            keys = keys0.new_zeros((n, keys0.shape[1], width, keys0.shape[3]))
            values = values0.new_zeros((n, values0.shape[1], width, values0.shape[3]))
            for j, kv in enumerate(caches):
                keys[j, :, width - lens[j] :] = kv[layer][0][0]
                values[j, :, width - lens[j] :] = kv[layer][1][0]
            cache.update(keys, values, layer)
        del caches
        mask = torch.zeros((n, width + self.max_tokens), dtype=torch.long)
        for j, length in enumerate(lens):
            mask[j, width - length : width] = 1
        positions = torch.tensor(lens).view(n, 1)
        rngs = [
            torch.Generator().manual_seed(seeds[i]) if temperatures[i] > 0 else None for i in live
        ]
        limit = [
            self.max_tokens if limits is None else min(limits[i], self.max_tokens) for i in live
        ]
        generated: list[list[int]] = [[] for _ in live]
        texts: list[str | None] = [None] * n  # set when a stop string ends an answer
        finish = ["length"] * n
        done = [False] * n
        step_logits = torch.stack(logits)
        for step in range(self.max_tokens):
            tokens = []
            for j, i in enumerate(live):
                token = self.eos_id  # a finished answer's input: computed, never read
                if not done[j]:
                    token = self._choose(step_logits[j], generated[j], temperatures[i], rngs[j])
                    if token in self.eos:
                        done[j], finish[j] = True, "stop"
                    else:
                        generated[j].append(token)
                        texts[j] = self._stopped(generated[j])
                        if texts[j] is not None:
                            done[j], finish[j] = True, "stop"
                        elif len(generated[j]) >= limit[j]:
                            done[j] = True
                tokens.append(token)
            if all(done):
                break
            mask[:, width + step] = 1
            out = self.model(
                input_ids=torch.tensor(tokens).view(n, 1),
                attention_mask=mask[:, : width + step + 1],
                position_ids=positions + step,
                cache=cache,
                cache_position=torch.tensor([width + step]),
                use_cache=True,
            )
            step_logits = out.logits[:, -1].float()
        decode_s = time.perf_counter() - t0
        for j, i in enumerate(live):
            results[i] = (generated[j], finish[j], texts[j], results[i])
        return results, decode_s

    def _choose(self, logits: Any, generated: list[int], temperature: float, rng: Any) -> int:
        """The next token: greedy at temperature 0, else sampled by `rng`; within the verdict
        constraint while it holds."""
        import torch

        allowed = self._allowed(generated)
        if allowed is not None:
            masked = torch.full_like(logits, float("-inf"))
            masked[allowed] = logits[allowed]
            logits = masked
        if temperature > 0:
            probs = torch.softmax(logits / temperature, dim=-1)
            return int(torch.multinomial(probs, 1, generator=rng))
        return int(torch.argmax(logits))

    def _stopped(self, generated: list[int]) -> str | None:
        """The answer cut before the first stop string, once one appears; else None (decoded
        per token only when stop strings are set)."""
        if not self.stop:
            return None
        so_far = self.tokenizer.decode(generated, skip_special_tokens=True)
        hits = [so_far.find(s) for s in self.stop if s in so_far]
        return so_far[: min(hits)] if hits else None

    def respond_many(self, requests: list[Request]) -> list[dict[str, Any] | Exception]:
        """Chat-completions-shaped responses (answer, usage, llama.cpp-style `timings`) or the
        exception of a request, decoded `decode_batch` at a time. `prompt_ms` is the request's
        own prompt pass, `predicted_ms` an even share of its batch's decoding."""
        out: list[dict[str, Any] | Exception] = []
        for start in range(0, len(requests), self.batch_size):
            out.extend(self._respond_batch(requests[start : start + self.batch_size]))
        return out

    def _respond_batch(self, requests: list[Request]) -> list[dict[str, Any] | Exception]:
        import torch

        prompts = [self._prompt_ids(r.question, r.passages) for r in requests]
        temperatures = [
            self.temperature if r.temperature is None else r.temperature for r in requests
        ]
        seeds = [self.seed if r.seed is None else r.seed for r in requests]
        limits = [self.max_tokens if r.max_tokens is None else r.max_tokens for r in requests]
        with torch.inference_mode():
            results, decode_s = self._decode_batch(prompts, temperatures, seeds, limits)
        n_live = sum(not isinstance(r, Exception) for r in results)
        responses: list[dict[str, Any] | Exception] = []
        for ids, result in zip(prompts, results, strict=True):
            if isinstance(result, Exception):
                responses.append(result)
                continue
            generated, finish, text, prompt_s = result
            if text is None:
                text = self.tokenizer.decode(generated, skip_special_tokens=True)
            responses.append(
                {
                    "choices": [
                        {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
                    ],
                    "usage": {"prompt_tokens": len(ids), "completion_tokens": len(generated)},
                    "timings": {
                        "prompt_n": len(ids),
                        "prompt_ms": prompt_s * 1000,
                        "predicted_n": len(generated),
                        "predicted_ms": decode_s / n_live * 1000,
                    },
                }
            )
        return responses

    def respond(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """respond_many of this one request (a batch of one); raises its exception."""
        (response,) = self.respond_many(
            [Request(question, passages, temperature, seed, max_tokens)]
        )
        if isinstance(response, Exception):
            raise response
        return response

    def generate_many(self, requests: list[Request]) -> list[Generation | Exception]:
        """The answers of respond_many, each with `seconds`: its prompt pass plus its share of
        the batch's decoding."""
        return [
            r if isinstance(r, Exception) else timed_generation(r)
            for r in self.respond_many(requests)
        ]

    def generate(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> Generation:
        return read_completion(self.respond(question, passages, temperature, seed, max_tokens))
