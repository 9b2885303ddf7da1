"""Image augmentations (policies/image_augment.py): shapes, ranges, what each preserves."""

import pytest
import torch

from policylab.policies.image_augment import (
    augment_observations,
    augment_per_row,
    colour_jitter,
    grayscale,
    hue_rotation,
    image_augmentations,
    random_conv,
    shift,
    to_images,
    to_rows,
)


def images(b=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (b, 3, 32, 32), generator=g).double()


def gen(seed=1):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name", ["shift", "colour_jitter", "random_conv", "grayscale"])
def test_each_keeps_shape_and_range_and_is_seeded(name):
    x = images()
    fn = image_augmentations.get(name)
    out = fn(x, gen())
    assert out.shape == x.shape and out.min() >= 0 and out.max() <= 255
    torch.testing.assert_close(out, fn(x, gen()))


def test_shift_moves_by_at_most_four_pixels():
    # one white pixel at (16, 16): after the shift it sits within ±4 of it, alone
    x = torch.zeros(50, 3, 32, 32, dtype=torch.float64)
    x[:, :, 16, 16] = 255
    out = shift(x, gen())
    where = (out[:, 0] == 255).nonzero()
    assert len(where) == 50  # exactly one per image
    offsets = where[:, 1:] - 16
    assert offsets.abs().max() <= 4 and len({tuple(o) for o in offsets.tolist()}) > 10


def test_shift_replicates_the_edges():
    # a flat image stays flat (zero padding would bring black borders in)
    x = torch.full((20, 3, 32, 32), 100.0, dtype=torch.float64)
    assert (shift(x, gen()) == 100).all()


def test_grayscale_is_luminance_on_every_channel():
    x = torch.tensor([255.0, 0.0, 0.0]).view(1, 3, 1, 1).expand(1, 3, 2, 2)
    out = grayscale(x, gen())
    torch.testing.assert_close(out, torch.full((1, 3, 2, 2), 0.299 * 255, dtype=out.dtype))


def test_hue_rotation_keeps_grey_and_a_third_turn_cycles_the_channels():
    r = hue_rotation(torch.tensor([1 / 3], dtype=torch.float64))[0]
    torch.testing.assert_close(r @ torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64),
                               torch.ones(3, dtype=torch.float64))  # fmt: skip
    # about the grey axis, 120° sends red to green
    torch.testing.assert_close(
        r @ torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64),
        torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64),
    )


def test_colour_jitter_changes_colours_not_layout():
    x = torch.full((8, 3, 32, 32), 100.0, dtype=torch.float64)
    x[:, :, 8:12, 8:12] = 200.0
    out = colour_jitter(x, gen())
    assert not torch.allclose(out, x)
    # the square is still where it was: inside pixels equal, outside pixels equal
    assert torch.allclose(out[:, :, 8:12, 8:12], out[:, :, 8:9, 8:9].expand(-1, -1, 4, 4))
    assert torch.allclose(out[:, :, 20:, 20:], out[:, :, 20:21, 20:21].expand(-1, -1, 12, 12))


def test_random_conv_differs_per_image():
    x = images(1).expand(4, -1, -1, -1)
    out = random_conv(x, gen())
    assert not torch.allclose(out[0], out[1])


def test_flat_rows_round_trip_in_both_layouts():
    x = images(3)
    hwc = x.permute(0, 2, 3, 1).reshape(3, -1)
    torch.testing.assert_close(to_images(hwc, (32, 32, 3), False), x)
    torch.testing.assert_close(to_rows(x, False), hwc)
    chw = x.reshape(3, -1)
    torch.testing.assert_close(to_images(chw, (3, 32, 32), True), x)
    out = augment_observations("grayscale", hwc, (32, 32, 3), False, gen())
    torch.testing.assert_close(to_images(out, (32, 32, 3), False), grayscale(x, gen()))


def test_per_row_uses_one_augmentation_per_row():
    rows = images(40).permute(0, 2, 3, 1).reshape(40, -1)
    out = augment_per_row(["grayscale", "shift"], rows, (32, 32, 3), False, gen())
    img = to_images(out, (32, 32, 3), False)
    grey = (img[:, 0] == img[:, 1]).all(-1).all(-1) & (img[:, 1] == img[:, 2]).all(-1).all(-1)
    assert 5 < int(grey.sum()) < 35  # about half the rows went grey, the rest shifted
