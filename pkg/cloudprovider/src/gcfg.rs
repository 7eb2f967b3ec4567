//! The INI dialect of upstream cloud configs (`gopkg.in/gcfg.v1`, which the in-tree providers
//! read their `--cloud-config` with), as a list of entries a provider then interprets.
//!
//! As gcfg: section and key names are case-insensitive (returned lower-cased), a section may
//! carry a quoted subsection name (`[ServiceOverride "1"]`, case kept), `;` and `#` start
//! comments outside double quotes, values may be double-quoted with `\"`, `\\`, `\n`, `\t`
//! escapes, and a key without `=` is a boolean `true` (its value is `None`). Malformed lines
//! are errors naming the line; what the keys mean is up to the provider.

/// One `key = value` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line number, for messages.
    pub line: usize,
    /// Section name, lower-cased.
    pub section: String,
    /// The quoted subsection name, as written (`[ServiceOverride "1"]` → `1`).
    pub subsection: Option<String>,
    /// Key name as written (for messages).
    pub key: String,
    /// The value, unquoted; `None` for a bare key.
    pub value: Option<String>,
}

impl Entry {
    /// The key, lower-cased, for matching.
    pub fn key_lower(&self) -> String {
        self.key.to_ascii_lowercase()
    }

    /// `[Section "sub"]` as a reader would write it, for messages.
    pub fn section_title(&self, written: &str) -> String {
        match &self.subsection {
            Some(s) => format!("[{written} {s:?}]"),
            None => format!("[{written}]"),
        }
    }
}

/// A section header seen in the file (including empty sections), for unknown-section warnings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// 1-based line number.
    pub line: usize,
    /// Name as written.
    pub name: String,
    /// Quoted subsection name.
    pub subsection: Option<String>,
}

/// A parsed file: every section header and every entry, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct File {
    /// Section headers.
    pub sections: Vec<Section>,
    /// Entries.
    pub entries: Vec<Entry>,
}

/// Parses gcfg text; the error is `line N: what is wrong`.
pub fn parse(text: &str) -> Result<File, String> {
    let mut file = File::default();
    let mut current: Option<(String, Option<String>)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |m: String| format!("line {line}: {m}");
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            let (name, sub) = header(rest).map_err(err)?;
            file.sections.push(Section {
                line,
                name: name.clone(),
                subsection: sub.clone(),
            });
            current = Some((name.to_ascii_lowercase(), sub));
            continue;
        }
        let Some((section, subsection)) = current.clone() else {
            return Err(err(format!("{trimmed:?} is outside any [section]")));
        };
        let (key, value) = match trimmed.split_once('=') {
            Some((k, v)) => (k.trim(), Some(unquote(v.trim()).map_err(err)?)),
            None => (trimmed, None),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(err(format!("expected `key = value`, got {trimmed:?}")));
        }
        file.entries.push(Entry {
            line,
            section,
            subsection,
            key: key.to_owned(),
            value,
        });
    }
    Ok(file)
}

/// `Name]` or `Name "sub"]` (after the `[`).
fn header(rest: &str) -> Result<(String, Option<String>), String> {
    let rest = rest.trim_start();
    let name_end = rest
        .find(|c: char| c.is_whitespace() || c == ']')
        .ok_or_else(|| format!("unclosed section header [{rest}"))?;
    let name = &rest[..name_end];
    if name.is_empty() {
        return Err("empty section name".into());
    }
    let mut after = rest[name_end..].trim_start();
    let mut sub = None;
    if let Some(q) = after.strip_prefix('"') {
        let mut s = String::new();
        let mut chars = q.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, c @ ('"' | '\\'))) => s.push(c),
                    _ => return Err("bad escape in subsection name".into()),
                },
                '"' => {
                    end = Some(i + 1);
                    break;
                }
                c => s.push(c),
            }
        }
        let end = end.ok_or("unterminated subsection name")?;
        sub = Some(s);
        after = q[end..].trim_start();
    }
    let tail = after
        .strip_prefix(']')
        .ok_or_else(|| format!("unclosed section header [{rest}"))?
        .trim();
    if !(tail.is_empty() || tail.starts_with(';') || tail.starts_with('#')) {
        return Err(format!("text after section header: {tail:?}"));
    }
    Ok((name.to_owned(), sub))
}

