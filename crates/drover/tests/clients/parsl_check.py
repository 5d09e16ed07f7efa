"""Parsl, unchanged: its SlurmProvider starts a 2-node block (one batch job, workers started
on each node by srun), Python and bash apps run in it, and the block is cancelled at the end.
Everything listens on loopback."""
import os

import parsl
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SrunLauncher
from parsl.providers import SlurmProvider

config = Config(
    executors=[
        HighThroughputExecutor(
            label="slurm",
            address="127.0.0.1",
            loopback_address="127.0.0.1",
            max_workers_per_node=2,
            provider=SlurmProvider(
                partition="debug",
                nodes_per_block=2,
                init_blocks=1,
                max_blocks=1,
                walltime="00:10:00",
                launcher=SrunLauncher(),
                worker_init="",
            ),
        )
    ],
    run_dir=os.path.abspath("runinfo"),
)
parsl.load(config)


@parsl.python_app
def where():
    import os

    return os.environ["SLURMD_NODENAME"], os.environ["SLURM_JOB_ID"]


@parsl.bash_app
def hello(stdout="hello.out"):
    return "echo hello from $SLURM_JOB_ID on $SLURMD_NODENAME"


# Many small tasks: both nodes' workers take some.
got = [f.result() for f in [where() for _ in range(40)]]
nodes = {n for n, _ in got}
jobs = {j for _, j in got}
assert len(jobs) == 1, jobs
assert len(nodes) == 2, nodes
if os.path.exists("hello.out"):
    os.remove("hello.out")  # a bash app's stdout appends
hello().result()
text = open("hello.out").read()
assert text.startswith(f"hello from {jobs.pop()} on node"), text
parsl.dfk().cleanup()
print(f"parsl: ok (one block across {sorted(nodes)})")
