//! GCE's list calls: `filter` (literal `=`/`!=` and RE2 `eq`/`ne` clauses, parenthesised
//! groups joined by `AND`), `orderBy` (`name`, `creationTimestamp desc`), `maxResults` and
//! `pageToken`, and the list response around a page.

use super::*;

/// One step of a `filter`: a field path and how its value must compare.
#[derive(Debug)]
enum Clause {
    /// `field = value`, `field != value` (literal; `*` matches anything).
    Equals(Vec<String>, String, bool),
    /// `field eq re`, `field ne re` (RE2, matched against the whole value).
    Regex(Vec<String>, regex::Regex, bool),
}

fn parse_filter(filter: &str) -> Result<Vec<Clause>, ApiError> {
    let bad = || {
        invalid(format!(
            "Invalid value for field 'filter': '{filter}'. Invalid list filter expression."
        ))
    };
    let f = filter.trim();
    if f.is_empty() {
        return Ok(Vec::new());
    }
    let unquote = |s: &str| s.trim().trim_matches('"').to_owned();
    let path = |s: &str| -> Vec<String> { s.trim().split('.').map(str::to_owned).collect() };
    // Clauses: top-level parenthesised groups (`(a eq x) (b = "y")`), else ` AND `-joined.
    let mut parts: Vec<String> = Vec::new();
    if f.starts_with('(') {
        let mut depth = 0usize;
        let mut current = String::new();
        for c in f.chars() {
            match c {
                '(' if depth == 0 => depth = 1,
                '(' => {
                    depth += 1;
                    current.push(c);
                }
                ')' if depth == 1 => {
                    depth = 0;
                    parts.push(std::mem::take(&mut current));
                }
                ')' if depth > 1 => {
                    depth -= 1;
                    current.push(c);
                }
                ')' => return Err(bad()),
                c if depth > 0 => current.push(c),
                c if c.is_whitespace() => {}
                _ => {
                    // Only `AND` may stand between groups.
                    current.push(c);
                    if current == "AND" {
                        current.clear();
                    } else if !"AND".starts_with(current.as_str()) {
                        return Err(bad());
                    }
                }
            }
        }
        if depth != 0 || !current.is_empty() {
            return Err(bad());
        }
    } else {
        parts = f.split(" AND ").map(str::to_owned).collect();
    }
    let mut clauses = Vec::new();
    for part in parts {
        // The regular-expression form: `name eq (a|b)`, `name ne x.*`.
        let regex_form = [(" eq ", false), (" ne ", true)]
            .into_iter()
            .find_map(|(op, negate)| part.split_once(op).map(|(a, b)| (a, b, negate)));
        if let Some((field, re, negate)) = regex_form {
            let re = regex::Regex::new(&format!("^(?:{})$", unquote(re))).map_err(|_| bad())?;
            clauses.push(Clause::Regex(path(field), re, negate));
            continue;
        }
        let (field, value, negate) = if let Some((a, b)) = part.split_once("!=") {
            (a, b, true)
        } else if let Some((a, b)) = part.split_once('=') {
            (a, b, false)
        } else {
            return Err(bad());
        };
        if field.trim().is_empty() {
            return Err(bad());
        }
        clauses.push(Clause::Equals(path(field), unquote(value), negate));
    }
    Ok(clauses)
}

fn field_text(view: &Value, path: &[String]) -> Option<String> {
    let mut v = view;
    for key in path {
        v = v.get(key)?;
    }
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => other.to_string(),
    })
}

fn matches(view: &Value, clauses: &[Clause]) -> bool {
    clauses.iter().all(|c| match c {
        Clause::Equals(path, want, negate) => {
            let got = field_text(view, path);
            let eq = want == "*" && got.is_some() || got.as_deref() == Some(want.as_str());
            eq != *negate
        }
        Clause::Regex(path, re, negate) => {
            let got = field_text(view, path).unwrap_or_default();
            re.is_match(&got) != *negate
        }
    })
}

