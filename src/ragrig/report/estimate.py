"""What a run's model calls will cost, before one is made: calls, prompt and completion tokens
and their price at the dated `report.prices`, per stage part and in total (`ragrig estimate`),
and the refusal of a run whose estimate exceeds `budget.usd` (the pipeline's estimate
stage, between rerank and generate, stops such a run before generate loads a model).

What is counted: the generator's answers to the sampled queries, its self-consistency samples
and position-probe answers; the LLM judge's calls (`judge.llm`, `repeats` per answer) and the
claim-by-claim LLM judge's (`judge=llm_claims`: one call per claim, and per cited passage of a
sentence when `citation_checks` is on). Local models are counted too, at their price (0.0 in
the shipped table): their cost is compute, which `ragrig.report.cost` prices after the run.

Tokens are counted with the model's own tokenizer where ragrig has it (a local GGUF model: its
converted tokenizer, the chat template applied as the generator applies it) and estimated
otherwise, at 4 characters per token plus 4 per chat message, which each part says. Prompts are
built from what exists: the queries (the parse stage's output is needed), the passages of the
last rerank output when there is one (else each passage at `max_passage_chars`, an upper
bound), the answers of the last generate output when the judge is estimated and there is one
(else each answer at `generate.max_tokens`). Completions are counted at `max_tokens` per call:
an upper bound. Cached LLM-judge calls are not subtracted: an upper bound again.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from ragrig.core.config import Section
from ragrig.core.errors import ConfigError

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4
# claims of an answer not generated yet: one per this many of its tokens (a sentence's length)
TOKENS_PER_CLAIM = 25
GENERATING = ("torch_gguf", "llama_cpp", "openai_http")


class BudgetConfig(Section):
    """The `budget` section: what the run's model calls may cost."""

    usd: float | None = Field(
        None,
        ge=0,
        description="USD at report.prices; the estimate stage stops a run whose estimate "
        "exceeds it, before any model is called; null: no budget",
    )


@dataclass
class Part:
    """One kind of call of one stage, with its count and price."""

    stage: str  # generate | judge
    part: str  # answers, samples, position probe, llm judge, claims, citation checks
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int  # max_tokens per call: an upper bound
    tokens: str  # "tokenizer" (counted) or "estimated"
    usd: float
    notes: list[str] = field(default_factory=list)


@dataclass
class Estimate:
    parts: list[Part]
    read: dict[str, str]  # what each input was read from, or why it was bounded
    prices_as_of: str
    budget_usd: float | None

    @property
    def total_usd(self) -> float:
        return sum(p.usd for p in self.parts)

    @property
    def over_budget(self) -> bool:
        return self.budget_usd is not None and self.total_usd > self.budget_usd

    def record(self) -> dict[str, Any]:
        return {
            "parts": [asdict(p) for p in self.parts],
            "total": {
                "calls": sum(p.calls for p in self.parts),
                "prompt_tokens": sum(p.prompt_tokens for p in self.parts),
                "completion_tokens": sum(p.completion_tokens for p in self.parts),
                "usd": self.total_usd,
            },
            "read": self.read,
            "prices_as_of": self.prices_as_of,
            "budget_usd": self.budget_usd,
            "over_budget": self.over_budget,
        }


class TokenCounter:
    """Tokens of one model's chat prompts: its tokenizer where ragrig has one (a local GGUF
    model), else CHARS_PER_TOKEN characters per token plus TOKENS_PER_MESSAGE per message."""

    def __init__(self, model: str, local_gguf: bool):
        self.model = model
        self.tokenizer = _gguf_tokenizer(model) if local_gguf else None
        self.kind = "tokenizer" if self.tokenizer is not None else "estimated"

    def chat(self, messages: list[dict[str, str]]) -> int:
        if self.tokenizer is None:
            chars = sum(len(m["content"]) for m in messages)
            return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        return len(ids if isinstance(ids, list) else ids["input_ids"])


def _gguf_tokenizer(model: str) -> Any:
    """The tokenizer the torch and llama.cpp generators read (the GGUF file's, as converted by
    `ragrig prepare` when it was); None when the file is not there."""
    from ragrig.weights.models import resolve_model

    try:
        path = Path(resolve_model(model))
    except (OSError, ValueError, ConfigError):
        return None
    if not path.is_file():
        return None
    from ragrig.generate.torch_gguf import load_gguf_tokenizer

    return load_gguf_tokenizer(path)


