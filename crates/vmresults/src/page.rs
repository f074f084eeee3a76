//! The results page, `index.html`: a run's plots, then its comparison
//! tables, then the machine and command that produced them.
//!
//! The page is rendered by minijinja from `page.html.j2`, which includes
//! the same `table.html.j2` that [`crate::table::render_html`] renders, so
//! the page's tables are the table model's HTML rendering. The templates
//! are part of the crate (`include_str!`), have `.html` names and so are
//! HTML auto-escaped: a title, configuration or command line with `<`,
//! `&` or quotes shows as written and cannot add markup. The page is
//! self-contained (an inline style sheet, no scripts), and its links are
//! relative to its directory, so the directory can be moved or published
//! as a whole.
//!
//! ```
//! use vmresults::page::{self, Page};
//! use vmresults::Machine;
//! let machine = Machine {
//!     cpu_model: "Test CPU".into(),
//!     cpus: 4,
//!     nodes: 1,
//!     kernel: "6.1.0".into(),
//!     topology: "host(1x4)".into(),
//! };
//! let dir = std::env::temp_dir();
//! let html = page::render_page(&dir, &Page {
//!     title: "vmbench suite",
//!     machine: &machine,
//!     command: "vmbench suite --quick",
//!     summary: &["0 of 0 rows differ significantly".to_string()],
//!     tables: &[],
//!     plots: &[],
//! })
//! .unwrap();
//! assert!(html.contains("<h1>vmbench suite</h1>"));
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use minijinja::{context, Environment, Value};
use serde::Serialize;

use crate::output::{write_file, WriteError};
use crate::table::{html_views, WorkloadTable};
use crate::Machine;

/// The name of the table template (see [`crate::table::render_html`]).
pub(crate) const TABLE_TEMPLATE: &str = "table.html.j2";
/// The name of the page template.
const PAGE_TEMPLATE: &str = "page.html.j2";

/// What the page shows.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The page's title and heading.
    pub title: &'a str,
    /// The machine the run measured.
    pub machine: &'a Machine,
    /// The command line that produced the run.
    pub command: &'a str,
    /// Lines shown at the top, above the plots (for example how many rows
    /// differ significantly); may be empty.
    pub summary: &'a [String],
    /// The comparison tables, shown after the plots.
    pub tables: &'a [WorkloadTable],
    /// Plot files, one figure per file stem in order of first appearance
    /// (see [`render_page`]).
    pub plots: &'a [PathBuf],
}

/// Why the page was not written: one line, ready to print.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The template could not be rendered (a bug in the crate's template).
    #[error("rendering the page: {0}")]
    Render(#[from] minijinja::Error),
    /// `index.html` could not be written; the file there is unchanged.
    #[error("{0}")]
    Write(#[from] WriteError),
}

/// The crate's templates, compiled once per process.
fn templates() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        // Both are parsed here from text compiled into the crate; the
        // tests render them, so a syntax error cannot reach a user.
        env.add_template(TABLE_TEMPLATE, include_str!("table.html.j2"))
            .expect("table.html.j2 parses");
        env.add_template(PAGE_TEMPLATE, include_str!("page.html.j2"))
            .expect("page.html.j2 parses");
        env
    })
}

/// Renders the crate's template `name` with `context`.
pub(crate) fn render_template(name: &str, context: Value) -> Result<String, minijinja::Error> {
    templates().get_template(name)?.render(context)
}

/// The page as HTML, for `index.html` in `dir`: the title, the summary
/// lines, every plot, the tables, then the machine and the command.
///
/// Plot files are grouped by file stem (`brk1.svg` and `brk1.png` are one
/// figure), in order of first appearance. A figure shows its SVG where it
/// has one and links every format it has; besides the files listed, an
/// existing `<stem>.svg` or `<stem>.png` next to a listed file is linked
/// too, and a listed file that does not exist is left out, so the page
/// links only what is there (with the `png` feature off, no PNG). Paths
/// inside `dir` are written relative to it.
pub fn render_page(dir: &Path, page: &Page<'_>) -> Result<String, PageError> {
    let m = page.machine;
    let context = context! {
        title => page.title,
        summary => page.summary,
        plots => plot_views(dir, page.plots),
        tables => html_views(page.tables),
        machine => context! {
            cpu_model => &m.cpu_model,
            cpus => m.cpus,
            nodes => m.nodes,
            kernel => &m.kernel,
            topology => &m.topology,
        },
        command => page.command,
    };
    Ok(render_template(PAGE_TEMPLATE, context)?)
}

