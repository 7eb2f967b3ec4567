//! Instance-specific values out, stable text in.
//!
//! Two runs of the same scenario differ in UUIDs, IPs, ports, timestamps and which node got
//! which number; the diagram must not. Strings are rewritten with placeholders (`{uuid}`,
//! `{ip}`, `{port}`, `{time}`, `{id}`, `node-{n}`), JSON values are printed compactly with
//! sorted keys, and errors are reduced to their kind.

use serde_json::Value;

/// `s` with instance-specific values replaced by placeholders.
pub fn normalise(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < c.len() {
        // Every rule needs a token boundary on its left, except `-<digits>` which needs a
        // word on its left (`node-3`).
        let at_boundary = i == 0 || !c[i - 1].is_ascii_alphanumeric();
        if at_boundary {
            if let Some(n) = uuid_len(&c[i..]) {
                out.push_str("{uuid}");
                i += n;
                continue;
            }
            if let Some(n) = timestamp_len(&c[i..]) {
                out.push_str("{time}");
                i += n;
                continue;
            }
            // `1.2.3.4.5` from its second digit on is not an address either.
            let after_dot = i > 0 && c[i - 1] == '.';
            if !after_dot {
                if let Some((n, port)) = ipv4_len(&c[i..]) {
                    out.push_str(if port { "{ip}:{port}" } else { "{ip}" });
                    i += n;
                    continue;
                }
            }
            if let Some(n) = hex_id_len(&c[i..]) {
                out.push_str("{id}");
                i += n;
                continue;
            }
        }
        // Not when a UUID follows whose first group happens to be all digits
        // (`pvc-82345678-998c-...`): that is the UUID rule's, at the next character.
        if c[i] == '-'
            && i > 0
            && c[i - 1].is_ascii_alphanumeric()
            && uuid_len(&c[i + 1..]).is_none()
        {
            let digits = run(&c[i + 1..], |ch| ch.is_ascii_digit());
            if digits > 0
                && !c
                    .get(i + 1 + digits)
                    .is_some_and(|ch| ch.is_ascii_alphanumeric())
            {
                out.push_str("-{n}");
                i += 1 + digits;
                continue;
            }
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

fn run(c: &[char], pred: impl Fn(char) -> bool) -> usize {
    c.iter().take_while(|ch| pred(**ch)).count()
}

/// Whether the token ends at `c[n]` (end of text or a non-alphanumeric character).
fn ends_at(c: &[char], n: usize) -> bool {
    !c.get(n).is_some_and(|ch| ch.is_ascii_alphanumeric())
}

/// `8-4-4-4-12` hex digits.
fn uuid_len(c: &[char]) -> Option<usize> {
    let mut i = 0;
    for (k, group) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if k > 0 {
            if c.get(i) != Some(&'-') {
                return None;
            }
            i += 1;
        }
        if c.len() < i + group || !c[i..i + group].iter().all(|ch| ch.is_ascii_hexdigit()) {
            return None;
        }
        i += group;
    }
    ends_at(c, i).then_some(i)
}

/// RFC 3339: `YYYY-MM-DDT` followed by the time, fraction and offset.
fn timestamp_len(c: &[char]) -> Option<usize> {
    let shape = "dddd-dd-ddT";
    if c.len() < shape.len() {
        return None;
    }
    let matches = shape.chars().zip(c).all(|(want, got)| match want {
        'd' => got.is_ascii_digit(),
        other => *got == other,
    });
    if !matches {
        return None;
    }
    let mut rest = run(&c[shape.len()..], |ch| {
        ch.is_ascii_digit() || matches!(ch, ':' | '.' | '+' | '-' | 'Z')
    });
    // A full stop or colon after the time belongs to the sentence.
    while rest > 0 && matches!(c[shape.len() + rest - 1], ':' | '.' | '+' | '-') {
        rest -= 1;
    }
    Some(shape.len() + rest)
}

/// A dotted quad, optionally with `:port`; the bool says whether a port was taken.
fn ipv4_len(c: &[char]) -> Option<(usize, bool)> {
    let mut i = 0;
    for k in 0..4 {
        if k > 0 {
            if c.get(i) != Some(&'.') {
                return None;
            }
            i += 1;
        }
        let d = run(&c[i.min(c.len())..], |ch| ch.is_ascii_digit());
        if !(1..=3).contains(&d) {
            return None;
        }
        i += d;
    }
    // `1.2.3.4.5` is a version string, not an address.
    if c.get(i) == Some(&'.') && c.get(i + 1).is_some_and(|ch| ch.is_ascii_digit()) {
        return None;
    }
    if !ends_at(c, i) {
        return None;
    }
    if c.get(i) == Some(&':') {
        let p = run(&c[i + 1..], |ch| ch.is_ascii_digit());
        if p > 0 && ends_at(c, i + 1 + p) {
            return Some((i + 1 + p, true));
        }
    }
    Some((i, false))
}

/// A run of at least 16 hex digits with at least one decimal digit: generated IDs, load
/// balancer names made from UIDs.
fn hex_id_len(c: &[char]) -> Option<usize> {
    let n = run(c, |ch| ch.is_ascii_hexdigit());
    (n >= 16 && ends_at(c, n) && c[..n].iter().any(|ch| ch.is_ascii_digit())).then_some(n)
}

/// `v` printed compactly: strings bare, objects as `{key: value, ...}` with sorted keys,
/// arrays as `[...]`; with `normalised`, strings go through [`normalise`] and array
/// elements that print the same are shown once, sorted (`[node-{n}]` for three nodes).
pub fn compact(v: &Value, normalised: bool) -> String {
    match v {
        Value::String(s) if normalised => normalise(s),
        Value::String(s) => s.clone(),
        Value::Null | Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::Array(items) => {
            let mut parts: Vec<String> = items.iter().map(|i| compact(i, normalised)).collect();
            if normalised {
                parts.sort();
                parts.dedup();
            }
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}: {}", compact(&map[k], normalised)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// A call's arguments as they appear between the parentheses: string values bare, other
/// values as `key=value`, in key order (`instance_metadata(node-{n})`,
/// `initialize(client=false)`).
pub fn args_label(args: &Value) -> String {
    match args {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            keys.into_iter()
                .map(|k| match &map[k] {
                    Value::String(s) => normalise(s),
                    other => format!("{k}={}", compact(other, true)),
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
        Value::Null => String::new(),
        other => compact(other, true),
    }
}

/// Results longer than this are shortened.
const MAX_RESULT_CHARS: usize = 48;
/// An object's field names are shown when its values do not fit and the names fit this.
const MAX_FIELDS_CHARS: usize = 80;

/// What a successful call returned, short: the normalised value when it is small
/// (`true`, `m1.small`, `{failureDomain: nova, region: RegionOne}`), else an object's field
/// names (`{instanceType, nodeAddresses, ...}`), else `ok`.
pub fn result_label(result: Option<&Value>) -> String {
    match result {
        None | Some(Value::Null) => "ok".into(),
        Some(v) => {
            let s = compact(v, true);
            if s.chars().count() <= MAX_RESULT_CHARS {
                return s;
            }
            if let Value::Object(map) = v {
                let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
                keys.sort_unstable();
                let fields = format!("{{{}}}", keys.join(", "));
                if fields.chars().count() <= MAX_FIELDS_CHARS {
                    return fields;
                }
            }
            "ok".into()
        }
    }
}

/// The kind of a traced error: the provider contract's sentinel errors by name
/// (`InstanceNotFound`, ...), a cloud API failure as `<operation> failed (HTTP <status>)`,
/// anything else as its normalised text up to the first `: `.
pub fn error_kind(message: &str) -> String {
    match message {
        "instance not found" => return "InstanceNotFound".into(),
        "disk not found" => return "DiskNotFound".into(),
        "unimplemented" => return "NotImplemented".into(),
        "implemented elsewhere" => return "ImplementedElsewhere".into(),
        _ => {}
    }
    // `Error::Cloud`: "{provider}: {operation} failed[ (HTTP s)][ [request r]]: {message}"
    if let Some((_, rest)) = message.split_once(": ") {
        if let Some(at) = rest.find(" failed") {
            let operation = &rest[..at];
            let after = &rest[at + " failed".len()..];
            let status = after
                .strip_prefix(" (HTTP ")
                .and_then(|s| s.split_once(')'))
                .map(|(code, _)| format!(" (HTTP {code})"))
                .unwrap_or_default();
            return normalise(&format!("{operation} failed{status}"));
        }
    }
    let head = message.split(": ").next().unwrap_or(message);
    let mut kind = normalise(head);
    if kind.chars().count() > MAX_RESULT_CHARS {
        kind = kind.chars().take(MAX_RESULT_CHARS - 1).collect::<String>() + "…";
    }
    kind
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_replace_instance_specific_values() {
        let cases = [
            (
                "local:///5d32d0c5-6634-4083-8f42-86b960d6e5e7",
                "local:///{uuid}",
            ),
            ("/D9866FCD-C34B-4FB0-9660-E139A808AF59", "/{uuid}"),
            ("10.0.0.2", "{ip}"),
            (
                "http://127.0.0.1:34735/identity/v3",
                "http://{ip}:{port}/identity/v3",
            ),
            ("10.244.1.0/24", "{ip}/24"),
            ("node-3", "node-{n}"),
            ("node-12.example", "node-{n}.example"),
            ("2026-11-23T00:01:15.122169Z", "{time}"),
            ("at 2026-11-23T00:01:15+01:00.", "at {time}."),
            ("a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "{id}"),
            ("req-5d32d0c5-6634-4083-8f42-86b960d6e5e7", "req-{uuid}"),
            // A UUID whose first group is all digits is still a UUID, not `-{n}`.
            ("pvc-82345678-998c-4c67-aa0d-420125fb5a5e", "pvc-{uuid}"),
            (
                "kubernetes-dynamic-pvc-12345678-1234-1234-1234-123456789012",
                "kubernetes-dynamic-pvc-{uuid}",
            ),
            // left alone
            ("m1.small", "m1.small"),
            ("RegionOne", "RegionOne"),
            ("HTTP 503", "HTTP 503"),
            ("v1.2.3.4.5", "v1.2.3.4.5"),
            ("node-3a", "node-3a"),
            ("default/web", "default/web"),
            ("", ""),
            ("×", "×"),
        ];
        for (input, want) in cases {
            assert_eq!(normalise(input), want, "{input}");
        }
    }

    #[test]
    fn compact_sorts_keys_and_dedups_normalised_arrays() {
        let v = json!({"z": 1, "a": ["node-2", "node-1", "node-3"], "m": {"b": true, "a": null}});
        assert_eq!(
            compact(&v, true),
            "{a: [node-{n}], m: {a: null, b: true}, z: 1}"
        );
        assert_eq!(
            compact(&v, false),
            "{a: [node-2, node-1, node-3], m: {a: null, b: true}, z: 1}"
        );
    }

    #[test]
    fn labels_for_args_and_results() {
        assert_eq!(args_label(&json!({"node": "node-7"})), "node-{n}");
        assert_eq!(args_label(&json!({"client": false})), "client=false");
        assert_eq!(args_label(&json!({})), "");
        assert_eq!(
            args_label(
                &json!({"cluster": "kubernetes", "service": "default/web", "nodes": ["node-1", "node-2"]})
            ),
            "kubernetes, nodes=[node-{n}], default/web"
        );
        assert_eq!(result_label(None), "ok");
        assert_eq!(result_label(Some(&json!(true))), "true");
        assert_eq!(
            result_label(Some(
                &json!([{"address": "10.0.0.2", "type": "InternalIP"}])
            )),
            "[{address: {ip}, type: InternalIP}]"
        );
        let long = json!({"providerId": "local:///5d32d0c5-6634-4083-8f42-86b960d6e5e7", "instanceType": "m1.small", "zone": "nova"});
        assert_eq!(
            result_label(Some(&long)),
            "{instanceType, providerId, zone}"
        );
        let many: serde_json::Map<String, Value> = (0..20)
            .map(|i| {
                (
                    format!("field{i}"),
                    json!("a long value to push it over the limit"),
                )
            })
            .collect();
        assert_eq!(result_label(Some(&Value::Object(many))), "ok");
        let list = json!([
            "local:///5d32d0c5-6634-4083-8f42-86b960d6e5e7",
            "local:///first",
            "local:///second"
        ]);
        assert_eq!(result_label(Some(&list)), "ok");
    }

    #[test]
    fn error_kinds() {
        assert_eq!(error_kind("instance not found"), "InstanceNotFound");
        assert_eq!(error_kind("unimplemented"), "NotImplemented");
        assert_eq!(
            error_kind("local: list servers failed (HTTP 503) [request req-5d32d0c5-6634-4083-8f42-86b960d6e5e7]: try later"),
            "list servers failed (HTTP 503)"
        );
        assert_eq!(
            error_kind(
                "local: get server 5d32d0c5-6634-4083-8f42-86b960d6e5e7 failed: connection refused"
            ),
            "get server {uuid} failed"
        );
        assert_eq!(
            error_kind("something odd at 10.0.0.9: details"),
            "something odd at {ip}"
        );
    }
}
