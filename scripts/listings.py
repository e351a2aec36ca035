#!/usr/bin/env python3
"""Listings with the distributions users have, as JSON lines for `tessera put-many`.

    scripts/listings.py COUNT [SEED]

Each object: a key `id`, a Zipf-distributed `city` (1 000 cities, s = 1), a log-normal
`price_cents` around 5 000, `created_at` in Unix seconds within the year before
2026-11-01, an `age` of 0-99 and a `rating` of 1.0-5.0 in tenths. The same seed gives the
same objects. The space they fit (docs/cuts.md):

    space listings key id
    attributes string city, int price_cents, int created_at, int age, float rating
    subspace price_cents subspace created_at subspace age, rating subspace city, price_cents
"""
import bisect
import json
import math
import random
import sys

CITIES = 1000
NOW = 1_793_491_200  # 2026-11-01T00:00:00Z
YEAR = 365 * 24 * 3600


def zipf_table(n, s=1.0):
    weights = [1.0 / (k ** s) for k in range(1, n + 1)]
    total = sum(weights)
    cumulative, acc = [], 0.0
    for w in weights:
        acc += w / total
        cumulative.append(acc)
    return cumulative


def listings(count, seed):
    rng = random.Random(seed)
    cities = zipf_table(CITIES)
    for n in range(count):
        city = min(bisect.bisect_left(cities, rng.random()), CITIES - 1)
        yield {
            "id": f"l{n:07d}",
            "city": f"city{city:04d}",
            "price_cents": int(math.exp(rng.gauss(math.log(5000), 0.9))),
            "created_at": NOW - rng.randrange(YEAR),
            "age": rng.randrange(100),
            "rating": round(1.0 + rng.randrange(41) / 10, 1),
        }


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    count, seed = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 1
    out = sys.stdout
    for obj in listings(count, seed):
        out.write(json.dumps(obj) + "\n")


if __name__ == "__main__":
    main()
