"""dask-jobqueue, unchanged: a SLURMCluster scaled to three workers (each a batch job), work
spread over them, then scaled down (its workers' jobs cancelled). Everything listens on
loopback."""
import time
import subprocess

from dask_jobqueue import SLURMCluster
from distributed import Client

cluster = SLURMCluster(
    cores=1,
    processes=1,
    memory="400MB",
    walltime="00:10:00",
    queue="debug",
    interface="lo",
    log_directory="dask-logs",
    scheduler_options={"dashboard_address": "127.0.0.1:0"},
    worker_extra_args=["--no-dashboard"],
)
script = cluster.job_script()
assert "#SBATCH -p debug" in script and "#SBATCH -t 00:10:00" in script, script
cluster.scale(3)
client = Client(cluster)
client.wait_for_workers(3, timeout=120)
jobs = subprocess.run(["squeue", "-h", "-n", "dask-worker", "-o", "%i %T"], capture_output=True, text=True, check=True).stdout
assert jobs.count("RUNNING") == 3, jobs
futures = client.map(lambda x: x * x, range(100))
assert sum(client.gather(futures)) == sum(x * x for x in range(100))
hosts = client.run(lambda: __import__("os").environ["SLURM_JOB_ID"])
assert len(set(hosts.values())) == 3, hosts
cluster.scale(0)
end = time.time() + 60
while time.time() < end:
    left = subprocess.run(["squeue", "-h", "-n", "dask-worker"], capture_output=True, text=True, check=True).stdout
    if not left.strip():
        break
    time.sleep(0.5)
else:
    raise SystemExit(f"workers' jobs still queued after scaling to 0:\n{left}")
client.close()
cluster.close()
print(f"dask-jobqueue: ok (3 workers in jobs {sorted(hosts.values())})")