/// Filters, orders and pages `items`; returns the page and the next page token.
pub(crate) fn page(
    mut items: Vec<Value>,
    params: &Params,
) -> Result<(Vec<Value>, Option<String>), ApiError> {
    let clauses = parse_filter(params.get("filter").unwrap_or_default())?;
    items.retain(|v| matches(v, &clauses));
    match params.get("orderBy").map(str::trim) {
        None | Some("") | Some("name") => items.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str())),
        Some("creationTimestamp desc") => items.sort_by(|a, b| {
            b["creationTimestamp"]
                .as_str()
                .cmp(&a["creationTimestamp"].as_str())
                .then_with(|| a["name"].as_str().cmp(&b["name"].as_str()))
        }),
        Some(other) => {
            return Err(invalid(format!(
                "Invalid value for field 'orderBy': '{other}'. Only 'name' and 'creationTimestamp desc' are supported."
            )))
        }
    }
    let max = match params.get("maxResults") {
        None => 500,
        Some(s) => match s.parse::<usize>() {
            Ok(n) if n <= 500 => n,
            _ => {
                return Err(invalid(format!(
                    "Invalid value for field 'maxResults': '{s}'. Must be less than or equal to 500"
                )))
            }
        },
    };
    let max = if max == 0 { 500 } else { max };
    let start = match params.get("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .map_err(|_| invalid(format!("Invalid value for field 'pageToken': '{t}'.")))?,
    };
    let total = items.len();
    let page: Vec<Value> = items.into_iter().skip(start).take(max).collect();
    let next = (start.saturating_add(max) < total).then(|| (start + max).to_string());
    Ok((page, next))
}

/// A list response: `{"kind": "compute#<x>List", "id", "items", "selfLink", "nextPageToken"}`.
pub(crate) fn list_reply(
    kind: &str,
    id: String,
    self_link: String,
    items: Vec<Value>,
    params: &Params,
) -> Result<Response, ApiError> {
    let (page, next) = page(items, params)?;
    let mut body = json!({"kind": kind, "id": id, "items": page, "selfLink": self_link});
    if let Some(next) = next {
        body["nextPageToken"] = json!(next);
    }
    Ok(reply(StatusCode::OK, body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(q: &[(&str, &str)]) -> Params {
        Params(
            q.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        )
    }

    fn names(items: &[Value]) -> Vec<&str> {
        items.iter().map(|v| v["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn filters_by_literal_and_regex() {
        let items = vec![
            json!({"name": "b", "status": "RUNNING", "labels": {"env": "x"}}),
            json!({"name": "a", "status": "TERMINATED"}),
            json!({"name": "c", "status": "RUNNING"}),
        ];
        let (p, _) = page(items.clone(), &params(&[("filter", "status = RUNNING")])).unwrap();
        assert_eq!(names(&p), ["b", "c"]);
        let (p, _) = page(items.clone(), &params(&[("filter", "name eq (a|c)")])).unwrap();
        assert_eq!(names(&p), ["a", "c"]);
        let (p, _) = page(items.clone(), &params(&[("filter", "name ne a")])).unwrap();
        assert_eq!(names(&p), ["b", "c"]);
        let (p, _) = page(
            items.clone(),
            &params(&[("filter", "(status = \"RUNNING\") (labels.env = \"x\")")]),
        )
        .unwrap();
        assert_eq!(names(&p), ["b"]);
        let (p, _) = page(
            items.clone(),
            &params(&[("filter", "(name eq (a|b)) (status eq RUN.*)")]),
        )
        .unwrap();
        assert_eq!(names(&p), ["b"]);
        assert!(page(items.clone(), &params(&[("filter", "(a = b) OR (c = d)")])).is_err());
        assert!(page(items, &params(&[("filter", "nonsense")])).is_err());
    }

    #[test]
    fn pages_with_tokens() {
        let items: Vec<Value> = (0..5).map(|i| json!({"name": format!("n{i}")})).collect();
        let (p, next) = page(items.clone(), &params(&[("maxResults", "2")])).unwrap();
        assert_eq!((names(&p), next.as_deref()), (vec!["n0", "n1"], Some("2")));
        let (p, next) = page(
            items.clone(),
            &params(&[("maxResults", "2"), ("pageToken", "4")]),
        )
        .unwrap();
        assert_eq!((names(&p), next), (vec!["n4"], None));
        assert!(page(items.clone(), &params(&[("maxResults", "501")])).is_err());
        assert!(page(items, &params(&[("orderBy", "zone")])).is_err());
    }
}
