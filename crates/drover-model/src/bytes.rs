//! Bytes that are not UTF-8, carried losslessly in Drover's strings.
//!
//! Slurm keeps a job's name, arguments, environment, paths and script as the bytes the user
//! gave; Drover's messages and records hold strings. Every byte string enters as [`encode`]
//! makes it and leaves (to `execve`, `open`, `chdir`, a terminal) as [`decode`] gives it
//! back: valid UTF-8 passes through unchanged, and each byte of anything else becomes one
//! character of the last 256 code points (U+10FF00 + byte, private use, which no text uses).
//! A character of that range in the input is itself carried as its four bytes, so decoding
//! gives back exactly what was encoded, whatever it was.
//!
//! ```text
//! b"caf\xe9" ──encode──► "caf\u{10ffe9}" ──decode──► b"caf\xe9"
//! ```

const BASE: u32 = 0x10FF00;

fn escaped(b: u8) -> char {
    char::from_u32(BASE + u32::from(b)).expect("invariant: U+10FF00..=U+10FFFF are chars")
}

/// `bytes` as a string that [`decode`] turns back into the same bytes.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                push_valid(&mut out, s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                push_valid(&mut out, std::str::from_utf8(good).expect("invariant: valid up to here"));
                let n = e.error_len().unwrap_or(bad.len());
                for &b in &bad[..n] {
                    out.push(escaped(b));
                }
                rest = &bad[n..];
            }
        }
    }
    out
}

fn push_valid(out: &mut String, s: &str) {
    for c in s.chars() {
        if u32::from(c) >= BASE {
            let mut buf = [0u8; 4];
            for &b in c.encode_utf8(&mut buf).as_bytes() {
                out.push(escaped(b));
            }
        } else {
            out.push(c);
        }
    }
}

/// The bytes `s` carries (see [`encode`]).
pub fn decode(s: &str) -> Vec<u8> {
    if !s.chars().any(|c| u32::from(c) >= BASE) {
        return s.as_bytes().to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    let mut buf = [0u8; 4];
    for c in s.chars() {
        let v = u32::from(c);
        if v >= BASE {
            out.push((v - BASE) as u8);
        } else {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    out
}

/// Text about to be written out (a command's output, a file), with the bytes its strings
/// carry given back; text without any is returned as it is, after one fast scan for the lead
/// byte of the escape range.
pub fn decode_output(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !text.contains(&0xF4) {
        return std::borrow::Cow::Borrowed(text);
    }
    match std::str::from_utf8(text) {
        Ok(s) => std::borrow::Cow::Owned(decode(s)),
        Err(_) => std::borrow::Cow::Borrowed(text),
    }
}

/// How many bytes `s` carries (the length of [`decode`]'s result, without making it).
pub fn decoded_len(s: &str) -> usize {
    s.chars().map(|c| if u32::from(c) >= BASE { 1 } else { c.len_utf8() }).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_passes_through_and_raw_bytes_come_back() {
        assert_eq!(encode(b"plain job"), "plain job");
        assert_eq!(encode("café ☃".as_bytes()), "café ☃");
        let raw = b"caf\xe9 \xff\xfe end";
        let e = encode(raw);
        assert_ne!(e.as_bytes(), raw);
        assert_eq!(decode(&e), raw);
        assert_eq!(decoded_len(&e), raw.len());
        // The escape range itself, given as text, round-trips too.
        let tricky = "x\u{10ff41}y".as_bytes();
        assert_eq!(decode(&encode(tricky)), tricky);
        // A cut-off sequence at the end.
        assert_eq!(decode(&encode(b"ab\xe2\x98")), b"ab\xe2\x98");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_round_trip(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            proptest::prop_assert_eq!(decode(&encode(&b)), b.clone());
            proptest::prop_assert_eq!(decoded_len(&encode(&b)), b.len());
            if let Ok(s) = std::str::from_utf8(&b) {
                if !s.chars().any(|c| u32::from(c) >= BASE) {
                    proptest::prop_assert_eq!(encode(&b), s);
                }
            }
        }
    }
}
