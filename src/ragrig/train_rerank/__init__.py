"""A reranker trained by the pipeline: a cross-encoder initialised from the packaged MiniLM,
fine-tuned on the dataset's *train* split with hard negatives mined by BM25.

* `ragrig.train_rerank.data`: training queries (the train qrels less any query of the evaluated
  split, by id or case-folded text), BM25-mined negatives, labelled pairs;
* `ragrig.train_rerank.train`: fine-tuning (the DVC stage `train_rerank`), deterministic given
  its seed, with a manifest of counts, timing, versions and the weights' hash.

Scoring with the trained model is the rerank stage's `trained` method (`ragrig.rerank`), which
needs no training code.
"""
