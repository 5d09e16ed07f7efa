//! Links `drover` as a non-PIE executable: every command is a new process of this binary, and
//! without position-independent relocations to apply the loader starts it ~0.3 ms sooner
//! (`perf stat drover version`: 1.04 → 0.72 ms CPU), which is a third of `sbatch`'s own cost.
//!
//! Release links also lay out the functions the commands run side by side, in the order of
//! `link-order.txt` (`cargo xtask link-order` writes it). A command's start is dominated by
//! page faults on the text, each of which maps the 64 KB around it; together, `sbatch` touches
//! 20 such windows instead of 80 (225 → 166 faults, 2.26 → 1.83 ms CPU). Only on
//! x86_64-unknown-linux-gnu, where rustc links with its own lld (`--symbol-ordering-file` is an
//! lld option): rustc 1.90 or later, and no linker of the user's choosing in the flags.
//! `DROVER_LINK_ORDER=0` turns it off.
//!
//! On linux-gnu the unwinder comes from libgcc_eh.a, linked in, rather than libgcc_s.so:
//! loading libgcc_s cost every command 0.1–0.14 ms, most of it its constructor
//! (`__cpu_indicator_init`), whose `cpuid` instructions trap to the hypervisor on a virtual
//! machine (8 µs each measured here; `perf stat` of an empty C program: 0.92 → 1.03 ms with
//! libgcc_s loaded). Whole-archive, so that its members are there before std's references to
//! them are seen; `--as-needed` then drops libgcc_s. Panics still unwind and are caught (the
//! daemons rely on it), with backtraces. `tests/linkage.rs` checks that the binary needs the C
//! library alone.
fn main() {
    println!("cargo:rustc-link-arg-bin=drover=-no-pie");
    if std::env::var("TARGET").is_ok_and(|t| t.ends_with("-linux-gnu")) {
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    }
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=DROVER_LINK_ORDER");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let lld = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu") && rustc_links_with_lld();
    let wanted = std::env::var("DROVER_LINK_ORDER").map_or(true, |v| v != "0");
    let file = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("link-order.txt");
    if release && lld && wanted && file.is_file() {
        println!("cargo:rustc-link-arg-bin=drover=-Wl,--symbol-ordering-file={}", file.display());
        println!("cargo:rustc-link-arg-bin=drover=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether rustc links this target with its own lld: 1.90 and later do unless the flags name
/// another linker.
fn rustc_links_with_lld() -> bool {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags.contains("linker") || std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some() {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("-V").output() else { return false };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let v = String::from_utf8_lossy(&out.stdout);
    let mut parts = v.split_whitespace().nth(1).unwrap_or("").split('.');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (1, 90)
}
