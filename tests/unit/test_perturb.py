"""Perturbations of supported claims: exact outputs, and None where nothing applies."""

from __future__ import annotations

import random

import pytest

from ragrig.judge import perturb


@pytest.mark.parametrize(
    ("claim", "negated"),
    [
        ("ADAR1 binds to Dicer to cleave pre-miRNA.", "ADAR1 does not bind to Dicer to cleave pre-miRNA."),
        ("Patients with diabetes are at higher risk.", "Patients with diabetes are not at higher risk."),
        ("1/2000 in UK have abnormal PrP positivity.", "1/2000 in UK do not have abnormal PrP positivity."),
        ("The drug has shown benefit.", "The drug has not shown benefit."),
        ("Mars has two moons.", "Mars does not have two moons."),
        ("Vitamin B12 deficiency raises homocysteine.", "Vitamin B12 deficiency does not raise homocysteine."),
        ("Smoking causes cancer.", "Smoking does not cause cancer."),
        ("The law library is not open on Sundays.", None),  # already negated
        ("The treatment increased survival in mice.", None),  # no auxiliary, no present verb
    ],
)  # fmt: skip
def test_negate(claim, negated):
    assert perturb.negate(claim) == negated


@pytest.mark.parametrize(
    ("claim", "affirmed"),
    [
        ("ADAR1 does not bind to Dicer.", "ADAR1 binds to Dicer."),
        ("Mars does not have two moons.", "Mars has two moons."),
        ("The clinic did not open in May.", "The clinic did open in May."),
        ("Penguins cannot fly.", "Penguins can fly."),
        ("The library won't open on Sundays.", "The library will open on Sundays."),
        ("The library isn't open on Sundays.", "The library is open on Sundays."),
        ("Patients are not at higher risk.", "Patients are at higher risk."),
        ("Mars has two moons.", None),  # nothing to remove
    ],
)  # fmt: skip
def test_affirm_removes_the_first_negation(claim, affirmed):
    assert perturb.affirm(claim) == affirmed
    if affirmed is not None and perturb.negate(affirmed) is not None:
        assert perturb.affirm(perturb.negate(affirmed)) == affirmed  # the inverse of negate


def test_change_number_avoids_values_of_the_context():
    claim = "Refunds take up to 24 hours."
    outs = {perturb.change_number(claim, "", random.Random(s)) for s in range(20)}
    assert outs == {
        "Refunds take up to 25 hours.",
        "Refunds take up to 48 hours.",
        "Refunds take up to 34 hours.",
        "Refunds take up to 23 hours.",
    }
    # 25 and 48 are in the context: never chosen
    ctx = "It took 25 hours, or 48 hours at most."
    outs = {perturb.change_number(claim, ctx, random.Random(s)) for s in range(20)}
    assert outs == {"Refunds take up to 34 hours.", "Refunds take up to 23 hours."}
    assert perturb.change_number("The dose was 1.8 mg.", "", random.Random(0)) in {
        "The dose was 1.9 mg.",
        "The dose was 3.6 mg.",
        "The dose was 2.8 mg.",
        "The dose was 1.7 mg.",
    }
    assert perturb.change_number("ADAR1 binds Dicer.", "", random.Random(0)) is None


def test_swap_entity_takes_a_name_the_context_lacks():
    ctx = "Phobos orbits Mars. Deimos is smaller."
    out = perturb.swap_entity("Phobos orbits Mars.", ctx, ["Deimos", "Titan"], random.Random(0))
    assert out == "Phobos orbits Titan."  # the opener "Phobos" is a name by position only
    # a capitalised opener that is a name only by position is not swapped
    assert perturb.swappable_names("Patients with Lyme disease recover.") == ["Lyme"]
    assert perturb.swap_entity("Mars is red.", "Mars is red.", ["Mars"], random.Random(0)) is None


@pytest.mark.parametrize(
    ("claim", "dropped"),
    [
        ("The treatment increased survival in mice.", "The treatment increased survival."),
        ("Refunds take up to 24 hours.", "Refunds take 24 hours."),
        ("Some patients recover quickly.", "Patients recover quickly."),
        ("Aspirin reduces fever.", None),
    ],
)
def test_drop_qualifier(claim, dropped):
    assert perturb.drop_qualifier(claim) == dropped


@pytest.mark.parametrize(
    ("claim", "reversed_"),
    [
        ("Vitamin B12 deficiency raises homocysteine.", "Vitamin B12 deficiency lowers homocysteine."),
        ("Spring tides are higher than neap tides.", "Spring tides are lower than neap tides."),
        ("Increased intake improves outcomes.", "Decreased intake improves outcomes."),
        ("Mars has two moons.", None),
    ],
)  # fmt: skip
def test_reverse_relation(claim, reversed_):
    assert perturb.reverse_relation(claim) == reversed_


def test_split_evidence_cuts_near_the_middle():
    s = "The county law library is open to the public on weekdays, and it offers self-help guides."
    assert perturb.split_evidence(s) == (
        "The county law library is open to the public on weekdays.",
        "It offers self-help guides.",
    )
    assert perturb.split_evidence("Mars has two moons.") is None
