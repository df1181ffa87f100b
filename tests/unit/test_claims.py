"""Claims and refusals: sentence segmentation, refusal kinds, short answers, entity/number overlap."""

from __future__ import annotations

import pytest

from ragrig.core.text import sentence_spans, split_sentences
from ragrig.judge import InvalidVerdict, Verdict
from ragrig.judge import entities as ent
from ragrig.judge.overlap import OverlapJudge, claim_negations, negation_scopes
from ragrig.judge.refusal import is_refusal, split_refusal

# --- sentence segmentation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "Smith et al. showed this in 2008 [1]. Fig. 2 shows the result. "
            "Drugs, e.g. aspirin, reduce fever [2, 3]. It works.",
            [
                "Smith et al. showed this in 2008 [1].",
                "Fig. 2 shows the result.",
                "Drugs, e.g. aspirin, reduce fever [2, 3].",
                "It works.",
            ],
        ),
        # a citation after the full stop stays with its sentence
        (
            "Aspirin reduces fever. [1] It also cures gout. [2][3]",
            ["Aspirin reduces fever. [1]", "It also cures gout. [2][3]"],
        ),
        # a citation after an abbreviation, mid-sentence
        ("Smith et al. [3] showed it. Done.", ["Smith et al. [3] showed it.", "Done."]),
        (
            "The value was 1.8 microm2/ms (p = 0.016). Dr. Jones agreed! Yes, in 2008.",
            ["The value was 1.8 microm2/ms (p = 0.016).", "Dr. Jones agreed!", "Yes, in 2008."],
        ),
        # abbreviations pySBD does not know, repaired
        (
            "The FDA approved it in Jan. 2020. Approx. 5 mg/kg was used. See Eq. 3 and Tab. 2 "
            "here. It was ca. 40 years. We used No. 5. The end.",
            [
                "The FDA approved it in Jan. 2020.",
                "Approx. 5 mg/kg was used.",
                "See Eq. 3 and Tab. 2 here.",
                "It was ca. 40 years.",
                "We used No. 5.",
                "The end.",
            ],
        ),
        ("  Norway ", ["Norway"]),
        ("", []),
        (" \n\t", []),
    ],
)
def test_split_sentences_exact(text, sentences):
    assert split_sentences(text) == sentences


def test_sentence_spans_are_offsets_into_the_text():
    text = "Mars has two moons.  Phobos and Deimos orbit Mars. [1]\nDone."
    spans = sentence_spans(text)
    assert spans == ((0, 19), (21, 54), (55, 60))
    assert [text[a:b] for a, b in spans] == [
        "Mars has two moons.",
        "Phobos and Deimos orbit Mars. [1]",
        "Done.",
    ]


# --- refusal detection ------------------------------------------------------------------------

REFUSE, CLAIM = True, False
REFUSAL_TABLE = [
    ("I do not have specific information about the dosage.", REFUSE),
    ("I don't have enough information to answer that.", REFUSE),
    ("The provided passages don't say.", REFUSE),
    ("The passages do not mention the price.", REFUSE),
    ("The context doesn't specify the dose.", REFUSE),
    ("There is no information about side effects.", REFUSE),
    ("There is no specific information on that topic in the documents.", REFUSE),
    ("I'm sorry, but I can't find that in the documents.", REFUSE),
    ("I cannot answer this from the provided passages.", REFUSE),
    ("I don't know.", REFUSE),
    ("It is not mentioned in the context.", REFUSE),
    ("The dose is not specified in the provided documents.", REFUSE),
    ("There is not enough information to determine the cause.", REFUSE),
    ("I was unable to find details on the lawsuit.", REFUSE),
    ("It is unclear from the passages who won.", REFUSE),
    ("The documents provide no information on Norway.", REFUSE),
    ("Unfortunately, I could not find anything about the tax rate.", REFUSE),
    ("That question is outside the scope of the provided texts.", REFUSE),
    # negated claims are claims
    ("Aspirin does not cure gout.", CLAIM),
    ("The drug did not reduce mortality in adults.", CLAIM),
    ("There is no evidence that vaccines cause autism.", CLAIM),
    ("Patients were not given information about the risks.", CLAIM),
    ("The trial does not provide evidence of benefit.", CLAIM),
    ("Norway cannot join the union without a referendum.", CLAIM),
    ("The law library is not open on Sundays.", CLAIM),
    ("No patients died during the study.", CLAIM),
    ("The study could not confirm the earlier result.", CLAIM),
    ("Mars has no rings.", CLAIM),
]


@pytest.mark.parametrize(("sentence", "refuses"), REFUSAL_TABLE)
def test_refusal_table(sentence, refuses):
    assert is_refusal(sentence) is refuses


