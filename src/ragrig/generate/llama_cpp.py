"""In-process GGUF chat generator via xllamacpp (the packaged SmolLM2-135M-Instruct by default)."""

from __future__ import annotations

from typing import Any

from ragrig.generate.base import Generation
from ragrig.generate.prompt import VERDICT_GRAMMAR, chat_messages, read_completion
from ragrig.weights.models import resolve_model

# generate.flash_attn -> llama.cpp's flash_attn_type (None, auto: llama.cpp decides per device)
FLASH_ATTN = {None: -1, False: 0, True: 1}


def grammar_for(cfg: Any) -> str | None:
    """The grammar a configuration's answers are decoded under: a claim_verdict answer begins
    with one verdict (VERDICT_GRAMMAR) unless `constrain_verdict` is false; else none."""
    if cfg.prompt == "claim_verdict" and cfg.constrain_verdict:
        return VERDICT_GRAMMAR
    return None


class LlamaCppGenerator:
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
        grammar: str | None = None,
        n_batch: int = 2048,
        n_ubatch: int = 512,
        flash_attn: bool | None = None,
        stop: tuple[str, ...] = (),
    ):
        import xllamacpp as xlc

        if flash_attn not in FLASH_ATTN:
            raise ValueError(f"flash_attn must be true, false or None, not {flash_attn!r}")
        params = xlc.CommonParams()
        params.model.path = resolve_model(model)
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = min(n_ubatch, n_batch)  # llama.cpp caps it so; stated, not implied
        params.flash_attn_type = FLASH_ATTN[flash_attn]
        params.n_parallel = 1
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads  # prompt evaluation: the same threads
        params.sampling.seed = seed
        params.sampling.temp = temperature
        params.verbosity = -1  # llama.cpp's per-request timing lines would drown the progress bar
        self.server = xlc.Server(params)
        self.model_name = model
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.prompt = prompt
        self.grammar = grammar  # GBNF constraining every answer (grammar_for)
        self.stop = list(stop)  # the answer ends before the first of these strings

    @classmethod
    def from_config(cls, cfg: Any, seed: int = 0, threads: int = 2) -> LlamaCppGenerator:
        return cls(
            cfg.model,
            cfg.system_prompt,
            cfg.n_ctx,
            cfg.max_tokens,
            cfg.temperature,
            seed,
            threads,
            cfg.prompt,
            grammar_for(cfg),
            cfg.n_batch,
            cfg.n_ubatch,
            cfg.flash_attn,
            tuple(cfg.stop),
        )

    def chat(self, messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
        """One chat-completions call; raises on an error response."""
        request = {
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            # Reusing a cached prompt prefix changes the logits slightly: answers would then
            # depend on which query ran before. Off, so that each answer is reproducible alone.
            "cache_prompt": False,
            **({"stop": self.stop} if self.stop else {}),
            **extra,
        }
        resp = self.server.handle_chat_completions(request)
        if not isinstance(resp, dict) or "choices" not in resp:
            raise RuntimeError(f"llama.cpp returned an error: {resp!r}"[:500])
        return resp

    def generate(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> Generation:
        """The answer; `temperature`, `seed` and a smaller `max_tokens` replace the configured
        ones for one call (a self-consistency sample)."""
        return read_completion(self.respond(question, passages, temperature, seed, max_tokens))

    def respond(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The whole chat-completions response of generate(): with llama.cpp's `timings`
        (prompt_n, prompt_ms, predicted_n, predicted_ms) beside the answer and usage."""
        extra = {k: v for k, v in (("temperature", temperature), ("seed", seed)) if v is not None}
        if max_tokens is not None:
            extra["max_tokens"] = min(max_tokens, self.max_tokens)
        if self.grammar:
            extra["grammar"] = self.grammar
        messages = chat_messages(self.system_prompt, question, passages, self.prompt)
        return self.chat(messages, **extra)
