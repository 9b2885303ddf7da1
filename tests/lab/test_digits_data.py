import torch

from policylab.lab.digits_data import DIM, N_TRAIN, load_digits_split


def test_split_is_fixed_scaled_and_complete():
    split = load_digits_split()
    assert split.x_train.shape == (N_TRAIN, DIM) and split.x_test.shape == (297, DIM)
    assert split.x_train.dtype == torch.float32
    both = torch.cat([split.x_train, split.x_test])
    assert float(both.min()) == -1.0 and float(both.max()) == 1.0  # 0 → −1, 16 → 1
    labels = torch.cat([split.y_train, split.y_test])
    assert torch.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    load_digits_split.cache_clear()
    again = load_digits_split()
    assert torch.equal(again.x_train, split.x_train) and torch.equal(again.y_test, split.y_test)
