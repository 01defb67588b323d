"""``ring run``: the workflow from any folder, with its results there.

    ring run all_tables                                         # the smoke grid, results/smoke/ in this folder
    ring run -n all_tables --profile slurm --grid paper         # plan the paper grid on the site's SLURM
    ring run table1 --profile local --grid mine.yaml --results /scratch/me -j 2   # snakemake's options pass through

The workflow is the checkout's (the Snakefile beside the imported ``ring``, an editable install) or the copy a wheel
ships in ``ring/resources/workflow/`` (setup.py), laid out as a checkout: ``Snakefile``, ``workflow/``,
``profiles/local`` and ``profiles/slurm``.  Snakemake reads a profile's and the Snakefile's config files relative to the
folder it runs in, so this command names them itself, absolute: the package's ``config.yaml`` (and the profile's
other files under ``ring/``), then the site's file in place of the profile's own ``site.yaml``: ``--site``, else
``site.yaml`` in the folder, else the profile's template; the user's ``--configfile`` files come last, so a key they
set wins (Snakemake keeps a repeated key's last value).  ``snakemake --profile profiles/local`` in a checkout is
unchanged: this module only builds the command line.  Torch-free, like every login-node command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import ring
from ring import resources
from ring.core.files import read_record, write_json
from ring.core.yaml_reading import read_yaml

PACKAGE_PARENT = Path(ring.__file__).resolve().parent.parent  # a checkout's root, or site-packages
SHIPPED = resources.path("workflow")  # present in a built package only (setup.py copies it there)
SITE_FILE = "site.yaml"  # a profile's file that holds a site's values: replaced by the user's


def workflow_root() -> Path:
    """The folder holding the Snakefile, workflow/ and profiles/: the checkout's when ``ring`` is imported from one,
    else the installed package's copy."""
    for root in (PACKAGE_PARENT, SHIPPED):
        if (root / "Snakefile").is_file() and (root / "workflow" / "rules").is_dir():
            return root
    raise RuntimeError(
        f"ring-bench's workflow is neither beside {Path(ring.__file__).parent} (a checkout) nor in {SHIPPED} (a "
        "built package); reinstall ring-bench from a wheel or a checkout (pip install ring-bench, pip install -e .)."
    )


def profile_dir(profile: str, root: Path) -> Path:
    """A shipped profile by name (``local``, ``slurm``) or a profile folder of the user's."""
    shipped = root / "profiles" / profile
    if (shipped / "config.yaml").is_file():
        return shipped
    if (Path(profile) / "config.yaml").is_file():
        return Path(profile).resolve()
    names = sorted(p.name for p in (root / "profiles").iterdir() if (p / "config.yaml").is_file())
    raise ValueError(f"--profile {profile!r} is neither one of {', '.join(names)} nor a folder holding a config.yaml.")


def site_file(folder: Path, site: Path | None) -> Path | None:
    """The site's file: ``site`` (``--site``), else ``site.yaml`` in ``folder``, else None."""
    if site is not None:
        if not site.is_file():
            raise ValueError(f"--site {site} names no file; give your site's values file (profiles/slurm/site.yaml).")
        return site.resolve()
    found = folder / SITE_FILE
    return found.resolve() if found.is_file() else None


def config_files(profile: Path, root: Path, site: Path | None) -> list[Path]:
    """The config files Snakemake reads for ``profile``, absolute: the profile's ``configfile`` list (the Snakefile's
    default config when it has none), a ``ring/...`` entry from the imported package, the site's entry replaced by
    ``site`` when there is one."""
    listed = (read_yaml(profile / "config.yaml", "Profile") or {}).get("configfile") or ["ring/resources/config.yaml"]
    files = []
    for entry in [listed] if isinstance(listed, str) else listed:
        path = Path(entry)
        if path.parts[0] == "ring":
            files.append(PACKAGE_PARENT / path)
        elif path.name == SITE_FILE and site is not None:
            files.append(site)
        else:
            files.append(root / path)
    return files


def command(args: argparse.Namespace, rest: list[str], folder: Path) -> list[str]:
    """The Snakemake command line of ``ring run``: the user's targets and options, the workflow's Snakefile, the
    profile, its config files and ``grid=``."""
    root = workflow_root()
    profile = profile_dir(args.profile, root)
    site = site_file(folder, args.site)
    files = config_files(profile, root, site)
    if args.site and site not in files:
        raise ValueError(f"--site: the profile {profile} reads no site file (the slurm profile does).")
    mine = [(folder / Path(given).expanduser()).resolve() for given in args.configfile or []]
    for given, path in zip(args.configfile or [], mine, strict=True):
        if not path.is_file():
            raise ValueError(f"--configfile {given} names no file; give the path of a YAML config file.")
    config = list(args.config or [])
    if args.grid:
        grid = Path(args.grid).expanduser()
        config.append(f"grid={grid.resolve() if grid.suffix in ('.yaml', '.yml') and grid.is_file() else args.grid}")
    # The user's targets and options first: the list-valued options below would read a target after them as theirs.
    line = [sys.executable, "-m", "snakemake", *rest, "--snakefile", str(root / "Snakefile"), "--profile", str(profile)]
    # Snakemake keeps a repeated key's last value: the package's defaults first, the user's --configfile files last.
    line += ["--configfile", *map(str, [*files, *mine])]
    if config:
        line += ["--config", *config]
    if args.results:
        line += ["--directory", str(results_folder(args.results))]
    return line


