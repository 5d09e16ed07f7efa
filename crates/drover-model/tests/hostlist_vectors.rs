//! The 93 hostlist expressions with real Slurm 22.05.8's answers (`testdata/hostlist/`).

use drover_model::hostlist::Hostlist;
use serde_json::Value;
use std::path::PathBuf;

/// The repository's `testdata/`.
fn testdata() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata"))
}

fn check_names(expected: &Value, got: &[String]) -> Result<(), String> {
    match expected {
        Value::Array(a) => {
            let want: Vec<&str> = a.iter().map(|v| v.as_str().unwrap()).collect();
            if want != got {
                return Err(format!("names {got:?} != {want:?}"));
            }
        }
        Value::Object(o) => {
            let count = o["count"].as_u64().unwrap() as usize;
            if got.len() != count {
                return Err(format!("count {} != {count}", got.len()));
            }
            let first: Vec<&str> = o["first"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            let last: Vec<&str> = o["last"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            if got[..first.len()] != first[..] || got[got.len() - last.len()..] != last[..] {
                return Err("first/last differ".into());
            }
        }
        _ => return Err("bad vector".into()),
    }
    Ok(())
}

#[test]
fn all_slurm_hostlist_vectors_pass() {
    let path = testdata().join("hostlist/slurm-22.05.8-scontrol-hostlist-vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    assert_eq!(vectors.len(), 93);
    let mut failures = Vec::new();
    for v in vectors {
        let input = v["input"].as_str().unwrap();
        let res = Hostlist::parse(input);
        let outcome = match (&res, v["hostlist_rc"].as_i64().unwrap()) {
            (Ok(hl), 0) => check_names(&v["hostnames"], &hl.names())
                .and_then(|_| {
                    let want = v["hostlist"].as_str().unwrap();
                    if hl.ranged() != want {
                        return Err(format!("ranged {:?} != {want:?}", hl.ranged()));
                    }
                    Ok(())
                })
                .and_then(|_| {
                    let want = v["hostlistsorted"].as_str().unwrap();
                    let got = hl.sorted().ranged();
                    if got != want {
                        return Err(format!("sorted {got:?} != {want:?}"));
                    }
                    Ok(())
                }),
            (Err(e), 1) => {
                let got = e.slurm_lines("scontrol").join("\n");
                let want = v["hostlist_stderr"].as_str().unwrap();
                if got == want {
                    Ok(())
                } else {
                    Err(format!("stderr {got:?} != {want:?}"))
                }
            }
            (Ok(hl), _) => Err(format!("accepted as {:?}, Slurm refuses", hl.ranged())),
            (Err(e), _) => Err(format!("refused ({e}), Slurm accepts")),
        };
        if let Err(msg) = outcome {
            failures.push(format!("{input:?}: {}", msg.chars().take(300).collect::<String>()));
        }
    }
    assert!(failures.is_empty(), "{} of 93 vectors fail:\n{}", failures.len(), failures.join("\n"));
}
