"""Block-causal attention, the 2-chunk context, the keyboard window and the rolling KV cache.

Latent layout used here (7 latent frames, tiny preset): chunk 0 = latent 0, chunk 1 = latents 1-2,
chunk 2 = latents 3-4, chunk 3 = latents 5-6; keys cover 1 + 4 * 6 = 25 pixel frames.
"""

import json

import pytest
import torch

from model_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from model_helpers import B, keys, latents, ref_images, ref_tokens, tiny_model
from wantofight_model.generate import StreamingGenerator

CHUNKS = [(0, 1), (1, 3), (3, 5), (5, 7)]  # latent frames of chunks 0..3
KEY_FRAMES = [(0, 1), (1, 9), (9, 17), (17, 25)]  # pixel frames of chunks 0..3
T = torch.tensor([[0.0, 300, 300, 600, 600, 900, 900], [50, 100, 100, 200, 200, 400, 400]])


def _forward(model, x, k, attention="block_causal"):
    return model(x, T, k, ref_tokens(), attention=attention)


def test_later_chunk_frames_and_keys_do_not_change_earlier_chunks():
    model = tiny_model()
    x, k = latents(7), keys(25)
    base = _forward(model, x, k)
    x2 = x.clone()
    x2[:, :, 3:5] += torch.randn_like(x2[:, :, 3:5])  # chunk 2 frames
    k2 = k.clone()
    k2[:, 9:17] = 1 - k2[:, 9:17]  # chunk 2 keys
    for out in (_forward(model, x2, k), _forward(model, x, k2)):
        assert torch.equal(out[:, :, :3], base[:, :, :3])  # chunks 0 and 1: bit-identical
        assert not torch.allclose(out[:, :, 3:], base[:, :, 3:])  # chunk 2 itself (and 3) moved
    # sanity: the bidirectional mask does let chunk 2 reach back
    bidir = _forward(model, x, k, "bidirectional")
    assert not torch.allclose(_forward(model, x2, k, "bidirectional")[:, :, :3], bidir[:, :, :3])


def test_two_chunk_context_excludes_chunk_k_minus_3():
    # One block, injection after it: the only path between chunks is that block's attention, so this
    # isolates the mask (with more blocks information also flows transitively via chunk k-2, as in any
    # sliding-window attention; the rolling cache then carries it in the K/V of chunk k-2).
    model = tiny_model(num_blocks=1, keyboard_every=1)
    x, k = latents(7), keys(25)
    base = _forward(model, x, k)
    x2 = x.clone()
    x2[:, :, 0:1] += 1.0  # chunk 0
    out = _forward(model, x2, k)
    assert torch.equal(out[:, :, 5:7], base[:, :, 5:7])  # chunk 3 does not see chunk 0
    assert not torch.allclose(out[:, :, 3:5], base[:, :, 3:5])  # chunk 2 does


@pytest.mark.parametrize("latent", [1, 2, 4])
def test_keyboard_window_locality(latent):
    # One block then the injection then the per-token head: frame f's output depends on keys only
    # through the window (latents f-2 .. f). Gate bias +4 holds the gate open.
    model = tiny_model(num_blocks=1, keyboard_every=1, keyboard_gate_bias=4.0)
    x, k = latents(7), keys(25)
    base = model(x, 500.0, k, ref_tokens(), attention="bidirectional")
    k2 = k.clone()
    lo = 0 if latent == 0 else 4 * latent - 3
    k2[:, lo:4 * latent + 1] = 1 - k2[:, lo:4 * latent + 1]  # the 4 pixel frames of this latent
    out = model(x, 500.0, k2, ref_tokens(), attention="bidirectional")
    for f in range(7):
        inside = latent <= f <= latent + 2  # window 3: own step and the 2 before
        changed = not torch.equal(out[:, :, f], base[:, :, f])
        assert changed == inside, f"latent frame {f} (keys of latent {latent} perturbed)"


