"""What every generate backend shares: its types, protocol and backend registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# every model output and error passes through redact before it is stored
from ragrig.llm.redact import REDACTED, redact  # noqa: F401  (REDACTED: re-exported)


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # wall seconds a batching backend attributes to this answer (its own prompt pass plus its
    # share of the batch's decoding); None: the call's own time is the answer's
    seconds: float | None = None
    # what was repaired in the answer on its way in ("usage invalid: ...", "2 lone surrogates
    # replaced ..."): stored in the row's `error` (the answer stays ok) and counted
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """One answer to produce: `temperature` / `seed` / `max_tokens` None take the generator's
    own (`max_tokens` at most the generator's: a sample's own token budget)."""

    question: str
    passages: list[str]
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None


class Generator(Protocol):
    """A backend may also have `secrets` (e.g. its API key): redacted from every stored error.

    A backend that answers several requests together also has `batch_size` and
    `generate_many(requests) -> [Generation | Exception]` (one per request, in order; a failed
    request is its exception, the others still answered); generate_all then hands it
    `batch_size` requests at a time."""

    model_name: str

    def generate(self, question: str, passages: list[str]) -> Generation:
        """Answer `question` from numbered `passages` ([1] is passages[0]). A backend that can
        sample (the chat ones) also takes keyword `temperature` and `seed` for one call."""
        ...


GENERATORS = {
    "extractive": "ragrig.generate.extractive:ExtractiveGenerator",
    "llama_cpp": "ragrig.generate.llama_cpp:LlamaCppGenerator",
    "openai_http": "ragrig.generate.openai_http:OpenAIHttpGenerator",
    "torch_gguf": "ragrig.generate.torch_gguf:TorchGgufGenerator",
}


def make_generator(cfg: Any, seed: int, threads: int) -> Generator:
    from ragrig.core.registry import resolve

    return resolve(GENERATORS, cfg.method, "generator").from_config(cfg, seed=seed, threads=threads)
