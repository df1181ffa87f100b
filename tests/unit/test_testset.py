"""`ragrig synth` (ragrig.tools.testset): each kind's round trip decided by hand with a stand-in
LLM and verifier, the reasons counted, near-duplicates dropped, the set written as BEIR data the
parse stage reads, versioned; the dry run calls nothing. The real verifier reads one kept and
one dropped pair (the shipped weights)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from ragrig.tools import testset as ts

DOCS = {
    "d1": "Aspirin reduces fever in adults. The trial enrolled 120 patients in Boston.",
    "d2": "Ibuprofen is an anti-inflammatory drug. It was tested on 80 volunteers.",
    "d3": "Boston hosts many hospitals. Fever clinics opened in 2019.",
}


def _tables(tmp_path):
    docs = pd.DataFrame(
        {"doc_id": list(DOCS), "title": ["", "", ""], "text": list(DOCS.values()),
         "content": list(DOCS.values()), "source": ["t"] * 3, "content_hash": ["h"] * 3}
    )  # fmt: skip
    chunks = pd.DataFrame(
        {"chunk_id": [f"{d}#0" for d in DOCS], "doc_id": list(DOCS), "text": list(DOCS.values()),
         "start": [0] * 3, "end": [len(t) for t in DOCS.values()]}
    )  # fmt: skip
    queries = pd.DataFrame(
        {"qid": ["q1"], "text": ["Is ibuprofen an anti-inflammatory drug?"], "claim_label": ["x"],
         "n_gold": [1], "n_words": [4]}
    )  # fmt: skip
    paths = {}
    for name, df in (("documents", docs), ("chunks", chunks), ("queries", queries)):
        paths[name] = tmp_path / f"{name}.parquet"
        df.to_parquet(paths[name])
    return paths


class FakeLLM:
    """Answers by the passage it is shown (the first words of the user message pick it)."""

    def __init__(self, replies):
        self.replies = replies
        self.calls = 0

    def exchange(self, messages, schema, name, parse):
        self.calls += 1
        text = messages[-1]["content"]
        for key, reply in self.replies.items():
            if key in text:
                if reply is None:
                    return SimpleNamespace(status="timeout", verdict=None, cached=False)
                return SimpleNamespace(status="ok", verdict=parse(json.dumps(reply))[0],
                                       cached=False)  # fmt: skip
        raise AssertionError(text)


class WordVerifier:
    """A sentence of the answer is supported when one passage holds all its content words."""

    def judge(self, question, answer, passages):
        words = [ts.content_words(p) for p in passages]
        claims = [s for s in answer.replace("No. ", "").split(". ") if s]
        sup = [c for c in claims if any(ts.content_words(c) <= w for w in words)]
        return SimpleNamespace(extracted=claims, supported=sup,
                               unsupported=[c for c in claims if c not in sup])  # fmt: skip


def test_each_kinds_round_trip_with_its_reasons_counted(tmp_path):
    paths = _tables(tmp_path)
    cfg = ts.SynthConfig(
        chunks=str(paths["chunks"]), documents=str(paths["documents"]),
        queries=str(paths["queries"]), out=str(tmp_path / "set"), per_chunk=3, multi_hop=1,
        min_chunk_words=5,
    )  # fmt: skip
    llm = FakeLLM({
        "Passage A": {"question": "Where was the aspirin trial, and what hosts hospitals?",
                      "answer": "The trial enrolled patients in Boston. Boston hosts hospitals."},
        "Aspirin reduces": {"question": "What does Aspirin reduce in adults",
                            "answer": "Aspirin reduces fever in adults. It enrolled 120 patients."},
        "Ibuprofen is": {"question": "Is ibuprofen an anti-inflammatory drug?",  # the set has it
                         "answer": "Ibuprofen is an anti-inflammatory drug."},
        "Boston hosts": {"question": "What opened in 2019?",
                         "answer": "Fever clinics opened in 2021."},  # not in its chunk
        "Question: What does Aspirin": {"question": "In adults, what is reduced by Aspirin?"},
    })  # fmt: skip
    b = ts.Builder(cfg, llm=llm, verifier=WordVerifier())
    items = b.build()
    rec = b.tally.record()
    assert rec["per_chunk"] == {"attempted": 3, "kept": 1, "kept_share": pytest.approx(1 / 3),
                                "dropped": {"answer_not_supported": 1, "near_duplicate": 1}}  # fmt: skip
    # d1 and d3 share "boston"; the two-sentence answer needs both chunks
    assert rec["multi_hop"]["kept"] == 1
    kept = {i.kind: i for i in items}
    assert kept["per_chunk"].question == "What does Aspirin reduce in adults?"
    assert kept["per_chunk"].gold == {"d1": 1}
    assert sorted(kept["multi_hop"].gold) == ["d1", "d3"]
    # adversarial from the one kept per_chunk query
    # "not" is a word the chunk lacks: the negated sentence is unsupported, kept
    assert kept["negation"].question == "Is it true that Aspirin does not reduce fever in adults?"
    assert kept["negation"].answer == "No. Aspirin reduces fever in adults."
    assert kept["negation"].parent == kept["per_chunk"].qid
    # the first sentence has no number: the second is edited, 120 -> 130 (the seed's choice of
    # 121, 240, 130, 119: none in the chunk)
    assert kept["quantifier"].question == "Is it true that it enrolled 130 patients?"
    assert kept["quantifier"].answer == "No. It enrolled 120 patients."
    assert kept["out_of_scope"].answer == ts.REFUSAL
    assert kept["out_of_scope"].gold == {"d1": 0}
    assert "Aspirin" not in kept["out_of_scope"].question
    # distractor: no other document shares a word with the question, BM25 ranks none
    assert rec["distractor"]["dropped"] == {"no_rule_applies": 1}
    # "Aspirin" has no number and one word: no shorter mention of it
    assert rec["ambiguous"]["dropped"] == {"no_rule_applies": 1}
    # the rewording keeps the name, the parent's answer and gold
    para = kept["paraphrase"]
    assert para.question == "In adults, what is reduced by Aspirin?"
    assert (para.answer, para.gold, para.parent) == (
        kept["per_chunk"].answer,
        {"d1": 1},
        kept["per_chunk"].qid,
    )
    assert llm.calls == 5  # 3 chunks + 1 pair + 1 paraphrase; the other adversarial kinds none
    assert b.notes == []


def test_a_distractor_takes_a_name_from_a_document_bm25_confuses_with_the_gold_one(tmp_path):
    paths = _tables(tmp_path)
    docs = pd.read_parquet(paths["documents"])
    docs.loc[docs["doc_id"] == "d2", "text"] = "Ibuprofen may reduce pain in adults."
    docs.to_parquet(paths["documents"])
    cfg = ts.SynthConfig(chunks=str(paths["chunks"]), documents=str(paths["documents"]),
                         queries=str(paths["queries"]), per_chunk=3, multi_hop=0,
                         min_chunk_words=5, adversarial=["distractor"])  # fmt: skip
    llm = FakeLLM({"Aspirin reduces": {"question": "What does Aspirin reduce in adults",
                                       "answer": "Aspirin reduces fever in adults."},
                   "Ibuprofen is": None, "Boston hosts": None})  # fmt: skip
    b = ts.Builder(cfg, llm=llm, verifier=WordVerifier())
    kept = {i.kind: i for i in b.build()}
    # d2 shares "reduce" and "adults": BM25 ranks it; its name replaces Aspirin, and the edited
    # answer ("Ibuprofen reduces fever in adults.") is in no document: kept, with a refusal
    assert kept["distractor"].question == "What does Ibuprofen reduce in adults?"
    assert (kept["distractor"].answer, kept["distractor"].gold) == (ts.REFUSAL, {"d1": 0})
    # a document that does say it: the edit is supported by the corpus, dropped
    docs.loc[docs["doc_id"] == "d2", "text"] = "Ibuprofen reduces fever in adults."
    docs.to_parquet(paths["documents"])
    b = ts.Builder(cfg, llm=llm, verifier=WordVerifier())
    b.build()
    assert b.tally.record()["distractor"]["dropped"] == {"corpus_supports_it": 1}


def test_the_set_is_beir_the_parse_stage_reads_and_versions_only_new_content(tmp_path):
    from ragrig.dataset.beir import load_beir

    paths = _tables(tmp_path)
    docs = pd.read_parquet(paths["documents"])
    items = [ts.Item("syn-per_chunk-1", "per_chunk", "What does aspirin reduce?",
                     "Aspirin reduces fever.", ["d1#0"], {"d1": 1}),
             ts.Item("syn-out_of_scope-1", "out_of_scope", "What does Oxvanel reduce?",
                     ts.REFUSAL, ["d1#0"], {"d1": 0}, "syn-per_chunk-1")]  # fmt: skip
    out = tmp_path / "set"
    v1 = ts.write_set(out, items, docs, {"kinds": {}})
    assert v1["version"] == 1 and v1["kinds"] == {"out_of_scope": 1, "per_chunk": 1}
    data = load_beir(out, "synthetic")
    assert data.queries == {"syn-per_chunk-1": "What does aspirin reduce?",
                            "syn-out_of_scope-1": "What does Oxvanel reduce?"}  # fmt: skip
    assert data.qrels == {"syn-per_chunk-1": {"d1": 1}, "syn-out_of_scope-1": {"d1": 0}}
    assert data.query_metadata["syn-out_of_scope-1"]["kind"] == "out_of_scope"
    assert data.query_metadata["syn-per_chunk-1"]["answer"] == "Aspirin reduces fever."
    assert ts.write_set(out, items, docs, {"kinds": {}})["version"] == 1  # same content
    assert ts.write_set(out, items[:1], docs, {"kinds": {}})["version"] == 2
    lines = (out / "versions.jsonl").read_text().splitlines()
    assert [json.loads(x)["queries"] for x in lines] == [2, 1]


def test_the_dry_run_prices_the_calls_and_calls_nothing(tmp_path, capsys):
    paths = _tables(tmp_path)
    cfg = ts.SynthConfig(chunks=str(paths["chunks"]), documents=str(paths["documents"]),
                         per_chunk=2, multi_hop=1, min_chunk_words=5)  # fmt: skip

    class NoCall:
        def exchange(self, *a, **k):
            raise AssertionError("a dry run called the model")

    b = ts.Builder(cfg, llm=NoCall(), verifier=None)
    lines = ts.dry_run(b, ts.Path("params.yaml"))
    assert lines[1].split()[:2] == ["per_chunk", "2"] and lines[2].split()[:2] == ["multi_hop", "1"]
    assert "(tokenizer)" in lines[1] and lines[-1].startswith("  total $0.0000")
    assert b.verifier is None  # no model loaded


def test_a_missing_input_or_an_unbuilt_kind_is_one_line(tmp_path):
    from pydantic import ValidationError

    with pytest.raises(ts.DataValidationError, match="run dvc repro chunk first"):
        ts.Builder(ts.SynthConfig(chunks=str(tmp_path / "none.parquet")))
    with pytest.raises(ValidationError, match="hyperbole"):
        ts.SynthConfig(adversarial=["hyperbole"])


def test_the_shipped_verifier_keeps_a_supported_answer_and_drops_a_contradicted_edit(tmp_path):
    paths = _tables(tmp_path)
    cfg = ts.SynthConfig(chunks=str(paths["chunks"]), documents=str(paths["documents"]))
    b = ts.Builder(cfg)
    passage = DOCS["d1"]
    assert b.supported("What does aspirin reduce?", "Aspirin reduces fever in adults.", [passage])
    assert not b.supported("Is it true?", "Aspirin does not reduce fever in adults.", [passage])


def test_an_ambiguous_mention_names_the_corpus_readings_it_fits(tmp_path):
    paths = _tables(tmp_path)
    docs = pd.DataFrame(
        {"doc_id": ["d1", "d2", "d3", "d4"], "title": ["", "", "", ""],
         "text": ["TLR4 binds lipopolysaccharide in macrophages of the lung.",
                  "The receptor TLR2 senses lipoproteins.", "We measured TLR-9 in B cells.",
                  "TLR4 and Boston were both mentioned."],
         "content": ["x"] * 4, "source": ["t"] * 4, "content_hash": ["h"] * 4}
    )  # fmt: skip
    docs.to_parquet(paths["documents"])
    chunks = pd.DataFrame({"chunk_id": ["d1#0"], "doc_id": ["d1"], "text": [docs["text"][0]],
                           "start": [0], "end": [10]})  # fmt: skip
    chunks.to_parquet(paths["chunks"])
    cfg = ts.SynthConfig(chunks=str(paths["chunks"]), documents=str(paths["documents"]),
                         queries=str(paths["queries"]), per_chunk=1, multi_hop=0,
                         min_chunk_words=5, adversarial=["ambiguous", "paraphrase"])  # fmt: skip
    llm = FakeLLM({"Passage:": {"question": "What does TLR4 bind in macrophages?",
                                "answer": "TLR4 binds lipopolysaccharide in macrophages."},
                   # the rewording lost the name: its meaning is not the parent's
                   "Question:": {"question": "What does the receptor bind in macrophages?"}})  # fmt: skip
    b = ts.Builder(cfg, llm=llm, verifier=WordVerifier())
    kept = {i.kind: i for i in b.build()}
    amb = kept["ambiguous"]
    assert amb.question == "What does TLR bind in macrophages?"
    # TLR2 (d2) and TLR-9 (d3) are other readings; TLR4's own document d4 is not one
    assert amb.answer == (
        "The question is ambiguous: TLR may mean TLR4, TLR-9, TLR2 in the documents; an answer "
        "should say which it means."
    )
    assert amb.gold == {"d1": 1, "d2": 1, "d3": 1}
    assert b.tally.record()["paraphrase"]["dropped"] == {"meaning_changed": 1}
    assert ts.mention_of("Boston University")[0] == "Boston" and ts.mention_of("Aspirin") is None
    # no other reading in the corpus: not ambiguous
    docs.loc[1:2, "text"] = ["The receptor senses lipoproteins.", "We measured it in B cells."]
    docs.to_parquet(paths["documents"])
    b = ts.Builder(cfg, llm=llm, verifier=WordVerifier())
    b.build()
    assert b.tally.record()["ambiguous"]["dropped"] == {"not_ambiguous": 1}


def test_one_question_for_every_chunk_and_a_corpus_too_small_for_pairs_are_said(tmp_path):
    paths = _tables(tmp_path)
    cfg = ts.SynthConfig(chunks=str(paths["chunks"]), documents=str(paths["documents"]),
                         queries=str(paths["queries"]), per_chunk=3, multi_hop=5,
                         min_chunk_words=5, adversarial=[])  # fmt: skip
    same = {"question": "What is this about?", "answer": "Fever."}
    b = ts.Builder(cfg, llm=FakeLLM({"Passage": same}), verifier=WordVerifier())
    b.build()
    assert b.notes == [
        "multi-hop: 1 of 5 chunk pairs found (a pair is two chunks of different documents, 5 "
        "words or more, sharing a content word): the corpus is too small for more",
        "per_chunk: the generator wrote the same question for 3 of the 3 chunks ('what is this "
        "about'): it is not reading them; all but one dropped as near-duplicates",
    ]
    b = ts.Builder(cfg, llm=FakeLLM({"Passage": None}), verifier=WordVerifier())
    assert b.build() == []
    assert b.notes[-1] == (
        "per_chunk: the generator returned no question for any of the 3 chunks (call timeout 3)"
    )


def test_the_build_reports_its_calls_cost_per_kept_query(tmp_path):
    from ragrig.core.config import load_section

    paths = _tables(tmp_path)
    cfg = ts.SynthConfig(chunks=str(paths["chunks"]), documents=str(paths["documents"]),
                         queries=str(paths["queries"]), per_chunk=1, multi_hop=0,
                         min_chunk_words=5, adversarial=[])  # fmt: skip
    b = ts.Builder(cfg, llm=None, verifier=WordVerifier())
    b.spent.update(prompt_tokens=300, completion_tokens=60, seconds=3.0)
    got = ts.spending(b, load_section("report", ts.Path("params.yaml")), kept=3)
    assert got["per_kept_query"] == {"prompt_tokens": 100.0, "completion_tokens": 20.0,
                                     "seconds": 1.0, "usd": 0.0}  # fmt: skip
    assert got["total"]["usd"] == 0.0 and got["total"]["unpriced"] == ""
    b.cfg = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"model": "nobody/priced"})})
    got = ts.spending(b, load_section("report", ts.Path("params.yaml")), kept=3)
    assert got["total"]["usd"] is None and "nobody/priced" in got["total"]["unpriced"]


def test_the_command_reads_conf_synth_yaml_which_names_every_kind():
    import argparse

    from ..conftest import PROJECT

    sub = argparse.ArgumentParser().add_subparsers()
    ts.add_parser(sub)
    args = sub.choices["synth"].parse_args([])
    assert args.config == "conf/synth.yaml"
    cfg = ts.load_config(PROJECT / args.config)
    assert cfg.adversarial == list(ts.ADVERSARIAL)
    assert cfg == ts.SynthConfig()  # the file says what the defaults are


def test_a_title_with_a_question_mark_and_an_answer_about_the_passage_are_dropped(tmp_path):
    paths = _tables(tmp_path)
    cfg = ts.SynthConfig(chunks=str(paths["chunks"]), documents=str(paths["documents"]),
                         queries=str(paths["queries"]), per_chunk=3, multi_hop=0,
                         min_chunk_words=5, adversarial=[])  # fmt: skip
    llm = FakeLLM({
        "Aspirin reduces": {"question": "Aspirin and fever in adults: a trial?",
                            "answer": "Aspirin reduces fever in adults."},
        "Ibuprofen is": {"question": "Which anti-inflammatory drug was tested on 80 volunteers?",
                         "answer": "The passage says ibuprofen was tested on 80 volunteers."},
        "Boston hosts": {"question": "Where do fever clinics operate since 2019?",
                         "answer": "Fever clinics opened in 2019."},
    })  # fmt: skip
    b = ts.Builder(cfg, llm=llm, verifier=WordVerifier())
    items = b.build()
    assert b.tally.record()["per_chunk"]["dropped"] == {
        "answer_points_at_passage": 1, "not_a_question": 1,
    }  # fmt: skip
    assert [i.question for i in items] == ["Where do fever clinics operate since 2019?"]
    assert ts.asks("Is aspirin safe?") and not ts.asks("Aspirin: a review?")
