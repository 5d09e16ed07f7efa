//! Open MPI launched the way it launches under Slurm: `mpirun` inside a batch job starts its
//! daemons with `srun --ntasks-per-node=1 --kill-on-bad-exit --mpi=none ... orted`, and the
//! ranks agree on an all-reduce across two nodes. Needs Open MPI (`.ci/run` installs
//! `openmpi-bin` and `libopenmpi-dev`); says so and passes where it is missing.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

const ALLREDUCE: &str = r#"#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"#;

#[test]
fn open_mpi_mpirun_launches_its_daemons_through_srun() {
    let have = |p: &str| std::process::Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success());
    if !have("mpicc") || !have("mpirun") {
        drover_testkit::skip("Open MPI (mpicc, mpirun) is not installed: apt-get install openmpi-bin libopenmpi-dev");
        return;
    }
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 2, ..Default::default() });
    let src = c.path().join("allreduce.c");
    std::fs::write(&src, ALLREDUCE).unwrap();
    let bin = c.path().join("allreduce");
    let cc = std::process::Command::new("mpicc").arg("-o").arg(&bin).arg(&src).output().unwrap();
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    // Both "nodes" are this host: Open MPI's shared-memory transport would mix up their
    // segments, so the ranks talk TCP. Root needs Open MPI's consent.
    let script = format!(
        "#!/bin/bash\nexport OMPI_MCA_btl=self,tcp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n\
         mpirun {} | sort\necho rc=${{PIPESTATUS[0]}}\nsqueue -h -s -o %j | sort\n",
        bin.display()
    );
    let path = c.path().join("mpi.sh");
    std::fs::write(&path, script).unwrap();
    let id = c.submit(&["-N2", "-n4", &path.display().to_string()]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(60));
    let out = std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap();
    assert!(
        out.starts_with("rank 0 of 4 sum 6\nrank 1 of 4 sum 6\nrank 2 of 4 sum 6\nrank 3 of 4 sum 6\nrc=0\n"),
        "{out}"
    );
}