def test_cached_chunks_equal_full_block_causal_forward():
    model = tiny_model()
    x, k = latents(7), keys(25)
    full = _forward(model, x, k)
    cache = model.new_cache(B)
    for (a, b), (ka, kb) in zip(CHUNKS, KEY_FRAMES):
        # a non-writing call first (an earlier denoising step) must not disturb the cache
        model(torch.randn_like(x[:, :, a:b]), T[:, a:b], k[:, ka:kb], ref_tokens(), "block_causal", cache, False)
        out = model(x[:, :, a:b], T[:, a:b], k[:, ka:kb], ref_tokens(), "block_causal", cache, True)
        cache.commit(b - a)
        assert (out - full[:, :, a:b]).abs().max() <= 1e-5
    assert cache.context_tokens == 2 * model.config.tokens_per_chunk  # only chunks 2 and 3 are held


@pytest.mark.parametrize("sampler, steps, write", [("euler", 4, -2), ("x0_renoise", 4, -2), ("euler", 1, -2),
                                                  ("euler", 3, -1), ("euler", 4, 0.0), ("x0_renoise", 4, 0.0),
                                                  ("x0_renoise", 4, 0.05)])
def test_streaming_generation_equals_full_recompute(sampler, steps, write):
    """In both cache-write modes: an int is the denoising step that writes, a float the clean write's
    context_sigma."""
    mode = {"cache_write": "denoising-step", "cache_write_step": write} if isinstance(write, int) else \
        {"cache_write": "clean", "context_sigma": write}
    model = tiny_model(**mode)
    gen = StreamingGenerator(model, sampler=sampler)
    prompt = latents(1)
    stream = [keys(8, seed=10 + i) for i in range(6)]  # 6 chunks: well past the 2-chunk context

    def run(use_cache):
        return list(gen.generate_latents(prompt, stream, ref_images(), steps=steps,
                                         generator=torch.Generator().manual_seed(7), use_cache=use_cache))

    cached, full = run(True), run(False)
    assert len(cached) == 6 and cached[0].shape == (B, 16, 2, 8, 8)
    for a, b in zip(cached, full):
        assert (a - b).abs().max() <= 1e-5


def test_a_per_frame_autoencoder_streams_eight_latent_frames_a_chunk_as_the_full_recompute():
    """With `vae.kind="frame"` a chunk of 8 pixel frames is 8 latent frames, each with its key row; the
    cached stream equals recomputing everything, past the 2-chunk context."""
    from wantofight_model.config import VAEConfig

    model = tiny_model(vae=VAEConfig(kind="frame", base_dim=16, dim_mult=(1, 2, 2, 2), num_res_blocks=1))
    gen = StreamingGenerator(model)
    stream = [keys(8, seed=10 + i) for i in range(4)]

    def run(use_cache):
        return list(gen.generate_latents(latents(1), stream, ref_images(), steps=2,
                                         generator=torch.Generator().manual_seed(7), use_cache=use_cache))

    cached, full = run(True), run(False)
    assert len(cached) == 4 and cached[0].shape == (B, 16, 8, 8, 8)
    for a, b in zip(cached, full):
        assert (a - b).abs().max() <= 1e-5


def _cache_of(model):
    """Patch `model.new_cache` to keep the caches it hands out; returns that list."""
    caches, original = [], model.new_cache

    def spy(batch_size):
        caches.append(original(batch_size))
        return caches[-1]

    model.new_cache = spy
    return caches


