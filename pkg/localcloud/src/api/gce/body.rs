//! What GCE's request bodies must be: resource names, JSON objects with known fields, typed
//! optional fields, metadata items and fingerprints. Each check answers GCE's 400 (412 for a
//! stale fingerprint) naming the field, before anything changes.

use super::*;

/// The `name` of an insert's body: required, and checked by [`check_name`].
pub(crate) fn resource_name(b: &Map<String, Value>) -> Result<String, ApiError> {
    let name = b
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| required("resource.name"))?;
    check_name(name)?;
    Ok(name.to_owned())
}

/// Checks a resource name against GCE's rule (RFC 1035 label, up to 63 characters).
pub(crate) fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'"
        )))
    }
}

/// The JSON object a request body (or one of its fields, `field`) must be: anything else
/// (`null`, a number, a string, a list) is GCE's 400 before anything changes.
pub(crate) fn object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, ApiError> {
    v.as_object().ok_or_else(|| {
        invalid(format!(
            "Invalid value for field '{field}': {}. Must be an object.",
            json_kind(v)
        ))
    })
}

/// Refuses members of `o` that are not in `allowed`, as GCE's JSON parser does.
pub(crate) fn known_fields(
    o: &Map<String, Value>,
    field: &str,
    allowed: &[&str],
) -> Result<(), ApiError> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(invalid(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\" at '{field}': Cannot find field."
        ))),
        None => Ok(()),
    }
}

/// What a JSON value is, for error messages (never the value itself, which may be huge).
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The optional string `key` of `o` (`field` names it in errors): absent and `null` are `None`,
/// another type is a 400.
pub(crate) fn opt_str<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'a str>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(invalid(format!(
            "Invalid value for field '{field}': {}. Must be a string.",
            json_kind(other)
        ))),
    }
}

/// The optional list `key` of `o` (`field` names it in errors): absent and `null` are empty,
/// another type is a 400.
pub(crate) fn opt_list<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<&'a [Value], ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(invalid(format!(
            "Invalid value for field '{field}': {}. Must be a list.",
            json_kind(other)
        ))),
    }
}

/// The fingerprint a `set*` call supplies must be the current one: Compute Engine requires it
/// (optimistic locking) and answers 412 `conditionNotMet` when it is missing or stale.
pub(crate) fn check_fingerprint(
    supplied: Option<&str>,
    current: &str,
    what: &str,
) -> Result<(), ApiError> {
    match supplied {
        Some(fp) if fp == current => Ok(()),
        Some(_) => Err(stale_fingerprint(what)),
        None => Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "conditionNotMet",
            format!("Required field '{what}.fingerprint' not specified: the current {what} fingerprint must be supplied."),
        )),
    }
}

/// The most metadata (keys and values together) an instance or project holds.
const MAX_METADATA_BYTES: usize = 512 * 1024;

/// Parses GCE's Metadata (`{"items": [{"key", "value"}], "fingerprint", "kind"}`) at `field`
/// of a body: its items and the fingerprint supplied.
pub(crate) fn parse_metadata(
    v: &Value,
    field: &str,
) -> Result<(BTreeMap<String, String>, Option<String>), ApiError> {
    let o = object(v, field)?;
    known_fields(o, field, &["items", "fingerprint", "kind"])?;
    let mut items = BTreeMap::new();
    let list = opt_list(o, "items", &format!("{field}.items"))?;
    let mut total = 0usize;
    for (i, item) in list.iter().enumerate() {
        let at = format!("{field}.items[{i}]");
        let item = object(item, &at)?;
        known_fields(item, &at, &["key", "value"])?;
        let key = opt_str(item, "key", &format!("{at}.key"))?
            .ok_or_else(|| required(&format!("{at}.key")))?;
        let key_ok = !key.is_empty()
            && key.len() <= 128
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !key_ok {
            return Err(invalid(format!(
                "Invalid value for field '{at}.key': '{key}'. Must be a match of regex '[a-zA-Z0-9-_]{{1,128}}'"
            )));
        }
        let value = opt_str(item, "value", &format!("{at}.value"))?.unwrap_or_default();
        if value.len() > 256 * 1024 {
            return Err(invalid(format!(
                "Invalid value for field '{at}.value': longer than 256 KiB"
            )));
        }
        total = total.saturating_add(key.len() + value.len());
        if total > MAX_METADATA_BYTES {
            return Err(invalid(format!(
                "Invalid value for field '{field}': the total size of all keys and values must be less than 512 KiB"
            )));
        }
        if items.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(invalid(format!("Duplicate metadata key '{key}'")));
        }
    }
    let fingerprint = opt_str(o, "fingerprint", &format!("{field}.fingerprint"))?;
    Ok((items, fingerprint.map(str::to_owned)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rfc1035() {
        assert!(check_name("node-1").is_ok());
        for bad in ["", "Node", "1node", "node-", "a_b", &"a".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_items_parse_and_reject_bad_keys() {
        let (items, fp) = parse_metadata(
            &json!({"items": [{"key": "ssh-keys", "value": "u:k"}], "fingerprint": "abc"}),
            "metadata",
        )
        .unwrap();
        assert_eq!(items["ssh-keys"], "u:k");
        assert_eq!(fp.as_deref(), Some("abc"));
        let bad = |v: Value| parse_metadata(&v, "metadata").unwrap_err();
        assert!(bad(json!({"items": [{"key": "a b", "value": ""}]}))
            .message
            .contains("metadata.items[0].key"));
        assert!(bad(json!({"items": [{"key": "a"}, {"key": "a"}]}))
            .message
            .contains("Duplicate"));
        // A body of the wrong shape is refused, not read as "no items".
        for v in [
            json!(null),
            json!(7),
            json!("items"),
            json!([]),
            json!(true),
        ] {
            let e = bad(v.clone());
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{v}");
            assert!(e.message.contains("'metadata'"), "{v}: {}", e.message);
        }
        assert!(bad(json!({"items": "x"}))
            .message
            .contains("metadata.items"));
        assert!(bad(json!({"items": [7]}))
            .message
            .contains("metadata.items[0]"));
        assert!(bad(json!({"items": [{"key": "a", "value": 1}]}))
            .message
            .contains("metadata.items[0].value"));
        assert!(bad(json!({"fingerprint": 5}))
            .message
            .contains("fingerprint"));
        assert!(bad(json!({"itemz": []})).message.contains("itemz"));
        let big = "x".repeat(200 * 1024);
        let items: Vec<Value> = (0..3)
            .map(|i| json!({"key": format!("k{i}"), "value": big}))
            .collect();
        assert!(bad(json!({ "items": items })).message.contains("512 KiB"));
    }

    #[test]
    fn fingerprints_are_required_and_must_be_current() {
        assert!(check_fingerprint(Some("a"), "a", "metadata").is_ok());
        for supplied in [None, Some("b")] {
            let e = check_fingerprint(supplied, "a", "metadata").unwrap_err();
            assert_eq!(e.status, StatusCode::PRECONDITION_FAILED);
            assert_eq!(
                error_body(&e)["error"]["errors"][0]["reason"],
                "conditionNotMet"
            );
        }
    }
}
