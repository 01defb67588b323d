"""Ring's cost: selection alone versus the authors' full sort, step-time ratios, and peak memory.

    python benchmarks/ring_selection.py            # CPU scale (or paper scale on a GPU)
    python benchmarks/ring_selection.py --tiny     # what the test suite runs

1. Selection: per-query window of a B x N similarity matrix by two ``kthvalue`` selections
   (ours) versus ``sort`` and slicing (the authors' code), asserting both select the same set.
2. Step time of IRing / IR and MoCoRing / MoCo: one full training step of the real objective
   modules with a ResNet-18, same inputs, ratio of medians.
3. Memory: IRing's negative selection on a 1.28M-entry bank never holds the B x N matrix; the
   peak extra memory is measured (CUDA allocator on a GPU, resident set size on the CPU).
4. IRing's draw: ``sample_in_window`` with the blocked draw (today's) and the cumulative-sum draw
   (before issue 31), asserting both draw the same indices; ``--draw-only`` runs just this.
5. IRing's parts (``--scaled N``, issue 39): the selection of one chunk split into the similarity matmul, the
   window's bounds, its mask and the draw, and the objective alone (loss, backward, bank update; no network)
   of IR and IRing, at a bank of N entries; then the whole step's ratio there.  Writes ``ring_selection_scaled``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, timeit, write  # noqa: E402
from ring.engine.encoder import Encoder, Precision, resolve_precision  # noqa: E402
from ring.engine.grouped_bn import Grouped  # noqa: E402
from ring.engine.objectives.ir import InstanceDiscrimination  # noqa: E402
from ring.engine.objectives.moco import MomentumContrast  # noqa: E402
from ring.engine.objectives.ring import (  # noqa: E402
    DEFAULT_MAX_CHUNK_ELEMENTS,
    DRAW_BY_DEVICE,
    _row_bounds,
    chunk_elements,
    padded_mask,
    sample_from_blocks,
    sample_from_mask,
    sample_in_window,
    window_mask,
    window_ranks,
)

WINDOW = (90.0, 99.0)  # the window after annealing: the largest selection cost does not depend on it


def sorted_window(sims: torch.Tensor, w_l: float, w_u: float) -> torch.Tensor:
    """The authors' approach: sort every row, slice the ranks of the window."""
    lo, hi = window_ranks(sims.shape[1], w_l, w_u)
    order = sims.sort(dim=1).indices[:, lo:hi]
    return torch.zeros_like(sims, dtype=torch.bool).scatter_(1, order, True)


def bench_selection(batch: int, sizes: list[int], device, repeats: int) -> list[dict]:
    rows = []
    for n in sizes:
        g = torch.Generator().manual_seed(0)
        # Distinct values (a permutation per row): with ties the sort would pick arbitrary members
        # of a tied boundary, while the selection keeps all of them (documented in ring.engine.objectives.ring).
        sims = torch.stack([torch.randperm(n, generator=g) for _ in range(batch)]).float().to(device)
        ours = window_mask(sims, *WINDOW)
        theirs = sorted_window(sims, *WINDOW)
        assert torch.equal(ours, theirs), f"selections differ at N={n}"
        t_ours = timeit(lambda sims=sims: window_mask(sims, *WINDOW), device, repeats)
        t_sort = timeit(lambda sims=sims: sorted_window(sims, *WINDOW), device, repeats)
        rows.append(
            {
                "batch": batch,
                "n": n,
                "kthvalue_s": t_ours,
                "sort_s": t_sort,
                "speedup": t_sort / t_ours,
                "same_set": True,
            }
        )
        del sims, ours, theirs
    return rows


