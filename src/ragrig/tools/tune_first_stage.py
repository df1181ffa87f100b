"""First-stage settings chosen on the dataset's *train* split, never on test.

`ragrig tune-first-stage` (this module) picks, by mean nDCG@10 over the train queries:

1. BM25 k1 and b of the configured sparse index (grid `BM25_GRID`, which holds Anserini's
   0.9/0.4, 1.2/0.75 and bm25s' default 1.5/0.75);
2. with that BM25, the RRF constant k (`RRF_GRID`) and the convex weight alpha of the dense lane
   (`ALPHA_GRID`), fusing the same two lanes the retrieve stage fuses. These are written to the
   hybrids' `tuned` lists with the corpus's content fingerprint (ragrig.retrieve.tuning): a run
   on another corpus reads the untuned defaults, not them.

A tie keeps the first grid point. The corpus is embedded once (the embed section's model) and
indexed once per BM25 grid point (bm25s stores k1/b-dependent scores at index time; its
tokens are computed once); the dense lane is searched once, and fusion reuses both lanes.
Figures use the pipeline's own parse, chunk, embed, index and retrieve code and its document-
level metrics (`metrics.ir`).

Only the train split's qrels are read to choose: the dataset is parsed with `split: train`
(`load_beir` reads qrels/train.tsv; of the other qrels files it reads only their query ids, to
count the unjudged queries). The test split is read afterwards, and only when asked
(`--evaluate-test`): its figures are printed for the chosen values and never compared across
grid points. A dataset without qrels/train.tsv is refused in one line.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.errors import ConfigError

BM25_GRID: tuple[tuple[float, float], ...] = tuple(
    (k1, b) for k1 in (0.6, 0.9, 1.2, 1.5, 2.0) for b in (0.3, 0.4, 0.5, 0.6, 0.75, 0.9)
)
RRF_GRID: tuple[int, ...] = (5, 10, 20, 30, 40, 60, 80, 100, 150)
ALPHA_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))
OBJECTIVE = "ndcg@10"
MEASURES = ("ndcg@10", "recall@100", "rr")


@dataclass
class Split:
    name: str
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]


@dataclass
class Corpus:
    """Chunks of the corpus with their vectors and dense index, shared by every split."""

    chunk_doc: np.ndarray
    chunk_ids: np.ndarray
    texts: list[str]
    dense: Any
    embedder: Any
    query_embedder: Any
    embed_s: float
    n_chunks: int


@dataclass
class Tuning:
    split: str
    n_queries: int
    bm25: list[dict[str, float]] = field(default_factory=list)  # k1, b, measures
    rrf: list[dict[str, float]] = field(default_factory=list)  # rrf_k, measures
    convex: list[dict[str, float]] = field(default_factory=list)  # alpha, measures
    dense: dict[str, float] = field(default_factory=dict)
    chosen: dict[str, float] = field(default_factory=dict)  # k1, b, rrf_k, alpha
    seconds: float = 0.0

    def best(self, table: str) -> dict[str, float]:
        rows = getattr(self, table)
        return max(rows, key=lambda r: r[OBJECTIVE])  # max keeps the first of equal rows

    def row(self, table: str, **where: float) -> dict[str, float] | None:
        for r in getattr(self, table):
            if all(r[k] == v for k, v in where.items()):
                return r
        return None


def _dataset_section(params: Path, split: str, root: Path | None) -> Any:
    from ragrig.core.config import load_params, validate_section

    raw = dict(load_params(params).get("dataset") or {})
    if root is not None:
        raw["root"] = str(root)
    ds_root = Path(raw["root"])
    if not (ds_root / "qrels" / f"{split}.tsv").exists():
        raise ConfigError(
            f"dataset {raw.get('name', ds_root.name)!r} has no {split} split "
            f"({ds_root / 'qrels' / f'{split}.tsv'} missing): first-stage settings are tuned on "
            "a train split only; keep the configured values"
        )
    return validate_section(
        "dataset", {"name": raw.get("name", ds_root.name), "root": raw["root"], "split": split}
    )


def load_split(params: Path, split: str, root: Path | None = None) -> tuple[Any, Split]:
    """(documents table, the split's queries and qrels) via the parse stage's own code."""
    from ragrig.core.config import load_section
    from ragrig.parse import make_parser

    ds = _dataset_section(params, split, root)
    parsed = make_parser(load_section("parse", params)).parse(ds)
    queries = parsed.queries.sort_values("qid", ignore_index=True)
    qrels: dict[str, dict[str, int]] = {}
    for row in parsed.qrels.itertuples(index=False):
        qrels.setdefault(row.qid, {})[row.doc_id] = int(row.relevance)
    return parsed.documents, Split(split, queries["qid"].tolist(), queries["text"].tolist(), qrels)


def load_chunk_vectors(
    path: Path, texts: list[str], chunk_ids: list[str], embedder: Any, check_rows: int = 4
) -> np.ndarray:
    """Chunk vectors written earlier for these chunks (data/embed/chunks.npy), checked: the row
    count, the chunk_ids.parquet beside the file if any, and `check_rows` rows spread over it
    against a fresh encoding of their texts (cosine >= 0.999). A mismatch is one clear error."""
    from ragrig.core.errors import DataValidationError
    from ragrig.core.io import load_array, read_parquet

    vectors = load_array(path)
    if vectors.shape[0] != len(texts):
        raise DataValidationError(
            f"{path}: {vectors.shape[0]} vectors for {len(texts)} chunks of this corpus"
        )
    ids_path = path.parent / "chunk_ids.parquet"
    if ids_path.exists() and read_parquet(ids_path)["id"].tolist() != list(chunk_ids):
        raise DataValidationError(f"{ids_path}: chunk ids differ from this corpus's chunks")
    rows = np.linspace(0, len(texts) - 1, num=min(check_rows, len(texts))).astype(int)
    fresh = embedder.encode([texts[i] for i in rows])
    cos = np.sum(fresh * vectors[rows], axis=1) / (
        np.linalg.norm(fresh, axis=1) * np.linalg.norm(vectors[rows], axis=1)
    )
    if float(cos.min()) < 0.999:
        raise DataValidationError(
            f"{path}: row {int(rows[int(np.argmin(cos))])} has cosine {float(cos.min()):.4f} "
            "to a fresh encoding: vectors of another model or settings"
        )
    return vectors


def build_corpus(
    documents: Any,
    params: Path,
    progress: bool = False,
    chunk_vectors: Path | None = None,
    check_rows: int = 4,
) -> Corpus:
    """Chunk, embed (once) and index the corpus as the chunk, embed and index stages do.

    `chunk_vectors`: a .npy of chunk vectors the embed stage already wrote for this corpus and
    embed section (data/embed/chunks.npy); used instead of embedding when its row count matches,
    its chunk_ids.parquet beside it (if any) lists the same chunks, and `check_rows` rows spread
    over it equal a fresh encoding of their texts (cosine >= 0.999). Otherwise one clear error.
    """
    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.core.config import load_section
    from ragrig.core.registry import resolve
    from ragrig.embed import make_embedder
    from ragrig.index import DENSE_INDEXES

    chunks = chunk_documents(documents, make_chunker(load_section("chunk", params)), progress)
    embed_cfg = load_section("embed", params)
    passages = make_embedder(embed_cfg, role="passage")
    texts = chunks["text"].tolist()
    t0 = time.perf_counter()
    if chunk_vectors is None:
        vectors = passages.encode(texts, progress=progress)
    else:
        vectors = load_chunk_vectors(
            Path(chunk_vectors), texts, chunks["chunk_id"].tolist(), passages, check_rows
        )
    embed_s = time.perf_counter() - t0
    index_cfg = load_section("index", params)
    dense = resolve(DENSE_INDEXES, index_cfg.dense.method, "dense index")(vectors, index_cfg.dense)
    return Corpus(
        chunk_doc=chunks["doc_id"].to_numpy(),
        chunk_ids=chunks["chunk_id"].to_numpy(),
        texts=texts,
        dense=dense,
        embedder=passages,
        query_embedder=passages.with_prefix(embed_cfg.query_prefix),
        embed_s=embed_s,
        n_chunks=len(chunks),
    )


def _retrieve_cfg(params: Path) -> Any:
    """depth, chunk_depth, ef_search, nprobe of the configured retrieve section."""
    from ragrig.core.config import load_params, validate_section

    raw = dict(load_params(params).get("retrieve") or {})
    keep = {k: raw[k] for k in ("depth", "chunk_depth", "ef_search", "nprobe") if k in raw}
    return validate_section("retrieve", {"method": "hybrid_rrf", **keep})


class Lanes:
    """Document lanes of one split's queries: dense once, BM25 per (k1, b)."""

    def __init__(self, corpus: Corpus, split: Split, params: Path):
        from ragrig.core.config import load_section
        from ragrig.core.text import tokenize
        from ragrig.index.dense import search, set_search_params
        from ragrig.retrieve import Hits, to_documents

        self.corpus, self.split = corpus, split
        self.cfg = _retrieve_cfg(params)
        self.sparse_cfg = load_section("index", params).sparse
        if self.sparse_cfg.method != "bm25s":
            raise ConfigError(
                f"tune-first-stage tunes the bm25s index; index.sparse.method is "
                f"{self.sparse_cfg.method!r} (use index/sparse=bm25s)"
            )
        qvecs = corpus.query_embedder.encode(split.query_texts)
        set_search_params(corpus.dense, self.cfg.ef_search, self.cfg.nprobe)
        scores, rows = search(corpus.dense, qvecs, self.cfg.chunk_depth)
        self.dense = {
            q: to_documents(
                Hits(rows[i], scores[i]), corpus.chunk_doc, corpus.chunk_ids, self.cfg.depth
            )
            for i, q in enumerate(split.query_ids)
        }
        from ragrig.index.sparse import _sorted_vocab_ids

        self._ids_vocab = _sorted_vocab_ids(
            tokenize(corpus.texts, self.sparse_cfg.stemmer, self.sparse_cfg.stopwords)
        )

    def bm25(self, k1: float, b: float) -> dict[str, list[tuple[str, str, float]]]:
        import bm25s

        from ragrig.index.sparse import Bm25sIndex
        from ragrig.retrieve import Hits, to_documents

        cfg = self.sparse_cfg.model_copy(update={"k1": k1, "b": b})
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        model.index(self._ids_vocab, show_progress=False)
        index = Bm25sIndex(cfg, model)
        scores, rows = index.search(self.split.query_texts, self.cfg.chunk_depth)
        c = self.corpus
        return {
            q: to_documents(Hits(rows[i], scores[i]), c.chunk_doc, c.chunk_ids, self.cfg.depth)
            for i, q in enumerate(self.split.query_ids)
        }

    def fused(
        self, bm25: dict[str, list[tuple[str, str, float]]], method: str, **setting: float
    ) -> dict[str, list[str]]:
        from ragrig.retrieve import fuse

        cfg = self.cfg.model_dump()
        cfg.pop("method")
        if method == "hybrid_convex":
            cfg.pop("rrf_k", None)
        from ragrig.core.config import validate_section

        fcfg = validate_section("retrieve", {"method": method, **cfg, **setting})
        return {
            q: [d for d, _, _ in fuse(method, {"dense": self.dense[q], "bm25": bm25[q]}, fcfg)]
            for q in self.split.query_ids
        }

    def measure(self, rankings: dict[str, list]) -> dict[str, float]:
        from ragrig.metrics.ir import mean_measures

        docs = {q: [x[0] if isinstance(x, tuple) else x for x in r] for q, r in rankings.items()}
        return mean_measures(docs, self.split.qrels, list(MEASURES))


def tune(
    lanes: Lanes,
    bm25_grid: tuple[tuple[float, float], ...] = BM25_GRID,
    rrf_grid: tuple[int, ...] = RRF_GRID,
    alpha_grid: tuple[float, ...] = ALPHA_GRID,
) -> Tuning:
    """Grid search on `lanes`' split; see the module docstring for the order of choices."""
    t0 = time.perf_counter()
    result = Tuning(lanes.split.name, len(lanes.split.query_ids))
    result.dense = lanes.measure(lanes.dense)
    runs = {}
    for k1, b in bm25_grid:
        runs[(k1, b)] = lanes.bm25(k1, b)
        result.bm25.append({"k1": k1, "b": b, **lanes.measure(runs[(k1, b)])})
    best = result.best("bm25")
    bm25 = runs[(best["k1"], best["b"])]
    for k in rrf_grid:
        result.rrf.append({"rrf_k": k, **lanes.measure(lanes.fused(bm25, "hybrid_rrf", rrf_k=k))})
    for a in alpha_grid:
        result.convex.append(
            {"alpha": a, **lanes.measure(lanes.fused(bm25, "hybrid_convex", alpha=a))}
        )
    result.chosen = {
        "k1": best["k1"],
        "b": best["b"],
        "rrf_k": result.best("rrf")["rrf_k"],
        "alpha": result.best("convex")["alpha"],
    }
    result.seconds = time.perf_counter() - t0
    return result


def runs_of(lanes: Lanes, setting: dict[str, float]) -> dict[str, dict[str, list[str]]]:
    """Document rankings of each first-stage method under one setting (k1, b, rrf_k, alpha)."""
    bm25 = lanes.bm25(setting["k1"], setting["b"])

    def docs(lane: dict[str, list]) -> dict[str, list[str]]:
        return {q: [d for d, _, _ in r] for q, r in lane.items()}

    return {
        "bm25": docs(bm25),
        "dense": docs(lanes.dense),
        "hybrid_rrf": lanes.fused(bm25, "hybrid_rrf", rrf_k=int(setting["rrf_k"])),
        "hybrid_convex": lanes.fused(bm25, "hybrid_convex", alpha=setting["alpha"]),
    }


def evaluate(lanes: Lanes, chosen: dict[str, float]) -> dict[str, dict[str, float]]:
    """Figures of the chosen settings on `lanes`' split (for the test split: report only)."""
    return {m: lanes.measure(run) for m, run in runs_of(lanes, chosen).items()}


def paired_deltas(
    lanes: Lanes, before: dict[str, float], chosen: dict[str, float], seed: int
) -> dict[str, dict[str, Any]]:
    """Per method, the paired deltas (chosen - before) over `lanes`' queries with intervals."""
    from ragrig.metrics.deltas import compare_runs

    a, b = runs_of(lanes, before), runs_of(lanes, chosen)
    return {
        m: compare_runs(
            a[m], b[m], lanes.split.qrels, seed=seed, names=("before", "chosen")
        ).metrics()
        for m in a
        if m != "dense"  # the dense lane has no tuned setting
    }


# --- writing the choice into conf/ --------------------------------------------------------------

_MARK = "tune-first-stage"


def _set_key(text: str, key: str, value: str, comment: str, path: Path) -> str:
    pattern = re.compile(rf"^{re.escape(key)}:[^\n]*$", re.MULTILINE)
    if len(pattern.findall(text)) != 1:
        raise ConfigError(f"{path}: expected exactly one top-level line `{key}: ...`")
    return pattern.sub(lambda _: f"{key}: {value}  # {comment}", text)


def _fmt(x: float) -> str:
    return f"{x:g}"


def _set_tuned(text: str, fingerprint: str, value: str, source: str, path: Path) -> str:
    """The `tuned:` list of a hybrid's conf file with this corpus's entry (one flow-style line
    per corpus) replaced or added; the other corpora's entries kept."""
    head = re.compile(r"^tuned:[^\n]*$", re.MULTILINE)
    if len(head.findall(text)) != 1:
        raise ConfigError(f"{path}: expected exactly one top-level line `tuned: ...`")
    entry = f"  - {{corpus_sha256: {fingerprint}, value: {value}, source: {json.dumps(source)}}}"
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if head.match(line))
    if lines[i].split("#")[0].strip() in ("tuned: []", "tuned: [ ]"):
        lines[i] = "tuned:"
    j = i + 1
    while j < len(lines) and lines[j].startswith("  - "):
        j += 1
    kept = [line for line in lines[i + 1 : j] if fingerprint not in line]
    lines[i + 1 : j] = [*kept, entry]
    return "\n".join(lines) + "\n"


