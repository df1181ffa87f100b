"""The chat-completions exchange every chat backend shares: the prompt it sends (system
instruction, numbered passages, question) and the answer and usage it reads back."""

from __future__ import annotations

from typing import Any

from ragrig.generate import Generation

SYSTEM_PROMPT = (
    "Answer the question using only the numbered passages. Cite passages like [1]. "
    "If the passages do not contain the answer, say you cannot answer."
)

USER_TEMPLATE = (
    "Passages:\n{passages}\n\nQuestion or claim: {question}\n"
    "Answer using only the passages, citing them like [1]."
)


def format_passages(passages: list[str]) -> str:
    """Passages numbered from 1, one per line: `[1] first`, `[2] second`."""
    return "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))


def chat_messages(system_prompt: str, question: str, passages: list[str]) -> list[dict[str, str]]:
    """The chat-completions messages for one question over its passages."""
    user = USER_TEMPLATE.format(passages=format_passages(passages), question=question)
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def read_completion(response: dict[str, Any]) -> Generation:
    """Answer text and token usage of a chat-completions response (no usage counts as 0);
    a response without choices raises KeyError, IndexError or TypeError."""
    text = response["choices"][0]["message"].get("content") or ""
    usage = response.get("usage") or {}
    return Generation(
        text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    )
