//! Proptest strategies shared by the fuzz tests of every configuration format (feature
//! `fuzz`, for dev-dependencies only): arbitrary text, and a valid sample file mutated the
//! ways a hand-edited or corrupted file goes wrong (hostile values, deleted or repeated
//! spans, stray section headers, quotes and brackets, control characters).

use proptest::prelude::*;

/// Values that have broken parsers: empty, huge, negative, not-a-number, unterminated
/// quotes and brackets, control characters, YAML aliases and tags, INI headers.
pub const HOSTILE: &[&str] = &[
    "",
    "-1",
    "0",
    "1e400",
    "-1e400",
    "NaN",
    "inf",
    "18446744073709551616",
    "-9223372036854775809",
    "999999999999999999999h",
    "0x10",
    "1.5",
    "\"",
    "'",
    "\"unterminated",
    "\\",
    "\n",
    "\r\n",
    "\0",
    "\u{7f}",
    "é",
    "\u{feff}",
    "[",
    "]",
    "[Global]",
    "[a \"b\"]",
    "{",
    "}",
    "{a: [b, {c: d}]}",
    "- ",
    "? ",
    ": ",
    " = ",
    "=",
    "#",
    ";",
    "*a",
    "&a x",
    "!!binary AAAA",
    "!!python/object:os.system",
    "~",
    "null",
    "true",
    "yes",
    "%YAML 1.2",
    "---",
    "...",
    "\t",
    "    ",
];

/// Arbitrary text: random bytes (read as lossy UTF-8) or a mix of hostile tokens.
pub fn arbitrary_text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        proptest::collection::vec(proptest::sample::select(HOSTILE), 0..64)
            .prop_map(|t| t.concat()),
        "[ -~\n\t\\[\\]=:#;\"'{}-]{0,400}",
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    Insert(usize, &'static str),
    Delete(usize, usize),
    ReplaceValue(usize, &'static str),
    RepeatLine(usize),
    Truncate(usize),
}

fn boundary(s: &str, at: usize) -> usize {
    let mut at = at % (s.len() + 1);
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(mut s: String, m: &Mutation) -> String {
    match *m {
        Mutation::Insert(at, t) => {
            let at = boundary(&s, at);
            s.insert_str(at, t);
            s
        }
        Mutation::Delete(at, len) => {
            let a = boundary(&s, at);
            let b = boundary(&s, a.saturating_add(len).min(s.len()));
            s.replace_range(a..b.max(a), "");
            s
        }
        Mutation::ReplaceValue(line, t) => {
            let mut lines: Vec<String> = s.lines().map(str::to_string).collect();
            if lines.is_empty() {
                return s;
            }
            let i = line % lines.len();
            let l = &lines[i];
            if let Some(p) = l.find(['=', ':']) {
                lines[i] = format!("{} {t}", &l[..=p]);
            }
            lines.join("\n")
        }
        Mutation::RepeatLine(line) => {
            let mut lines: Vec<&str> = s.lines().collect();
            if lines.is_empty() {
                return s;
            }
            let i = line % lines.len();
            lines.insert(i, lines[i]);
            lines.join("\n")
        }
        Mutation::Truncate(at) => {
            let at = boundary(&s, at);
            s.truncate(at);
            s
        }
    }
}

/// `sample` with one to four mutations.
pub fn mutated(sample: &'static str) -> impl Strategy<Value = String> {
    let token = proptest::sample::select(HOSTILE);
    let mutation = prop_oneof![
        (any::<usize>(), token.clone()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        (any::<usize>(), 0usize..40).prop_map(|(a, l)| Mutation::Delete(a, l)),
        (any::<usize>(), token).prop_map(|(l, t)| Mutation::ReplaceValue(l, t)),
        any::<usize>().prop_map(Mutation::RepeatLine),
        any::<usize>().prop_map(Mutation::Truncate),
    ];
    proptest::collection::vec(mutation, 1..5)
        .prop_map(move |ms| ms.iter().fold(sample.to_string(), apply))
}

/// How many cases each config-format property runs (the closing note of issue #29 counts
/// them).
pub const CASES: u32 = 1000;

/// The property of every config parser: accepted, or refused with an error that names the
/// file (`origin`) and stays short; never a panic.
pub fn check_error<T, E: std::fmt::Display>(
    result: Result<T, E>,
    origin: &str,
) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        let msg = e.to_string();
        prop_assert!(msg.contains(origin), "the file is not named: {msg}");
        prop_assert!(msg.len() < 4096, "an error of {} bytes", msg.len());
    }
    Ok(())
}

/// The fuzz tests of a config format, as a module `config_fuzz` of the caller's tests:
/// `parse(text, origin)` on arbitrary text and on each sample mutated ([`CASES`] cases each),
/// checked by [`check_error`]. The caller's crate needs `proptest` as a dev-dependency.
///
/// `config_fuzz!(Config::parse, "fuzz.conf", mutated_ini => INI, mutated_yaml => YAML);`
#[macro_export]
macro_rules! config_fuzz {
    ($parse:expr, $origin:literal, $($name:ident => $sample:expr),* $(,)?) => {
        mod config_fuzz {
            #[allow(unused_imports)]
            use super::*;
            use proptest::prelude::*;

            fn check(text: &str) -> Result<(), TestCaseError> {
                $crate::fuzz::check_error($parse(text, $origin), $origin)
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases($crate::fuzz::CASES))]

                #[test]
                fn arbitrary_text_parses_or_names_the_file(text in $crate::fuzz::arbitrary_text()) {
                    check(&text)?;
                }

                $(
                    #[test]
                    fn $name(text in $crate::fuzz::mutated($sample)) {
                        check(&text)?;
                    }
                )*
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    #[test]
    fn mutations_change_the_sample_and_keep_it_text() {
        let sample = "[Global]\nregion = r1\nzone = z1\n";
        let mut runner = TestRunner::deterministic();
        let strategy = mutated("[Global]\nregion = r1\nzone = z1\n");
        let changed = (0..200)
            .filter(|_| {
                let v = strategy.new_tree(&mut runner).expect("tree").current();
                v != sample
            })
            .count();
        assert!(
            changed > 150,
            "only {changed} of 200 mutations changed the sample"
        );
    }
}
