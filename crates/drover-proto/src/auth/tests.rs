use super::*;
use std::sync::Arc;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef-cluster-key";

fn claims_of(cred: &[u8]) -> v1::AuthClaims {
    v1::AuthClaims::decode(v1::AuthCredential::decode(cred).unwrap().claims.as_ref()).unwrap()
}

/// A credential with these claims, signed with `key` (what a forger holding a key writes).
fn signed(key: &[u8], claims: v1::AuthClaims) -> Vec<u8> {
    let c = claims.encode_to_vec();
    v1::AuthCredential {
        mac: key::Key::from_bytes(key).mac(&c).to_vec().into(),
        claims: c.into(),
        munge: String::new(),
    }
    .encode_to_vec()
}

fn fresh_claims(purpose: &str) -> v1::AuthClaims {
    v1::AuthClaims {
        uid: 0,
        gid: 0,
        host: "h".into(),
        issued: now(),
        expires: now() + 60,
        nonce: random::<16>().to_vec().into(),
        purpose: purpose.into(),
        binding: Default::default(),
    }
}

#[test]
fn a_credential_says_who_made_it_once() {
    let a = Auth::with_key(KEY, 64030);
    let cred = a.issue(&Purpose::Connect("controller"), b"challenge").unwrap();
    let (who, binding) = a.verify(&cred, &Purpose::Connect("controller")).unwrap();
    assert_eq!(who.uid, nix::unistd::geteuid().as_raw());
    assert_eq!(binding, b"challenge");
    assert_eq!(a.verify(&cred, &Purpose::Connect("controller")).unwrap_err(), AuthError::Replayed);
}

#[test]
fn forged_altered_misused_or_stale_credentials_are_refused() {
    let a = Auth::with_key(KEY, 64030);
    // Signed with another key.
    let other = Auth::with_key(b"another cluster's key, also 32+ bytes long", 0);
    let cred = other.issue(&Purpose::Connect("controller"), b"").unwrap();
    assert!(
        matches!(a.verify(&cred, &Purpose::Connect("controller")), Err(AuthError::Invalid(m)) if m.contains("bad signature"))
    );
    // A claim changed after signing (uid 1001 made into root).
    let mut c = v1::AuthCredential::decode(a.issue(&Purpose::Connect("node"), b"").unwrap().as_slice()).unwrap();
    let mut claims = v1::AuthClaims::decode(c.claims.as_ref()).unwrap();
    claims.uid = 0;
    claims.gid = 0;
    claims.host = "elsewhere".into();
    c.claims = claims.encode_to_vec().into();
    assert!(matches!(a.verify(&c.encode_to_vec(), &Purpose::Connect("node")), Err(AuthError::Invalid(_))));
    // Made for another service.
    let cred = a.issue(&Purpose::Connect("accounting"), b"").unwrap();
    assert!(
        matches!(a.verify(&cred, &Purpose::Connect("node")), Err(AuthError::Invalid(m)) if m.contains("connect/accounting"))
    );
    // Expired, and from the future (clock skew): both name the issuing host.
    let mut old = fresh_claims("connect/node");
    (old.issued, old.expires) = (now() - 200, now() - 140);
    let e = a.verify(&signed(KEY, old), &Purpose::Connect("node")).unwrap_err();
    assert!(matches!(e, AuthError::Expired { ago: 140, .. }), "{e}");
    assert!(e.to_string().contains("clocks of h"), "{e}");
    let mut future = fresh_claims("connect/node");
    (future.issued, future.expires) = (now() + 600, now() + 660);
    assert!(matches!(a.verify(&signed(KEY, future), &Purpose::Connect("node")), Err(AuthError::Future { .. })));
    // Garbage.
    assert!(matches!(a.verify(b"\xff\xff", &Purpose::Connect("node")), Err(AuthError::Invalid(_))));
    assert!(matches!(a.verify(&[], &Purpose::Connect("node")), Err(AuthError::Invalid(_))));
}

#[test]
fn launches_are_signed_by_the_cluster_and_bound_to_their_bytes() {
    let a = Auth::with_key(KEY, 64030);
    let launch = v1::Launch { cluster_name: "c".into(), kill_wait: 5, ..Default::default() };
    let signed_launch = a.sign_launch(launch.encode_to_vec()).unwrap();
    assert_eq!(a.verify_launch(&signed_launch).unwrap(), launch);
    // Once.
    assert_eq!(a.verify_launch(&signed_launch).unwrap_err(), AuthError::Replayed);
    // Other bytes under a good signature.
    let mut swapped = a.sign_launch(launch.encode_to_vec()).unwrap();
    swapped.launch = v1::Launch { cluster_name: "evil".into(), ..Default::default() }.encode_to_vec().into();
    assert!(matches!(a.verify_launch(&swapped), Err(AuthError::Invalid(m)) if m.contains("not the one signed")));
    // Signed by someone who is not root or SlurmUser (a key holder signing as uid 1001).
    let mut claims = fresh_claims("launch");
    claims.uid = 1001;
    {
        use sha2::Digest;
        claims.binding = sha2::Sha256::digest(launch.encode_to_vec()).to_vec().into();
    }
    let by_user = v1::SignedLaunch { launch: launch.encode_to_vec().into(), cred: signed(KEY, claims).into() };
    assert!(matches!(a.verify_launch(&by_user), Err(AuthError::Denied(_))));
    // A connection credential is not a launch credential.
    let conn = a.issue(&Purpose::Connect("node"), b"").unwrap();
    let misused = v1::SignedLaunch { launch: launch.encode_to_vec().into(), cred: conn.into() };
    assert!(matches!(a.verify_launch(&misused), Err(AuthError::Invalid(_))));
}

