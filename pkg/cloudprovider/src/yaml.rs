//! A cheap look at YAML before it is parsed: documents nested deeper than [`MAX_YAML_DEPTH`]
//! are refused, naming the line, because the YAML parser's time grows with the square of the
//! nesting (a few hundred kilobytes of `[[[[...` or of ever-deeper indentation take minutes)
//! and no configuration we read needs more than a handful of levels.

/// The deepest nesting accepted (block indentation, compact `- - -` entries and flow
/// brackets together).
pub const MAX_YAML_DEPTH: usize = 64;

/// `Err("line N: ...")` when `text` nests deeper than [`MAX_YAML_DEPTH`]. Linear in the text;
/// it over-counts brackets inside block scalars, which only matters past the bound.
pub fn check_depth(text: &str) -> Result<(), String> {
    let too_deep = |n: usize| {
        Err(format!(
            "line {n}: nested deeper than {MAX_YAML_DEPTH} levels"
        ))
    };
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let body = line.trim_start_matches(' ');
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indent = line.len() - body.len();
        if flow == 0 {
            while indents.last().is_some_and(|&top| top > indent) {
                indents.pop();
            }
            if indents.last() != Some(&indent) {
                indents.push(indent);
            }
        }
        // Compact nested entries on one line: `- - - a`, `? - a`.
        let mut rest = body;
        let mut compact = 0;
        while let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("? ")) {
            compact += 1;
            rest = r.trim_start_matches(' ');
        }
        let mut deepest = flow;
        let mut quote: Option<char> = None;
        for c in rest.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '[' | '{') => {
                    flow += 1;
                    deepest = deepest.max(flow);
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        if indents.len() + compact + deepest > MAX_YAML_DEPTH {
            return too_deep(n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_documents_pass_deep_ones_are_refused_by_line() {
        check_depth("global:\n  user: a\n  list: [a, b, {c: d}]\nvcenter:\n  vc1:\n    server: x\n  - - a\n")
            .expect("ordinary");
        check_depth("a: '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['\n")
            .expect("brackets in quotes do not count");
        let flow = format!("a: {}\n", "[".repeat(100_000));
        assert_eq!(
            check_depth(&flow).expect_err("flow"),
            "line 1: nested deeper than 64 levels"
        );
        let block: String = (0..200)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        let err = check_depth(&block).expect_err("block");
        assert!(err.starts_with("line 65:"), "{err}");
        let dashes = format!("{}a\n", "- ".repeat(100));
        assert!(check_depth(&dashes).is_err());
        let split_flow: String = (0..100).map(|_| "[\n").collect();
        assert!(check_depth(&split_flow)
            .expect_err("across lines")
            .starts_with("line 64:"));
    }
}
