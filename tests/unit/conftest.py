"""Fixtures the unit tests share: a tiny randomly initialised BERT to train in seconds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide BERT with the packaged MiniLM's tokenizer, randomly initialised."""
    torch = pytest.importorskip("torch")
    from transformers import BertConfig, BertModel

    from ragrig.weights.models import resolve_model

    packaged = Path(resolve_model("packaged:all-MiniLM-L6-v2"))
    out = tmp_path_factory.mktemp("tiny_base")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(packaged / name, out / name)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertModel(cfg).save_pretrained(out)
    return out
