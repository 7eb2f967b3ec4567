//! Two runs of `hack/compare-modes.sh` side by side: the differences between what the in-tree
//! and the external layout put into the cluster (`DIR/modes.diff`), each with the reason
//! `hack/lib/expected-mode-differences.txt` gives for it, or marked unexplained.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Serialize;

/// Errors of reading a comparison.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of the expected differences is not a regular expression.
    #[error("{}:{line}: not a regular expression: {message}", path.display())]
    Pattern {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What the regex crate said.
        message: String,
    },
}

/// The largest diff, view or expectations file read.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// An expected difference: the pattern a changed line must match whole, and why.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The line as written.
    pub pattern: String,
    regex: Regex,
    /// The comment paragraph above it.
    pub explanation: String,
}

/// A changed line of the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// The line, with its `-`/`+`.
    pub line: String,
    /// `in-tree` (`-`) or `external` (`+`).
    pub side: &'static str,
    /// Why upstream has it too, when it is expected.
    pub explanation: Option<String>,
    /// The pattern that matched.
    pub pattern: Option<String>,
}

/// Reads the expectations: one regular expression a line, each explained by the comment
/// paragraph above it (paragraphs separated by a bare `#`).
pub fn parse_expected(text: &str, path: &Path) -> Result<Vec<Expected>, Error> {
    let mut out = Vec::new();
    let mut paragraph: Vec<String> = Vec::new();
    let mut after_pattern = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            if after_pattern || comment.is_empty() {
                paragraph.clear();
                after_pattern = false;
            }
            if !comment.is_empty() {
                paragraph.push(comment.to_string());
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let regex = Regex::new(&format!("^(?:{line})$")).map_err(|e| Error::Pattern {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        out.push(Expected {
            pattern: line.to_string(),
            regex,
            explanation: paragraph.join(" "),
        });
        after_pattern = true;
    }
    Ok(out)
}

/// The changed lines of a `diff -u` output, each explained when an expectation matches.
pub fn differences(diff: &str, expected: &[Expected]) -> Vec<Difference> {
    diff.lines()
        .filter(|l| !l.starts_with("+++") && !l.starts_with("---"))
        .filter_map(|l| {
            let side = match l.as_bytes().first() {
                Some(b'-') => "in-tree",
                Some(b'+') => "external",
                _ => return None,
            };
            let hit = expected.iter().find(|e| e.regex.is_match(l));
            Some(Difference {
                line: l.to_string(),
                side,
                explanation: hit.map(|e| e.explanation.clone()),
                pattern: hit.map(|e| e.pattern.clone()),
            })
        })
        .collect()
}

/// Reads a text file of at most [`MAX_FILE_BYTES`].
pub fn read(path: &Path) -> Result<String, Error> {
    hypercloud_cloudprovider::input::read_limited_text(path, MAX_FILE_BYTES).map_err(|source| {
        Error::Read {
            path: path.to_path_buf(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECTED: &str = "# Header of the file.\n# More header.\n#\n# The Hostname address.\n# Kubelet adds it.\n-  address Hostname node-[0-9]+\n#\n# Pods waiting.\n\\+  [0-9]+ were Pending\n";

    #[test]
    fn each_difference_gets_the_paragraph_above_its_pattern() {
        let expected = parse_expected(EXPECTED, "x".as_ref()).expect("parse");
        assert_eq!(expected.len(), 2);
        assert_eq!(
            expected[0].explanation,
            "The Hostname address. Kubelet adds it."
        );
        assert_eq!(expected[1].explanation, "Pods waiting.");
        let diff = "--- in-tree\n+++ external\n@@ -1,3 +1,3 @@\n node node-1\n-  address Hostname node-1\n+  3 were Pending\n+  label x=y\n";
        let d = differences(diff, &expected);
        assert_eq!(d.len(), 3);
        assert_eq!(
            (d[0].side, d[0].explanation.as_deref()),
            ("in-tree", Some("The Hostname address. Kubelet adds it."))
        );
        assert_eq!(
            (d[1].side, d[1].explanation.as_deref()),
            ("external", Some("Pods waiting."))
        );
        assert_eq!(
            d[2].explanation, None,
            "a line no pattern matches whole is unexplained"
        );
    }

    #[test]
    fn a_bad_pattern_is_named_by_line() {
        let err = parse_expected("# why\n(unclosed\n", "e.txt".as_ref()).expect_err("bad regex");
        assert!(
            err.to_string()
                .starts_with("e.txt:2: not a regular expression"),
            "{err}"
        );
    }

    #[test]
    fn the_committed_expectations_parse_and_explain_every_pattern() {
        let path = hypercloud_testenv::repo_root().join("hack/lib/expected-mode-differences.txt");
        let text = read(&path).expect("read");
        let expected = parse_expected(&text, &path).expect("parse");
        assert!(expected.len() >= 3);
        for e in &expected {
            assert!(
                !e.explanation.is_empty(),
                "no explanation above {}",
                e.pattern
            );
        }
    }
}