def write_choice(
    conf: Path, result: Tuning, dataset: str, fingerprint: str | None = None
) -> list[Path]:
    """Set k1/b (conf/index/sparse/bm25s.yaml) with its train-split figure as a line comment,
    and record rrf_k (conf/retrieve/hybrid_rrf.yaml) and alpha (conf/retrieve/hybrid_convex.yaml)
    as tuned on the corpus of `fingerprint` (ragrig.retrieve.tuning): used on that corpus only."""
    c = result.chosen
    where = f"{_MARK} on {dataset} {result.split} ({result.n_queries} queries)"
    bm = result.best("bm25")
    anserini = result.row("bm25", k1=0.9, b=0.4)
    ref = f", 0.9/0.4 {anserini[OBJECTIVE]:.4f}" if anserini else ""
    edits = {
        conf / "index" / "sparse" / "bm25s.yaml": [
            ("k1", _fmt(c["k1"]), f"{where}: nDCG@10 {bm[OBJECTIVE]:.4f}{ref}"),
            ("b", _fmt(c["b"]), f"{where}, with k1"),
        ],
    }
    tuned = {
        conf / "retrieve" / "hybrid_rrf.yaml": (
            str(int(c["rrf_k"])),
            f"{where}: nDCG@10 {result.best('rrf')[OBJECTIVE]:.4f}" + _ref(result, "rrf", rrf_k=60),
        ),
        conf / "retrieve" / "hybrid_convex.yaml": (
            _fmt(c["alpha"]),
            f"{where}: nDCG@10 {result.best('convex')[OBJECTIVE]:.4f}"
            + _ref(result, "convex", alpha=0.5),
        ),
    }
    from ragrig.core.io import atomic_write_text

    for path, keys in edits.items():
        text = path.read_text(encoding="utf-8")
        for key, value, comment in keys:
            text = _set_key(text, key, value, comment, path)
        atomic_write_text(path, text)
    if fingerprint is None:
        return list(edits)
    for path, (value, source) in tuned.items():
        text = _set_tuned(path.read_text(encoding="utf-8"), fingerprint, value, source, path)
        atomic_write_text(path, text)
    return [*edits, *tuned]


