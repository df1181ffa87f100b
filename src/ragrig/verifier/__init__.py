"""A claim verifier trained by the pipeline: a cross-encoder initialised from the packaged MiniLM
that reads (claim, evidence) and says SUPPORT / CONTRADICT / NOT_ADDRESSED.

* `ragrig.verifier.data`: training pairs built from SciFact *train* claims, their abstracts'
  sentences and perturbations of supported claims;
* `ragrig.verifier.train`: fine-tuning (the DVC stage `train_verifier`), deterministic given its
  seed, with a manifest of label counts, timing, versions and the weights' hash;
* `ragrig.verifier.model`: loading a trained model directory and scoring pairs in batches.
"""

LABELS = ("SUPPORT", "CONTRADICT", "NOT_ADDRESSED")
SUPPORT, CONTRADICT, NOT_ADDRESSED = LABELS
