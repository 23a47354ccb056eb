"""Attention masks against dense masks built the obvious way (loops over tokens)."""

import pytest
import torch

from model_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from wantofight_model.attention import (
    bidirectional_mask,
    block_causal_mask,
    chunk_of_frame,
    dense_mask,
    keyboard_window_mask,
)


def test_chunk_of_frame_first_chunk_is_one_latent_frame():
    # chunk 0 = latent 0 (pixel frame 0); chunk c >= 1 = latents 2c-1, 2c (pixel frames 8c-7 .. 8c)
    assert [chunk_of_frame(f, 2) for f in range(7)] == [0, 1, 1, 2, 2, 3, 3]


def test_bidirectional_mask_is_all_true():
    assert dense_mask(bidirectional_mask(), 6, 9).all()


def _obvious_block_causal(frames_q, frames_kv, n, context, q_off, kv_off):
    def chunk(f):
        return 0 if f == 0 else (f - 1) // 2 + 1

    mask = torch.zeros(frames_q * n, frames_kv * n, dtype=torch.bool)
    for i in range(frames_q * n):
        for j in range(frames_kv * n):
            cq, ck = chunk(q_off + i // n), chunk(kv_off + j // n)
            mask[i, j] = cq - context <= ck <= cq
    return mask


@pytest.mark.parametrize("context", [0, 1, 2, 3])
@pytest.mark.parametrize("offsets", [(0, 0), (5, 1), (7, 3)])
def test_block_causal_mask_matches_dense(context, offsets):
    q_off, kv_off = offsets
    frames_q, frames_kv, n = 4, 4 + q_off - kv_off, 3
    got = dense_mask(block_causal_mask(n, 2, context, q_off, kv_off), frames_q * n, frames_kv * n)
    assert torch.equal(got, _obvious_block_causal(frames_q, frames_kv, n, context, q_off, kv_off))


def test_block_causal_mask_is_bidirectional_inside_a_chunk():
    mask = dense_mask(block_causal_mask(2, 2, 2), 7 * 2, 7 * 2)
    assert mask[2, 5] and mask[5, 2]  # latents 1 and 2 share chunk 1
    assert not mask[2, 6]  # chunk 1 does not see chunk 2
    assert not mask[12, 0]  # chunk 3 (latents 5, 6) does not see chunk 0 with a 2-chunk context


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("offsets", [(0, 0), (3, 1), (4, 4)])
def test_keyboard_window_mask_matches_dense(window, offsets):
    q_off, kv_off = offsets
    frames, n, kb_frames = 4, 2, 4 + q_off - kv_off
    expected = torch.zeros(frames * n, kb_frames, dtype=torch.bool)
    for i in range(frames * n):
        for j in range(kb_frames):
            f, k = q_off + i // n, kv_off + j
            expected[i, j] = f - window < k <= f  # own step and the (window - 1) before it
    got = dense_mask(keyboard_window_mask(n, window, q_off, kv_off), frames * n, kb_frames)
    assert torch.equal(got, expected)


def test_flex_block_mask_gives_the_same_attention_as_the_dense_mask():
    import warnings

    from wantofight_model.attention import attention, flex_block_mask

    n, frames = 16, 7
    mod = block_causal_mask(n, 2, 2)
    q, k, v = (torch.randn(1, frames * n, 2, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    dense = attention(q, k, v, dense_mask(mod, frames * n, frames * n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager flex on CPU warns that it is unfused
        flex = attention(q, k, v, flex_block_mask(mod, frames * n, frames * n, "cpu"))
    torch.testing.assert_close(flex, dense, atol=1e-5, rtol=1e-5)