def _shown(path: Path) -> str:
    """`path` as the record shows it: relative to the working directory (data/parse/...), else its
    stage folder and name, so that the same run writes the same bytes wherever it is rooted."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(Path(path.parent.name) / path.name)


def price(model: str, prices: dict[str, Any], as_of: str, prompt: int, completion: int) -> float:
    from ragrig.metrics.aggregate import cost_usd
    from ragrig.report.config import price_hint

    if model not in prices:
        raise ConfigError(price_hint(model, as_of))
    return cost_usd(prompt, completion, prices[model])


def _part(stage, part, model, counter, prompts, calls_each, max_tokens, prices, as_of, notes):
    """A Part whose `prompts` (chat messages) are each sent `calls_each` times."""
    prompt = sum(counter.chat(m) for m in prompts) * calls_each
    calls = len(prompts) * calls_each
    completion = calls * max_tokens
    usd = price(model, prices, as_of, prompt, completion)
    return Part(stage, part, model, calls, prompt, completion, counter.kind, usd, notes)


def local_gguf(method_or_backend: str) -> bool:
    return method_or_backend in ("torch_gguf", "llama_cpp")


def _contexts(gcfg: Any, qids: list[str], chunk_dir: Path, rerank_dir: Path, read: dict) -> dict:
    """qid -> the passages the generator will read: the last rerank output's, else each at
    max_passage_chars (an upper bound)."""
    from ragrig.core.io import read_table
    from ragrig.generate import assemble_contexts

    run_file, chunks_file = rerank_dir / "run.parquet", chunk_dir / "chunks.parquet"
    if run_file.is_file() and chunks_file.is_file():
        chunks = read_table(chunks_file, "chunks")
        ctx = assemble_contexts(
            read_table(run_file, "run"),
            dict(zip(chunks["chunk_id"], chunks["text"], strict=True)),
            qids,
            gcfg.n_passages,
            gcfg.passage_order,
        )
        read["passages"] = f"{_shown(run_file)} (the last rerank output)"
        return {q: [t[: gcfg.max_passage_chars] for _, t in ctx[q]] for q in qids}
    read["passages"] = (
        f"no rerank output at {_shown(run_file)}: {gcfg.n_passages} passages of "
        f"{gcfg.max_passage_chars} characters each (their longest)"
    )
    return {q: ["x" * gcfg.max_passage_chars] * gcfg.n_passages for q in qids}


def answer_tokens(gcfg: Any) -> int:
    """The longest answer the generator may give, in tokens: its max_tokens; an extractive
    answer (no max_tokens) is at most a passage of max_passage_chars."""
    limit = getattr(gcfg, "max_tokens", None)
    return int(limit) if limit else math.ceil(gcfg.max_passage_chars / CHARS_PER_TOKEN)


def _answers(
    gcfg: Any, qids: list[str], contexts: dict, generate_dir: Path | None, read: dict
) -> dict:
    """(qid -> answer text for the judge's prompts, None where not generated yet; qid -> its
    passages). With the last generate output: its answers and the passages each was given (a
    failed answer is not judged, so it is left out); else `contexts` as they are."""
    if generate_dir is not None and (generate_dir / "generations.parquet").is_file():
        from ragrig.core.io import read_table
        from ragrig.core.schemas import GENERATION_FAILED

        gens = read_table(generate_dir / "generations.parquet", "generations")
        gens = gens[~gens["status"].isin(GENERATION_FAILED)]
        shown = _shown(generate_dir / "generations.parquet")
        read["answers"] = f"{shown} (the last generate output)"
        given = {g.qid: json.loads(g.contexts) for g in gens.itertuples(index=False)}
        return dict(zip(gens["qid"], gens["answer"].astype(str), strict=True)), given
    read["answers"] = (
        f"no generate output: each answer at its longest ({answer_tokens(gcfg)} tokens)"
    )
    return dict.fromkeys(qids), contexts


def estimate(
    params: Path,
    parse_dir: Path = Path("data/parse"),
    chunk_dir: Path = Path("data/chunk"),
    rerank_dir: Path = Path("data/rerank"),
    generate_dir: Path | None = Path("data/generate"),
) -> Estimate:
    """The estimate of the run `params` describes (module doc); reads no model but tokenizers."""
    from ragrig.core.config import load_section
    from ragrig.core.io import read_table
    from ragrig.generate import sample_queries
    from ragrig.runtime.stage import read_runtime

    gcfg = load_section("generate", params)
    jcfg = load_section("judge", params)
    rcfg = load_section("report", params)
    prices = rcfg.prices
    as_of = rcfg.prices_as_of
    read: dict[str, str] = {}
    queries_file = parse_dir / "queries.parquet"
    if not queries_file.is_file():
        raise ConfigError(
            f"no queries at {queries_file}: run `dvc repro parse` first (it calls no model)"
        )
    queries = read_table(queries_file, "queries")
    texts = dict(zip(queries["qid"], queries["text"], strict=True))
    read["queries"] = _shown(queries_file)
    parts: list[Part] = []
    seed = read_runtime(params, "seed")
    if gcfg.method in ("answers_file", "rag_http"):
        qids = sample_queries(queries["qid"].tolist(), getattr(gcfg, "max_queries", None), seed)
        note = (
            "the team's answers file: no call"
            if gcfg.method == "answers_file"
            else "the team's endpoint builds its own prompts: calls counted, tokens not known "
            "before it answers (priced after the run from its reported usage)"
        )
        calls = 0 if gcfg.method == "answers_file" else len(qids)
        parts.append(Part("generate", "answers", gcfg.model, calls, 0, 0, "none", 0.0, [note]))
        contexts = dict.fromkeys(qids, [])
        read["passages"] = "the team's own (known after it answers): judge prompts without them"
        max_answer_tokens = 0
    else:
        qids = sample_queries(queries["qid"].tolist(), gcfg.max_queries, seed)
        contexts = _contexts(gcfg, qids, chunk_dir, rerank_dir, read)
        max_answer_tokens = answer_tokens(gcfg)
        if gcfg.method in GENERATING:
            parts += generate_parts(gcfg, qids, texts, contexts, prices, as_of)
    if jcfg.method == "llm_claims" or getattr(jcfg, "llm", None) is not None:
        answers, contexts = _answers(gcfg, qids, contexts, generate_dir, read)
        qids = list(answers)
        parts += judge_parts(jcfg, qids, texts, contexts, answers, max_answer_tokens, prices, as_of)
    return Estimate(parts, read, as_of, load_section("budget", params).usd)


def generate_parts(gcfg, qids, texts, contexts, prices, as_of) -> list[Part]:
    from ragrig.generate.prompt import chat_messages

    counter = TokenCounter(gcfg.model, local_gguf(gcfg.method))
    prompts = [chat_messages(gcfg.system_prompt, texts[q], contexts[q], gcfg.prompt) for q in qids]
    tail = (gcfg.max_tokens, prices, as_of)
    out = [_part("generate", "answers", gcfg.model, counter, prompts, 1, *tail, [])]
    n = getattr(gcfg, "consistency_samples", 0)
    if n:
        note = (
            f"{n} self-consistency samples per answer at temperature {gcfg.consistency_temperature}"
        )
        budget = getattr(gcfg, "consistency_max_tokens", None)
        each = min(budget, gcfg.max_tokens) if isinstance(budget, int) else gcfg.max_tokens
        if budget == "answer":
            note += " (each at most its answer's length: counted at max_tokens, an upper bound)"
        out.append(
            _part("generate", "samples", gcfg.model, counter, prompts, n, each, *tail[1:], [note])
        )
    probe = getattr(gcfg, "position_probe", None)
    if probe is not None and probe.enabled:
        from ragrig.generate.position import POSITIONS

        probed = prompts[: probe.max_queries] if probe.max_queries else prompts
        note = (
            f"{len(POSITIONS)} positions per probed query, each counted with the pipeline's "
            "passages (an upper bound: a query without a gold passage is not asked)"
        )
        out.append(
            _part("generate", "position probe", gcfg.model, counter, probed, len(POSITIONS),
                  *tail, [note])
        )  # fmt: skip
    return out


def judge_parts(jcfg, qids, texts, contexts, answers, max_answer_tokens, prices, as_of):
    if jcfg.method == "llm_claims":
        return claim_parts(jcfg, qids, texts, contexts, answers, max_answer_tokens, prices, as_of)
    llm = jcfg.llm
    from ragrig.judge.llm import judge_messages

    model = llm.model
    counter = TokenCounter(model, local_gguf(llm.backend))
    prompts, unknown = [], 0
    for q in qids:
        answer = answers.get(q)
        if answer is None:
            unknown += 1
            answer = "x" * (max_answer_tokens * CHARS_PER_TOKEN)
        prompts.append(judge_messages(texts[q], answer, contexts[q]))
    notes = [f"{llm.repeats} calls per answer"] if llm.repeats > 1 else []
    if unknown:
        notes.append(f"{unknown} answers not generated yet, each at {max_answer_tokens} tokens")
    return [
        _part("judge", "llm judge", model, counter, prompts, llm.repeats, llm.max_tokens, prices,
              as_of, notes)
    ]  # fmt: skip


def claim_parts(jcfg, qids, texts, contexts, answers, max_answer_tokens, prices, as_of):
    from ragrig.judge.citations import pair_items
    from ragrig.judge.llm_claims import claim_messages
    from ragrig.judge.overlap import OverlapJudge

    v = jcfg.verifier
    counter = TokenCounter(v.model, local_gguf(v.backend))
    splitter = OverlapJudge(min_content_words=jcfg.min_content_words)
    prompts, cited, guessed = [], [], 0
    for q in qids:
        answer = answers.get(q)
        if answer is None:  # not generated yet: claims of a sentence's length, passages whole
            guessed += 1
            n = max(1, max_answer_tokens // TOKENS_PER_CLAIM)
            claim = "x" * (TOKENS_PER_CLAIM * CHARS_PER_TOKEN)
            prompts += [claim_messages(claim, contexts[q])] * n
            if jcfg.citation_checks:
                cited += [claim_messages(claim, contexts[q][:1])] * n
            continue
        cs = splitter.claim_set(texts[q], answer)
        prompts += [claim_messages(cs.surface[c], contexts[q]) for c in cs.claims]
        if jcfg.citation_checks:
            for question, sentence, passage in pair_items(texts[q], answer, contexts[q]):
                sub = splitter.claim_set(question, sentence)
                cited += [claim_messages(sub.surface[c], passage) for c in sub.claims]
    notes = (
        [f"{guessed} answers not generated yet: {TOKENS_PER_CLAIM}-token claims"] if guessed else []
    )
    out = [
        _part("judge", "claims", v.model, counter, prompts, 1, v.max_tokens, prices, as_of, notes)
    ]
    if jcfg.citation_checks:
        note = "each claim of a citing sentence against each passage it cites"
        if guessed:
            note += f" ({guessed} answers not generated yet: one cited passage per claim)"
        out.append(
            _part("judge", "citation checks", v.model, counter, cited, 1, v.max_tokens, prices,
                  as_of, [note])
        )  # fmt: skip
    return out


OK_TEXT = "within budget\n"


def refusal(est: Estimate) -> str:
    """The one line a run over its budget stops with."""
    return (
        f"the run's estimated cost ${est.total_usd:.4f} exceeds budget.usd "
        f"${est.budget_usd:.4f} (prices of {est.prices_as_of}; `ragrig estimate` shows each "
        "part): no model was called"
    )


def render(est: Estimate) -> str:
    """The console table of an estimate."""
    rows = [("stage", "part", "model", "calls", "prompt tok", "completion tok", "tokens", "USD")]
    for p in est.parts:
        rows.append(
            (p.stage, p.part, p.model, str(p.calls), str(p.prompt_tokens),
             f"<= {p.completion_tokens}", p.tokens, f"{p.usd:.4f}")
        )  # fmt: skip
    rec = est.record()["total"]
    rows.append(
        ("total", "", "", str(rec["calls"]), str(rec["prompt_tokens"]),
         f"<= {rec['completion_tokens']}", "", f"{rec['usd']:.4f}")
    )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for p in est.parts:
        lines += [f"  {p.stage} {p.part}: {n}" for n in p.notes]
    lines += [f"read: {k}: {v}" for k, v in est.read.items()]
    budget = (
        f"budget ${est.budget_usd:.4f}: {'OVER' if est.over_budget else 'within'}"
        if est.budget_usd is not None
        else "no budget set (budget.usd)"
    )
    lines.append(f"prices as of {est.prices_as_of}; completions at max_tokens; {budget}")
    return "\n".join(lines)


def cmd_estimate(args: Any) -> int:
    """`ragrig estimate`: print (and with --json write) the estimate; exit 1 over budget."""
    params = Path(args.params)
    if not params.is_file():
        raise ConfigError(f"no params file at {params}: `ragrig params write` composes one")
    est = estimate(params)
    print(render(est))
    if args.json:
        Path(args.json).write_text(json.dumps(est.record(), indent=1) + "\n", encoding="utf-8")
    return 1 if est.over_budget else 0
