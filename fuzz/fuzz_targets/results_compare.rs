//! `results_compare`: a `results.jsonl` may come from another machine, an
//! older build or a hand edit, and CI pipelines feed them to `vmbench
//! compare`. Any content must end in tables or a one-line error.
//!
//! The input is split at its first NUL byte into run A's file and run B's
//! (no NUL: both runs read the same text). Each is parsed as `vmbench
//! compare` parses it; when both parse, B is compared with A, each run's own
//! table is built as `vmbench suite` builds it, and every table is rendered
//! as text and Markdown. Checked: errors are one line; a run compared with
//! itself has a row for each of its figures and none differs significantly;
//! the significant count never exceeds the rows compared.
//!
//! ```text
//! cargo +nightly fuzz run results_compare fuzz/corpus/results_compare -- \
//!     -dict=fuzz/dict/results_compare.dict -max_total_time=600
//! ```

#![no_main]

use libfuzzer_sys::fuzz_target;
use vmresults::compare::{self, Incomparable};
use vmresults::samples::{self, Sample};

fn parse(bytes: &[u8]) -> Option<Vec<Sample>> {
    match samples::parse_samples(&String::from_utf8_lossy(bytes)) {
        Ok(s) => Some(s),
        Err(e) => {
            assert!(!e.contains('\n'), "parse error is not one line: {e:?}");
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (a, b) = match data.iter().position(|&c| c == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, data),
    };
    let (Some(a), Some(b)) = (parse(a), parse(b)) else {
        return;
    };
    for run in [&a, &b] {
        let tables = compare::suite_tables(run);
        let _ = compare::render_text(&tables);
        let _ = compare::render_markdown(&tables);
        // Names come from the file: none may open an element on the page.
        let html = compare::render_html(&tables);
        assert!(!html.contains("<script"), "unescaped name in {html}");
    }
    match compare::compare(&a, &b) {
        Ok(tables) => {
            let (significant, total) = compare::significant_rows(&tables);
            assert!(0 < total && significant <= total);
            let _ = compare::render_text(&tables);
            let _ = compare::render_markdown(&tables);
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
    // A run against itself: every figure with a mean is a row, and no
    // difference can be significant.
    match compare::compare(&a, &a) {
        Ok(tables) => assert_eq!(compare::significant_rows(&tables).0, 0),
        Err(Incomparable::NoMean(_)) => {}
        Err(Incomparable::NoCommonFigure) => panic!("a run has no figure in common with itself"),
    }
});
