# The run handlers' own helpers, included by workflow/rules/run.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.

import shlex
import subprocess
import tempfile
from types import SimpleNamespace

from snakemake.utils import format as format_shell


def check_data_first() -> None:
    """The data check of every dataset this run reads, run here, in onstart, before its first job.

    A stage's jobs wait only for their own dataset's check: without this, a transfer set or a study's dataset that is
    missing was found after the pretraining it follows had trained, and Table 4's Detectron2 datasets after the
    pretraining and the conversion.  Each data_check job the run needs is run here as its job would run it (a dataset
    this run generates is left to its job), and the Detectron2 datasets of each detection task by the stage's own
    check; a failure stops the run before any job, with the summary a failed run ends with.  The data_check jobs
    then run again at once: the check's stamp makes the second pass a few stats."""
    failed = []
    with tempfile.TemporaryDirectory() as scratch:
        for output, rule, log, command in data_first_commands(Path(scratch)):
            for path in [*output, *log]:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            run = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], capture_output=True)
            if run.returncode:
                sys.stderr.write(run.stderr.decode(errors="replace"))
                failed.append((output, rule, log))
    if failed:
        print(f"\n{ring.core.failures.report(failed)}", file=sys.stderr)
        raise WorkflowError("A data check failed before any job started (above); nothing was started.")


def data_first_commands(scratch: Path) -> list:
    """(outputs, rule, log files, shell command) of each check :func:`check_data_first` runs: the planned data_check
    jobs' (their command as the rule formats it), and one per detection task and Detectron2 folder (its log beside
    the data checks')."""
    commands, detection = [], {}
    for wildcards in PLANNED.of("data_check"):
        if all(Path(f).exists() for f in generated_data(wildcards)):
            values = dict(wildcards.items())
            output, log = [DATA_OK.format(**values)], [DATA_LOG.format(**values)]
            params = SimpleNamespace(**{name: value(wildcards, output) for name, value in DATA_CHECK_PARAMS.items()})
            command = format_shell(DATA_CHECK_SHELL, params=params, wildcards=wildcards, output=output, log=log)
            commands.append((output, "data_check", log, command))
    for wildcards in PLANNED.of("detection"):
        if GRIDS[wildcards.grid].detection.get("datasets") != "embedded":
            cfg = detection_cell_config(wildcards)
            detection.setdefault((wildcards.grid, cfg.task, cfg.datasets_root, repr(cfg.overrides)), cfg)
    for i, ((grid, task, _, _), cfg) in enumerate(detection.items()):
        config = scratch / f"{i}.yaml"
        config_save(cfg, config)
        log = f"results/{grid}/data/detectron2-{task}.log"
        python = (
            f"{shlex.quote(str(PYTHON))} -m ring.detection.runner --config {shlex.quote(str(config))} --datasets-only"
        )
        output = f"results/{grid}/data/detectron2-{task}"
        commands.append(([output], "detection", [log], f"{python} 2>&1 | tee {shlex.quote(log)} >&2"))
    return commands