#[test]
fn claims_carry_the_issuer_and_a_fresh_nonce() {
    let a = Auth::with_key(KEY, 64030);
    let c1 = claims_of(&a.issue(&Purpose::Launch, b"x").unwrap());
    let c2 = claims_of(&a.issue(&Purpose::Launch, b"x").unwrap());
    assert_ne!(c1.nonce, c2.nonce);
    assert_eq!(c1.expires - c1.issued, 60);
    assert_eq!(c1.host, this_host());
}

#[test]
fn a_key_others_can_read_or_too_short_is_refused_with_its_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("slurm.key");
    std::fs::write(&p, KEY).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = key::Key::load(&p).err().unwrap().to_string();
    assert!(
        e.contains("readable by every user") && e.contains("chmod 0600") && e.contains(&p.display().to_string()),
        "{e}"
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(key::Key::load(&p).is_ok());
    std::fs::write(&p, b"short").unwrap();
    assert!(key::Key::load(&p).err().unwrap().to_string().contains("at least 32"));
    let missing = dir.path().join("none.key");
    assert!(key::Key::load(&missing).err().unwrap().to_string().contains("cannot read"));
}

#[test]
fn io_macs_differ_by_part_boundaries_and_keys() {
    let m = io_mac(b"k", &[b"ab", b"c"]);
    assert!(io_mac_ok(b"k", &[b"ab", b"c"], &m));
    assert!(!io_mac_ok(b"k", &[b"a", b"bc"], &m));
    assert!(!io_mac_ok(b"other", &[b"ab", b"c"], &m));
    assert!(!io_mac_ok(b"k", &[b"ab", b"c"], &m[..31]));
}

#[tokio::test]
async fn the_handshake_proves_both_ends_and_refuses_a_forger() {
    let a = Arc::new(Auth::with_key(KEY, 64030));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let r = refusals.clone();
    let mut incoming = Box::pin(accept_authenticated(listener, a.clone(), "controller", move |addr, e| {
        r.lock().unwrap().push(format!("{addr}: {e}"))
    }));
    // A client of this cluster gets in, and learns the server is the cluster's.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let server = client_handshake(&mut s, &a, "controller").await.unwrap().expect("the server was checked");
    assert_eq!(server.uid, nix::unistd::geteuid().as_raw());
    use tokio_stream::StreamExt;
    let accepted = incoming.next().await.unwrap().unwrap();
    assert_eq!(accepted.peer().uid, nix::unistd::geteuid().as_raw());
    // A forger's credential (another key) is refused with Slurm's words, and logged.
    let forger = Auth::with_key(b"not this cluster's key but long enough!!", 0);
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let e = client_handshake(&mut s, &forger, "controller").await.unwrap_err();
    assert!(e.to_string().starts_with("Invalid authentication credential"), "{e}");
    // A client that sends no credential at all.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    assert!(String::from_utf8_lossy(&answer).contains("Protocol authentication error"), "{answer:?}");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let refusals = refusals.lock().unwrap().clone();
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert!(refusals[0].contains("127.0.0.1:"), "refusals say where from: {refusals:?}");
}

#[tokio::test]
async fn a_server_of_another_cluster_or_a_replayed_answer_is_not_believed() {
    // The client holds this cluster's key; the server answering holds another.
    let ours = Auth::with_key(KEY, 64030);
    let theirs = Arc::new(Auth::with_key(b"the squatter's own key, 32 bytes or more", 0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        // It cannot check our credential either, but answers as if it had.
        let mut head = [0u8; 8];
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.read_exact(&mut head).await.unwrap();
        let len = u32::from_be_bytes(head[4..8].try_into().unwrap()) as usize;
        let mut cred = vec![0; len];
        s.read_exact(&mut cred).await.unwrap();
        let reply = theirs.issue(&Purpose::Reply("controller"), b"whatever").unwrap();
        let mut out = vec![0u8];
        out.extend_from_slice(&(reply.len() as u32).to_be_bytes());
        out.extend_from_slice(&reply);
        s.write_all(&out).await.unwrap();
    });
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let e = client_handshake(&mut s, &ours, "controller").await.unwrap_err();
    assert!(matches!(e, AuthError::Invalid(_)), "{e}");
}

/// `connect_proved` looks a name up (on this thread in a command's runtime, on tokio's
/// blocking threads in a daemon's) and makes its credential while the connection opens: both
/// runtimes reach a server by name, and a port nobody listens on is unreachable, not an
/// authentication failure.
async fn proved_by_name() {
    let a = Arc::new(Auth::with_key(KEY, 64030));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut incoming = Box::pin(accept_authenticated(listener, a.clone(), "controller", |_, _| {}));
    let s = connect_proved(&format!("localhost:{port}"), &a, "controller").await.expect("reached by name");
    use tokio_stream::StreamExt;
    let accepted = incoming.next().await.unwrap().unwrap();
    assert_eq!(accepted.peer().uid, nix::unistd::geteuid().as_raw());
    drop(s);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    match connect_proved(&format!("127.0.0.1:{closed}"), &a, "controller").await {
        Err(ProvedError::Unreachable(e)) => assert!(e.contains("refused"), "{e}"),
        other => panic!("expected unreachable, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_command_connects_by_name() {
    proved_by_name().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_connects_by_name() {
    proved_by_name().await
}
