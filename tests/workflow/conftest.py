import os
import subprocess

import pytest

from tests.workflow.slurm import SCRIPTS, cluster_turn


@pytest.fixture(scope="session")
def cluster():
    """The SLURM test cluster, started for this pytest process (a worker) and stopped when the last process that uses
    it leaves (.ci/slurm/start.sh and stop.sh --user: the SLURM files run on both xdist workers at once).  Started in a
    turn, so that it never finds the cluster disturbed on purpose by a test of the other worker (a stopped controller
    or a drained node look like a broken cluster, which start.sh would restart under the other worker's jobs)."""
    user = str(os.getpid())
    with cluster_turn():
        subprocess.run(["bash", str(SCRIPTS / "start.sh"), "--user", user], check=True, timeout=900)
    yield
    subprocess.run(["bash", str(SCRIPTS / "stop.sh"), "--user", user], check=True, timeout=300)


@pytest.fixture
def slurm_turn(request, cluster):
    """Each SLURM test's turn on the cluster (``pytestmark`` of the SLURM files): shared, or alone for a test that
    asks for ``cluster_alone``."""
    if "cluster_alone" in request.fixturenames:
        yield
        return
    with cluster_turn():
        yield


@pytest.fixture
def cluster_alone(cluster):
    """The cluster for this test alone: it stops the controller or drains the node, which every other test's jobs and
    squeue/scancel calls would meet."""
    with cluster_turn(alone=True):
        yield
