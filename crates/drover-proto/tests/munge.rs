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
