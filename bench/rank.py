"""Rank agreement between a model and a measurement, for the benchmarks that check a model of
`hottext order` against the simulation (bench/postgres/model_check.py, bench/cache_sets/)."""

import itertools


def tau(triples):
    """Kendall's tau-a over (name, model, measured) triples, and the names of the pairs the
    model orders the other way round."""
    concordant, discordant, flipped = 0, 0, []
    for (n1, m1, s1), (n2, m2, s2) in itertools.combinations(triples, 2):
        sign = (m1 - m2) * (s1 - s2)
        if sign > 0:
            concordant += 1
        elif sign < 0:
            discordant += 1
            flipped.append(f"{n1}/{n2}")
    total = concordant + discordant
    return (concordant - discordant) / total if total else float("nan"), flipped