def results_folder(results: Path) -> Path:
    """``--results``, absolute: a folder, or a path where one can be made (refused in one sentence otherwise)."""
    folder = results.expanduser().resolve()
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ValueError(
            f"--results {results}: {blocker} is a file, not a folder; give a folder to work in (made when missing)."
        )
    return folder


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ring run",
        allow_abbrev=False,  # a Snakemake option (--rerun-incomplete, --report) is never read as one of these
        description="Run the workflow (the Snakefile and its profiles, shipped in the package) from this folder; "
        "every other option and the targets go to Snakemake (snakemake --help).",
        epilog="Results land under results/<grid>/ in this folder (or in --results). `snakemake --profile "
        "profiles/local` in a checkout runs the same workflow.",
    )
    p.add_argument(
        "--profile",
        default="local",
        help="local (this machine, the default), slurm (submitit jobs) or a profile folder",
    )
    p.add_argument("--grid", help="a grid's name (ring/resources/grids/NAME.yaml) or a grid file; default: profile's")
    p.add_argument("--site", type=Path, help=f"your site's values (default: ./{SITE_FILE}, else the profile's own)")
    p.add_argument("--results", type=Path, help="the folder to work in: results/<grid>/ and .snakemake/ land there")
    p.add_argument("--config", nargs="+", metavar="KEY=VALUE", help="Snakemake's --config, with grid= added")
    p.add_argument(
        "--configfile",
        "--configfiles",
        nargs="+",
        action="extend",
        metavar="FILE",
        help="your config files, read after the package's (a key they set wins)",
    )
    return p


LAST_RUN = Path("results") / ".ring-run.json"  # below the folder Snakemake runs in: the grid `ring status` reads


def chosen_grid(line: list[str]) -> str:
    """The grid a ``ring run`` command line plans: the last ``grid=`` of its ``--config``, else the last config file
    (the profile's) that names one, else the package's default."""
    config = line[line.index("--config") + 1 :] if "--config" in line else []
    given = [item.split("=", 1)[1] for item in config if item.startswith("grid=")]
    if given:
        return given[-1]
    files = line[line.index("--configfile") + 1 :] if "--configfile" in line else []
    for path in reversed([f for f in files if f.endswith((".yaml", ".yml")) and Path(f).is_file()]):
        if grid := (read_yaml(path, "Config file") or {}).get("grid"):
            return str(grid)
    return "smoke"


def remember_grid(line: list[str], workdir: Path) -> None:
    """Record the grid this run uses in ``workdir``, so that ``ring status`` there needs no ``--grid``."""
    record = workdir / LAST_RUN
    record.parent.mkdir(parents=True, exist_ok=True)
    write_json(record, {"grid": chosen_grid(line)})


def dry_run(rest: list[str]) -> bool:
    """Whether Snakemake's options ask for a plan only (-n, -np, --dry-run)."""
    return any(a in ("--dry-run", "--dryrun") or (a[:1] == "-" and a[1:2] != "-" and "n" in a[1:]) for a in rest)


def last_grid(results: Path) -> str:
    """The grid ``ring run`` last used with its results in ``results`` (``ring status``'s default), else smoke."""
    return str(read_record(results / LAST_RUN.name).get("grid") or "smoke")


def main(argv=None) -> int:
    args, rest = parser().parse_known_args(argv)
    try:
        line = command(args, rest, Path.cwd())
    except (ValueError, RuntimeError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    made = made_folders(results_folder(args.results)) if args.results else []
    for folder in reversed(made):
        folder.mkdir()
    code = subprocess.run(line, env=os.environ).returncode
    for folder in made if code else []:  # a refused run leaves none of the folders it made for itself
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    workdir = (args.results or Path.cwd()).resolve()
    # The grid is remembered by a run that wrote results (one whose jobs failed included); a plan, or a run refused
    # before its first job, writes nothing.
    if not dry_run(rest) and (code == 0 or any((workdir / "results").glob("*/"))):
        remember_grid(line, workdir)
    return code


def made_folders(folder: Path) -> list[Path]:
    """The folders ``--results`` makes: ``folder`` and its missing parents, deepest first."""
    return [p for p in (folder, *folder.parents) if not p.exists()]


if __name__ == "__main__":
    sys.exit(main())
