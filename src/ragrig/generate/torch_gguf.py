"""A GGUF chat model run by torch: the packaged SmolLM2-135M-Instruct's weights de-quantized by
transformers' GGUF loader, the prompt evaluated under bf16 autocast, the answer decoded in fp32.

Why beside llama.cpp (`llama_cpp`): the xllamacpp wheel is built for AVX2 at most, so on a CPU
with AMX or AVX-512 it evaluates a ~900-token SciFact prompt at ~170 tokens/s, while torch's
bf16 matrix products (oneDNN) evaluate it 5-10x faster. Decoding one token at a time is a chain
of small products where autocast costs more than it saves, so the KV cache is cast to fp32 and
the answer decoded in fp32. The weights are the same Q4_1 file, de-quantized to fp32: the
answers are close to llama.cpp's but not the same (llama.cpp also quantizes activations).

The verdict constraint (`constrain_verdict`, prompt claim_verdict) is greedy decoding restricted
to the token sequences of "SUPPORTED.", "CONTRADICTED." and "NOT ENOUGH INFORMATION." until one
is complete, then free: the grammar llama.cpp applies (VERDICT_GRAMMAR), token by token.
Deterministic for a given thread count: no sampling at temperature 0, and a seeded generator per
call otherwise.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ragrig.generate import Generation
from ragrig.generate.prompt import VERDICT_LABELS, chat_messages, read_completion
from ragrig.models import resolve_model

PRECISIONS = ("bf16", "fp32")


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
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        if prefill_precision not in PRECISIONS:
            raise ValueError(f"prefill_precision must be one of {PRECISIONS}")
        torch.set_num_threads(threads)
        path = Path(resolve_model(model))
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the loader's de-quantizing bars and deprecation notes
        hf_logging.disable_progress_bar()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            self.model = AutoModelForCausalLM.from_pretrained(
                path.parent, gguf_file=path.name, dtype=torch.float32
            ).eval()
        finally:
            hf_logging.set_verbosity(verbosity)
            hf_logging.enable_progress_bar()
        eos = self.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.eos.add(self.tokenizer.eos_token_id)
        self.model_name = model
        self.system_prompt = system_prompt
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.prompt = prompt
        self.prefill_precision = prefill_precision
        self.stop = list(stop)
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
            cfg.prefill_precision,
            tuple(cfg.stop),
        )

    def _allowed(self, generated: list[int]) -> list[int] | None:
        """The tokens the verdict constraint allows next; None once a verdict is complete."""
        if not self.verdicts:
            return None
        n = len(generated)
        live = [v for v in self.verdicts if v[: min(n, len(v))] == generated[: len(v)]]
        if any(len(v) <= n for v in live):
            return None
        return sorted({v[n] for v in live})

    def _decode(self, ids: list[int], temperature: float, seed: int) -> dict[str, Any]:
        import torch

        if len(ids) + self.max_tokens > self.n_ctx:
            raise ValueError(
                f"prompt of {len(ids)} tokens + max_tokens {self.max_tokens} exceeds n_ctx "
                f"{self.n_ctx}"
            )
        rng = torch.Generator().manual_seed(seed) if temperature > 0 else None
        t0 = time.perf_counter()
        with torch.inference_mode():
            with torch.autocast("cpu", torch.bfloat16, enabled=self.prefill_precision == "bf16"):
                # logits of the last position only: the vocabulary product of 49k x 576 at
                # every prompt position would be a tenth of the prompt's work
                out = self.model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
            cache = out.cache
            for layer in getattr(cache, "layers", []):  # decode in fp32 from here on
                layer.keys, layer.values = layer.keys.float(), layer.values.float()
            logits = out.logits[0, -1].float()
            t1 = time.perf_counter()
            generated: list[int] = []
            text: str | None = None  # set when a stop string ends the answer
            finish = "length"
            while len(generated) < self.max_tokens:
                allowed = self._allowed(generated)
                if allowed is not None:
                    masked = torch.full_like(logits, float("-inf"))
                    masked[allowed] = logits[allowed]
                    logits = masked
                if temperature > 0:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    token = int(torch.multinomial(probs, 1, generator=rng))
                else:
                    token = int(torch.argmax(logits))
                if token in self.eos:
                    finish = "stop"
                    break
                generated.append(token)
                if self.stop:  # decoded per token only when a stop string may end it
                    so_far = self.tokenizer.decode(generated, skip_special_tokens=True)
                    if any(s in so_far for s in self.stop):
                        text = so_far[: min(so_far.find(s) for s in self.stop if s in so_far)]
                        finish = "stop"
                        break
                out = self.model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True)
                cache, logits = out.cache, out.logits[0, -1].float()
            t2 = time.perf_counter()
        if text is None:
            text = self.tokenizer.decode(generated, skip_special_tokens=True)
        return {
            "choices": [
                {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
            ],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(generated)},
            "timings": {
                "prompt_n": len(ids),
                "prompt_ms": (t1 - t0) * 1000,
                "predicted_n": len(generated),
                "predicted_ms": (t2 - t1) * 1000,
            },
        }

    def respond(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """A chat-completions-shaped response: the answer, usage and `timings` (prompt_n,
        prompt_ms, predicted_n, predicted_ms, as llama.cpp reports them)."""
        messages = chat_messages(self.system_prompt, question, passages, self.prompt)
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        if not isinstance(ids, list):  # a BatchEncoding in some transformers versions
            ids = list(ids["input_ids"])
        return self._decode(
            ids,
            self.temperature if temperature is None else temperature,
            self.seed if seed is None else seed,
        )

    def generate(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        return read_completion(self.respond(question, passages, temperature, seed))