@pytest.mark.parametrize("context_sigma", [0.0, 0.1])
def test_clean_write_caches_the_keys_of_the_finished_chunk_at_context_sigma(context_sigma):
    """The cache holds what one forward pass over each chunk's x0 (at t = 1000 context_sigma, noised to
    that level) computes. Red with the denoising-step write: its keys are those of a noisy state."""
    model = tiny_model(cache_write="clean", context_sigma=context_sigma)
    caches = _cache_of(model)
    prompt, stream = latents(1), [keys(8, seed=10 + i) for i in range(3)]
    out = list(StreamingGenerator(model).generate_latents(prompt, stream, ref_tokens(), steps=4,
                                                          generator=torch.Generator().manual_seed(7)))
    # the same chunks written by hand, each from its x0 (noised with the draw the loop made after it)
    replay = torch.Generator().manual_seed(7)
    expected = model.new_cache(B)
    model(prompt, 0.0, keys(1, seed=0) * 0, ref_tokens(), "block_causal", expected, True)
    expected.commit(1)
    for x0, k in zip(out, stream):
        torch.randn(x0.shape, generator=replay)  # the chunk's initial noise
        state = x0
        if context_sigma > 0:
            state = (1 - context_sigma) * x0 + context_sigma * torch.randn(x0.shape, generator=replay)
        model(state, 1000 * context_sigma, k, ref_tokens(), "block_causal", expected, True)
        expected.commit(2)
    assert caches[0].chunk_tokens == expected.chunk_tokens
    torch.testing.assert_close(caches[0].k, expected.k, rtol=0, atol=1e-6)
    torch.testing.assert_close(caches[0].v, expected.v, rtol=0, atol=1e-6)
    torch.testing.assert_close(caches[0].keyboard, expected.keyboard, rtol=0, atol=1e-6)


@pytest.mark.parametrize("mode", ["clean", "denoising-step"])
def test_a_teacher_forced_chunk_is_generated_from_the_true_chunks_before_it(mode):
    """Teacher forcing (the benchmark's --teacher-forced): chunk c equals the first chunk generated after
    a prompt made of the true chunks 0..c-1, with the same noise, in either cache-write mode; without
    the true chunks (free-running) chunk 2 differs, and chunk 0, whose context is the prompt, does not."""
    model = tiny_model(cache_write=mode, context_sigma=0.0)
    gen = StreamingGenerator(model)
    prompt, stream = latents(1), [keys(8, seed=10 + i) for i in range(3)]
    truth = [latents(2, seed=20 + i) for i in range(3)]
    shape = (B, 16, 2, 8, 8)

    def generated(prompt, stream, skip_draws=0, true_chunks=None):
        noise = torch.Generator().manual_seed(7)
        for _ in range(skip_draws):
            torch.randn(shape, generator=noise)  # the initial noise of the chunks before
        prompt_keys = torch.cat([torch.zeros(B, 1, 2, 16)] + stream[:skip_draws], dim=1)
        return list(gen.generate_latents(prompt, stream[skip_draws:], ref_tokens(), steps=4, generator=noise,
                                         prompt_keys=prompt_keys, true_chunks=true_chunks))

    forced = generated(prompt, stream, true_chunks=truth)
    free = generated(prompt, stream)
    for c in range(3):
        from_truth = generated(torch.cat([prompt] + truth[:c], dim=2), stream, skip_draws=c)[0]
        torch.testing.assert_close(forced[c], from_truth, rtol=0, atol=1e-5)
    torch.testing.assert_close(forced[0], free[0], rtol=0, atol=0)
    assert (forced[2] - free[2]).abs().max() > 1e-2
    with pytest.raises(ValueError, match="ended before chunk 2"):
        generated(prompt, stream, true_chunks=truth[:2])


def test_clean_write_spends_one_more_pass_per_chunk_than_the_denoising_step_write():
    counts = {}
    for mode in ("clean", "denoising-step"):
        model = tiny_model(cache_write=mode)
        calls = []
        model.dit.register_forward_pre_hook(lambda m, args: calls.append(args[1]))
        list(StreamingGenerator(model).generate_latents(latents(1), [keys(8)] * 2, ref_tokens(), steps=4))
        counts[mode] = len(calls)
        if mode == "clean":  # per chunk: 4 steps from t = 1000, then the write at t = 0
            assert [float(t) for t in calls[1:6]] == pytest.approx([1000, 937.5, 833.333, 625, 0], abs=1e-3)
    assert counts == {"clean": 1 + 2 * 5, "denoising-step": 1 + 2 * 4}


def test_cache_memory_is_constant_and_generation_runs_for_any_number_of_chunks():
    model = tiny_model()
    gen = StreamingGenerator(model)
    sizes = []

    def key_stream():
        for i in range(12):
            yield keys(8, seed=i)

    cache_bytes = []
    original = model.new_cache

    def spy(batch_size):
        cache = original(batch_size)
        cache_bytes.append(cache)
        return cache

    model.new_cache = spy
    for chunk in gen.generate_latents(latents(3), key_stream(), ref_tokens(), steps=2):
        sizes.append(cache_bytes[0].nbytes)
    assert len(sizes) == 12 and len(set(sizes)) == 1


