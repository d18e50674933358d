"""Word evidence: does a new intent keep only the utterances of E that contain one word?

Teams also narrow an intent by a plain word ("set an alarm *in the morning*",
"book a *restaurant*"): no entity type marks it, and the model's pooled
embedding, trained to put all of E's utterances on E, barely moves with it,
so the kNN estimate of contain(E->N) reads such a subset as most of E (50-86%
on the generated ``subset_word`` cases, where the truth is 10-40%) and the
verdict became "duplicate", or, where the estimate fell under ``sub_min``,
"novel". The word pivot is the direct evidence: a word carried by nearly
every row of N (``NEW_SHARE``) and by some, significantly fewer, of E's rows
(Fisher's exact test, ``intentvcs.service.audit.slots.fisher_exact_p``,
Bonferroni-corrected over the words that qualify on N's side: few, so the
test keeps its power). E's share is then the lexical estimate of contain(E->N):
N is "E with w". A word on fewer than ``min_rows`` of E's rows names no part of E
that can be estimated (the least rows of either side for any estimate), and is no
pivot: a stray mention ("... and a taxi to the restaurant" once in 200 restaurant
requests) does not make a request that adds a taxi a narrower restaurant.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from intentvcs.core.dataio import Example
from intentvcs.service.audit.containment import percent
from intentvcs.service.audit.slots import fisher_exact_p, format_p, gap_under

WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
# Function words never name a narrowed intent, yet ride along with the one that does ("in the morning").
FUNCTION_WORDS = frozenset(
    "a an the in on at to for of from by with and or but is are be was it this that these those i me my you "
    "your we us our he she they them what which who how when where can could would will please do does".split())
# The least share of N's rows that must carry the word: the defining word of a narrowed intent is on
# every row of it; one row in ten may be phrased without it.
NEW_SHARE = 0.9
# The most of E's rows that may carry it: the word marks a minority of E. A word on most of E's rows is
# E's own vocabulary, which a second version of E (a duplicate) repeats a little more often.
EXISTING_SHARE = 0.5


@dataclass(frozen=True)
class WordPivot:
    """The word nearly all of N's rows carry and only part of E's rows do."""

    word: str
    new_share: float
    existing_share: float
    p_value: float  # Fisher's exact test, Bonferroni-corrected over the ``tested`` words
    tested: int

    def describe(self, new: str, existing: str) -> str:
        return (f"'{self.word}' is in {percent(self.new_share)} of {new}'s rows and {percent(self.existing_share)} of "
                f"{existing}'s ({format_p(self.p_value)})")


def _presence(rows: Sequence[Example]) -> Counter[str]:
    """Word (lower case) -> number of rows that contain it."""
    return Counter(word for row in rows for word in set(WORD.findall(row.text.lower())))


def word_pivot(new_rows: Sequence[Example], existing_rows: Sequence[Example], *, min_rows: int,
               min_gap: float) -> WordPivot | None:
    """The most significant word carried by ``NEW_SHARE`` of N's rows and by at least ``min_rows`` of E's,
    at most ``EXISTING_SHARE`` of them and at least ``min_gap`` fewer; ``None`` when either side has fewer
    than ``min_rows`` rows or no word qualifies."""
    if len(new_rows) < min_rows or len(existing_rows) < min_rows:
        return None
    n1, n2 = len(new_rows), len(existing_rows)
    new_counts, old_counts = _presence(new_rows), _presence(existing_rows)
    words = sorted(word for word, k in new_counts.items() if k >= NEW_SHARE * n1 and word not in FUNCTION_WORDS)
    best = None
    for word in words:
        k1, k2 = new_counts[word], old_counts[word]
        # N's share above E's by at least min_gap, compared exactly (``gap_under`` is on the absolute gap).
        if k2 < min_rows or k2 / n2 > EXISTING_SHARE or k1 * n2 < k2 * n1 or gap_under(k1, n1, k2, n2, min_gap):
            continue
        p = min(1.0, fisher_exact_p(k1, n1, k2, n2) * len(words))
        if best is None or p < best.p_value:
            best = WordPivot(word, k1 / n1, k2 / n2, p, len(words))
    return best