/// Writes [`render_page`]'s page to `<dir>/index.html` (atomically: a
/// page that cannot be written leaves the old one) and returns its path.
pub fn write_page(dir: &Path, page: &Page<'_>) -> Result<PathBuf, PageError> {
    let html = render_page(dir, page)?;
    let path = dir.join("index.html");
    write_file(&path, &html)?;
    Ok(path)
}

/// A link to one file of a figure.
#[derive(Debug, Serialize)]
struct LinkView {
    /// The percent-encoded relative path, marked safe for the template.
    href: Value,
    /// The file's extension, e.g. `png`.
    format: String,
}

/// One figure of the page.
#[derive(Debug, Serialize)]
struct PlotView {
    /// The file stem, e.g. `brk1`.
    name: String,
    /// The file shown: the SVG where there is one.
    src: Value,
    /// Every file of the figure.
    links: Vec<LinkView>,
}

/// The formats a plot may have beside the one listed.
const PLOT_FORMATS: [&str; 2] = ["svg", "png"];

/// The page's figures: `plots` grouped by file stem in order of first
/// appearance, with the existing files of each; see [`render_page`].
fn plot_views(dir: &Path, plots: &[PathBuf]) -> Vec<PlotView> {
    let mut groups: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for p in plots {
        let stem = p.file_stem().map_or_else(
            || p.to_string_lossy().into_owned(),
            |s| s.to_string_lossy().into_owned(),
        );
        let mut files = vec![p.clone()];
        if let Some(stem) = p.file_stem() {
            for ext in PLOT_FORMATS {
                let mut name = stem.to_os_string();
                name.push(".");
                name.push(ext);
                files.push(p.with_file_name(name));
            }
        }
        let i = match groups.iter().position(|(s, _)| *s == stem) {
            Some(i) => i,
            None => {
                groups.push((stem, Vec::new()));
                groups.len() - 1
            }
        };
        for f in files {
            if f.is_file() && !groups[i].1.contains(&f) {
                groups[i].1.push(f);
            }
        }
    }
    groups
        .into_iter()
        .filter(|(_, files)| !files.is_empty())
        .map(|(name, files)| {
            let rel = |f: &PathBuf| {
                f.strip_prefix(dir)
                    .unwrap_or(f)
                    .to_string_lossy()
                    .into_owned()
            };
            let shown = files
                .iter()
                .find(|f| f.extension().is_some_and(|e| e == "svg"))
                .unwrap_or(&files[0]);
            PlotView {
                name,
                src: Value::from_safe_string(url(&rel(shown))),
                links: files
                    .iter()
                    .map(|f| LinkView {
                        href: Value::from_safe_string(url(&rel(f))),
                        format: f
                            .extension()
                            .map_or_else(|| rel(f), |e| e.to_string_lossy().into_owned()),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// A relative path as a URL: bytes outside the unreserved set and `/` are
/// percent-encoded, so a file name with spaces still links, and what is
/// left (letters, digits, `-._~/%`) needs no HTML escaping in an attribute.
pub(crate) fn url(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::suite_tables;
    use crate::table::render_html;
    use crate::Sample;
    use std::fs;

    /// A fresh directory for one test.
    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("vmresults-page-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn machine() -> Machine {
        Machine {
            cpu_model: "Test CPU <x> & \"y\"".into(),
            cpus: 2,
            nodes: 1,
            kernel: "6.1.0".into(),
            topology: "host(1x2)".into(),
        }
    }

    /// Two configurations of `brk1`, five repetitions each, the second
    /// named to break out of HTML if it were not escaped.
    fn samples() -> Vec<Sample> {
        let mut out = Vec::new();
        for (config, centre) in [("maple", 1000.0), ("<script>alert('x')</script>", 400.0)] {
            for (rep, f) in [1.0, 1.02, 0.98, 1.01, 0.99].into_iter().enumerate() {
                out.push(Sample {
                    workload: "brk1".into(),
                    metric: "ops/s".into(),
                    unit: "ops/s".into(),
                    higher_is_better: true,
                    config: config.into(),
                    threads: 1,
                    rep,
                    value: centre * f,
                    cpu_wait: None,
                    transfer_ns: None,
                    transfer_after_ns: None,
                });
            }
        }
        out
    }

    #[test]
    fn the_page_opens_with_plots_then_tables_then_the_run() {
        let dir = temp_dir("order");
        for f in ["brk1.svg", "brk1.png", "tree.svg", "my plot.svg"] {
            fs::write(dir.join(f), "x").unwrap();
        }
        let tables = suite_tables(&samples());
        let summary = ["1 of 1 rows differ significantly & <b>".to_string()];
        // The suite lists SVGs only: the PNG beside one is found and
        // linked; a listed file that is not there is left out.
        let plots = [
            dir.join("brk1.svg"),
            dir.join("tree.svg"),
            dir.join("gone.png"),
            dir.join("my plot.svg"),
        ];
        let page = Page {
            title: "vmbench <suite>",
            machine: &machine(),
            command: "vmbench suite --configs 'a&b' \"<x>\"",
            summary: &summary,
            tables: &tables,
            plots: &plots,
        };
        let path = write_page(&dir, &page).unwrap();
        assert_eq!(path, dir.join("index.html"));
        let html = fs::read_to_string(&path).unwrap();
        assert_eq!(html, render_page(&dir, &page).unwrap());
        for needle in [
            "<title>vmbench &lt;suite&gt;</title>",
            "<h1>vmbench &lt;suite&gt;</h1>",
            "<li>1 of 1 rows differ significantly &amp; &lt;b&gt;</li>",
            "<img src=\"brk1.svg\" alt=\"brk1\">",
            "<figcaption>brk1 &middot; <a href=\"brk1.svg\">svg</a> &middot; \
             <a href=\"brk1.png\">png</a></figcaption>",
            "<figcaption>tree &middot; <a href=\"tree.svg\">svg</a></figcaption>",
            "<img src=\"my%20plot.svg\" alt=\"my plot\">",
            "Test CPU &lt;x&gt; &amp; &quot;y&quot; &middot; 2 CPUs &middot; 1 NUMA node &middot;",
            "kernel 6.1.0 &middot; topology host(1x2)",
            "<pre class=\"cmd\">vmbench suite --configs &#x27;a&amp;b&#x27; &quot;&lt;x&gt;&quot;</pre>",
            "&lt;script&gt;alert(&#x27;x&#x27;)&lt;&#x2f;script&gt;",
        ] {
            assert!(html.contains(needle), "page lacks {needle}:\n{html}");
        }
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("gone"), "{html}");
        // Plots and summary first, tables after them, the run last.
        let at = |needle: &str| {
            html.find(needle)
                .unwrap_or_else(|| panic!("no {needle}:\n{html}"))
        };
        assert!(at("<h1>") < at("<ul class=\"summary\">"));
        assert!(at("<ul class=\"summary\">") < at("<figure>"));
        assert!(at("<figure>") < at("<table>"));
        assert_eq!(html.matches("<figure>").count(), 3);
        assert!(html.rfind("</figure>").unwrap() < at("<h2>Tables</h2>"));
        assert!(at("</table>") < at("<h2>Run</h2>"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_page_shows_the_table_models_html() {
        let dir = temp_dir("tables");
        let tables = suite_tables(&samples());
        let page = Page {
            title: "t",
            machine: &machine(),
            command: "c",
            summary: &[],
            tables: &tables,
            plots: &[],
        };
        let html = render_page(&dir, &page).unwrap();
        let table = render_html(&tables);
        assert!(table.contains("<td class=\"r sig worse\">400 ±"), "{table}");
        assert!(html.contains(&table), "{html}\n---\n{table}");
        assert!(html.contains("<p>No plots.</p>"));
        assert!(!html.contains("class=\"summary\""));
        assert!(!html.contains("<script"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_page_that_cannot_be_written_is_a_one_line_error() {
        let dir = temp_dir("missing");
        let page = Page {
            title: "t",
            machine: &machine(),
            command: "c",
            summary: &[],
            tables: &[],
            plots: &[],
        };
        let e = write_page(&dir.join("missing"), &page).unwrap_err();
        assert!(matches!(e, PageError::Write(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("index.html") && !e.contains('\n'), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn paths_outside_the_directory_stay_as_given_and_are_encoded() {
        let dir = temp_dir("outside");
        let other = temp_dir("outside-other");
        fs::write(other.join("execl.png"), "x").unwrap();
        let views = plot_views(&dir, &[other.join("execl.png")]);
        assert_eq!(views.len(), 1);
        assert_eq!(
            views[0].src.to_string(),
            url(&other.join("execl.png").to_string_lossy())
        );
        assert_eq!(url("a b/c&d\"e.svg"), "a%20b/c%26d%22e.svg");
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&other).unwrap();
    }
}