def _ref(result: Tuning, table: str, **where: float) -> str:
    row = result.row(table, **where)
    if row is None:
        return ""
    ((k, v),) = where.items()
    return f", {k} {_fmt(v)} {row[OBJECTIVE]:.4f}"


def format_tuning(result: Tuning) -> str:
    lines = [
        f"tuned on the {result.split} split ({result.n_queries} queries) in {result.seconds:.1f} s; "
        f"objective mean {OBJECTIVE}",
        f"dense lane: nDCG@10 {result.dense['ndcg@10']:.4f}",
        "BM25 k1 b: nDCG@10 R@100 MRR",
    ]
    for r in result.bm25:
        lines.append(
            f"  {r['k1']:<4g} {r['b']:<5g} {r['ndcg@10']:.4f} {r['recall@100']:.4f} {r['rr']:.4f}"
        )
    lines.append("RRF k (chosen BM25): nDCG@10 R@100 MRR")
    for r in result.rrf:
        lines.append(f"  {r['rrf_k']:<4d} {r['ndcg@10']:.4f} {r['recall@100']:.4f} {r['rr']:.4f}")
    lines.append("convex alpha (chosen BM25): nDCG@10 R@100 MRR")
    for r in result.convex:
        lines.append(f"  {r['alpha']:<5g} {r['ndcg@10']:.4f} {r['recall@100']:.4f} {r['rr']:.4f}")
    c = result.chosen
    lines.append(
        f"chosen: k1 {c['k1']:g}, b {c['b']:g}, rrf_k {int(c['rrf_k'])}, alpha {c['alpha']:g}"
    )
    return "\n".join(lines)


