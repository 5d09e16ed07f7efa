//! What the trust and authorization tests share: a cluster's authenticator as root holds it,
//! channels opened with a credential the test chose, and what an answer came to.

#![allow(dead_code)]

use drover_proto::auth::Auth;
use drover_testkit::Cluster;

pub fn conf(c: &Cluster) -> drover_model::conf::Config {
    drover_model::conf::parse_file(&c.conf).expect("the cluster's slurm.conf")
}

/// The cluster's authenticator, as root holds it (the key beside slurm.conf).
pub fn auth(c: &Cluster) -> Auth {
    let cfg = conf(c);
    Auth::new(&cfg.auth, &cfg.path, true).expect("the cluster's key")
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A channel to `addr` opened with `cred` (none: plain gRPC, as before authentication).
pub use drover_testkit::attack::open;

/// What a request came to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// The connection was refused before any request.
    Refused,
    /// Authenticated, and told `Access/permission denied`.
    Denied,
    /// Past authorization (whatever the request's own answer: a job not found, a request not
    /// valid, or done).
    Allowed,
}

pub fn outcome<T>(r: Result<T, tonic::Status>) -> Outcome {
    match r {
        Ok(_) => Outcome::Allowed,
        Err(s) if s.code() == tonic::Code::PermissionDenied => {
            assert!(s.message().starts_with("Access/permission denied"), "{s:?}");
            Outcome::Denied
        }
        Err(s) if s.code() == tonic::Code::Unauthenticated => Outcome::Refused,
        // The request's own answer: it got past authorization.
        Err(s)
            if matches!(
                s.code(),
                tonic::Code::InvalidArgument
                    | tonic::Code::NotFound
                    | tonic::Code::FailedPrecondition
                    | tonic::Code::ResourceExhausted
                    | tonic::Code::OutOfRange
                    | tonic::Code::AlreadyExists
            ) =>
        {
            Outcome::Allowed
        }
        // The transport's: the server dropped a connection that proved nothing.
        Err(_) => Outcome::Refused,
    }
}

/// Registers as node2 on a node link, and says what that came to.
pub async fn register_node(ch: tonic::transport::Channel) -> Outcome {
    use drover_proto::v1;
    let mut link = v1::node_link_client::NodeLinkClient::new(ch);
    let reg = v1::NodeToController {
        msg: Some(v1::node_to_controller::Msg::Register(v1::Register {
            node: "node2".into(),
            cpus: 2,
            ..Default::default()
        })),
    };
    match link.session(tokio_stream::iter(vec![reg])).await {
        // A refused session may also end at its first message.
        Ok(resp) => {
            let mut s = resp.into_inner();
            match tokio::time::timeout(std::time::Duration::from_secs(2), s.message()).await {
                Ok(Err(st)) => outcome::<()>(Err(st)),
                _ => Outcome::Allowed,
            }
        }
        Err(st) => outcome::<()>(Err(st)),
    }
}

/// A job of 1,000 CPUs "for another user" (uid 4242), as the forging attack recorded it.
pub fn forged_record() -> drover_proto::v1::AcctRecords {
    drover_testkit::attack::forged_record("test")
}
