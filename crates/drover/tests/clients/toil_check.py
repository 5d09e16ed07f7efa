"""Toil, unchanged (`--batchSystem slurm`): a workflow of four children and a follow-on, each
a batch job, their results combined on the leader."""
import os

from toil.common import Toil
from toil.job import Job


def square(job, x):
    return x * x, os.environ.get("SLURM_JOB_ID")


def total(job, results):
    return sum(r[0] for r in results), sorted({r[1] for r in results})


def root(job):
    kids = [job.addChildJobFn(square, i, cores=1, memory="200M", disk="10M") for i in range(4)]
    return job.addFollowOnJobFn(total, [k.rv() for k in kids], cores=1, memory="200M", disk="10M").rv()


if __name__ == "__main__":
    opts = Job.Runner.getDefaultOptions(os.path.abspath("jobstore"))
    opts.batchSystem = "slurm"
    opts.clean = "always"
    opts.realTimeLogging = False
    opts.workDir = os.path.abspath("work")
    os.makedirs(opts.workDir, exist_ok=True)
    with Toil(opts) as toil:
        s, jobs = toil.start(Job.wrapJobFn(root, cores=1, memory="200M", disk="10M"))
    assert s == 0 + 1 + 4 + 9, s
    assert len(jobs) == 4 and all(j and j.isdigit() for j in jobs), jobs
    print(f"toil: ok (children ran as jobs {jobs})")