# --- the command ------------------------------------------------------------------------------


def cmd_tune(args: Any) -> int:
    import json

    from ragrig.core.config import load_params, load_section

    params = Path(args.params)
    root = Path(args.dataset_root) if args.dataset_root else None
    ds = load_params(params).get("dataset") or {}
    name = ds.get("name") or Path(root or ds.get("root", "dataset")).name
    documents, train = load_split(params, "train", root)
    from ragrig.retrieve.tuning import documents_fingerprint

    fingerprint = documents_fingerprint(documents)
    before = {
        "k1": load_section("index", params).sparse.k1,
        "b": load_section("index", params).sparse.b,
        "rrf_k": _composed(args.conf, "hybrid_rrf", "rrf_k", fingerprint),
        "alpha": _composed(args.conf, "hybrid_convex", "alpha", fingerprint),
    }
    embed_model = str(load_section("embed", params).model)
    if "train_embed" in Path(embed_model).parts:
        from ragrig.core.errors import ConfigError

        raise ConfigError(
            f"tune-first-stage: embed.model {embed_model} is the embedder train_embed adapts on "
            "this train split; choosing settings on the queries it was trained on is biased. "
            "Tune with the pretrained one: python -m ragrig params write embed=minilm, then "
            "tune-first-stage, then python -m ragrig params write"
        )
    print(f"tune-first-stage: {name} train split, {len(train.query_ids)} queries", flush=True)
    vectors = Path(args.chunk_vectors) if args.chunk_vectors else None
    corpus = build_corpus(documents, params, progress=not args.quiet, chunk_vectors=vectors)
    how = f"read from {vectors} (checked on a sample)" if vectors else "embedded once"
    print(f"{corpus.n_chunks} chunk vectors {how} in {corpus.embed_s:.1f} s", flush=True)
    result = tune(Lanes(corpus, train, params))
    print(format_tuning(result))
    out: dict[str, Any] = {
        "dataset": name,
        "split": result.split,
        "queries": result.n_queries,
        "chosen": result.chosen,
        "corpus_sha256": fingerprint,
        "configured_before": before,
        "train": {
            "bm25": result.bm25,
            "rrf": result.rrf,
            "convex": result.convex,
            "dense": result.dense,
        },
        "embed_s": corpus.embed_s,
        "chunk_vectors": str(vectors) if vectors else None,
        "tune_s": result.seconds,
    }
    if not args.no_write:
        for path in write_choice(Path(args.conf), result, name, fingerprint):
            print(f"wrote {path}")
        print("run `make params` (python -m ragrig params write) to update params.yaml")
        from ragrig.dataset.splits import record_tuning

        marked = record_tuning(
            root or Path(ds.get("root", "")), train.query_ids, "tune-first-stage chose on them"
        )
        if marked is not None:
            print(
                f"tune-first-stage: {len(marked['added'])} queries it chose on marked development "
                f"({marked['already']} were already): they leave every measured part at the next "
                "ragrig split"
            )
    if args.evaluate_test:
        # read only now, after the choice is made and written: reported, never used to choose
        _, test = load_split(params, "test", root)
        lanes = Lanes(corpus, test, params)
        out["test"] = {"chosen": evaluate(lanes, result.chosen), "before": evaluate(lanes, before)}
        from ragrig.runtime import stage

        seed = stage.read_runtime(params, "seed")
        out["test_paired_deltas"] = paired_deltas(lanes, before, result.chosen, seed)
        print(f"test split ({len(test.query_ids)} queries), for the record only:")
        for label, figures in out["test"].items():
            for method, m in figures.items():
                print(
                    f"  {label:<7} {method:<14} nDCG@10 {m['ndcg@10']:.4f}  "
                    f"R@100 {m['recall@100']:.4f}  MRR {m['rr']:.4f}"
                )
        print("  paired deltas chosen - before (95% bootstrap interval, randomisation p):")
        for method, measures in out["test_paired_deltas"].items():
            d = measures["ndcg@10"]
            ci = f"[{d['ci_low']:+.4f}, {d['ci_high']:+.4f}]" if "ci_low" in d else "(one query)"
            print(f"  {method:<14} nDCG@10 {d['delta']:+.4f} {ci} p {d['p_value']:.3f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def _composed(conf: str, option: str, key: str, fingerprint: str) -> float:
    """The setting a run of `option` uses on the corpus of `fingerprint` (the configured
    value, else the one tuned on this corpus, else the untuned default)."""
    import yaml

    from ragrig.core.config import validate_section
    from ragrig.retrieve.tuning import choose_fusion

    raw = yaml.safe_load((Path(conf) / "retrieve" / f"{option}.yaml").read_text())
    cfg, _ = choose_fusion(validate_section("retrieve", raw), fingerprint)
    return getattr(cfg, key)