def test_prompt_of_several_chunks_and_wrong_key_chunk():
    model = tiny_model()
    gen = StreamingGenerator(model)
    out = list(gen.generate_latents(latents(5), [keys(8)], ref_tokens(), steps=2, prompt_keys=keys(17)))
    assert out[0].shape == (B, 16, 2, 8, 8)
    with pytest.raises(ValueError, match="8 frames"):
        list(gen.generate_latents(latents(1), [keys(4)], ref_tokens(), steps=2))
    with pytest.raises(ValueError, match="prompt of 2 latent frames"):
        list(gen.generate_latents(latents(2), [keys(8)], ref_tokens(), steps=2))


def test_noisy_prompt_is_consistent_between_cache_and_recompute():
    gen = StreamingGenerator(tiny_model())

    def run(use_cache):
        return list(gen.generate_latents(latents(1), [keys(8, seed=i) for i in range(3)], ref_tokens(), steps=2,
                                         generator=torch.Generator().manual_seed(3), use_cache=use_cache,
                                         prompt_sigma=0.1))

    clean = list(gen.generate_latents(latents(1), [keys(8, seed=i) for i in range(3)], ref_tokens(), steps=2,
                                      generator=torch.Generator().manual_seed(3)))
    noisy = run(True)
    for a, b in zip(noisy, run(False)):
        assert (a - b).abs().max() <= 1e-5
    assert not torch.allclose(noisy[0], clean[0])


