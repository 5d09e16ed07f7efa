//! The task I/O stream between a job supervisor and `srun`: length-prefixed frames over one
//! TCP connection per node, both ways (output and exits to srun, stdin and terminal size to
//! the tasks). `[kind u8][task u32 BE][len u32 BE][bytes]`.
//!
//! A connection starts by proving both ends hold the step's I/O key (which the controller
//! gave srun and put in the signed launch), so that no one else can read the tasks' stdin or
//! write into srun's output:
//!
//! ```text
//!  srun ── CHALLENGE c1 (32 random bytes) ──────────────────────────────► supervisor
//!  srun ◄── HELLO c2 (32) ‖ HMAC(key, "hello", c1, c2, node) ‖ node ───── supervisor
//!  srun ── PROOF HMAC(key, "srun", c1, c2, node) ───────────────────────► supervisor
//! ```

use std::io::{self, Read, Write};

pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
/// Payload: the task's raw wait status as i32 BE.
pub const EXIT: u8 = 3;
/// Payload: the node name; first frame on a connection.
pub const HELLO: u8 = 4;
/// No payload: the task was ended by the out-of-memory killer (sent before its EXIT).
pub const OOM: u8 = 5;
/// srun → supervisor: bytes for a task's stdin; an empty payload closes it.
pub const STDIN: u8 = 6;
/// srun → supervisor: the terminal's size for a `--pty` task, rows and columns as u16 BE.
pub const WINSIZE: u8 = 7;
/// srun → supervisor, the first frame: 32 random bytes the hello must answer.
pub const CHALLENGE: u8 = 8;
/// srun → supervisor, after a good hello: srun's proof that it holds the key too.
pub const PROOF: u8 = 9;

fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why.to_string())
}

/// The supervisor's start of a connection to srun: answers srun's challenge with this node's
/// name and proof of the step's key, then checks srun's proof. Nothing of the tasks flows
/// before both passed.
pub fn supervisor_hello(conn: &mut (impl Read + Write), key: &[u8], node: &str) -> io::Result<()> {
    if key.is_empty() {
        return Err(refused("the launch carries no I/O key"));
    }
    let c1 = match read_frame(conn)? {
        Some(f) if f.kind == CHALLENGE && f.data.len() == 32 => f.data,
        _ => return Err(refused("the listener did not challenge: not srun")),
    };
    let c2 = crate::auth::random::<32>();
    let mac = crate::auth::io_mac(key, &[b"hello", &c1, &c2, node.as_bytes()]);
    let mut hello = Vec::with_capacity(64 + node.len());
    hello.extend_from_slice(&c2);
    hello.extend_from_slice(&mac);
    hello.extend_from_slice(node.as_bytes());
    write_frame(conn, HELLO, 0, &hello)?;
    match read_frame(conn)? {
        Some(f) if f.kind == PROOF && crate::auth::io_mac_ok(key, &[b"srun", &c1, &c2, node.as_bytes()], &f.data) => {
            Ok(())
        }
        _ => Err(refused("the listener could not prove it holds the step's I/O key: not this step's srun")),
    }
}

/// srun's start of a supervisor's connection: challenges it, checks its hello against the
/// step's key (waiting up to `key`'s arrival), proves srun holds it too. Returns the node.
pub fn srun_accept(conn: &mut (impl Read + Write), key: impl FnOnce() -> Option<Vec<u8>>) -> io::Result<String> {
    let c1 = crate::auth::random::<32>();
    write_frame(conn, CHALLENGE, 0, &c1)?;
    let f = match read_frame(conn)? {
        Some(f) if f.kind == HELLO && f.data.len() >= 64 => f,
        _ => return Err(refused("no hello")),
    };
    let (c2, rest) = f.data.split_at(32);
    let (mac, node) = rest.split_at(32);
    let key = key().ok_or_else(|| refused("the step's I/O key never came"))?;
    if !crate::auth::io_mac_ok(&key, &[b"hello", &c1, c2, node], mac) {
        return Err(refused("a hello without the step's I/O key"));
    }
    write_frame(conn, PROOF, 0, &crate::auth::io_mac(&key, &[b"srun", &c1, c2, node]))?;
    Ok(String::from_utf8_lossy(node).into_owned())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub task: u32,
    pub data: Vec<u8>,
}