def bench_draw(batch: int, n: int, k: int, device, repeats: int) -> list[dict]:
    """IRing's draw, blocked versus cumulative-sum, at the start and the end of annealing: the draw alone
    (window mask to indices) and the whole selection (similarities, window bounds, mask and draw)."""
    g = torch.Generator().manual_seed(0)
    bank = F.normalize(torch.randn(n, 128, generator=g), dim=1).to(device)
    q = F.normalize(torch.randn(batch, 128, generator=g), dim=1).to(device)
    u = torch.rand(batch, k, generator=g).to(device)
    budget = chunk_elements(0, device)
    rows = []
    for window in ((0.0, 90.0), WINDOW):

        def select(draw, window=window):
            return sample_in_window(q, bank, *window, u, max_chunk_elements=budget, draw=draw)

        assert torch.equal(select(sample_from_blocks), select(sample_from_mask)), f"draws differ at N={n}, {window}"
        sims = q[: min(batch, max(1, budget // n))] @ bank.T  # one chunk's rows, as the selection draws them
        mask = padded_mask(sims, *_row_bounds(sims, *window_ranks(n, *window)))
        del sims
        part = u[: mask.shape[0]]
        draw_s = {
            draw.__name__: timeit(lambda draw=draw, mask=mask, part=part: draw(mask, part), device, 5 * repeats)
            for draw in (sample_from_blocks, sample_from_mask)
        }
        select_s = {
            draw.__name__: timeit(lambda draw=draw: select(draw), device, repeats)
            for draw in (sample_from_blocks, sample_from_mask)
        }
        rows.append(
            {
                "batch": batch,
                "n": n,
                "k": k,
                "window": window,
                "draw_rows": mask.shape[0],
                "draw_blocks_s": draw_s["sample_from_blocks"],
                "draw_cumsum_s": draw_s["sample_from_mask"],
                "select_blocks_s": select_s["sample_from_blocks"],
                "select_cumsum_s": select_s["sample_from_mask"],
                "draw_speedup": draw_s["sample_from_mask"] / draw_s["sample_from_blocks"],
                "select_speedup": select_s["sample_from_mask"] / select_s["sample_from_blocks"],
                "same_draws": True,
            }
        )
        del mask
    return rows


def bench_parts(batch: int, n: int, k: int, device, repeats: int) -> list[dict]:
    """Where IRing's extra time goes: one selection chunk's parts, and IR's and IRing's objective without a network."""
    g = torch.Generator().manual_seed(0)
    bank = F.normalize(torch.randn(n, 128, generator=g), dim=1).to(device)
    q = F.normalize(torch.randn(batch, 128, generator=g), dim=1).to(device)
    index = torch.randint(0, n, (batch,), generator=g).to(device)
    budget = chunk_elements(0, device)
    rows = min(batch, max(1, budget // n))  # one chunk's queries, as sample_in_window cuts them
    objective_s = {}
    for ring in (False, True):
        objective = InstanceDiscrimination(n, 128, k, 0.07, 0.5, ring, budget).to(device)

        def step(objective=objective):
            x = q.clone().requires_grad_()
            objective.contrast(x, objective.bank.memory, index, WINDOW, objective.draws(x)).backward()
            objective.bank.update(index, x.detach())

        objective_s[ring] = timeit(step, device, repeats)
    draw = DRAW_BY_DEVICE.get(device.type, sample_from_blocks)  # as sample_in_window picks it
    out = []
    for window in ((0.0, 90.0), WINDOW):
        lo_rank, hi_rank = window_ranks(n, *window)
        sims = q[:rows] @ bank.T
        lo, hi = _row_bounds(sims, lo_rank, hi_rank)
        # The sides sample_in_window compares (an open one needs no comparison).
        sides = (lo if lo_rank > 0 else None, hi if hi_rank < n else None)
        mask = padded_mask(sims, *sides)
        u = torch.rand(rows, k, generator=g).to(device)
        parts = {
            "similarity_s": timeit(lambda: q[:rows] @ bank.T, device, repeats),
            "bounds_s": timeit(lambda s=sims, r=(lo_rank, hi_rank): _row_bounds(s, *r), device, repeats),
            "mask_s": timeit(lambda sims=sims, sides=sides: padded_mask(sims, *sides), device, repeats),
            "draw_s": timeit(lambda mask=mask, u=u: draw(mask, u), device, repeats),
        }
        total = sum(parts.values())
        out.append(
            {
                "batch": batch,
                "n": n,
                "k": k,
                "window": window,
                "chunk_rows": rows,
                **parts,
                "shares": {name: value / total for name, value in parts.items()},
                "ir_objective_s": objective_s[False],
                "iring_objective_s": objective_s[True],
                "objective_extra_s": objective_s[True] - objective_s[False],
            }
        )
        del sims, mask
    return out


def _step(objective, encoder, optimizer, views, index, window):
    loss = objective(encoder, views, index, window)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def bench_steps(
    batch: int, image: int, bank_sizes: list[int], queue: int, device, repeats: int, groups: int = 8
) -> list[dict]:
    rows = []
    torch.manual_seed(0)
    x = [torch.randn(batch, 3, image, image, device=device) for _ in range(2)]
    for kind, sizes in (("IR", bank_sizes), ("MoCo", [queue] if queue else [])):  # queue None: IR's banks only
        for n in sizes:
            times = {}
            for ring in (False, True):
                encoder = Encoder().to(device)
                # The training precision (bf16 and channels-last on a GPU, as ring.pretrain runs it): the
                # selection stays fp32 either way, so an fp32 step would understate Ring's share of it.
                bn_groups = groups if kind == "MoCo" else 1  # MoCo's shuffled BN over 8 groups
                model = Grouped(Precision(encoder, *resolve_precision("auto", "auto", device, bn_groups)), bn_groups)
                optimizer = torch.optim.SGD(encoder.parameters(), lr=0.03, momentum=0.9, foreach=True)
                if kind == "IR":
                    objective = InstanceDiscrimination(n, 128, min(4096, n), 0.07, 0.5, ring, chunk_elements(0, device))
                else:
                    objective = MomentumContrast(model, 128, n, 0.999, 0.07, ring=ring)
                objective.to(device)
                index = torch.randint(0, n if kind == "IR" else batch, (batch,), device=device)
                times[ring] = timeit(
                    lambda o=objective, m=model, opt=optimizer, i=index: _step(o, m, opt, x, i, WINDOW), device, repeats
                )
            name = f"{kind}ing" if kind == "IR" else "MoCoRing"
            rows.append(
                {
                    "base": kind,
                    "ring": name,
                    "n": n,
                    "batch": batch,
                    "image": image,
                    "precision": "bf16, channels-last" if device.type == "cuda" else "fp32",
                    "chunk_elements": chunk_elements(0, device),
                    "base_step_s": times[False],
                    "ring_step_s": times[True],
                    "ratio": times[True] / times[False],
                }
            )
    return rows


def bench_method_steps(name: str, batch: int, image: int, n_images: list[int], device, repeats: int) -> list[dict]:
    """Step-time ratio of a registered Ring method (a plug-in's, by its name) over its base method, at the size its
    kind ranks (``ring_selection(cfg, n)``) for each training-set size ``n``: rows of that kind, which `ring estimate`
    prices its cells by.  Built through the registry, as the pretraining stage builds them."""
    from ring.core.catalog import spec as dataset_spec
    from ring.core.config import PretrainConfig
    from ring.core.methods import apply_fixed, method
    from ring.engine.objectives import build_encoder, build_objective
    from ring.pretrain import objective_settings

    ring_method = method(name)
    if not ring_method.ring:
        raise SystemExit(f"--method {name} is not a Ring method; name its Ring variant (its base is timed beside it).")
    rows, measured = [], set()
    for n in n_images:
        configs = {
            m: PretrainConfig(**apply_fixed(m, {"dataset": "digits", "method": m, "batch_size": batch}))
            for m in (ring_method.base, name)
        }
        kind, size = ring_method.objective.ring_selection(configs[name], n)
        if size in measured:
            continue
        measured.add(size)
        torch.manual_seed(0)
        times = {}
        for m, cfg in configs.items():
            spec = method(m)
            settings = objective_settings(cfg, spec, dataset_spec(cfg.dataset))
            encoder = build_encoder(settings).to(device)
            objective = build_objective(settings, encoder, n, chunk_elements(cfg.max_chunk_elements, device)).to(device)
            optimizer = torch.optim.SGD(encoder.parameters(), lr=0.03, momentum=0.9)
            views = [torch.randn(batch, 3, image, image, device=device) for _ in range(spec.objective.n_views)]
            index = torch.randint(0, n, (batch,), device=device)
            window = WINDOW if spec.ring else None
            times[m] = timeit(
                lambda o=objective, e=encoder, opt=optimizer, v=views, i=index, w=window: _step(o, e, opt, v, i, w),
                device,
                repeats,
            )
        base_s, ring_s = times[ring_method.base], times[name]
        row = {"base": ring_method.base, "ring": kind, "method": name, "n": size, "batch": batch, "image": image}
        rows.append({**row, "base_step_s": base_s, "ring_step_s": ring_s, "ratio": ring_s / base_s})
    return rows


def _peak_child(n: int, batch: int, budget: int) -> None:
    """Runs in a subprocess: allocate the bank, select, print the selection's peak extra memory in bytes."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    bank = F.normalize(torch.randn(n, 128, device=device), dim=1)
    q = F.normalize(torch.randn(batch, 128, device=device), dim=1)
    u = torch.rand(batch, 4096, device=device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
        base = _status_kb("VmRSS") * 1024
    sample_in_window(q, bank, *WINDOW, u, max_chunk_elements=budget)
    if device.type == "cuda":
        print(torch.cuda.max_memory_allocated() - base)
    else:
        print(_status_kb("VmHWM") * 1024 - base)


def _status_kb(key: str) -> int:
    return int(
        next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(key))
    )


def bench_memory(n: int, batch: int, budget: int = DEFAULT_MAX_CHUNK_ELEMENTS) -> dict:
    # A fixed mmap threshold makes glibc return every large freed block at once, so the resident
    # set tracks live tensors instead of heap pages kept for reuse.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, __file__, "--peak-child", str(n), str(batch), str(budget)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    extra = int(out.stdout.strip())
    cuda = torch.cuda.is_available()
    full = batch * n * 4
    return {
        "n": n,
        "batch": batch,
        "measure": "cuda max_memory_allocated over the bank"
        if cuda
        else "peak RSS (VmHWM) over the RSS before selecting",
        "selection_peak_bytes": extra,
        "full_similarity_bytes": full,
        "fraction_of_full": extra / full,
        "chunk_budget_bytes": budget * 4,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds-long run for the test suite")
    parser.add_argument(
        "--quick", action="store_true", help="on a GPU: IRing at the 1.28M bank only (gpu_suite.sh --quick)"
    )
    parser.add_argument("--draw-only", action="store_true", help="time IRing's two draws only; print, write nothing")
    parser.add_argument(
        "--method",
        help="a plug-in's Ring method: time its kind's step against its base's, write only those rows (into "
        "RING_BENCH_RESULTS, the plug-in's figures folder: docs/adding-a-method.md, Pricing it)",
    )
    parser.add_argument(
        "--scaled",
        type=int,
        metavar="N",
        help="IRing's parts and step ratio at a bank of N entries (batch 256, k 4096, 32 px on the CPU); "
        "writes ring_selection_scaled",
    )
    parser.add_argument("--peak-child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak_child:
        _peak_child(*args.peak_child)
        return
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.type == "cuda"
    if args.method:  # the sizes of bench_steps's runs below: the digits and CIFAR's 50,000, ImageNet's on a GPU
        scale = (
            (16, 32, [2048], 2)
            if args.tiny
            else (256, 224, [50_000, 1_281_167], 20)
            if gpu
            else (64, 32, [1347, 50_000], 5)
        )
        steps = bench_method_steps(args.method, scale[0], scale[1], scale[2], device, scale[3])
        write("ring_selection", {"machine": machine(), "window": WINDOW, "steps": steps}, tiny=args.tiny)
        return
    # ImageNet's bank on a GPU; on the CPU a 200,000-entry bank at the paper's batch and k.
    draw_scale = (16, 20_000, 256, 2) if args.tiny else (256, 1_281_167 if gpu else 200_000, 4096, 10 if gpu else 3)
    if args.draw_only:
        print(json.dumps(bench_draw(*draw_scale[:3], device, draw_scale[3]), indent=1))
        return
    if args.scaled:  # issue 39: where IRing's extra time goes at a bank of N entries
        repeats = 10 if gpu else 3
        parts = bench_parts(256, args.scaled, 4096, device, repeats)
        steps = bench_steps(256, 224 if gpu else 32, [args.scaled], None, device, repeats)
        write("ring_selection_scaled", {"machine": machine(), "parts": parts, "steps": steps}, tiny=False)
        return
    if args.tiny:
        sel = bench_selection(8, [4096], device, 2)
        steps = bench_steps(16, 32, [2048], 1024, device, 2)
        mem = bench_memory(200_000, 128, budget=2**21)
        parts = bench_parts(16, 20_000, 256, device, 2)
    elif gpu and args.quick:  # IRing / IR at ImageNet's bank, the suite's quick mode
        repeats = int(os.environ.get("RING_BENCH_STEPS", 20))
        sel = bench_selection(256, [1_281_167], device, repeats)
        steps = bench_steps(256, 224, [1_281_167], None, device, repeats)
        mem = bench_memory(1_281_167, 256, budget=chunk_elements(0, device))
    elif gpu:  # the paper's scale (RING_BENCH_STEPS: fewer repeats, as benchmarks/gpu_suite.sh may ask)
        repeats = int(os.environ.get("RING_BENCH_STEPS", 20))
        sel = bench_selection(256, [65_536, 1_281_167], device, repeats)
        steps = bench_steps(256, 224, [50_000, 1_281_167], 65_536, device, repeats)
        mem = bench_memory(1_281_167, 256, budget=chunk_elements(0, device))
    else:  # CPU scale: the smoke grid's sizes, then the paper's batch, bank and queue sizes on 32x32 images
        sel = bench_selection(64, [65_536, 1_281_167], device, 3)
        steps = bench_steps(64, 32, [1347], 1024, device, 15) + bench_steps(
            256, 32, [50_000, 1_281_167], 65_536, device, 5
        )
        mem = bench_memory(1_281_167, 256)
    draw = bench_draw(*draw_scale[:3], device, draw_scale[3])
    extra = {"parts": parts} if args.tiny else {}
    # The quick run's own name: unpacked, it must not replace a full run's ratios (the estimate reads them all).
    name = "ring_selection_quick" if gpu and args.quick and not args.tiny else "ring_selection"
    write(
        name,
        {
            "machine": machine(),
            "window": WINDOW,
            "selection": sel,
            "steps": steps,
            "memory": mem,
            "draw": draw,
            **extra,
        },
        tiny=args.tiny,
    )


if __name__ == "__main__":
    main()
