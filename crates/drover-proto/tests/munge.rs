//! auth/munge against real `munged` daemons (Debian's `munge`), each started here on a
//! socket of its own with a key of its own: credentials round-trip through libmunge, MUNGE's
//! own replay check and key refuse what they should, and a stopped daemon is named.

use drover_proto::auth::{Auth, AuthConf, AuthError, AuthKind, Purpose};
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

struct Munged {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Munged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn munged_binary() -> Option<PathBuf> {
    ["/usr/sbin/munged", "/usr/bin/munged"].iter().map(PathBuf::from).find(|p| p.exists())
}

fn start_munged(bin: &Path) -> Munged {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("munge.key");
    let bytes: Vec<u8> = (0..1024).map(|_| rand_byte()).collect();
    std::fs::write(&key, bytes).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let socket = dir.path().join("munge.socket");
    let child = Command::new(bin)
        .arg("--foreground")
        .arg("--force")
        .arg(format!("--socket={}", socket.display()))
        .arg(format!("--key-file={}", key.display()))
        .arg(format!("--pid-file={}", dir.path().join("munged.pid").display()))
        .arg(format!("--seed-file={}", dir.path().join("munged.seed").display()))
        .stderr(std::fs::File::create(dir.path().join("munged.log")).unwrap())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !socket.exists() {
        assert!(
            t.elapsed().as_secs() < 10,
            "munged did not start: {:?}",
            std::fs::read_to_string(dir.path().join("munged.log"))
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Munged { child, socket, _dir: dir }
}

fn rand_byte() -> u8 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    h.finish() as u8
}

fn auth_on(socket: &Path) -> Auth {
    let conf =
        AuthConf { kind: AuthKind::Munge, munge_socket: Some(socket.display().to_string()), ..Default::default() };
    Auth::new(&conf, "/nonexistent/slurm.conf", true).expect("libmunge loads")
}

fn need_munge() -> Option<PathBuf> {
    let bin = munged_binary();
    if bin.is_none() {
        let why = "MUNGE is not installed (apt-get install munge): auth/munge is not tested";
        assert!(std::env::var("DROVER_TEST_STRICT").as_deref() != Ok("1"), "cannot run: {why}");
        eprintln!("skipped: {why}");
    }
    bin
}

#[test]
fn munge_credentials_carry_uid_once_and_only_within_one_key() {
    let Some(bin) = need_munge() else { return };
    let one = start_munged(&bin);
    let other = start_munged(&bin);
    let a = auth_on(&one.socket);
    let cred = a.issue(&Purpose::Connect("controller"), b"challenge").unwrap();
    let (who, binding) = a.verify(&cred, &Purpose::Connect("controller")).unwrap();
    assert_eq!((who.uid, who.gid), (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw()));
    assert_eq!(binding, b"challenge");
    // MUNGE's replay cache refuses a second use.
    assert_eq!(a.verify(&cred, &Purpose::Connect("controller")).unwrap_err(), AuthError::Replayed);
    // A purpose is checked after MUNGE's own checks.
    let cred = a.issue(&Purpose::Connect("accounting"), b"").unwrap();
    assert!(matches!(a.verify(&cred, &Purpose::Connect("node")), Err(AuthError::Invalid(_))));
    // A credential of a realm with another munge.key is not believed.
    let b = auth_on(&other.socket);
    let foreign = b.issue(&Purpose::Connect("controller"), b"").unwrap();
    let e = a.verify(&foreign, &Purpose::Connect("controller")).unwrap_err();
    assert!(matches!(e, AuthError::Invalid(ref m) if m.contains("Munge decode failed")), "{e}");
    // An auth/slurm credential where MUNGE is configured.
    let slurm = Auth::with_key(b"0123456789abcdef0123456789abcdef", 0);
    let e = a.verify(&slurm.issue(&Purpose::Connect("node"), b"").unwrap(), &Purpose::Connect("node")).unwrap_err();
    assert!(e.to_string().contains("auth/slurm credential where auth/munge"), "{e}");
}

#[test]
fn munge_signs_launches_and_a_stopped_munged_is_named() {
    let Some(bin) = need_munge() else { return };
    let m = start_munged(&bin);
    let a = auth_on(&m.socket);
    let launch = drover_proto::v1::Launch { cluster_name: "c".into(), ..Default::default() };
    let signed = a.sign_launch(launch.encode_to_vec()).unwrap();
    assert_eq!(a.verify_launch(&signed).unwrap(), launch);
    let socket = m.socket.clone();
    drop(m);
    let e = a.issue(&Purpose::Connect("controller"), b"").unwrap_err().to_string();
    assert!(
        e.starts_with("Munge encode failed")
            && e.contains("is munged running")
            && e.contains(&socket.display().to_string()),
        "{e}"
    );
}

fn auth_as(socket: &Path, slurm_user: &str) -> Auth {
    let conf = AuthConf {
        kind: AuthKind::Munge,
        munge_socket: Some(socket.display().to_string()),
        slurm_user: slurm_user.into(),
        ..Default::default()
    };
    Auth::new(&conf, "/nonexistent/slurm.conf", true).expect("libmunge loads")
}

/// A credential sealed to a uid is opened by that uid's processes alone, and a daemon takes
/// no credential anyone could read where a sealed one belongs.
#[test]
fn a_sealed_credential_opens_for_its_uid_alone() {
    let Some(bin) = need_munge() else { return };
    let m = start_munged(&bin);
    let a = auth_on(&m.socket);
    let me = nix::unistd::geteuid().as_raw();
    let cred = a.issue_sealed(&Purpose::Connect("controller"), b"a secret", me).unwrap();
    let (who, secret) = a.verify_sealed(&cred, &Purpose::Connect("controller")).unwrap();
    assert_eq!((who.uid, secret.as_slice()), (me, &b"a secret"[..]));
    // Sealed to another uid: munged will not open it for us (nor, unless built to, for root).
    let other = if me == 65534 { 65533 } else { 65534 };
    let cred = a.issue_sealed(&Purpose::Connect("controller"), b"a secret", other).unwrap();
    let e = a.verify_sealed(&cred, &Purpose::Connect("controller")).unwrap_err();
    assert!(matches!(e, AuthError::NotOurs(_)), "{e}");
    // The secret is encrypted: a plain credential carries it as it is, a sealed one not.
    let plain = a.issue(&Purpose::Connect("controller"), b"a secret").unwrap();
    assert!(raw(&plain).windows(8).any(|w| w == b"a secret"), "the plain credential shows its payload");
    assert!(!raw(&cred).windows(8).any(|w| w == b"a secret"), "the sealed one hides it");
    // Anyone's credential where a sealed one belongs.
    let e = a.verify_sealed(&plain, &Purpose::Connect("controller")).unwrap_err();
    assert!(e.to_string().contains("anyone could read"), "{e}");
}

/// The bytes of a MUNGE credential (its base64 between `MUNGE:` and `:`), by coreutils.
fn raw(cred: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let c = drover_proto::v1::AuthCredential::decode(cred).unwrap();
    let b64 = c.munge.trim().trim_start_matches("MUNGE:").trim_end_matches(':').to_string();
    let mut child = Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b64.as_bytes()).unwrap();
    child.wait_with_output().unwrap().stdout
}

fn frame(code: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![code];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// A squatter on the port: reads the magic and one credential per answer it gives, and gives
/// `answers` in turn; then keeps what the client sends after, until it hangs up.
async fn squatter(answers: Vec<Vec<u8>>) -> (std::net::SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let after = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        for answer in answers {
            let mut head = [0u8; 8];
            if s.read_exact(&mut head).await.is_err() {
                return Vec::new();
            }
            let mut cred = vec![0; u32::from_be_bytes(head[4..8].try_into().unwrap()) as usize];
            s.read_exact(&mut cred).await.unwrap();
            s.write_all(&answer).await.unwrap();
        }
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
        rest
    });
    (addr, after)
}