/// A value as gcfg reads it: double quotes group (with `\"`, `\\`, `\n`, `\t` escapes),
/// `;` or `#` outside quotes starts a comment, trailing blanks go.
pub fn unquote(v: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = v.chars();
    let mut in_quotes = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => in_quotes = !in_quotes,
            '\\' if in_quotes => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c @ ('"' | '\\')) => out.push(c),
                Some(c) => return Err(format!("unknown escape \\{c}")),
                None => return Err("value ends in a backslash".into()),
            },
            ';' | '#' if !in_quotes => break,
            c => out.push(c),
        }
    }
    if in_quotes {
        return Err("unterminated quoted value".into());
    }
    Ok(out.trim_end().to_owned())
}

/// gcfg booleans: a bare key, `true`/`yes`/`on`/`1`, `false`/`no`/`off`/`0`.
pub fn parse_bool(value: Option<&str>) -> Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("true") | Some("yes") | Some("on") | Some("1") => Ok(true),
        Some("false") | Some("no") | Some("off") | Some("0") => Ok(false),
        Some(other) => Err(format!("{other:?} is not a boolean (true/false)")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sections_subsections_keys_and_comments() {
        let f = parse(
            "; comment\n[Global]\nZone = us-east-1a ; trailing\nDisableSecurityGroupIngress\n\
             [ServiceOverride \"1\"]\nURL = \"http://127.0.0.1:5000/#x\"\n",
        )
        .unwrap();
        assert_eq!(f.sections.len(), 2);
        assert_eq!(f.sections[1].subsection.as_deref(), Some("1"));
        assert_eq!(f.entries[0].section, "global");
        assert_eq!(f.entries[0].value.as_deref(), Some("us-east-1a"));
        assert_eq!(f.entries[1].value, None);
        assert_eq!(f.entries[2].section, "serviceoverride");
        assert_eq!(f.entries[2].subsection.as_deref(), Some("1"));
        assert_eq!(
            f.entries[2].value.as_deref(),
            Some("http://127.0.0.1:5000/#x")
        );
    }

    #[test]
    fn malformed_lines_name_the_line() {
        for (text, want) in [
            (
                "Zone = a\n",
                "line 1: \"Zone = a\" is outside any [section]",
            ),
            ("[Global\n", "line 1: unclosed section header"),
            (
                "[Global]\nx = \"open\n",
                "line 2: unterminated quoted value",
            ),
            ("[S \"1]\n", "line 1: unterminated subsection name"),
            ("[Global] x\n", "line 1: text after section header"),
            ("[Global]\na b = c\n", "line 2: expected `key = value`"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn booleans_as_gcfg() {
        assert!(parse_bool(None).unwrap());
        assert!(!parse_bool(Some("False")).unwrap());
        assert!(parse_bool(Some("maybe")).is_err());
    }

    mod props {
        use super::*;
        use crate::fuzz::{arbitrary_text, mutated, CASES};
        use proptest::prelude::*;

        const SAMPLE: &str = "; comment\n[Global]\nZone = us-east-1a\nname = \"quoted \\\"x\\\"\"\nflag\n\n[ServiceOverride \"1\"]\nService = ec2\nURL = http://127.0.0.1:5000/\n";

        /// The reader's only errors name the line (`line N: ...`).
        fn check(text: &str) -> Result<(), TestCaseError> {
            if let Err(e) = parse(text) {
                prop_assert!(e.starts_with("line "), "{text:?}: {e}");
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(CASES))]

            #[test]
            fn arbitrary_text_parses_or_names_the_line(text in arbitrary_text()) {
                check(&text)?;
            }

            #[test]
            fn mutated_files_parse_or_name_the_line(text in mutated(SAMPLE)) {
                check(&text)?;
            }
        }
    }
}
