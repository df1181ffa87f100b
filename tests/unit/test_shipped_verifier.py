"""The verifier that ships inside ragrig: loaded offline and checked against its recorded sha256
(a missing, truncated, swapped or misshapen file is one line, nothing judged), reading meaning
(a negation contradicts, a paraphrase is supported), and the overlap judge's lexical findings
confirmed by it before they decide an answer."""

from __future__ import annotations

import hashlib

import pytest

from ragrig.core.errors import ConfigError
from ragrig.judge import verifier_model as VM
from ragrig.judge.confirm import VerifierConfirm, shared_verifier
from ragrig.judge.overlap import OverlapJudge

CONTEXT = "Aspirin is a common drug. Aspirin reduces fever in most adults within a few hours."


@pytest.fixture(scope="module")
def shipped():
    return shared_verifier("shipped", 192, 32, 2, "none")


def test_the_shipped_weights_are_the_recorded_ones():
    path = VM.check_shipped()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == VM.SHIPPED_SHA256
    assert path.stat().st_size < 50_000_000
    assert (path.parent / "MODEL_CARD.md").exists()


def test_the_shipped_verifier_reads_meaning(shipped):
    (ps_ok, pc_ok), (ps_neg, pc_neg), (ps_off, _) = shipped.readings(
        [
            ("Aspirin lowers fever in most adults.", CONTEXT),
            ("Aspirin does not reduce fever in adults.", CONTEXT),
            ("Aspirin cures diabetes.", CONTEXT),
        ]
    )
    assert ps_ok > 0.5 and ps_ok > pc_ok  # a paraphrase is supported
    assert pc_neg > 0.5 and ps_neg < 0.1  # the negation is contradicted
    assert ps_off < 0.5  # what the context does not say is not supported


def test_a_missing_truncated_or_swapped_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="are missing"):
        VM.check_shipped(tmp_path / "verifier.safetensors")
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(VM.shipped_path().read_bytes()[:1000])
    with pytest.raises(ConfigError, match="truncated or was replaced"):
        VM.check_shipped(cut)


def test_weights_of_another_architecture_are_refused(tmp_path):
    import torch
    from safetensors.torch import save_file

    other = tmp_path / "other.safetensors"
    save_file({"classifier.weight": torch.zeros(5, 384)}, str(other))
    digest = hashlib.sha256(other.read_bytes()).hexdigest()
    with pytest.raises(ConfigError, match="do not fit packaged:all-MiniLM-L6-v2's architecture"):
        VM._ShippedCrossEncoder(other, 128, sha256=digest)


class _Fixed:
    """A stand-in verifier: the same (P(support), P(contradict)) for every pair."""

    def __init__(self, ps):
        self.ps = ps
        self.pairs = []

    def readings(self, pairs):
        self.pairs += pairs
        return [(self.ps, 0.5)] * len(pairs)


@pytest.mark.parametrize("ps, confirmed", [(0.01, True), (0.2, False)])
def test_a_lexical_finding_decides_only_when_the_verifier_confirms_it(ps, confirmed):
    fake = _Fixed(ps)
    judge = OverlapJudge(confirm=VerifierConfirm(below=0.05, verifier=fake))
    negated = judge.judge("", "Aspirin does not reduce fever in most adults.", [CONTEXT])
    kinds = [k for _, k, _ in negated.contradictions]
    assert "negation" in kinds and ("contradicted" in kinds) == confirmed
    # only the claim with a finding reached the model
    assert {c for c, _ in fake.pairs} == {"Aspirin does not reduce fever in most adults"}
    fake.pairs.clear()
    faithful = judge.judge("", "Aspirin reduces fever in most adults.", [CONTEXT])
    assert faithful.contradictions == () and fake.pairs == []


class _ByText:
    """A stand-in verifier that reads only the claim: (P(support), P(contradict)) per claim text,
    `other` for every claim not listed."""

    def __init__(self, table, other=(0.1, 0.1)):
        self.table, self.other = table, other
        self.claims = []

    def readings(self, pairs):
        self.claims += [c for c, _ in pairs]
        return [self.table.get(c, self.other) for c, _ in pairs]


NEGATED = "Aspirin does not reduce fever in most adults"
AFFIRMED = "Aspirin reduces fever in most adults"