def test_flex_mask_backend_matches_dense_in_the_model():
    import warnings

    x, k = latents(7), keys(25)
    dense = _forward(tiny_model(), x, k)
    with warnings.catch_warnings(), torch.no_grad():  # CPU flex attention: forward only, unfused
        warnings.simplefilter("ignore")
        flex = _forward(tiny_model(mask_backend="flex"), x, k)
    torch.testing.assert_close(flex, dense, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# The previous frame as input channels (`previous_frame_input`, docs/model.md)
# ---------------------------------------------------------------------------------------------

def previous_model(**overrides):
    """A tiny model with the previous-frame input opened (its channels start at zero)."""
    model = tiny_model(previous_frame_input=True, **overrides)
    with torch.no_grad():
        extra = model.dit.patch_embedding.weight[:, 16:]
        extra.copy_(torch.randn(extra.shape, generator=torch.Generator().manual_seed(5)) * 0.2)
    return model


def test_each_chunk_reads_the_last_frame_of_the_chunk_before_it_where_that_frame_is_clean():
    model = previous_model()
    x = latents(7)
    t = torch.tensor([[0.0, 50, 50, 900, 900, 0, 0], [0.0, 900, 900, 100, 100, 50, 50]])
    read = model.dit.previous_frames(x, t, 0, None)
    # chunk 0: nothing before it; chunk c reads frame 2c - 2, where it is at most sigma 0.1 (t <= 100)
    expected = {0: [None, 0, 0, 2, 2, None, None], 1: [None, 0, 0, None, None, 4, 4]}
    for b, sources in expected.items():
        for f, source in enumerate(sources):
            want = torch.zeros_like(x[b, :, 0]) if source is None else x[b, :, source]
            torch.testing.assert_close(read[b, :, f], want, rtol=0, atol=0, msg=f"sample {b}, frame {f}")


@pytest.mark.parametrize("mode", ["clean", "denoising-step"])
def test_streaming_with_the_previous_frame_input_equals_full_recompute(mode):
    """The cache carries the written chunk's last frame (and its level) to the next chunk, as the full
    block-causal forward reads it from the sequence; the previous frame changes what is generated."""
    model = previous_model(cache_write=mode)
    stream = [keys(8, seed=10 + i) for i in range(5)]

    def run(m, use_cache):
        return list(StreamingGenerator(m).generate_latents(latents(1), stream, ref_images(), steps=3,
                                                           generator=torch.Generator().manual_seed(7),
                                                           use_cache=use_cache))

    cached, full = run(model, True), run(model, False)
    for a, b in zip(cached, full):
        assert (a - b).abs().max() <= 1e-5
    unread = previous_model(cache_write=mode)
    with torch.no_grad():
        unread.dit.patch_embedding.weight[:, 16:] = 0
    assert (run(unread, True)[1] - cached[1]).abs().max() > 1e-3


def test_a_model_saved_without_the_previous_frame_input_loads_into_one_with_it_unchanged():
    """Its channels start at zero: the widened model computes what the saved one did."""
    from wantofight.train.checkpoint import model_differences

    old, new = tiny_model(), tiny_model(previous_frame_input=True)
    state = dict(old.dit.state_dict())
    state["patch_embedding.weight"] = new.dit.fit_patch_embedding(state["patch_embedding.weight"])
    new.dit.load_state_dict(state)
    x, k, t = latents(7), keys(25), T
    torch.testing.assert_close(new(x, t, k, ref_tokens(), "block_causal"), old(x, t, k, ref_tokens(), "block_causal"),
                               rtol=0, atol=0)
    saved = json.loads(json.dumps(old.config.to_dict()))  # as a checkpoint holds it
    del saved["previous_frame_input"], saved["previous_frame_max_sigma"]  # a config saved before the field
    assert model_differences(saved, old.config.to_dict()) == []
    assert model_differences(saved, new.config.to_dict()) == ["previous_frame_input=False"]


def continue_a_still_scene(previous_frame_input: bool, steps: int = 150) -> float:
    """Train a tiny block-causal model for `steps` on scenes that do not move (every frame the same random
    latent), chunk 1 a clean context chunk half the time as stage 2 draws them; return the x0 error of
    chunk 2 generated in one step from pure noise after a clean chunk 1 (the clean cache write's case)."""
    model = tiny_model(seed=0, opened=False, previous_frame_input=previous_frame_input).train()
    optimiser = torch.optim.Adam(model.dit.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    n_frames, frame_chunk = 5, [0, 1, 1, 2, 2]
    for step in range(steps + 1):
        z = torch.randn(8, 16, 1, 8, 8, generator=gen).expand(8, 16, n_frames, 8, 8)
        noise = torch.randn(8, 16, n_frames, 8, 8, generator=gen)
        sigma = torch.rand(8, 3, generator=gen)
        context = torch.rand(8, generator=gen) < 0.5
        sigma[:, 0], sigma[:, 1] = 0, torch.where(context, 0.1 * sigma[:, 1], sigma[:, 1])
        weight = torch.ones(8, n_frames)
        weight[:, 0], weight[:, 1:3] = 0, (~context).float()[:, None]
        if step == steps:  # the test: chunk 1 clean, chunk 2 from pure noise
            sigma[:, 1], sigma[:, 2], weight[:, :3] = 0, 1, 0
        s = sigma[:, frame_chunk]  # (B, F)
        x = (1 - s[:, None, :, None, None]) * z + s[:, None, :, None, None] * noise
        with torch.set_grad_enabled(step < steps):
            velocity = model(x, 1000 * s, None, None, "block_causal")
        if step < steps:
            per_frame = (velocity - (noise - z)).pow(2).mean(dim=(1, 3, 4))  # (B, F)
            optimiser.zero_grad()
            ((per_frame * weight).sum() / weight.sum()).backward()
            optimiser.step()
    return float(((x - velocity) - z)[:, :, 3:].pow(2).mean())


@pytest.mark.slow
def test_the_previous_frame_input_learns_to_continue_the_context_where_attention_alone_has_not_yet():
    """150 steps: with the previous frame as input channels the model continues a clean context (x0 error
    well under the scene's variance of 1); without it (the ablation), attention alone has not learned to."""
    torch.manual_seed(0)
    with_input, without = continue_a_still_scene(True), continue_a_still_scene(False)
    assert with_input < 0.35, with_input
    assert with_input < 0.3 * without, (with_input, without)