def test_refusal_table_is_large_and_balanced():
    assert len(REFUSAL_TABLE) >= 25
    assert sum(r for _, r in REFUSAL_TABLE) == 18


@pytest.mark.parametrize(
    ("sentence", "parts"),
    [
        (
            "The passages do not mention dosage, but aspirin reduces fever",
            ["aspirin reduces fever"],
        ),
        ("I'm sorry, but I can't find that", []),
        ("I cannot answer, but thanks", []),
        ("Aspirin does not cure gout", ["Aspirin does not cure gout"]),
    ],
)
def test_split_refusal_keeps_the_claim_clauses(sentence, parts):
    assert split_refusal(sentence)[0] == parts


CTX = ["Aspirin reduces fever in adults. The usual dose is not given here."]


@pytest.mark.parametrize(
    ("answer", "kind", "outcome", "extracted"),
    [
        ("I do not have specific information about the dose.", "refusal", "no_claims", []),
        ("I'm sorry, but I can't find that. The provided passages don't say.", "refusal",
         "no_claims", []),
        ("The passages do not mention dosage, but aspirin reduces fever.", "partial_refusal",
         "scored", ["aspirin reduces fever"]),
        ("There is no information about the dose. Aspirin reduces fever [1].", "partial_refusal",
         "scored", ["Aspirin reduces fever"]),
        ("Aspirin does not reduce fever.", "answer", "scored", ["Aspirin does not reduce fever"]),
    ],
)  # fmt: skip
def test_answer_kinds(answer, kind, outcome, extracted):
    verdict = OverlapJudge().judge("What is the dose of aspirin?", answer, CTX)
    assert (verdict.kind, verdict.outcome, verdict.extracted) == (kind, outcome, extracted)
    if kind == "refusal":
        assert (verdict.score, verdict.reason) == (None, "refusal")


def test_a_refusal_verdict_cannot_hold_claims():
    with pytest.raises(InvalidVerdict, match="partial_refusal"):
        Verdict(["a claim"], ["a claim"], [], kind="refusal")
    with pytest.raises(InvalidVerdict, match="unknown answer kind"):
        Verdict([], [], [], kind="maybe")


def test_attribution_preamble_is_not_part_of_the_claim():
    verdict = OverlapJudge().judge(
        "q", "Based on the provided passages, aspirin reduces fever.", CTX
    )
    assert verdict.extracted == ["aspirin reduces fever"]
    assert verdict.score == 1.0


# --- short answers ----------------------------------------------------------------------------

NORWAY = ["Norway won the most medals in 2018. Germany came second with 31 medals."]


@pytest.mark.parametrize(
    ("answer", "claim", "supported"),
    [
        ("Norway", "Q: Who won the most medals? A: Norway", True),
        ("Norway [1].", "Q: Who won the most medals? A: Norway", True),
        ("Sweden", "Q: Who won the most medals? A: Sweden", False),
        ("2018", "Q: Who won the most medals? A: 2018", True),
        ("Yes, in 2018.", "Q: Who won the most medals? A: Yes, in 2018", True),
        ("Yes, in 2008.", "Q: Who won the most medals? A: Yes, in 2008", False),
        # a bare "Yes" checks the question's terms against the context
        ("Yes.", "Q: Who won the most medals? A: Yes", True),
    ],
)
def test_short_answers_are_claims(answer, claim, supported):
    verdict = OverlapJudge().judge("Who won the most medals?", answer, NORWAY)
    assert verdict.extracted == [claim]
    assert verdict.score == (1.0 if supported else 0.0)
    assert verdict.kind == "answer"


def test_short_answer_without_question_is_the_answer_itself():
    verdict = OverlapJudge().judge("", "Germany", NORWAY)
    assert (verdict.extracted, verdict.score) == (["Germany"], 1.0)
    bare = OverlapJudge().judge("", "Yes.", NORWAY)
    assert (bare.outcome, bare.reason) == ("no_claims", "no checkable claim")


def test_short_fragment_beside_a_claim_is_not_a_claim():
    verdict = OverlapJudge().judge("Who won?", "Norway. Norway won the most medals.", NORWAY)
    assert verdict.extracted == ["Norway won the most medals"]


# --- entities and numbers ---------------------------------------------------------------------


def test_unseen_entity_flag_reference(reference):
    ex = reference["unseen_entity_flag"]
    found = ent.check(ex["answer"], ex["context"])
    assert list(found.names) == ex["entities"] == ["Paris"]
    assert found.flag is ex["expected_flag"] is False
    # the lesson: the flag passes, yet the claim is unsupported (negation is invisible to it)
    assert found.numbers == ("1994",) and found.unseen_numbers == ()


