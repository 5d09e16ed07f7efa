"""submitit, unchanged: a function, an array of them, and the preemption path (USR2 to the job,
submitit checkpoints and requeues it, and the job goes on from its checkpoint)."""
import os
import time

import submitit


def add(a, b):
    return a + b


class Count(submitit.helpers.Checkpointable):
    """Counts until a flag file appears, noting each run's restart count; checkpointed
    (pickled with its count) on USR2 and requeued by submitit."""

    def __init__(self):
        self.n = 0
        self.restarts = []

    def __call__(self, flag, runs):
        self.restarts.append(os.environ.get("SLURM_RESTART_COUNT", "0"))
        with open(runs, "a") as f:
            f.write(f"{self.restarts[-1]}\n")
        while self.n < 3000:
            if os.path.exists(flag):
                return self.n, self.restarts
            self.n += 1
            time.sleep(0.1)
        return self.n, self.restarts


def wait_for(what, f, secs=60):
    end = time.time() + secs
    while time.time() < end:
        if f():
            return
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


ex = submitit.AutoExecutor(folder="logs")
assert ex.cluster == "slurm", ex.cluster
ex.update_parameters(timeout_min=5, slurm_partition="debug")

job = ex.submit(add, 2, 3)
assert job.result() == 5
# The result is written before the job ends: its state follows (sacct) within moments.
wait_for("COMPLETED", lambda: job.state == "COMPLETED", 10)

jobs = ex.map_array(add, [1, 2, 3], [10, 20, 30])
assert [j.result() for j in jobs] == [11, 22, 33]
assert len({j.job_id.split("_")[0] for j in jobs}) == 1, [j.job_id for j in jobs]

flag, runs = os.path.abspath("flag"), os.path.abspath("runs.txt")
job = ex.submit(Count(), flag, runs)
# Preempted three times (what a preemption does: scancel --signal=TERM, then USR2): each time
# submitit checkpoints and requeues it, and its next run goes on from the checkpoint.
for k in range(1, 4):
    wait_for(f"run {k} of the job", lambda: os.path.exists(runs) and len(open(runs).read().split()) == k
             and job.state == "RUNNING")
    time.sleep(1)
    job._interrupt()
wait_for("run 4 of the job", lambda: os.path.exists(runs) and len(open(runs).read().split()) == 4)
open(flag, "w").close()
n, restarts = job.result()
assert restarts == ["0", "1", "2", "3"], restarts
assert n > 30, n
# Each preempted run logs "Calling checkpoint method" before it asks for the requeue (its
# "Requeued job" line comes after scontrol returns, racing the run's end as on Slurm).
log = open(job.paths.stdout).read()
assert log.count("Calling checkpoint method") == 3, f"the log keeps each run's lines (append):\n{log}"
print(f"submitit: ok (array {jobs[0].job_id.split('_')[0]}, checkpointed at {n}, restarts {restarts})")
