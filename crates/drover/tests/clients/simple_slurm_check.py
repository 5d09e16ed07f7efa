"""simple-slurm, unchanged: an array written as `#SBATCH` lines and fed to sbatch on
standard input, a job depending on it (afterok), and srun."""
import subprocess
import time

from simple_slurm import Slurm

array = Slurm(
    array=range(3),
    cpus_per_task=1,
    job_name="ss-array",
    output=f"ss-{Slurm.JOB_ARRAY_MASTER_ID}_{Slurm.JOB_ARRAY_ID}.out",
    time="00:02:00",
)
first = array.sbatch("echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT")
assert isinstance(first, int), first
after = Slurm(dependency=dict(afterok=first), job_name="ss-after", output="after-%j.out")
second = after.sbatch("echo after $SLURM_JOB_DEPENDENCY")
end = time.time() + 60
while time.time() < end:
    # -t all: squeue -j alone, as Slurm 22.05's, lists only pending, running and completing
    # jobs (finished ones stay in view for MinJobAge with -t).
    queued = subprocess.run(["squeue", "-h", "-t", "all", "-j", f"{first},{second}", "-o", "%i %T"], capture_output=True,
                            text=True).stdout
    if queued.split()[1::2] == ["COMPLETED"] * 4:
        break
    time.sleep(0.3)
else:
    raise SystemExit(f"still queued: {queued}")
for task in range(3):
    assert open(f"ss-{first}_{task}.out").read() == f"task {task} of 3\n"
assert open(f"after-{second}.out").read() == f"after afterok:{first}\n", open(f"after-{second}.out").read()
out = Slurm(job_name="ss-srun", ntasks=2).srun("echo rank $SLURM_PROCID")
assert out == 0, out
print(f"simple-slurm: ok (array {first}, then {second})")
