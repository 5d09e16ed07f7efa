//! Slurm's `%[.][width]code` output formats (squeue/sinfo `-o`), shared by every command that
//! prints columns: literals are copied, `.` right-justifies, a width pads and truncates.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Lit(String),
    Field { code: char, width: Option<usize>, right: bool },
}

/// One `-O/--Format` token, `name[:[.][width][suffix]]`, as squeue's and sinfo's
/// `_parse_long_token` read it: (name, width, right-justified, suffix). 20 wide without a
/// `:`; no width or 0 after it prints the value whole.
pub fn long_token(token: &str) -> (&str, Option<usize>, bool, &str) {
    let Some((name, size)) = token.split_once(':') else { return (token, Some(20), false, "") };
    let (right, size) = match size.strip_prefix('.') {
        Some(s) => (true, s),
        None => (false, size),
    };
    let digits = size.chars().take_while(|c| c.is_ascii_digit()).count();
    (name, size[..digits].parse::<usize>().ok().filter(|w| *w > 0), right, &size[digits..])
}

/// A `-O` field and what follows it (its suffix) as format items.
pub fn push_long_field(out: &mut Vec<Item>, code: char, width: Option<usize>, right: bool, suffix: &str) {
    out.push(Item::Field { code, width, right });
    if !suffix.is_empty() {
        out.push(Item::Lit(suffix.to_string()));
    }
}

pub fn parse(fmt: &str) -> Vec<Item> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            lit.push(c);
            i += 1;
            continue;
        }
        if chars.get(i + 1) == Some(&'%') {
            // Slurm splits a format at its `%`s (strtok): `%%` is an empty piece, and prints
            // nothing.
            i += 2;
            continue;
        }
        let mut j = i + 1;
        let right = chars.get(j) == Some(&'.');
        if right {
            j += 1;
        }
        let start = j;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        let width = if j > start { chars[start..j].iter().collect::<String>().parse().ok() } else { None };
        match chars.get(j) {
            Some(&code) if code.is_ascii_alphabetic() => {
                if !lit.is_empty() {
                    out.push(Item::Lit(std::mem::take(&mut lit)));
                }
                out.push(Item::Field { code, width, right });
                i = j + 1;
            }
            _ => {
                lit.extend(&chars[i..j.min(chars.len())]);
                i = j;
            }
        }
    }
    if !lit.is_empty() {
        out.push(Item::Lit(lit));
    }
    out
}

/// Pads or truncates `v` to the field's width.
pub fn cell(v: &str, width: Option<usize>, right: bool) -> String {
    match width {
        None => v.to_string(),
        Some(w) => {
            let t: String = v.chars().take(w).collect();
            if right {
                format!("{t:>w$}")
            } else {
                format!("{t:<w$}")
            }
        }
    }
}

/// Appends `v` padded or truncated to the field's width (no allocation).
pub fn cell_into(out: &mut String, v: &str, width: Option<usize>, right: bool) {
    let Some(w) = width else {
        out.push_str(v);
        return;
    };
    let (cut, n) = if v.is_ascii() {
        let n = v.len().min(w);
        (&v[..n], n)
    } else {
        match v.char_indices().nth(w) {
            Some((i, _)) => (&v[..i], w),
            None => (v, v.chars().count()),
        }
    };
    if right {
        pad(out, w - n);
        out.push_str(cut);
    } else {
        out.push_str(cut);
        pad(out, w - n);
    }
}

fn pad(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// A value in a column of the accounting commands (sacct, sstat, sacctmgr): cut to `width`
/// (its last kept character replaced by `+` when `mark` is set, as Slurm marks a cut), then
/// justified.
pub fn slurm_cell(v: &str, width: usize, left: bool, mark: bool) -> String {
    let v: String = if v.chars().count() > width {
        let mut s: String = v.chars().take(if mark { width.saturating_sub(1) } else { width }).collect();
        if mark {
            s.push('+');
        }
        s
    } else {
        v.to_string()
    };
    if left {
        format!("{v:<width$}")
    } else {
        format!("{v:>width$}")
    }
}

/// Renders one line: `value(code)` gives the text of each field.
pub fn render(items: &[Item], mut value: impl FnMut(char) -> String) -> String {
    let mut s = String::with_capacity(96);
    render_fields_into(&mut s, items, &mut String::new(), &mut |buf, c| buf.push_str(&value(c)));
    s
}

/// Appends one rendered line to `out`; `value(buf, code)` appends each field's text to an
/// emptied scratch buffer (so a line costs no allocation once the buffers have grown).
pub fn render_fields_into(
    out: &mut String,
    items: &[Item],
    scratch: &mut String,
    value: &mut impl FnMut(&mut String, char),
) {
    render_fields_uncut_into(out, items, scratch, value, &|_, _| false);
}

/// As [`render_fields_into`], where `whole(code, value)` says a value is printed whole when
/// longer than its width (Slurm's commands do not cut times and node lists).
pub fn render_fields_uncut_into(
    out: &mut String,
    items: &[Item],
    scratch: &mut String,
    value: &mut impl FnMut(&mut String, char),
    whole: &dyn Fn(char, &str) -> bool,
) {
    for it in items {
        match it {
            Item::Lit(l) => out.push_str(l),
            Item::Field { code, width, right } => {
                scratch.clear();
                value(scratch, *code);
                let width = match width {
                    Some(w) if whole(*code, scratch) && scratch.chars().count() > *w => None,
                    w => *w,
                };
                cell_into(out, scratch, width, *right);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_tokens_read_as_slurm_reads_them() {
        assert_eq!(long_token("JobID"), ("JobID", Some(20), false, ""));
        assert_eq!(long_token("StateLong:.12"), ("StateLong", Some(12), true, ""));
        assert_eq!(long_token("JobID:x"), ("JobID", None, false, "x"), "no digits: whole, the rest a suffix");
        assert_eq!(long_token("CPUs:3|"), ("CPUs", Some(3), false, "|"));
        assert_eq!(long_token("Name:0"), ("Name", None, false, ""));
    }

    #[test]
    fn parses_widths_and_literals() {
        let items = parse("%.18i %9P|%j%%");
        assert_eq!(items[0], Item::Field { code: 'i', width: Some(18), right: true });
        assert_eq!(items[1], Item::Lit(" ".into()));
        assert_eq!(items[2], Item::Field { code: 'P', width: Some(9), right: false });
        assert_eq!(items[4], Item::Field { code: 'j', width: None, right: false });
        // `%%` prints nothing, as in Slurm (`job %i is %T%%` prints `job 12 is RUNNING`).
        assert_eq!(items.len(), 5);
        let line = render(&items, |c| match c {
            'i' => "42".into(),
            'P' => "averyverylongname".into(),
            _ => "x".into(),
        });
        assert_eq!(line, "                42 averyvery|x");
        let mut out = String::new();
        cell_into(&mut out, "héllo", Some(3), false);
        cell_into(&mut out, "ab", Some(4), true);
        assert_eq!(out, "hél  ab");
    }
}
