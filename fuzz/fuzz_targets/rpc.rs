//! What arrives over the network: credentials (checked against a key), and the messages
//! that follow them, decoded and converted as the controller does.
#![no_main]
use drover_proto::v1;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::sync::OnceLock;

fn auth() -> &'static drover_proto::auth::Auth {
    static AUTH: OnceLock<(tempfile::TempDir, drover_proto::auth::Auth)> = OnceLock::new();
    &AUTH
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("a temp dir");
            let key = dir.path().join("slurm.key");
            drover_proto::auth::write_new_key(&key).expect("a key");
            let cfg = drover_model::conf::parse_str("slurm.conf", "AuthType=auth/slurm\n").expect("a config");
            let auth = drover_proto::auth::Auth::with_key_file(&cfg.auth, key, true).expect("auth");
            (dir, auth)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let _ = auth().verify(data, &drover_proto::auth::Purpose::Connect("controller"));
    let _ = auth().verify(data, &drover_proto::auth::Purpose::Launch);
    if let Ok(s) = v1::SignedLaunch::decode(data) {
        let _ = auth().verify_launch(&s);
    }
    if let Ok(r) = v1::SubmitRequest::decode(data) {
        if let Some(spec) = r.spec {
            let _ = drover_proto::spec_from_wire(spec);
        }
    }
    let _ = v1::NodeToController::decode(data);
    let _ = v1::AcctRecords::decode(data);
    let mut j = v1::JobInfo::default();
    let _ = drover_proto::decode_job_into(&mut j, data);
});