/// Under MUNGE a connection costs two credentials, not four: the client's, sealed to the
/// daemon's uid, carries the secret the server's answer is made with. A daemon running as
/// another trusted uid than guessed has the client seal again (and it remembers); a squatter
/// can neither open the credential nor answer for it; a sealed credential is good once.
#[tokio::test(flavor = "current_thread")]
async fn a_connection_under_munge_is_proved_both_ways_with_one_credential() {
    let Some(bin) = need_munge() else { return };
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var("DROVER_TEST_STRICT").as_deref() != Ok("1"), "cannot run: needs root");
        eprintln!("skipped: needs root (the daemon must run as a trusted uid)");
        return;
    }
    use drover_proto::auth::{accept_authenticated, connect_proved, send_sealed, ProvedError};
    use tokio_stream::StreamExt;
    let m = start_munged(&bin);
    let server = std::sync::Arc::new(auth_on(&m.socket));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let refused = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let r = refused.clone();
    let mut incoming = Box::pin(accept_authenticated(listener, server.clone(), "controller", move |_, e| {
        r.lock().unwrap().push(e.to_string())
    }));

    // SlurmUser=nobody: the client seals to nobody's uid first; the daemon (root) says it is
    // root, the client seals again, and the next connection seals to root at once.
    let client = auth_as(&m.socket, "nobody");
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap().uid.as_raw();
    assert_eq!(client.daemon_uid("controller"), nobody);
    let s = connect_proved(&addr, &client, "controller").await.expect("proved after sealing again");
    assert_eq!(incoming.next().await.unwrap().unwrap().peer().uid, 0);
    assert_eq!(client.daemon_uid("controller"), 0, "the daemon's uid is remembered");
    assert_eq!(client.daemon_uid("accounting"), nobody, "per service");
    drop(s);
    let root = auth_on(&m.socket);
    assert_eq!(root.daemon_uid("controller"), 0);
    let s = connect_proved(&addr, &root, "controller").await.expect("proved at once");
    assert_eq!(incoming.next().await.unwrap().unwrap().peer().uid, 0);
    drop(s);

    // A sealed credential replayed (as a relay that saw it would) is refused.
    let cred = root.issue_sealed(&Purpose::Connect("controller"), &[1; 32], 0).unwrap();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    send_sealed(&mut s, &cred, "controller").await.expect("its first use");
    assert_eq!(incoming.next().await.unwrap().unwrap().peer().uid, 0);
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let e = send_sealed(&mut s, &cred, "controller").await.unwrap_err();
    assert!(e.to_string().contains("replayed"), "{e}");
    // A credential anyone can read, in the sealed exchange.
    let plain = root.issue(&Purpose::Connect("controller"), &[1; 32]).unwrap();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let e = send_sealed(&mut s, &plain, "controller").await.unwrap_err();
    assert!(e.to_string().contains("anyone could read"), "{e}");

    // Squatters: an answer it made up; a claim to run as an untrusted uid; a claim to run as
    // root, then an answer it could not make (it cannot open a credential sealed to root).
    let garbage = frame(0, &[0x5a; 48]);
    let again_as_root = frame(2, &0u32.to_be_bytes());
    for (answers, want) in [
        (vec![garbage.clone()], "not for this connection"),
        (vec![frame(2, &4242u32.to_be_bytes())], "runs as uid 4242"),
        (vec![again_as_root, garbage.clone()], "not for this connection"),
    ] {
        let (at, _) = squatter(answers).await;
        match connect_proved(&at.to_string(), &client, "controller").await {
            Err(ProvedError::Auth(e)) => assert!(e.to_string().contains(want), "{want}: {e}"),
            other => panic!("{want}: expected a refusal, got {:?}", other.map(|_| ())),
        }
    }
    // The commands' channel checks the answer before any request leaves: the squatter gets
    // not a byte of it (a job's script, say).
    let (at, after) = squatter(vec![garbage]).await;
    let client = std::sync::Arc::new(client);
    let target = drover_proto::Target::Tcp { addr: at.to_string(), auth: client, service: "controller" };
    let e = drover_proto::connect_target(target).await.map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("not for this connection"), "{e}");
    assert_eq!(after.await.unwrap(), b"", "nothing after the credential");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let refused = refused.lock().unwrap().clone();
    assert_eq!(refused.len(), 2, "{refused:?}");
}
