//! `drover sim --svg FILE`: mean wait by job size, one bar per policy, as a small standalone
//! SVG (no script, no external font or file), so that a comparison of policies on a site's
//! workload can go straight into a report or a web page.

use crate::JobRow;

/// Job-size classes by processors: (label, lowest, highest).
const CLASSES: [(&str, u32, u32); 6] =
    [("1", 1, 1), ("2–4", 2, 4), ("5–16", 5, 16), ("17–64", 17, 64), ("65–256", 65, 256), ("257+", 257, u32::MAX)];

/// Bar colours, one per policy in order (then repeated).
const COLOURS: [&str; 6] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"];

/// Mean wait (seconds) and job count per size class.
pub fn wait_by_size(rows: &[JobRow]) -> Vec<(f64, usize)> {
    CLASSES
        .iter()
        .map(|&(_, lo, hi)| {
            let w: Vec<i64> = rows.iter().filter(|r| r.procs >= lo && r.procs <= hi).map(JobRow::wait).collect();
            let n = w.len();
            (if n == 0 { 0.0 } else { w.iter().sum::<i64>() as f64 / n as f64 }, n)
        })
        .collect()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The chart: `title` on top, size classes along the bottom (those with no job left out),
/// mean wait on a log scale (seconds), one bar per `(policy, rows)`.
pub fn svg(title: &str, runs: &[(String, Vec<JobRow>)]) -> String {
    let stats: Vec<Vec<(f64, usize)>> = runs.iter().map(|(_, rows)| wait_by_size(rows)).collect();
    let classes: Vec<usize> = (0..CLASSES.len()).filter(|&c| stats.iter().any(|s| s[c].1 > 0)).collect();
    let (w, h, left, right, top, bottom) = (760.0, 380.0, 70.0, 20.0, 40.0, 70.0);
    let plot_h = h - top - bottom;
    // Log scale from 1 s to the next power of ten above the largest mean.
    let max = stats.iter().flatten().map(|s| s.0).fold(1.0f64, f64::max);
    // libm's log10, not f64::log10: std's calls the C library's, and that one call put
    // libm.so.6 in the NEEDED list of a binary that starts as every command (tests/linkage.rs).
    let decades = libm::log10(max).ceil().max(1.0);
    let y = |v: f64| top + plot_h * (1.0 - (libm::log10(v.max(1.0)) / decades));
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        w / 2.0,
        escape(title)
    );
    for d in 0..=decades as i32 {
        let yy = y(10f64.powi(d));
        out.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\n\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">1e{d} s</text>\n",
            w - right,
            left - 6.0,
            yy + 4.0
        ));
    }
    let group = (w - left - right) / classes.len().max(1) as f64;
    let bar = (group * 0.8) / runs.len().max(1) as f64;
    for (g, &c) in classes.iter().enumerate() {
        let x0 = left + g as f64 * group + group * 0.1;
        for (p, s) in stats.iter().enumerate() {
            let (mean, n) = s[c];
            let top_y = y(mean);
            out.push_str(&format!(
                "<rect x=\"{:.1}\" y=\"{top_y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {} jobs, mean wait {:.0} s</title></rect>\n",
                x0 + p as f64 * bar,
                (bar - 1.0).max(1.0),
                (top + plot_h - top_y).max(0.0),
                COLOURS[p % COLOURS.len()],
                escape(&runs[p].0),
                n,
                mean
            ));
        }
        out.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            x0 + group * 0.4,
            top + plot_h + 16.0,
            CLASSES[c].0
        ));
    }
    out.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">processors per job</text>\n",
        left + (w - left - right) / 2.0,
        top + plot_h + 34.0
    ));
    for (p, (name, _)) in runs.iter().enumerate() {
        let x = left + p as f64 * 130.0;
        out.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            h - 22.0,
            COLOURS[p % COLOURS.len()],
            x + 16.0,
            h - 12.0,
            escape(name)
        ));
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(procs: u32, wait: i64) -> JobRow {
        JobRow { id: 1, submit: 0, start: wait, end: wait + 10, procs, run: 10, nodes: "n1".into() }
    }

    #[test]
    fn means_by_size_class_and_a_bar_per_policy_and_class() {
        let a = vec![row(1, 10), row(1, 30), row(8, 1000)];
        assert_eq!(wait_by_size(&a)[0], (20.0, 2));
        assert_eq!(wait_by_size(&a)[2], (1000.0, 1));
        assert_eq!(wait_by_size(&a)[5], (0.0, 0));
        let b = vec![row(1, 5), row(8, 100)];
        let s = svg("KTH <test>", &[("easy".into(), a), ("default".into(), b)]);
        assert!(s.starts_with("<svg ") && s.ends_with("</svg>\n"));
        // Two classes with jobs, two policies: four bars (plus two legend swatches).
        assert_eq!(s.matches("<rect x=").count(), 6);
        assert!(s.contains("easy: 2 jobs, mean wait 20 s") && s.contains("default: 1 jobs, mean wait 100 s"));
        assert!(s.contains("KTH &lt;test&gt;"));
        assert!(s.contains(">1e3 s<"));
    }
}
