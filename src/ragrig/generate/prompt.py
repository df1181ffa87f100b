"""The chat-completions exchange every chat backend shares: the prompt it sends (system
instruction, numbered passages, question) and the answer and usage it reads back.

Two prompts (`generate.prompt`):

* ``answer``: answer a question from the passages, citing them (question-answering datasets);
* ``claim_verdict``: the query is a scientific claim (SciFact); the answer begins with exactly
  one verdict, SUPPORTED, CONTRADICTED or NOT ENOUGH INFORMATION, then justifies it citing the
  passages. ``ragrig.metrics.answers.parse_verdict`` reads the verdict back.
"""

from __future__ import annotations

from typing import Any

from ragrig.generate.base import Generation

SYSTEM_PROMPT = (
    "Answer the question using only the numbered passages. Cite passages like [1]. "
    "If the passages do not contain the answer, say you cannot answer."
)

USER_TEMPLATE = (
    "Passages:\n{passages}\n\nQuestion or claim: {question}\n"
    "Answer using only the passages, citing them like [1]."
)

VERDICT_LABELS = ("SUPPORTED", "CONTRADICTED", "NOT ENOUGH INFORMATION")

VERDICT_SYSTEM_PROMPT = (
    "You check a scientific claim against numbered passages, using only those passages. "
    "Begin your answer with exactly one of: SUPPORTED, CONTRADICTED, NOT ENOUGH INFORMATION. "
    "Then justify the verdict in one or two sentences, citing the passages like [1]."
)

VERDICT_USER_TEMPLATE = (
    "Passages:\n{passages}\n\nClaim: {question}\n"
    "Is the claim SUPPORTED, CONTRADICTED, or is there NOT ENOUGH INFORMATION in the passages? "
    "Begin with the verdict, then justify it citing the passages like [1]."
)

# GBNF grammar (llama.cpp) making a claim_verdict answer begin with one verdict and a full stop;
# the justification after it is free. A small model (SmolLM2-135M) otherwise writes "The claim
# is not supported by the passage", which names no verdict.
VERDICT_GRAMMAR = (
    'root ::= verdict ". " rest\n'
    'verdict ::= "SUPPORTED" | "CONTRADICTED" | "NOT ENOUGH INFORMATION"\n'
    "rest ::= [^\\x00]*\n"
)

# generate.prompt -> (system prompt, user template)
PROMPTS: dict[str, tuple[str, str]] = {
    "answer": (SYSTEM_PROMPT, USER_TEMPLATE),
    "claim_verdict": (VERDICT_SYSTEM_PROMPT, VERDICT_USER_TEMPLATE),
}


def system_prompt_of(prompt: str, override: str | None = None) -> str:
    """The system instruction sent: `override` (generate.system_prompt) when set, else the
    built-in one of `prompt`."""
    if prompt not in PROMPTS:
        raise ValueError(f"unknown prompt {prompt!r}; known: {sorted(PROMPTS)}")
    return override if override is not None else PROMPTS[prompt][0]


def format_passages(passages: list[str]) -> str:
    """Passages numbered from 1, one per line: `[1] first`, `[2] second`."""
    return "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))


def chat_messages(
    system_prompt: str, question: str, passages: list[str], prompt: str = "answer"
) -> list[dict[str, str]]:
    """The chat-completions messages for one question (or claim) over its passages."""
    if prompt not in PROMPTS:
        raise ValueError(f"unknown prompt {prompt!r}; known: {sorted(PROMPTS)}")
    user = PROMPTS[prompt][1].format(passages=format_passages(passages), question=question)
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def read_completion(response: dict[str, Any]) -> Generation:
    """Answer text and token usage of a chat-completions response (no usage counts as 0; a
    usage that is not a pair of counts counts as 0 too, named in `notes`); a response without
    choices raises KeyError, IndexError or TypeError, content that is not text a TypeError."""
    from ragrig.llm.http import usage_counts

    text = response["choices"][0]["message"].get("content") or ""
    if not isinstance(text, str):
        raise TypeError(f"message content is {type(text).__name__}, not text")
    prompt_tokens, completion_tokens, problem = usage_counts(response.get("usage"))
    return Generation(
        text,
        prompt_tokens,
        completion_tokens,
        notes=(f"{USAGE_INVALID}: {problem}",) if problem else (),
    )


USAGE_INVALID = "usage invalid"
