"""Real-time streaming on a GPU: `wan-1.3b` with random weights, bf16, 512x384, 4 steps, rolling cache.

Measures generated frames per second and per-chunk latency (DiT denoising + VAE decode, which is
included), eager and with `torch.compile` on the DiT blocks, and writes a Markdown table.
Random weights cost exactly what trained ones do. The paper reports 30 FPS on one RTX 5090.

    python bench/gpu_stream.py                       # H200 / any CUDA GPU, < 8 minutes
    python bench/gpu_stream.py --preset tiny --device cpu --chunks 4 --dtype fp32   # smoke test
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from wantofight_model.generate import StreamingGenerator
from wantofight_model.model import WanToFight
from wantofight_model.presets import PRESETS, get_preset
from wantofight_model.vae import WanVAE

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_rollout(generator: StreamingGenerator, config, device, dtype, chunks: int, steps: int, seed: int):
    """Per-chunk (denoise seconds, decode seconds) of one streaming rollout of `chunks` chunks."""
    gen = torch.Generator(device=device).manual_seed(seed)
    B, P = 1, config.num_players
    first = torch.rand(B, 3, 1, config.height, config.width, generator=gen, device=device) * 2 - 1
    refs = torch.rand(B, P, 3, config.clip_image_size, config.clip_image_size, generator=gen, device=device) * 2 - 1
    stream = [(torch.rand(B, config.chunk_frames, P, config.num_keys, generator=gen, device=device) > 0.8).to(dtype)
              for _ in range(chunks)]
    prompt = generator.vae.encode(first.to(dtype)).to(dtype)
    decoder = generator.vae.streaming_decoder()
    decoder.decode(prompt)
    results = []
    sync(device)
    start = time.perf_counter()
    for latents in generator.generate_latents(prompt, stream, refs.to(dtype), steps=steps, generator=gen):
        sync(device)
        denoised = time.perf_counter()
        frames = decoder.decode(latents)
        sync(device)
        decoded = time.perf_counter()
        assert frames.shape[2] == config.chunk_frames
        results.append((denoised - start, decoded - denoised))
        start = time.perf_counter()
    return results


def summarise(name: str, results: list[tuple[float, float]], frames_per_chunk: int) -> dict:
    dit = statistics.median(r[0] for r in results)
    dec = statistics.median(r[1] for r in results)
    total = [r[0] + r[1] for r in results]
    latency = statistics.median(total)
    return {"mode": name, "chunks": len(results), "dit_ms": dit * 1e3, "decode_ms": dec * 1e3,
            "latency_ms": latency * 1e3, "p90_ms": sorted(total)[int(0.9 * (len(total) - 1))] * 1e3,
            "fps": frames_per_chunk / latency, "fps_dit_only": frames_per_chunk / dit}


def write_table(rows: list[dict], args, config, device: torch.device, final: bool = False) -> None:
    """Write (and, when `final`, print) the Markdown table of the rows measured so far: it is rewritten
    after every row, so a run stopped by a time limit still leaves what it measured."""
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    lines = [
        f"# Streaming generation: {args.preset}, {config.width}x{config.height}, {args.dtype}, "
        f"{args.steps} denoising steps",
        "",
        f"Device: {device_name}; torch {torch.__version__}; random weights; batch 1; rolling KV cache of "
        f"{config.context_chunks} chunks; chunk = {config.chunk_frames} frames; VAE decode included "
        f"(streaming Wan2.1 decoder); peak GPU memory {peak:.1f} GiB.",
        f"Medians over {args.chunks} chunks after {args.warmup} warm-up chunks. Command: "
        f"`python bench/gpu_stream.py {' '.join(sys.argv[1:])}`",
        "",
        "| mode | DiT ms/chunk | decode ms/chunk | latency ms/chunk | p90 ms | FPS | FPS (DiT only) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['dit_ms']:.1f} | {r['decode_ms']:.1f} | {r['latency_ms']:.1f} | "
                     f"{r['p90_ms']:.1f} | {r['fps']:.1f} | {r['fps_dit_only']:.1f} |")
    if any("compile_warmup_s" in r for r in rows):
        lines += ["", f"torch.compile warm-up (compilation) took {rows[-1]['compile_warmup_s']:.0f} s."]
    lines += ["", "The pruned-decoder row swaps in the structurally pruned Wan decoder (`wtf train decoder`); "
              "the other rows use the full decoder."]
    lines += ["", "Paper (WanToFight): 30 FPS at 512x384 on one RTX 5090 (4-step student, pruned VAE decoder)."]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
    if final:
        print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="wan-1.3b", choices=sorted(PRESETS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=20, help="timed chunks per mode (after warm-up)")
    parser.add_argument("--warmup", type=int, default=4, help="warm-up chunks (compilation happens here)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile run")
    parser.add_argument("--pruned-keep", type=float, default=0.5,
                        help="also time the structurally pruned VAE decoder keeping this fraction of each residual "
                             "block's hidden channels (train/vae/pruned_decoder.py); 0 skips that row")
    parser.add_argument("--out", default="bench/results/gpu_stream.md")
    args = parser.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but CUDA is not available here; this is a GPU benchmark "
              "(smoke-test it with --preset tiny --device cpu --dtype fp32)", file=sys.stderr)
        return 2
    dtype = DTYPES[args.dtype]
    config = get_preset(args.preset)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True

    build_start = time.perf_counter()
    model = WanToFight.from_config(config, device=device).half_precision(dtype).eval()
    vae = WanVAE.from_config(config.vae, device=device, dtype=dtype).eval()
    generator = StreamingGenerator(model, vae)
    print(f"built {args.preset} on {device} in {time.perf_counter() - build_start:.1f}s", flush=True)

    rows = []
    timed_rollout(generator, config, device, dtype, args.warmup, args.steps, seed=0)
    rows.append(summarise("eager", timed_rollout(generator, config, device, dtype, args.chunks, args.steps, 1),
                          config.chunk_frames))
    print(rows[-1], flush=True)
    write_table(rows, args, config, device)

    if args.pruned_keep > 0:  # random weights cost what fine-tuned ones do: only the structure matters here
        from wantofight.train.vae.pruned_decoder import count_parameters, prune_decoder, with_decoder

        full_decoder = vae.autoencoder.decoder
        pruned, _ = prune_decoder(full_decoder, args.pruned_keep)
        pruned_generator = StreamingGenerator(model, with_decoder(vae, pruned.to(device, dtype).eval()))
        timed_rollout(pruned_generator, config, device, dtype, 1, args.steps, seed=0)
        row = summarise(f"eager, pruned decoder (keep {args.pruned_keep:g}: {count_parameters(pruned) / 1e6:.1f}M of "
                        f"{count_parameters(full_decoder) / 1e6:.1f}M params)",
                        timed_rollout(pruned_generator, config, device, dtype, args.chunks, args.steps, 1),
                        config.chunk_frames)
        rows.append(row)
        print(rows[-1], flush=True)
        write_table(rows, args, config, device)

    if not args.no_compile:
        import torch._dynamo.config as dynamo_config

        # one graph per (chunk length, context length, cache write) combination: allow them all
        if hasattr(dynamo_config, "recompile_limit"):
            dynamo_config.recompile_limit = 64
        else:  # pragma: no cover - older torch
            dynamo_config.cache_size_limit = 64
        for block in model.dit.blocks:
            block.compile(dynamic=False)
        for injection in model.dit.keyboard_injection:
            injection.compile(dynamic=False)
        compile_start = time.perf_counter()
        timed_rollout(generator, config, device, dtype, args.warmup, args.steps, seed=0)
        compile_s = time.perf_counter() - compile_start
        row = summarise("torch.compile", timed_rollout(generator, config, device, dtype, args.chunks, args.steps, 1),
                        config.chunk_frames)
        row["compile_warmup_s"] = compile_s
        rows.append(row)
        print(rows[-1], flush=True)
        write_table(rows, args, config, device)

    write_table(rows, args, config, device, final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
