# The run's handlers: what every run checks before its first job (Detectron2 where it runs, SLURM's resources, every
# dataset the run reads) and the summary a failed run ends with.  Its functions are in functions.smk.


onstart:
    # Detectron2 where a job of this run imports it on this machine, before the first job: a plan needs none.
    if problem := ring.plan.checks.detection_environment(PLANNED.rules(), config["launcher"]):
        print(f"ring: {problem}", file=sys.stderr)
        raise WorkflowError(
            "Detectron2 is missing where this run's detection jobs run (above); no job was started."
        )
    if config["launcher"] == "slurm":  # every resource set this run submits, checked before its first submission
        from ring.cluster.admission import run_preflight  # submitit: only SLURM runs import it

        if problems := run_preflight(PLANNED.jobs.values(), LAUNCHED_CHECKPOINT_INTERVAL):
            print("\n".join(f"ring: {p}" for p in problems), file=sys.stderr)
            raise WorkflowError("SLURM refused resources before any submission (above); nothing was submitted.")
    check_data_first()  # every dataset the run reads, before any job (functions.smk)
    # Then, with nothing left to refuse, the first run that writes results/<grid> records its grid file there (a dry
    # run, which has no onstart, writes nothing): a later plan from another file of the same name is refused
    # (ring.plan.ownership).  A refused run has written nothing.
    ring.plan.ownership.claim(GRID_FILE, Path("results", config["grid"]))


onerror:
    # A short summary last: one line per failed job with its cell and its one-sentence reason.
    print(f"\n{ring.core.failures.run_summary(log)}", file=sys.stderr)