pub fn write_frame(w: &mut impl Write, kind: u8, task: u32, data: &[u8]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(9 + data.len());
    buf.push(kind);
    buf.extend_from_slice(&task.to_be_bytes());
    buf.extend_from_slice(&(data.len() as u32).to_be_bytes());
    buf.extend_from_slice(data);
    w.write_all(&buf)
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub fn read_frame(r: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut head = [0u8; 9];
    let mut got = 0;
    while got < head.len() {
        let n = r.read(&mut head[got..])?;
        if n == 0 {
            return if got == 0 { Ok(None) } else { Err(io::ErrorKind::UnexpectedEof.into()) };
        }
        got += n;
    }
    let task = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
    if len > 16 << 20 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "I/O frame too large"));
    }
    let mut data = vec![0u8; len];
    r.read_exact(&mut data)?;
    Ok(Some(Frame { kind: head[0], task, data }))
}

/// Takes every complete frame off the front of `buf` (bytes read so far from a stream).
pub fn split_frames(buf: &mut Vec<u8>) -> io::Result<Vec<Frame>> {
    let mut frames = Vec::new();
    let mut at = 0;
    while buf.len() - at >= 9 {
        let h = &buf[at..at + 9];
        let task = u32::from_be_bytes([h[1], h[2], h[3], h[4]]);
        let len = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) as usize;
        if len > 16 << 20 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "I/O frame too large"));
        }
        if buf.len() - at - 9 < len {
            break;
        }
        frames.push(Frame { kind: h[0], task, data: buf[at + 9..at + 9 + len].to_vec() });
        at += 9 + len;
    }
    buf.drain(..at);
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ends over a socket pair, each on its own thread.
    fn meet(srun_key: Option<Vec<u8>>, sup_key: Vec<u8>) -> (io::Result<String>, io::Result<()>) {
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let sup = std::thread::spawn(move || supervisor_hello(&mut b, &sup_key, "node7"));
        let srun = srun_accept(&mut a, move || srun_key);
        drop(a);
        (srun, sup.join().unwrap())
    }

    #[test]
    fn both_ends_prove_the_steps_key() {
        let (srun, sup) = meet(Some(b"k".to_vec()), b"k".to_vec());
        assert_eq!(srun.unwrap(), "node7");
        sup.unwrap();
        // A supervisor (or anyone) without the key is turned away before any task I/O.
        let (srun, sup) = meet(Some(b"k".to_vec()), b"guess".to_vec());
        assert_eq!(srun.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        assert!(sup.is_err());
        // A listener that is not the step's srun cannot answer.
        let (srun, sup) = meet(Some(b"other".to_vec()), b"k".to_vec());
        assert!(srun.is_err());
        assert!(sup.unwrap_err().to_string().contains("not this step's srun"));
        // No key, no connection.
        let (_, sup) = meet(Some(b"k".to_vec()), Vec::new());
        assert!(sup.unwrap_err().to_string().contains("no I/O key"));
    }

    #[test]
    fn a_listener_that_does_not_challenge_gets_nothing() {
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        write_frame(&mut a, STDIN, 0, b"injected").unwrap();
        assert!(supervisor_hello(&mut b, b"k", "n").unwrap_err().to_string().contains("not srun"));
    }

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, STDOUT, 3, b"hello\n").unwrap();
        write_frame(&mut buf, EXIT, 3, &0i32.to_be_bytes()).unwrap();
        let mut r = &buf[..];
        assert_eq!(read_frame(&mut r).unwrap().unwrap(), Frame { kind: STDOUT, task: 3, data: b"hello\n".to_vec() });
        assert_eq!(read_frame(&mut r).unwrap().unwrap().kind, EXIT);
        assert!(read_frame(&mut r).unwrap().is_none());
    }

    #[test]
    fn split_frames_keeps_a_partial_frame_for_later() {
        let mut buf = Vec::new();
        write_frame(&mut buf, STDIN, 0, b"ab").unwrap();
        write_frame(&mut buf, STDIN, 1, b"").unwrap();
        write_frame(&mut buf, WINSIZE, 0, &[0, 24, 0, 80]).unwrap();
        let whole = buf.clone();
        buf.truncate(whole.len() - 2);
        let got = split_frames(&mut buf).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], Frame { kind: STDIN, task: 1, data: vec![] });
        assert_eq!(buf.len(), 9 + 4 - 2);
        buf.extend_from_slice(&whole[whole.len() - 2..]);
        assert_eq!(split_frames(&mut buf).unwrap()[0].data, vec![0, 24, 0, 80]);
        assert!(buf.is_empty());
    }
}
