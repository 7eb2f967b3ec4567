//! XML text for documents written by hand (the local cloud's oVirt dialect, the trace
//! renderer's SVG): one escaper, so every writer makes the same well-formed text.

/// `s` as XML text or attribute value: `&`, `<`, `>`, `"` and `'` escaped, and control
/// characters other than tab (which XML 1.0 does not allow) written as spaces.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_and_control_characters() {
        assert_eq!(super::escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(super::escape("x\ny\tz"), "x y\tz");
    }
}
