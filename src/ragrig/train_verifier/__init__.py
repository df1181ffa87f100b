"""A claim verifier trained by the pipeline: a cross-encoder initialised from the packaged MiniLM
that reads (claim, evidence) and says SUPPORT / CONTRADICT / NOT_ADDRESSED.

* `ragrig.train_verifier.data`: training pairs built from SciFact *train* claims, their abstracts'
  sentences and perturbations of supported claims;
* `ragrig.train_verifier.train`: fine-tuning (the DVC stage `train_verifier`), deterministic given its
  seed, with a manifest of label counts, timing, versions and the weights' hash;
Loading a trained model and scoring pairs (inference, which the judge needs without training)
is `ragrig.judge.verifier_model`, where the labels are defined.
"""

from ragrig.judge.verifier_model import CONTRADICT, LABELS, NOT_ADDRESSED, SUPPORT

__all__ = ["CONTRADICT", "LABELS", "NOT_ADDRESSED", "SUPPORT"]
