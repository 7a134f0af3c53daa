"""Training triples ``(query, positive, negative)`` from labelled pairs."""
import random


def build_triples(pairs, *, max_per_query=10, random_negatives=0, seed=42):
    """Group labelled pairs by their first text and pair each query's
    positives with its negatives.

    Args:
        pairs: dicts with ``text_a`` (the query), ``text_b``, ``positive``
            (bool) and ``source`` (``file:line``), in file order.
        max_per_query: at most this many labelled triples per query; when the
            query has more (positives × negatives), a subset is drawn with
            ``seed`` and kept in file order.
        random_negatives: for each positive pair, this many extra triples whose
            negative is a text drawn with ``seed`` from all texts of the file
            (never the query or one of its positives). For data where few
            queries have a labelled negative (AFQMC: 1 in 300).
        seed: the same pairs and seed always give the same triples.

    Returns dicts ``{query, positive, negative, source}`` (the source is the
    positive pair's), queries in order of first appearance.
    """
    rng = random.Random(seed)
    groups = {}
    for pair in pairs:
        group = groups.setdefault(pair["text_a"], {"pos": {}, "neg": {}})
        side = group["pos"] if pair["positive"] else group["neg"]
        side.setdefault(pair["text_b"], pair["source"])  # duplicates count once
    pool = list(dict.fromkeys(t for pair in pairs for t in (pair["text_a"], pair["text_b"])))
    pool_set = set(pool)
    triples = []
    for query, group in groups.items():
        combos = [(p, n) for p in group["pos"] for n in group["neg"]]
        if len(combos) > max_per_query:
            combos = [combos[i] for i in sorted(rng.sample(range(len(combos)), max_per_query))]
        triples += [{"query": query, "positive": p, "negative": n, "source": group["pos"][p]} for p, n in combos]
        if random_negatives:
            taken = {query, *group["pos"]}
            for p, source in group["pos"].items():
                for negative in _draw(rng, pool, pool_set, taken, random_negatives):
                    triples.append({"query": query, "positive": p, "negative": negative, "source": source})
    return triples


def _draw(rng, pool, pool_set, taken, k):
    """Up to ``k`` distinct texts of ``pool`` not in ``taken`` (rejection sampling)."""
    k = min(k, len(pool) - sum(t in pool_set for t in taken))
    chosen = []
    while len(chosen) < k:
        text = pool[rng.randrange(len(pool))]
        if text not in taken and text not in chosen:
            chosen.append(text)
    return chosen