@pytest.mark.parametrize(
    ("affirmed_reading", "margin", "contradicted"),
    [
        ((0.8, 0.1), 0.3, True),  # the affirmative is read 0.6 higher: the passages say the opposite
        ((0.4, 0.1), 0.3, False),  # 0.2 higher: within the margin
        ((0.8, 0.6), 0.3, False),  # the affirmative is itself read as contradicted
        ((0.8, 0.1), None, False),  # the contrast is off
    ],
)  # fmt: skip
def test_a_negation_is_read_beside_its_affirmative(affirmed_reading, margin, contradicted):
    fake = _ByText({NEGATED: (0.2, 0.3), AFFIRMED: affirmed_reading})
    judge = OverlapJudge(confirm=VerifierConfirm(below=0.05, verifier=fake, negation_margin=margin))
    v = judge.judge("", NEGATED + ".", [CONTEXT])
    found = [d for _, k, d in v.contradictions if k == "contradicted"]
    assert bool(found) == contradicted
    assert (AFFIRMED in fake.claims) == (margin is not None)
    if contradicted:
        assert found[0].startswith(
            "negation contrast: P(support) 0.200 as written, 0.800 without the negation against: "
        )


@pytest.mark.parametrize("needs_finding", [True, False])
def test_a_negation_the_passages_share_is_read_only_when_configured(needs_finding):
    claim = "Aspirin does not cure colds"
    fake = _ByText({claim: (0.2, 0.3), "Aspirin cures colds": (0.8, 0.1)})
    confirm = VerifierConfirm(
        below=0.05, verifier=fake, negation_margin=0.3, negation_needs_finding=needs_finding
    )
    v = OverlapJudge(confirm=confirm).judge("", claim + ".", ["Aspirin does not cure colds."])
    # no lexical finding: the claim reaches the model only when every negation cue is read
    assert (claim in fake.claims, bool(v.contradictions)) == (not needs_finding,) * 2


ENTITY_CONTEXT = (
    "Aspirin is a common drug. In 1899 Bayer sold aspirin as a pain reliever in Germany."
)
SWAPPED = "In 1899 Merck sold aspirin as a pain reliever in Germany"


@pytest.mark.parametrize(
    ("claim_ps", "contradicted"),
    [(0.1, True), (0.35, False)],  # read above entity_below (0.3): the claim is not tried
)
def test_a_missing_name_is_read_against_the_names_of_its_passages(claim_ps, contradicted):
    fake = _ByText({SWAPPED: (claim_ps, 0.1), SWAPPED.replace("Merck", "Bayer"): (0.9, 0.0)})
    judge = OverlapJudge(
        confirm=VerifierConfirm(below=0.05, verifier=fake, entity_margin=0.2, entity_below=0.3)
    )
    v = judge.judge("", SWAPPED + ".", [ENTITY_CONTEXT])
    found = [d for _, k, d in v.contradictions if k == "contradicted"]
    assert bool(found) == contradicted
    # the names of the claim's windows replace the missing one (the best window's first, then
    # the two-sentence window's new one); a claim read above entity_below is not tried
    assert [c for c in dict.fromkeys(fake.claims) if c != SWAPPED] == [
        SWAPPED.replace("Merck", n) for n in ("Bayer", "Germany", "Aspirin") if contradicted
    ]
    if contradicted:
        assert found[0].startswith(
            "entity contrast: P(support) 0.100 with 'Merck', 0.900 with another name of the "
            "passages: In 1899 Bayer sold"
        )


def test_the_default_config_turns_both_contrasts_on():
    from ragrig.core.config import load_section
    from ragrig.judge.config import VerifierConfirmConfig

    confirm = load_section("judge").confirm
    assert (confirm.negation_margin, confirm.entity_margin, confirm.entity_below) == (0.3, 0.2, 0.3)
    assert VerifierConfirmConfig().negation_margin is None  # off unless configured


def test_the_default_judge_confirms_a_negation_with_the_shipped_model(shipped):
    judge = OverlapJudge(confirm=VerifierConfirm(verifier=shipped))
    v = judge.judge("", "Aspirin does not reduce fever in most adults.", [CONTEXT])
    (finding,) = [d for _, k, d in v.contradictions if k == "contradicted"]
    assert finding.startswith("negation finding confirmed by the verifier: P(support) 0.0")
