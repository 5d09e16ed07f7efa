//! Device confinement on cgroup v2: an eBPF `BPF_PROG_TYPE_CGROUP_DEVICE` program, attached
//! to a job's cgroup, that refuses the character devices the job must not open.
//!
//! cgroup v2 has no `devices.deny` file; the kernel asks the device programs attached to a
//! task's cgroup (and its ancestors) on every open/mknod of a device, and all must allow.
//! The program is a few instructions, assembled here as runc and crun do: a crate such as
//! aya loads compiled BPF objects, which would need a BPF toolchain in the build for what is
//! a fixed list of comparisons.
//!
//! ```text
//!   r2 = ctx->access_type & 0xffff     (device type: 1 block, 2 char)
//!   r4 = ctx->major; r5 = ctx->minor
//!   for each denied (major, minor):
//!     if r2 == 2 && r4 == major && r5 == minor: return 0   (refuse)
//!   return 1                                              (allow)
//! ```

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;
const BPF_DEVCG_DEV_CHAR: i32 = 2;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// dst in the low nibble, src in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: dst | (src << 4), off, imm }
}

/// `dst = *(u32 *)(src + off)`
fn ldx_w(dst: u8, src: u8, off: i16) -> Insn {
    insn(0x61, dst, src, off, 0)
}
/// `dst32 &= imm`
fn and32(dst: u8, imm: i32) -> Insn {
    insn(0x54, dst, 0, 0, imm)
}
/// `if dst != imm goto +off`
fn jne(dst: u8, imm: i32, off: i16) -> Insn {
    insn(0x55, dst, 0, off, imm)
}
/// `dst = imm`
fn mov(dst: u8, imm: i32) -> Insn {
    insn(0xb7, dst, 0, 0, imm)
}
fn exit() -> Insn {
    insn(0x95, 0, 0, 0, 0)
}

/// The program refusing `deny` (character devices) and allowing everything else.
pub fn program(deny: &[(u64, u64)]) -> Vec<Insn> {
    let mut p = vec![ldx_w(2, 1, 0), and32(2, 0xffff), ldx_w(4, 1, 4), ldx_w(5, 1, 8)];
    for &(major, minor) in deny {
        p.extend([jne(2, BPF_DEVCG_DEV_CHAR, 4), jne(4, major as i32, 3), jne(5, minor as i32, 2), mov(0, 0), exit()]);
    }
    p.extend([mov(0, 1), exit()]);
    p
}

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to the fields used.
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

/// `union bpf_attr` for `BPF_PROG_ATTACH`.
#[repr(C)]
#[derive(Default)]
struct ProgAttach {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, fully initialised `repr(C)` prefix of `union bpf_attr`
    // whose pointers (if any) the caller keeps alive for the call; its size goes with it.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>() as libc::c_uint) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Attaches a program refusing `deny` to the cgroup v2 directory `cgroup` (alongside any
/// program already there: the kernel allows an open only if all of them do). The program
/// lives as long as the cgroup does.
pub fn deny_devices(cgroup: &Path, deny: &[(u64, u64)]) -> Result<(), String> {
    let prog_fd = load(deny)?;
    let dir = std::fs::File::open(cgroup).map_err(|e| format!("opening {}: {e}", cgroup.display()))?;
    let mut attach = ProgAttach {
        target_fd: dir.as_raw_fd() as u32,
        attach_bpf_fd: prog_fd.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
        ..Default::default()
    };
    bpf(BPF_PROG_ATTACH, &mut attach)
        .map_err(|e| format!("attaching the device program to {}: {e}", cgroup.display()))?;
    Ok(())
}

/// Loads (verifies) the program refusing `deny`.
fn load(deny: &[(u64, u64)]) -> Result<OwnedFd, String> {
    let prog = program(deny);
    let license = b"Apache-2.0\0";
    let mut log = vec![0u8; 4096];
    let mut name = [0u8; 16];
    name[..13].copy_from_slice(b"drover_device");
    let mut load = ProgLoad {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name,
        ..Default::default()
    };
    let fd = bpf(BPF_PROG_LOAD, &mut load).map_err(|e| {
        let text = String::from_utf8_lossy(&log);
        let text = text.trim_end_matches('\0').trim();
        if text.is_empty() {
            format!("loading the device program: {e}")
        } else {
            format!("loading the device program: {e}: {}", text.lines().last().unwrap_or_default())
        }
    })?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether this host lets us load a device program (root, a kernel with cgroup BPF).
pub fn probe() -> Result<(), String> {
    load(&[]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_denied_device_is_one_comparison_block_that_skips_to_the_next() {
        let p = program(&[(195, 0), (195, 2)]);
        assert_eq!(p.len(), 4 + 5 * 2 + 2);
        // The first block compares type, major, minor, and jumps past its own refusal.
        assert_eq!(p[4], jne(2, 2, 4));
        assert_eq!(p[5], jne(4, 195, 3));
        assert_eq!(p[6], jne(5, 0, 2));
        assert_eq!((p[7], p[8]), (mov(0, 0), exit()));
        assert_eq!(p[11], jne(5, 2, 2));
        assert_eq!(&p[14..], &[mov(0, 1), exit()]);
        // Encoding: dst in the low nibble, src in the high one.
        assert_eq!(ldx_w(2, 1, 0).regs, 0x12);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn an_empty_list_allows_everything() {
        assert_eq!(program(&[])[4..], [mov(0, 1), exit()]);
    }
}
