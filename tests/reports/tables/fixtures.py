"""Cells as the stages leave them, for the table tests: configs, encoders with their checksum records, metrics."""

import json


def _evaluated_cell(root, dataset, method, seed, pre_cfg, lin_cfg, top1, encoder=b"trunk bytes"):
    """A pretraining and a linear-evaluation cell as the stages leave them: configs, an encoder with its
    checksum record, and metrics that record what they were made from.  Returns the metrics path."""
    from ring.core.config import config_hash, save
    from ring.core.files import record_checksums

    pre, lin = (root / stage / dataset / method / f"seed{seed}" for stage in ("pretrain", "lincls"))
    for cell, cfg in ((pre, pre_cfg), (lin, lin_cfg)):
        cell.mkdir(parents=True, exist_ok=True)
        save(cfg, cell / "config.yaml")
    (pre / "encoder.pt").write_bytes(encoder)
    record = record_checksums(pre, ["encoder.pt"], config_hash=config_hash(pre_cfg))
    metrics = lin / "metrics.json"
    metrics.write_text(
        json.dumps(
            {
                "dataset": dataset,
                "method": method,
                "seed": seed,
                "top1": top1,
                "config_hash": config_hash(lin_cfg),
                "encoder_config_hash": config_hash(pre_cfg),
                "protocol": {"encoder_files": record["files"]},
            }
        )
    )
    return metrics


def _detection_cell(root, method, pre_cfg, det_cfg, columns=None):
    """A Table 4 cell as the stages leave it: the pretraining cell's config and encoder record, the converted
    backbone and its record, the detection config and metrics that record what they were made from."""
    from ring.core.config import config_hash, save
    from ring.core.files import record_checksums

    pre = root / "pretrain" / "imagenet" / method / "seed0"
    pre.mkdir(parents=True)
    save(pre_cfg, pre / "config.yaml")
    (pre / "encoder.pt").write_bytes(b"trunk")
    encoder = record_checksums(pre, ["encoder.pt"], config_hash=config_hash(pre_cfg))
    conv = root / "detection" / "imagenet" / method / "seed0"
    conv.mkdir(parents=True)
    (conv / "backbone.pkl").write_bytes(b"backbone")
    backbone = record_checksums(
        conv, ["backbone.pkl"], encoder_files=encoder["files"], encoder_config_hash=encoder["config_hash"]
    )
    cell = conv.parent / "voc_det" / "seed0"
    cell.mkdir(parents=True)
    save(det_cfg, cell / "config.yaml")
    (cell / "metrics.json").write_text(
        json.dumps(
            {
                "task": "voc_det",
                "method": method,
                "seed": 0,
                "config_hash": config_hash(det_cfg),
                "backbone_sha256": backbone["files"]["backbone.pkl"],
                "encoder_files": encoder["files"],
                "encoder_config_hash": encoder["config_hash"],
                "columns": columns or {"voc_det_AP": 6.0, "voc_det_AP50": 15.0, "voc_det_AP75": 3.5},
            }
        )
    )
    return cell / "metrics.json"


def _metrics(tmp_path, rows):
    paths = []
    for i, (dataset, method, seed, top1) in enumerate(rows):
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps({"dataset": dataset, "method": method, "seed": seed, "top1": top1}))
        paths.append(path)
    return paths


# The linear protocol's words as ring.lincls writes them into a high-loss probe's note.
PROTOCOL = "the linear protocol (SGD lr=0.01, momentum 0.9, weight decay 0, batch 64, 30 epochs, constant lr)"


def _probe(tmp_path, method, top1, loss, seed=0):
    """A digits probe's metrics.json as ring.lincls writes it: its last epoch's scores judged by
    ring.engine.health.probe_verdict (digits: 10 classes, 450 test images)."""
    from ring.engine import health

    verdict = health.probe_verdict(
        {"top1": top1, "top5": min(100.0, 3 * top1)}, loss, 10, 450, f"cells/{method}/seed{seed}", 30, 0.01, PROTOCOL
    )
    path = tmp_path / f"{method}-{seed}.json"
    path.write_text(json.dumps({"dataset": "digits", "method": method, "seed": seed, **verdict}))
    return path