def test_entity_overlap_on_the_claim_faithfulness_example(reference):
    ex = reference["claim_faithfulness"]
    found = ent.check(ex["answer"], ex["context"])
    assert found.names == ("Mars", "Phobos", "Deimos", "Curiosity")
    assert found.numbers == ("2", "2012")  # "two" and 2012
    assert (found.overlap, found.flag) == (1.0, False)
    verdict = OverlapJudge().judge("", ex["answer"], [ex["context"]])
    assert verdict.score == ex["expected_faithfulness"] == 0.75
    assert (verdict.entity_overlap, verdict.unseen_entities) == (1.0, ())


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("up to 24 hours", [24.0]),
        ("1,000 people and 1000 mice", [1000.0, 1000.0]),
        ("2.5% of 5 million, p = 0.016", [2.5, 5e6, 0.016]),
        ("two moons and twelve rings", [2.0, 12.0]),
        ("ADAR1 and COVID-19 in microm2/ms", []),
        ("a 3.5-fold rise in 2008", [3.5, 2008.0]),
    ],
)
def test_numbers_exact(text, values):
    assert ent.numbers(text) == values


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("The National Football League was founded by the Bank of America.",
         ["National Football League", "Bank of America"]),
        ("NASA's Curiosity rover landed on Mars.", ["NASA", "Curiosity", "Mars"]),
        ("However, mRNA levels rose. Interestingly, it works.", ["mRNA"]),
        ("Up to five people said so.", []),
        # punctuation ends a name; single letters are no names
        ("Like FICO, Vantagescore is used in the U.S. market.", ["FICO", "Vantagescore"]),
        ("3. The game suits Ann.", ["Ann"]),
    ],
)  # fmt: skip
def test_names_exact(text, found):
    assert ent.names(text) == found


def test_list_markers_are_no_numbers():
    found = ent.check("3. Let others play it.\n4. Failure of ovaries", "Let others play. Failure.")
    assert (found.numbers, found.flag) == ((), False)


def test_numbers_compare_as_numbers():
    same = ent.check("It costs 1000 dollars for 24 hours.", "It costs 1,000 dollars for 24 hours.")
    assert (same.flag, same.overlap) == (False, 1.0)
    changed = ent.check("It takes up to 25 hours.", "It takes up to 24 hours.")
    assert (changed.flag, changed.unseen_numbers, changed.overlap) == (True, ("25",), 0.0)


def test_answer_without_names_or_numbers_has_no_entity_score():
    found = ent.check("it works well", "it works")
    assert (found.overlap, found.flag) == (None, False)


def test_entity_check_rejects_a_changed_number_the_words_accept():
    ctx = ["Refunds are processed within 24 hours of the request."]
    answer = "Refunds are processed within 25 hours of the request."
    assert OverlapJudge(entity_check=False).judge("q", answer, ctx).score == 1.0
    verdict = OverlapJudge().judge("q", answer, ctx)
    assert (verdict.score, verdict.unseen_entities) == (0.0, ("25",))


def test_entity_check_rejects_a_swapped_name():
    ctx = ["Phobos orbits Mars every eight hours."]
    assert OverlapJudge().judge("q", "Deimos orbits Mars every eight hours.", ctx).score == 0.0
    assert OverlapJudge().judge("q", "Phobos orbits Mars every eight hours.", ctx).score == 1.0


# --- negation check and evidence windows ------------------------------------------------------


def test_negated_claim_needs_a_negated_sentence():
    answer = "Aspirin does not reduce fever."
    assert OverlapJudge(negation_check=False).judge("q", answer, CTX).score == 1.0
    assert OverlapJudge().judge("q", answer, CTX).score == 0.0
    # a negated claim backed by a negated sentence stays supported
    ctx = ["Aspirin does not cure gout in adults."]
    assert OverlapJudge().judge("q", "Aspirin does not cure gout.", ctx).score == 1.0


def test_negation_must_negate_what_the_claim_negates():
    ctx = [
        "Clear relationships were observed between hip fracture risk and statin use. There was "
        "no evidence of such relationships with nonstatin agents."
    ]
    # the context negates "evidence", the claim negates "inverse": flagged
    claim = "There is not an inverse relationship between hip fracture risk and statin use."
    assert OverlapJudge(negation_check=False).judge("q", claim, ctx).score == 1.0
    assert OverlapJudge().judge("q", claim, ctx).score == 0.0
    # a paraphrased negation of the same word is support: "not associated with an increased"
    ctx = ["Use of ADHD medications was not associated with an increased risk of cardiac events."]
    claim = "ADHD medications do not increase the risk of cardiac events."
    assert OverlapJudge().judge("q", claim, ctx).score == 1.0
    # ... a negation farther than NEGATION_SCOPE content words away is not
    far = [
        "ADHD medications were not studied in long clinical trials of adults, and increase the risk of cardiac events."
    ]
    assert OverlapJudge().judge("q", claim, far).score == 0.0


