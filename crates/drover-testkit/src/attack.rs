//! What the attacks of the trust tests and of the lab's `drover-probe` share: a channel
//! opened with a credential the attacker chose, and a forged accounting record.

use drover_proto::auth::{send_credential, send_sealed};
use drover_proto::v1;

/// A channel to `addr` opened with `cred` as it is (none: plain gRPC, as before
/// authentication), in auth/slurm's exchange.
pub async fn open(addr: &str, cred: Option<Vec<u8>>, service: &str) -> Result<tonic::transport::Channel, String> {
    open_in(addr, cred, service, false).await
}

/// As [`open`], in auth/munge's exchange where `sealed` (the server's answer is not checked).
pub async fn open_in(
    addr: &str,
    cred: Option<Vec<u8>>,
    service: &str,
    sealed: bool,
) -> Result<tonic::transport::Channel, String> {
    let Some(cred) = cred else {
        return tonic::transport::Endpoint::try_from(format!("http://{addr}"))
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map_err(|e| e.to_string());
    };
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    if sealed {
        send_sealed(&mut s, &cred, service).await.map_err(|e| e.to_string())?;
    } else {
        send_credential(&mut s, &cred, service).await.map_err(|e| e.to_string())?;
    }
    drover_proto::auth::channel_over(s, addr).await
}

/// A job of 1,000 CPUs "for another user" (uid 4242, job 990001) on `cluster`, as the forging
/// attack recorded it.
pub fn forged_record(cluster: &str) -> v1::AcctRecords {
    let info = v1::JobInfo {
        job_id: 990_001,
        spec: Some(v1::JobSpec { name: "forged".into(), uid: 4242, ..Default::default() }),
        state: "COMPLETED".into(),
        submit_time: 1,
        start_time: 2,
        end_time: 3600,
        ..Default::default()
    };
    v1::AcctRecords {
        cluster: cluster.into(),
        jobs: vec![v1::AcctJob {
            cluster: cluster.into(),
            info: Some(info),
            alloc_tres: "cpu=1000".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}
