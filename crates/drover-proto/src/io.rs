//! The task I/O stream between a job supervisor and `srun`: length-prefixed frames over one
//! TCP connection per node, both ways (output and exits to srun, stdin and terminal size to
//! the tasks). `[kind u8][task u32 BE][len u32 BE][bytes]`.

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