def test_negation_scopes_and_claim_negations():
    assert negation_scopes("It does not increase the risk, and there is no evidence.", 2) == [
        {"increas", "risk"},
        {"evid"},
    ]
    assert negation_scopes("They don’t cure gout.", 4) == [{"cure", "gout"}]
    assert claim_negations("Aspirin does not reduce fever.") == (frozenset({"reduc"}),)
    assert claim_negations("No.") == (frozenset(),)  # a bare "No" needs a negating sentence
    assert claim_negations("No, it reduces fever.") == ()  # an answer particle before a claim
    assert claim_negations("It is not only cheap.") == ()
    assert claim_negations("Aspirin reduces fever.") == ()


def test_a_context_negation_in_the_claims_clause_contradicts_it(reference):
    # the reference lesson: the unseen-entity flag passes, yet the claim is unsupported
    ex = reference["unseen_entity_flag"]
    v = OverlapJudge().judge("", ex["answer"], [ex["context"]])
    assert ent.check(ex["answer"], ex["context"]).flag is ex["expected_flag"]
    assert v.score == 0.0
    assert v.contradictions == (
        ("Paris was founded in 1994", "negation", "the context negates what the claim states"),
    )


def test_window_joins_adjacent_sentences_of_one_passage():
    ctx = ["The county library opens on weekdays. It offers guides for appeals."]
    answer = "The county library opens on weekdays and offers guides for appeals."
    assert OverlapJudge(window=1).judge("q", answer, ctx).score == 0.0  # 4/7 in one sentence
    assert OverlapJudge().judge("q", answer, ctx).score == 1.0  # the default window is 2
    # two passages are never one window
    split = ["The county library opens on weekdays.", "It offers guides for appeals."]
    assert OverlapJudge(window=2).judge("q", answer, split).score == 0.0
    with pytest.raises(ValueError, match="window"):
        OverlapJudge(window=0)


class _Lossy:
    def __init__(self, segments):
        self.segments = segments

    def segment(self, text):
        return self.segments


@pytest.mark.parametrize(
    ("segments", "expected"),
    [
        ([], ["Mars has two moons. Phobos orbits Mars."]),  # nothing returned (pySBD #126)
        (["Mars has two moons. "], ["Mars has two moons.", "Phobos orbits Mars."]),
        (["Phobos orbits Mars."], ["Mars has two moons.", "Phobos orbits Mars."]),
        (["Mars has two moons. ", "Phobos orbits MARS"], ["Mars has two moons.", "Phobos orbits Mars."]),
    ],
)  # fmt: skip
def test_text_the_segmenter_drops_is_kept(monkeypatch, segments, expected):
    import ragrig.core.text as text_mod

    monkeypatch.setattr(text_mod, "_segmenter", lambda: _Lossy(segments))
    text_mod.sentence_spans.cache_clear()
    try:
        assert split_sentences("Mars has two moons. Phobos orbits Mars.") == expected
    finally:
        text_mod.sentence_spans.cache_clear()


def test_long_text_is_segmented_in_blocks_with_the_same_sentences() -> None:
    from ragrig.core.text import SEGMENT_BLOCK_CHARS, _blocks, sentence_spans

    sentence = "Aspirin reduces the risk of stroke in 42 adults (Smith et al. 1988) [1]. "
    text = sentence * 20_000  # 1.5 MB
    blocks = _blocks(text)
    assert "".join(blocks) == text
    assert max(len(b) for b in blocks) <= SEGMENT_BLOCK_CHARS
    assert all(b.endswith(". ") for b in blocks)  # each cut at a sentence end
    short = sentence * 100  # 7,400 characters: two blocks, the same sentences as one per repeat
    spans = sentence_spans(short)
    assert len(spans) == 100
    assert {short[a:b] for a, b in spans} == {sentence.strip()}


def test_judging_cost_is_linear_in_answer_length() -> None:
    """pySBD alone is quadratic: 4x the text took 11x the time before block segmentation."""
    import time

    from ragrig.core.text import sentence_spans

    base = "Aspirin reduces the risk of heart attack in 42 adults [1]. Smith studied it in 1988. "

    def seconds(n: int) -> float:
        """CPU seconds, the least of 3 runs (a busy machine only ever adds time)."""
        text = (base * (n // len(base) + 1))[:n]
        best = float("inf")
        for k in range(3):
            t0 = time.process_time()
            sentence_spans(text + " " * (k + 1))  # a text not seen before: lru_cache cannot answer
            best = min(best, time.process_time() - t0)
        return best

    seconds(4_000)  # pySBD's rules compiled
    small, large = seconds(25_000), seconds(100_000)
    assert large / small < 8  # linear: ~4; quadratic: ~16
