"""A bi-encoder adapted by the pipeline: the packaged MiniLM sentence-transformer fine-tuned on
the dataset's *train* split with in-batch and BM25-mined hard negatives
(MultipleNegativesRankingLoss).

* `ragrig.train_embed.data`: training examples (query, judged-relevant passage, hard negatives)
  from the train qrels less any query of the evaluated split (`ragrig.training.split`);
* `ragrig.train_embed.train`: fine-tuning (the DVC stage `train_embed`), deterministic given its
  seed, with a manifest of counts, timing, versions and the weights' hash.

Embedding with the trained model is the embed stage's `embed=trained` option (a
sentence-transformers folder, data/train_embed/model), which needs no training code.
"""
