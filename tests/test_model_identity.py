"""New conditioning starts as the identity; player association binds keys to characters."""

import torch

from model_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from model_helpers import keys, latents, ref_images, tiny_model
from wantofight_model.scheduler import FlowMatchScheduler


def test_zero_init_model_equals_backbone_then_learns_after_one_step():
    model = tiny_model(opened=False).train()
    x0, k, r = latents(5), keys(17), ref_images()
    t = torch.tensor([300.0, 700.0])
    with torch.no_grad():
        backbone_only = model(x0, t, keys=None, references=None)
        assert torch.equal(model(x0, t, k, r), backbone_only)  # bit-identical at step 0
        assert torch.equal(model(x0, t, k, r, attention="block_causal"),
                           model(x0, t, None, None, attention="block_causal"))

    sched = FlowMatchScheduler()
    noise = torch.randn_like(x0)
    sigma = (t / 1000).view(-1, 1, 1, 1, 1)
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    loss = (model(sched.add_noise(x0, noise, sigma), t, k, r) - sched.velocity_target(x0, noise)).square().mean()
    loss.backward()
    assert model.dit.keyboard_injection[0].o.weight.grad.abs().sum() > 0  # the zero-init output does learn
    optimiser.step()
    with torch.no_grad():
        assert not torch.allclose(model(x0, t, k, r), model(x0, t, None, None))


def test_swapping_players_with_their_keys_is_invariant_swapping_only_images_is_not():
    model = tiny_model()
    x, k, r = latents(5), keys(17), ref_images()
    t = torch.tensor([400.0, 800.0])
    swap = [1, 0]
    with torch.no_grad():
        base = model(x, t, k, r)
        both = model(x, t, k[:, :, swap], r[:, swap])
        images_only = model(x, t, k, r[:, swap])
    torch.testing.assert_close(both, base, atol=1e-6, rtol=1e-6)
    assert (images_only - base).abs().max() > 1e-3


def test_association_has_no_player_slot_embedding():
    # identity must come from the reference image only: same image for both players + swapped keys
    # gives the same output as unswapped (the model cannot tell slot 0 from slot 1 by itself)
    model = tiny_model()
    x, k = latents(3), keys(9)
    r = ref_images()
    same = torch.stack([r[:, 0], r[:, 0]], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(x, 500.0, k, same), model(x, 500.0, k[:, :, [1, 0]], same),
                                   atol=1e-6, rtol=1e-6)


def keyboard_update(model, hidden, k, refs, frames: int, tokens: int) -> torch.Tensor:
    """What the first keyboard injection adds to `hidden` (B, F N, D) under keys `k` and references."""
    from wantofight_model.attention import dense_mask, keyboard_window_mask

    dit = model.dit
    keyboard = dit.keyboard_latents(k, model.encode_references(refs))  # (B, P, F, E)
    mask = dense_mask(keyboard_window_mask(tokens, model.config.keyboard_window, 0, 0), frames * tokens, frames,
                      hidden.device)
    return dit.keyboard_injection[0](hidden, keyboard, mask) - hidden


def test_a_video_token_picks_its_own_players_keys_and_player_order_does_not_matter():
    """Player 1 holds three keys, player 2 none, each with its own reference image. The update a frame's
    tokens receive must depend on the token (a sprite's tokens can take their player's keys): spread over
    the frame's tokens relative to the update's size. With one softmax per player, summed, it was 8.5e-7
    (every token got the same vector); with one softmax over both players' latents it is 1.9. Swapping
    the players (keys and images together) leaves it unchanged."""
    model = tiny_model()
    F, N = 5, 16  # 8x8 latents, 2x2 patches
    k = torch.zeros(2, 17, 2, 16)
    k[:, 1:, 0, [0, 3, 7]] = 1
    refs = ref_images()
    hidden = torch.randn(2, F * N, model.config.dim, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        update = keyboard_update(model, hidden, k, refs, F, N)
        swapped = keyboard_update(model, hidden, k[:, :, [1, 0]], refs[:, [1, 0]], F, N)
    frame = update[:, 3 * N:4 * N]  # latent frame 3: its window (frames 1..3) holds the same keys throughout
    spread = (frame - frame.mean(dim=1, keepdim=True)).abs().max() / frame.abs().mean()
    assert spread > 0.1, float(spread)
    torch.testing.assert_close(swapped, update, atol=1e-6, rtol=1e-6)
