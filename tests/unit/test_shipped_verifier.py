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


def test_the_default_judge_confirms_a_negation_with_the_shipped_model(shipped):
    judge = OverlapJudge(confirm=VerifierConfirm(verifier=shipped))
    v = judge.judge("", "Aspirin does not reduce fever in most adults.", [CONTEXT])
    (finding,) = [d for _, k, d in v.contradictions if k == "contradicted"]
    assert finding.startswith("negation finding confirmed by the verifier: P(support) 0.0")
