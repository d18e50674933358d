import random

from intentvcs.training.batching import grouped_training_batches, training_batches


def test_grouped_batches_keep_each_row_with_its_copies_and_cover_every_row_once():
    # Rows 0-9 are clean; rows 10-39 are three copies of each.
    sources = [-1] * 10 + [i % 10 for i in range(30)]
    lengths = [5 + (i % 7) for i in range(40)]
    batches = grouped_training_batches(sources, lengths, batch_size=8, rng=random.Random(0), pool=2)
    assert sorted(row for batch in batches for row in batch) == list(range(40))
    for batch in batches:
        assert len(batch) <= 8
        for row in batch:
            if sources[row] >= 0:
                assert sources[row] in batch
    # Fixed seed, fixed batches; another seed, another order.
    assert batches == grouped_training_batches(sources, lengths, 8, random.Random(0), pool=2)
    assert batches != grouped_training_batches(sources, lengths, 8, random.Random(1), pool=2)


def test_a_group_bigger_than_the_batch_is_a_batch_of_its_own():
    sources = [-1, -1] + [0] * 5
    batches = grouped_training_batches(sources, [3] * 7, batch_size=4, rng=random.Random(0))
    assert sorted(map(sorted, batches)) == [[0, 2, 3, 4, 5, 6], [1]]


def test_plain_batches_cover_every_row_once():
    batches = training_batches(50, [i % 9 for i in range(50)], 8, random.Random(0))
    assert sorted(row for batch in batches for row in batch) == list(range(50))
    assert max(map(len, batches)) == 8
