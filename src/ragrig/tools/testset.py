"""`ragrig synth`: synthetic and adversarial queries built from the corpus, each checked before
it is kept, written as a versioned BEIR set the pipeline reads like any other.

Kinds (conf/synth.yaml):

* **per_chunk**: a question one chunk answers, and its answer, written by the configured LLM (the
  packaged SmolLM2 in-process by default, any OpenAI-compatible endpoint by configuration; the
  same settings as `judge.llm`). Gold: the chunk's document.
* **multi_hop**: two chunks of different documents that share their rarest content word, and a
  question that needs both. Gold: both documents.
* adversarial, derived by rule from kept per_chunk queries (no model call):
  **negation** ("Is it true that <a sentence of the answer, negated>?", reference "No. <the
  sentence>"), **quantifier** (the same with one number of the sentence changed),
  **out_of_scope** (a name of the question replaced by one the corpus never mentions; reference:
  a refusal, no gold document: its source document judged 0) and **distractor** (a name of the
  question found in its chunk replaced by a name from a document BM25 ranks high for the
  question, so retrieval meets that document; reference a refusal as for out_of_scope),
  **ambiguous** (a name of the question replaced by a shorter mention the corpus uses for
  several things: the letters before a name's number, "TLR" for TLR4, or a multi-word name's
  first word; kept when the corpus's documents name at least one other thing the mention fits,
  the readings; reference: the mention's readings named, gold: the parent's documents and each
  reading's first document).
* **paraphrase** (near-duplicate phrasing): a kept per_chunk question reworded by the LLM, the
  same answer and gold; a system should answer both alike.

**The round trip**: every generated query is checked before it is kept, and the reason of each
drop is counted per kind:

* per_chunk: the verifier (the shipped one by default) must find every claim of the reference
  answer supported by the gold chunk;
* multi_hop: supported by the two chunks together, and by neither alone (else
  `answerable_by_one`);
* negation / quantifier: the edited statement must not be supported by the gold chunk;
* out_of_scope, distractor: the edited answer must be supported by none of the corpus's top BM25
  passages for the edited question (`out_of_scope_k`);
* ambiguous: the mention fits another name of the corpus's documents (else `not_ambiguous`);
* paraphrase: it keeps every name and number of its parent (else `meaning_changed`) and is not
  the parent's text again (`same_as_parent`);
* per_chunk and multi_hop: the question must ask (an interrogative word or an auxiliary verb,
  not a title with a question mark: `not_a_question`) and stand alone (it does not point at "the
  passage", and holds at least two content words of its passages: `not_standalone`), and its
  answer must not speak of "the passage" (`answer_points_at_passage`);
* every kind: a query whose content words overlap an existing query's (the dataset's, or one
  kept before it) by Jaccard >= `near_duplicate` is dropped; an adversarial query is not
  compared with its own parent or siblings, which it resembles by design.

Each LLM call is cached by content (the judge's call cache), so a killed run resumes where it
stopped and a rerun with the same settings makes no call. `--dry-run` prints the calls, prompt
tokens (the local model's tokenizer, else estimated) and price at `report.prices` without
calling anything. After a build, the calls' tokens, price and seconds are reported in total and
per kept query (a call answered from the cache costs nothing again). A generator that returns
the same question for most chunks, or nothing usable at all, and a corpus with no pair of
documents to ask a multi-hop question of, are each said in one line and counted.

The set: ``<out>/corpus.jsonl.gz`` (the parsed documents), ``queries.jsonl`` (metadata:
`synthetic` true, `kind`, `answer` the reference, `source_chunks`), ``qrels/synthetic.tsv``,
``synth.json`` (kept share per kind and the reasons), ``versions.jsonl`` (one line per distinct
content: sha256 of each file). Read it with ``dataset=synthetic``; the `kind` metadata is a slice
of every report. Synthetic queries cover cases; they do not replace real traffic.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ragrig.core.config import Section, Seed
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.judge.config import LLMJudgeConfig, LLMJudgeLlamaCpp

KINDS = ("per_chunk", "multi_hop", "negation", "quantifier", "out_of_scope", "distractor",
         "ambiguous", "paraphrase")  # fmt: skip
ADVERSARIAL = ("negation", "quantifier", "out_of_scope", "distractor", "ambiguous", "paraphrase")
AdversarialKind = Literal[
    "negation", "quantifier", "out_of_scope", "distractor", "ambiguous", "paraphrase"
]
SPLIT = "synthetic"
REFUSAL = "The documents do not say."
# names no corpus is expected to hold; one the corpus does hold is never used
INVENTED = ("Zorvathine", "Quellamide", "Brindlestrom", "Oxvanel", "Trelqualin", "Marduvex")
QA_SCHEMA = {
    "type": "object",
    "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
    "required": ["question", "answer"],
    "additionalProperties": False,
}
Q_SCHEMA = {
    "type": "object",
    "properties": {"question": {"type": "string"}},
    "required": ["question"],
    "additionalProperties": False,
}
SYSTEM = "You write test questions for a document search system. Reply with JSON only."
MAX_READINGS = 3  # an ambiguous mention's other readings named and judged at most
# the same question written for this share of the chunks asked: the generator is not reading them
SAME_QUESTION_SHARE = 0.5


class SynthVerifier(Section):
    model: str = Field("shipped", description="shipped, or a verifier model folder")
    support_threshold: float = Field(0.5, gt=0, lt=1)
    quantize: Literal["auto", "none", "bf16", "int8"] = "auto"
    threads: int = Field(2, gt=0)
    max_length: int = Field(128, gt=0)


class SynthConfig(Section):
    """conf/synth.yaml (module doc)."""

    chunks: str = "data/chunk/chunks.parquet"
    documents: str = "data/parse/documents.parquet"
    queries: str = Field(
        "data/parse/queries.parquet", description="existing queries: near-duplicates dropped"
    )
    out: str = "data/golden/synthetic"
    seed: Seed = 13
    per_chunk: int = Field(20, ge=0, description="chunks asked for a question each")
    multi_hop: int = Field(5, ge=0, description="chunk pairs asked for a question each")
    adversarial: list[AdversarialKind] = Field(default_factory=lambda: list(ADVERSARIAL))
    min_chunk_words: int = Field(30, ge=1, description="shorter chunks are not asked")
    max_chunk_chars: int = Field(1200, gt=0, description="a chunk's text is cut here in prompts")
    near_duplicate: float = Field(0.8, gt=0, le=1)
    out_of_scope_k: int = Field(10, gt=0)
    llm: LLMJudgeConfig = Field(
        default_factory=lambda: LLMJudgeLlamaCpp(max_tokens=96, timeout_s=120)
    )
    verifier: SynthVerifier = Field(default_factory=SynthVerifier)


def load_config(path: Path | None) -> SynthConfig:
    from ragrig.core.config import load_config_file

    return load_config_file(SynthConfig, path, "conf/synth.yaml")


@dataclass
class Item:
    qid: str
    kind: str
    question: str
    answer: str
    chunks: list[str]  # source chunk ids
    gold: dict[str, int]  # doc id -> grade
    parent: str | None = None


@dataclass
class Tally:
    attempted: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)
    dropped: dict[str, Counter] = field(default_factory=dict)

    def drop(self, kind: str, reason: str) -> None:
        self.dropped.setdefault(kind, Counter())[reason] += 1

    def record(self) -> dict[str, Any]:
        out = {}
        for kind in KINDS:
            n = self.attempted[kind]
            if not n:
                continue
            out[kind] = {
                "attempted": n,
                "kept": self.kept[kind],
                "kept_share": round(self.kept[kind] / n, 6),
                "dropped": dict(sorted(self.dropped.get(kind, Counter()).items())),
            }
        return out


# a sentence's opener that is not a name, lower-cased inside "Is it true that ...?"
_OPENERS = frozenset(
    [
        "a",
        "an",
        "the",
        "it",
        "its",
        "this",
        "these",
        "those",
        "they",
        "their",
        "there",
        "that",
        "in",
        "on",
        "at",
        "of",
        "for",
        "by",
        "our",
    ]
)


def _lower_opener(sentence: str) -> str:
    first, _, rest = sentence.partition(" ")
    return f"{first.lower()} {rest}" if first.lower() in _OPENERS else sentence


# a question that points at the text it was written from cannot be asked of a search system
_POINTING = re.compile(
    r"\b(?:(?:the|this|that|these|above|given) (?:passage|passages|text|article|document|"
    r"paragraph|excerpt|abstract)s?|passage [ab]|the answer)\b",
    re.IGNORECASE,
)


_ASKS = re.compile(
    r"\b(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|do|did|can|could|"
    r"should|will|would|has|have|had|may|might)\b",
    re.IGNORECASE,
)


def asks(question: str) -> bool:
    """A question, not a title with a question mark ("Suicide prevention strategies: a
    systematic review?"): it holds an interrogative word or an auxiliary verb."""
    return bool(_ASKS.search(question))


def standalone(question: str, passages: list[str]) -> bool:
    """A question a user could ask without the passage: it does not point at "the passage" and
    holds at least two content words of the passages."""
    if _POINTING.search(question):
        return False
    return len(content_words(question) & content_words(" ".join(passages))) >= 2


def content_words(text: str) -> frozenset[str]:
    from ragrig.core.text import tokenize

    return frozenset(tokenize([text])[0])


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _order(key: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def qa_messages(passages: list[str], multi: bool) -> list[dict[str, str]]:
    if multi:
        ask = (
            f"Passage A:\n{passages[0]}\n\nPassage B:\n{passages[1]}\n\nWrite one question "
            "that can only be answered by reading both passages, and its answer in one or two "
            "sentences using facts from both."
        )
    else:
        ask = (
            f"Passage:\n{passages[0]}\n\nWrite one question that this passage answers, and "
            "its answer in one sentence using only facts from the passage."
        )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]


def paraphrase_messages(question: str) -> list[dict[str, str]]:
    ask = (
        f"Question: {question}\n\nRewrite this question in other words for the same search. "
        "Keep every name and number in it; the answer must stay the same."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]


def parse_question(content: str) -> tuple[str, int]:
    q = str(json.loads(content).get("question", "")).strip()
    if not q:
        raise ValueError("an empty question")
    return (q if q.endswith("?") else q + "?"), 0


_NUMBERED = re.compile(r"^([A-Za-z]{2,})-?\d\w*$")


def mention_of(name: str) -> tuple[str, re.Pattern[str]] | None:
    """(a shorter mention of `name`, the pattern of the names it fits), or None: the letters
    before a name's number ("TLR" of TLR4: TLR2, TLR-9), else a multi-word name's first word
    ("Boston" of Boston University: Boston Children's Hospital)."""
    m = _NUMBERED.match(name)
    if m:
        return m.group(1), re.compile(re.escape(m.group(1)) + r"-?\d\w*")
    first, _, rest = name.partition(" ")
    if rest and len(first) >= 3:
        return first, re.compile(re.escape(first) + r" \S.*")
    return None


def _norm(question: str) -> str:
    return " ".join(re.findall(r"\w+", question.lower()))


def parse_qa(content: str) -> tuple[dict[str, str], int]:
    data = json.loads(content)
    q, a = str(data.get("question", "")).strip(), str(data.get("answer", "")).strip()
    if not q or not a:
        raise ValueError("an empty question or answer")
    return {"question": q if q.endswith("?") else q + "?", "answer": a}, 0


def pick_chunks(chunks: Any, n: int, min_words: int, seed: int) -> list[int]:
    """Row indices of `n` chunks of at least `min_words` words, in the seed's order."""
    ok = [i for i, t in enumerate(chunks["text"]) if len(str(t).split()) >= min_words]
    ok.sort(key=lambda i: _order(str(chunks["chunk_id"].iloc[i]), seed))
    return ok[:n]


def pick_pairs(chunks: Any, n: int, min_words: int, seed: int) -> list[tuple[int, int]]:
    """`n` pairs of chunks of different documents sharing their rarest content word (each chunk
    in one pair at most), in the seed's order."""
    texts = [str(t) for t in chunks["text"]]
    docs = [str(d) for d in chunks["doc_id"]]
    words = [content_words(t) for t in texts]
    df: Counter = Counter(w for ws in words for w in ws)
    by_word: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        for w in ws:
            by_word.setdefault(w, []).append(i)
    order = [i for i, t in enumerate(texts) if len(t.split()) >= min_words]
    order.sort(key=lambda i: _order(f"pair:{chunks['chunk_id'].iloc[i]}", seed))
    used: set[int] = set()
    out: list[tuple[int, int]] = []
    for i in order:
        if len(out) >= n:
            break
        if i in used:
            continue
        for w in sorted(words[i], key=lambda w: (df[w], w)):
            if df[w] < 2:
                continue
            mates = [j for j in by_word[w] if j not in used and j != i and docs[j] != docs[i]
                     and len(texts[j].split()) >= min_words]  # fmt: skip
            if mates:
                j = min(mates, key=lambda j: _order(f"mate:{i}:{j}", seed))
                out.append((i, j))
                used |= {i, j}
                break
    return out


class Builder:
    """One build of the set (module doc)."""

    def __init__(self, cfg: SynthConfig, llm: Any = None, verifier: Any = None):
        from ragrig.core.io import read_table

        self.cfg = cfg
        for path in (cfg.chunks, cfg.documents):
            if not Path(path).is_file():
                raise DataValidationError(f"not found: {path} (run dvc repro chunk first)")
        self.chunks = read_table(Path(cfg.chunks), "chunks").reset_index(drop=True)
        self.documents = read_table(Path(cfg.documents), "documents")
        existing: list[str] = []
        if Path(cfg.queries).is_file():
            existing = read_table(Path(cfg.queries), "queries")["text"].astype(str).tolist()
        # (the query family a text belongs to, its content words): an adversarial query is not
        # a near-duplicate of its own parent, which it differs from by design
        self.seen: list[tuple[str, frozenset[str]]] = [("", content_words(t)) for t in existing]
        self.llm = llm
        self.verifier = verifier
        self.tally = Tally()
        self.calls = Counter()
        self.spent = {"prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        self.questions: Counter = Counter()  # per_chunk questions as written, normalised
        self.notes: list[str] = []

    # the models, built when first needed: a dry run loads neither
    def _llm(self) -> Any:
        if self.llm is None:
            from ragrig.judge.llm import make_llm_judge

            self.llm = make_llm_judge(self.cfg.llm)
        return self.llm

    def _verifier(self) -> Any:
        if self.verifier is None:
            from ragrig.judge.verifier import VerifierJudge
            from ragrig.weights.precision import resolve_precision

            v = self.cfg.verifier
            self.verifier = VerifierJudge(
                v.model, v.support_threshold, max_length=v.max_length, threads=v.threads,
                quantize=resolve_precision(v.quantize, fp32="none"),
            )  # fmt: skip
        return self.verifier

    def text(self, row: int) -> str:
        return str(self.chunks["text"].iloc[row])[: self.cfg.max_chunk_chars]

    def prompts(self) -> list[tuple[str, list[int], list[dict[str, str]]]]:
        """(kind, chunk rows, messages) of every LLM call the build makes."""
        cfg = self.cfg
        out = [
            ("per_chunk", [i], qa_messages([self.text(i)], False))
            for i in pick_chunks(self.chunks, cfg.per_chunk, cfg.min_chunk_words, cfg.seed)
        ]
        pairs = pick_pairs(self.chunks, cfg.multi_hop, cfg.min_chunk_words, cfg.seed)
        if len(pairs) < cfg.multi_hop and not any("multi-hop" in n for n in self.notes):
            self.notes.append(
                f"multi-hop: {len(pairs)} of {cfg.multi_hop} chunk pairs found (a pair is two "
                f"chunks of different documents, {cfg.min_chunk_words} words or more, sharing a "
                "content word): the corpus is too small for more"
            )
        out += [
            ("multi_hop", [i, j], qa_messages([self.text(i), self.text(j)], True)) for i, j in pairs
        ]
        return out

    def _call(self, messages: list[dict], schema: dict, name: str, parse: Any) -> Any:
        r = self._llm().exchange(messages, schema, name, parse)
        self.calls["cached" if getattr(r, "cached", False) else r.status] += 1
        self.spent["prompt_tokens"] += int(getattr(r, "prompt_tokens", 0) or 0)
        self.spent["completion_tokens"] += int(getattr(r, "completion_tokens", 0) or 0)
        if not getattr(r, "cached", False):
            self.spent["seconds"] += float(getattr(r, "latency_ms", 0.0) or 0.0) / 1000
        return r

    def supported(self, question: str, answer: str, passages: list[str]) -> bool:
        v = self._verifier().judge(question, answer, passages)
        return bool(v.extracted) and not v.unsupported

    def _fresh(self, question: str, family: str) -> bool:
        words = content_words(question)
        if any(
            jaccard(words, s) >= self.cfg.near_duplicate
            for f, s in self.seen
            if not (f and f == family)
        ):
            return False
        self.seen.append((family, words))
        return True

    def _qid(self, kind: str, key: str) -> str:
        return f"syn-{kind}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def build(self) -> list[Item]:
        from ragrig.core.progress import bar

        kept: list[Item] = []
        prompts = self.prompts()
        with bar("synth", len(prompts), "calls") as b:
            for kind, rows, messages in prompts:
                self.tally.attempted[kind] += 1
                item = self._generated(kind, rows, messages)
                if item is not None:
                    kept.append(item)
                    self.tally.kept[kind] += 1
                b.update(1)
        self._check_generator()
        parents = [k for k in kept if k.kind == "per_chunk"]
        calls = len(parents) if "paraphrase" in self.cfg.adversarial else 0
        with bar("synth adversarial", calls, "calls") as b:
            for parent in parents:
                for kind in self.cfg.adversarial:
                    self.tally.attempted[kind] += 1
                    item = self._adversarial(kind, parent)
                    if item is not None:
                        kept.append(item)
                        self.tally.kept[kind] += 1
                if calls:
                    b.update(1)
        return kept

    def _check_generator(self) -> None:
        """One line when the generator gave nothing usable, or one question for most chunks."""
        asked = self.tally.attempted["per_chunk"]
        if not asked:
            return
        if not self.questions:
            self.notes.append(
                f"per_chunk: the generator returned no question for any of the {asked} chunks "
                f"({', '.join(f'{k} {n}' for k, n in sorted(self.tally.dropped.get('per_chunk', Counter()).items()))})"
            )
            return
        question, n = self.questions.most_common(1)[0]
        if n >= 2 and n >= SAME_QUESTION_SHARE * asked:
            self.notes.append(
                f"per_chunk: the generator wrote the same question for {n} of the {asked} chunks "
                f"({question!r}): it is not reading them; all but one dropped as near-duplicates"
            )

    def _generated(self, kind: str, rows: list[int], messages: list[dict]) -> Item | None:
        r = self._call(messages, QA_SCHEMA, "question_answer", parse_qa)
        if r.status != "ok":
            self.tally.drop(kind, f"call {r.status}")
            return None
        qa = r.verdict
        if kind == "per_chunk":
            self.questions[_norm(qa["question"])] += 1
        passages = [self.text(i) for i in rows]
        if not asks(qa["question"]):
            self.tally.drop(kind, "not_a_question")
            return None
        if not standalone(qa["question"], passages):
            self.tally.drop(kind, "not_standalone")
            return None
        if _POINTING.search(qa["answer"]):  # "The passage provides ...": not an answer to a user
            self.tally.drop(kind, "answer_points_at_passage")
            return None
        if not self.supported(qa["question"], qa["answer"], passages):
            self.tally.drop(kind, "answer_not_supported")
            return None
        if kind == "multi_hop" and any(
            self.supported(qa["question"], qa["answer"], [p]) for p in passages
        ):
            self.tally.drop(kind, "answerable_by_one")
            return None
        ids = [str(self.chunks["chunk_id"].iloc[i]) for i in rows]
        qid = self._qid(kind, "|".join(ids))
        if not self._fresh(qa["question"], qid):
            self.tally.drop(kind, "near_duplicate")
            return None
        gold = {str(self.chunks["doc_id"].iloc[i]): 1 for i in rows}
        return Item(qid, kind, qa["question"], qa["answer"], ids, gold)

    def _adversarial(self, kind: str, parent: Item) -> Item | None:
        from ragrig.core.text import split_sentences
        from ragrig.judge import entities as ent
        from ragrig.judge import perturb

        row = int(self.chunks.index[self.chunks["chunk_id"].astype(str) == parent.chunks[0]][0])
        passage = self.text(row)
        rng = random.Random(f"{self.cfg.seed}:{kind}:{parent.qid}")
        answer = parent.answer.rstrip()
        if kind in ("negation", "quantifier"):
            # the answer's first sentence the rule applies to, and that sentence edited
            edited = sentence = None
            for sentence in split_sentences(answer) or [answer]:
                edited = (
                    perturb.negate(sentence)
                    if kind == "negation"
                    else perturb.change_number(sentence, passage, rng)
                )
                if edited:
                    break
            if not edited:
                self.tally.drop(kind, "no_rule_applies")
                return None
            question = f"Is it true that {_lower_opener(edited.rstrip('.'))}?"
            if self.supported(question, edited, [passage]):
                self.tally.drop(kind, "edit_still_supported")
                return None
            item = Item(self._qid(kind, parent.qid), kind, question, f"No. {sentence}",
                        parent.chunks, dict(parent.gold), parent.qid)  # fmt: skip
        elif kind == "paraphrase":
            r = self._call(paraphrase_messages(parent.question), Q_SCHEMA, "question",
                           parse_question)  # fmt: skip
            if r.status != "ok":
                self.tally.drop(kind, f"call {r.status}")
                return None
            question = r.verdict
            if _norm(question) == _norm(parent.question):
                self.tally.drop(kind, "same_as_parent")
                return None
            if not asks(question):
                self.tally.drop(kind, "not_a_question")
                return None
            if not standalone(question, [passage]):
                self.tally.drop(kind, "not_standalone")
                return None
            kept_names = all(
                ent._phrase_in(n, question) for n in perturb.swappable_names(parent.question)
            )
            if not kept_names or sorted(ent.numbers(question)) != sorted(
                ent.numbers(parent.question)
            ):
                self.tally.drop(kind, "meaning_changed")
                return None
            item = Item(self._qid(kind, parent.qid), kind, question, parent.answer,
                        parent.chunks, dict(parent.gold), parent.qid)  # fmt: skip
        elif kind == "ambiguous":
            found = [(n, mention_of(n)) for n in perturb.swappable_names(parent.question)
                     if n in passage]  # fmt: skip
            found = [(n, m) for n, m in found if m is not None]
            if not found:
                self.tally.drop(kind, "no_rule_applies")
                return None
            target, (mention, fits) = found[0]
            readings = self._readings(target, fits, set(parent.gold))
            if not readings:
                self.tally.drop(kind, "not_ambiguous")
                return None
            question = re.sub(r"(?<!\w)" + re.escape(target) + r"(?!\w)", mention,
                              parent.question, count=1)  # fmt: skip
            named = ", ".join([target, *readings])
            answer = (
                f"The question is ambiguous: {mention} may mean {named} in the documents; an "
                "answer should say which it means."
            )
            gold = dict(parent.gold)
            gold.update({d: 1 for d in readings.values()})
            item = Item(self._qid(kind, parent.qid), kind, question, answer, parent.chunks,
                        gold, parent.qid)  # fmt: skip
        else:  # out_of_scope, distractor
            names = perturb.swappable_names(parent.question)
            if kind == "out_of_scope":
                pool = [n for n in INVENTED if n.lower() not in self._vocabulary()]
            else:  # names of the documents retrieval confuses with the gold one
                names = [n for n in names if n in passage]
                ids = self.documents["doc_id"].astype(str).tolist()
                pool = sorted(
                    {n for r in self._corpus_rows(parent.question) if ids[r] not in parent.gold
                     for n in ent.names(self._texts[r]) if n not in passage and n.lower() not in
                     parent.question.lower()}
                )  # fmt: skip
            if not names or not pool:
                self.tally.drop(kind, "no_rule_applies")
                return None
            target, new = names[0], rng.choice(pool)
            question = parent.question.replace(target, new, 1)
            edited = answer.replace(target, new) if target in answer else f"{new}: {answer}"
            if self.supported(question, edited, self._corpus_hits(question)):
                self.tally.drop(kind, "corpus_supports_it")
                return None
            gold = dict.fromkeys(parent.gold, 0)  # judged, no relevant document
            item = Item(self._qid(kind, parent.qid), kind, question, REFUSAL, parent.chunks,
                        gold, parent.qid)  # fmt: skip
        if not self._fresh(item.question, parent.qid):
            self.tally.drop(kind, "near_duplicate")
            return None
        return item

    def _readings(self, name: str, fits: re.Pattern[str], gold: set[str]) -> dict[str, str]:
        """Other names of the corpus's documents the mention fits -> the first document naming
        each (not a gold one), at most MAX_READINGS, in name order."""
        if not hasattr(self, "_names"):
            from ragrig.judge import entities as ent

            self._names: dict[str, str] = {}
            for d, t, x in zip(self.documents["doc_id"].astype(str),
                               self.documents["title"].astype(str),
                               self.documents["text"].astype(str), strict=True):  # fmt: skip
                for n in ent.names(f"{t}. {x}" if t else x):
                    self._names.setdefault(n, d)
        out = {}
        for n in sorted(self._names):
            if n != name and fits.fullmatch(n) and self._names[n] not in gold:
                out[n] = self._names[n]
                if len(out) == MAX_READINGS:
                    break
        return out

    def _vocabulary(self) -> set[str]:
        if not hasattr(self, "_vocab"):
            words = re.compile(r"\w+")
            self._vocab = {
                w for t in self.documents["text"].astype(str) for w in words.findall(t.lower())
            } | {w for t in self.documents["title"].astype(str) for w in words.findall(t.lower())}
        return self._vocab

    def _corpus_rows(self, question: str) -> list[int]:
        """Rows of the documents table BM25 ranks highest for `question` (out_of_scope_k)."""
        if not hasattr(self, "_bm25"):
            from ragrig.index.sparse import Bm25sIndex
            from ragrig.training.split import MiningConfig

            self._texts = [
                f"{t}. {x}" if t else str(x)
                for t, x in zip(self.documents["title"].astype(str),
                                self.documents["text"].astype(str), strict=True)
            ]  # fmt: skip
            self._bm25 = Bm25sIndex.build(self._texts, MiningConfig())
        _, rows = self._bm25.search([question], self.cfg.out_of_scope_k)
        return [int(r) for r in rows[0] if r >= 0]

    def _corpus_hits(self, question: str) -> list[str]:
        return [self._texts[r] for r in self._corpus_rows(question)]


def write_set(out: Path, items: list[Item], documents: Any, record: dict[str, Any]) -> dict:
    """The BEIR set at `out`, replaced in one rename; a new line in versions.jsonl when its
    content differs from the last version's. Returns the version line (new or last)."""
    from ragrig.core.io import atomic_dir, file_sha256

    previous: list[dict[str, Any]] = []
    vpath = out / "versions.jsonl"
    if vpath.is_file():
        previous = [json.loads(x) for x in vpath.read_text(encoding="utf-8").splitlines() if x]
    with atomic_dir(out) as tmp:
        with (
            open(tmp / "corpus.jsonl.gz", "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        ):
            for d, t, x in zip(documents["doc_id"], documents["title"], documents["text"],
                               strict=True):  # fmt: skip
                line = {"_id": str(d), "title": str(t or ""), "text": str(x or "")}
                gz.write((json.dumps(line, ensure_ascii=False) + "\n").encode())
        with open(tmp / "queries.jsonl", "w", encoding="utf-8") as fh:
            for it in items:
                meta = {"synthetic": True, "kind": it.kind, "answer": it.answer,
                        "source_chunks": "|".join(it.chunks), "parent": it.parent or ""}  # fmt: skip
                fh.write(json.dumps({"_id": it.qid, "text": it.question, "metadata": meta},
                                    ensure_ascii=False) + "\n")  # fmt: skip
        (tmp / "qrels").mkdir()
        with open(tmp / "qrels" / f"{SPLIT}.tsv", "w", encoding="utf-8") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            for it in items:
                for d, g in sorted(it.gold.items()):
                    fh.write(f"{it.qid}\t{d}\t{g}\n")
        (tmp / "synth.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        files = {
            name: file_sha256(tmp / name)
            for name in ("corpus.jsonl.gz", "queries.jsonl", f"qrels/{SPLIT}.tsv")
        }
        line = {"version": len(previous) + 1, "queries": len(items), "files": files,
                "kinds": dict(sorted(Counter(i.kind for i in items).items()))}  # fmt: skip
        if previous and previous[-1]["files"] == files:
            line = previous[-1]
        else:
            previous.append(line)
        (tmp / "versions.jsonl").write_text("".join(json.dumps(v) + "\n" for v in previous))
    return line


def dry_run(builder: Builder, params: Path) -> list[str]:
    """What the build's LLM calls would cost (module doc): no call made."""
    from ragrig.core.config import load_section
    from ragrig.report.estimate import TokenCounter, local_gguf, price

    cfg = builder.cfg
    rcfg = load_section("report", params)
    counter = TokenCounter(cfg.llm.model, local_gguf(cfg.llm.backend))
    lines = [f"ragrig synth --dry-run: no model called; prices as of {rcfg.prices_as_of}"]
    prompts = builder.prompts()
    asked = {kind: [m for k, _, m in prompts if k == kind] for kind in ("per_chunk", "multi_hop")}
    rows = [(kind, f"{len(m):>5}", m, "") for kind, m in asked.items()]
    if "paraphrase" in cfg.adversarial:  # one call per kept per_chunk query: at most one each
        # the question is not written yet: its longest allowed length stands in for it
        stand_in = paraphrase_messages("x " * cfg.llm.max_tokens)
        n = len(asked["per_chunk"])
        rows.append(("paraphrase", f"<= {n:>2}", [stand_in] * n, ", questions at max_tokens"))
    total = 0.0
    for kind, calls, messages, how in rows:
        tokens = sum(counter.chat(m) for m in messages)
        completion = len(messages) * cfg.llm.max_tokens
        usd = price(cfg.llm.model, rcfg.prices, rcfg.prices_as_of, tokens, completion)
        total += usd
        lines.append(
            f"  {kind:<10} {calls} calls  {tokens:>8} prompt tokens ({counter.kind}{how})  "
            f"<= {completion:>7} completion tokens  ${usd:.4f}"
        )
    lines.append(f"  total ${total:.4f} (completions at max_tokens: an upper bound); the other "
                 "adversarial kinds call no model")  # fmt: skip
    return lines


def spending(builder: Builder, rcfg: Any, kept: int) -> dict[str, Any]:
    """The build's calls' tokens, price and seconds, in total and per kept query; `rcfg` the
    report section (its prices), read before the build so that a bad one costs no call."""
    from ragrig.report.estimate import price

    sp = builder.spent
    try:
        usd: float | None = price(builder.cfg.llm.model, rcfg.prices, rcfg.prices_as_of,
                                  sp["prompt_tokens"], sp["completion_tokens"])  # fmt: skip
        why = ""
    except ConfigError as exc:  # the set is still written; its price is said to be unknown
        usd, why = None, str(exc)
    total = {**sp, "usd": usd, "prices_as_of": rcfg.prices_as_of, "unpriced": why}
    per = {k: round(float(sp[k]) / kept, 6) if kept else None for k in sp}
    per["usd"] = usd / kept if kept and usd is not None else None
    return {"total": total, "per_kept_query": per}


def cmd_synth(args: Any) -> int:
    from ragrig.core.errors import RagrigError

    try:
        cfg = load_config(Path(args.config))
        if args.out:
            cfg = cfg.model_copy(update={"out": args.out})
        builder = Builder(cfg)
        from ragrig.core.config import load_section

        prices = load_section("report", Path(args.params))  # before any call is paid for
        if args.dry_run:
            for line in dry_run(builder, Path(args.params)):
                print(line)
            return 0
        items = builder.build()
        for note in builder.notes:
            print(f"ragrig synth: {note}", file=sys.stderr)
        if not items:
            raise DataValidationError(
                "no query was kept: "
                + json.dumps(builder.tally.record())
                + " (nothing written; see the reasons above)"
            )
        record = {
            "kinds": builder.tally.record(),
            "calls": dict(sorted(builder.calls.items())),
            "cost": spending(builder, prices, len(items)),
            "notes": builder.notes,
            "llm": cfg.llm.model,
            "verifier": cfg.verifier.model,
            "seed": cfg.seed,
        }
        version = write_set(Path(cfg.out), items, builder.documents, record)
    except (RagrigError, ConfigError) as exc:
        print(f"ragrig synth: error: {exc}", file=sys.stderr)
        return 2
    print(f"{'kind':<13} {'attempted':>9} {'kept':>5} {'share':>6}  dropped")
    for kind, r in record["kinds"].items():
        why = ", ".join(f"{k} {n}" for k, n in r["dropped"].items()) or "-"
        print(f"{kind:<13} {r['attempted']:>9} {r['kept']:>5} {r['kept_share']:>6.3f}  {why}")
    calls = ", ".join(f"{k} {n}" for k, n in record["calls"].items())
    c, per = record["cost"]["total"], record["cost"]["per_kept_query"]
    usd = "price unknown" if c["usd"] is None else f"${c['usd']:.4f}"
    usd_each = "price unknown" if per["usd"] is None else f"${per['usd']:.6f}"
    print(
        f"cost of this build's calls: {c['prompt_tokens']} prompt + {c['completion_tokens']} "
        f"completion tokens, {usd} (prices as of {c['prices_as_of']}), {c['seconds']:.1f} s; "
        f"per kept query {per['prompt_tokens']:.0f} + {per['completion_tokens']:.0f} tokens, "
        f"{usd_each}, {per['seconds']:.2f} s (calls answered from the cache cost nothing again)"
        + (f"; {c['unpriced']}" if c["unpriced"] else "")
    )
    print(
        f"ragrig synth: {len(items)} queries kept, version {version['version']} of "
        f"{Path(cfg.out) / 'versions.jsonl'} (LLM calls: {calls}); read it with "
        f"dataset=synthetic (dataset.root={cfg.out}); synthetic queries cover cases, they do not "
        "replace real traffic"
    )
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "synth",
        help="synthetic and adversarial queries from the corpus, each checked by the verifier "
        "before it is kept, written as a versioned dataset (conf/synth.yaml)",
    )
    p.add_argument("--config", default="conf/synth.yaml", help="the settings (module doc)")
    p.add_argument("--out", default=None, help="the set's folder (default: the config's out)")
    p.add_argument("--params", default="params.yaml", help="report.prices, to price the calls")
    p.add_argument("--dry-run", action="store_true", help="the calls and their cost; none made")
    p.set_defaults(func=cmd_synth)
