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
