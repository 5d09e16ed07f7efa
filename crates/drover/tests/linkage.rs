//! Every command is a new process of the `drover` binary, so each shared library it needs is
//! loaded, relocated and initialised on every `sbatch` and `squeue`. libgcc_s cost 0.1 ms of
//! that (its constructor's `cpuid` traps to the hypervisor on a virtual machine) and libm
//! came back through one call of `f64::log10`: the binary must need the C library alone.
//!
//! The list is read from the binary's dynamic section (`DT_NEEDED`), by hand: twenty lines of
//! ELF are less than a dependency, and `ldd` would run the loader.

use std::path::Path;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn u16_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?)))
}
fn u32_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The `DT_NEEDED` names of a little-endian ELF64 file, in order; `None` when it is not one
/// or its dynamic section cannot be followed.
fn needed(b: &[u8]) -> Option<Vec<String>> {
    if b.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (phoff, phentsize, phnum) = (u64_at(b, 32)? as usize, u16_at(b, 54)? as usize, u16_at(b, 56)? as usize);
    // (type, offset, vaddr, filesz) of each program header.
    let headers: Vec<(u64, u64, u64, u64)> = (0..phnum)
        .map(|i| {
            let h = phoff + i * phentsize;
            Some((u32_at(b, h)?, u64_at(b, h + 8)?, u64_at(b, h + 16)?, u64_at(b, h + 32)?))
        })
        .collect::<Option<_>>()?;
    // A virtual address in a loaded segment, as an offset in the file.
    let file_offset = |addr: u64| {
        headers
            .iter()
            .find(|&&(kind, _, vaddr, size)| kind == 1 && (vaddr..vaddr + size).contains(&addr))
            .map(|&(_, offset, vaddr, _)| (offset + addr - vaddr) as usize)
    };
    let Some(&(_, dyn_off, _, dyn_size)) = headers.iter().find(|h| h.0 == 2) else {
        return Some(Vec::new()); // static: needs nothing
    };
    let entries: Vec<(u64, u64)> = (0..dyn_size as usize / 16)
        .map(|i| Some((u64_at(b, dyn_off as usize + i * 16)?, u64_at(b, dyn_off as usize + i * 16 + 8)?)))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .take_while(|&(tag, _)| tag != 0)
        .collect();
    let strtab = file_offset(entries.iter().find(|e| e.0 == 5)?.1)?;
    entries
        .iter()
        .filter(|e| e.0 == 1)
        .map(|&(_, name)| {
            let start = strtab + name as usize;
            let len = b.get(start..)?.iter().position(|&c| c == 0)?;
            Some(String::from_utf8_lossy(&b[start..start + len]).into_owned())
        })
        .collect()
}

#[test]
fn the_binary_loads_the_c_library_alone() {
    let bytes = std::fs::read(EXE).expect("the drover binary");
    let libs = needed(&bytes).expect("an ELF64 binary with a dynamic section");
    assert!(libs.iter().any(|l| l == "libc.so.6"), "the reader found no libc in {libs:?}");
    let others: Vec<&String> = libs.iter().filter(|l| *l != "libc.so.6" && !l.starts_with("ld-linux")).collect();
    assert!(
        others.is_empty(),
        "every command would load {others:?} besides the C library (all of {libs:?}): a call into libm \
         (f64's transcendental functions; use the libm crate) or the unwinder (build.rs links libgcc_eh)"
    );
}

/// The reader itself, on a program that needs libm: without this the test above could pass
/// by reading nothing.
#[test]
fn the_dynamic_section_reader_sees_a_needed_library() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path().join("m.c");
    std::fs::write(
        &src,
        "#include <math.h>\nint main(int argc, char **argv) { (void)argv; return (int)log10((double)argc); }\n",
    )
    .expect("the C source");
    let exe = dir.path().join("m");
    let built = Command::new("cc").arg(&src).arg("-o").arg(&exe).arg("-lm").status().expect("cc");
    assert!(built.success(), "cc failed");
    let libs = needed(&std::fs::read(&exe).expect("the program")).expect("an ELF64 program");
    assert!(libs.contains(&"libm.so.6".to_string()) && libs.contains(&"libc.so.6".to_string()), "{libs:?}");
    assert_eq!(needed(b"#!/bin/sh\n"), None);
    assert!(Path::new(EXE).is_file());
}
