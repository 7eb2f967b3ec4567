//! Reading Octavia request bodies: the object under one key (`{"listener": {...}}`) with only
//! the attributes the call takes, read field by field with Octavia's types and ranges. Every
//! refusal is a 400 whose `faultstring` names the field (`Invalid input for field/attribute
//! delay. Value: '-1'. Value should be between 0 and 2147483647`), as Octavia's WSME layer
//! answers, so no number reaches the data plane unchecked.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{Map, Value};

use super::super::{parse_body, ApiError};
use crate::model::octavia::{Common, Octavia};

pub(crate) use crate::model::octavia::MAX_TIMEOUT_MS;
/// The largest integer Octavia stores (its database columns are 32-bit).
pub(crate) const MAX_INT: i64 = 2_147_483_647;

pub(super) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid input for field/attribute {}",
        message.into()
    ))
}

/// The attributes every Octavia object takes (members and monitors have no description).
pub(super) const COMMON_FIELDS: [&str; 4] = ["name", "description", "admin_state_up", "tags"];

/// One object of a request body.
#[derive(Debug, Clone)]
pub(super) struct Body {
    o: Map<String, Value>,
}

impl Body {
    /// The object under `key` of `body`, refusing attributes not in `allowed`.
    pub fn parse(body: &[u8], key: &str, allowed: &[&str]) -> Result<Body, ApiError> {
        let v: Value = parse_body(body)?;
        let Some(Value::Object(o)) = v.get(key).cloned() else {
            return Err(invalid(format!("{key}. Value: missing")));
        };
        Body::of(o, key, allowed)
    }

    /// As [`Body::parse`], allowing the common attributes and `extra`.
    pub fn parse_common(body: &[u8], key: &str, extra: &[&str]) -> Result<Body, ApiError> {
        let mut allowed = COMMON_FIELDS.to_vec();
        allowed.extend_from_slice(extra);
        Body::parse(body, key, &allowed)
    }

    /// `o`, an element of `key` in a body, refusing attributes not in `allowed`.
    pub fn of(o: Map<String, Value>, key: &str, allowed: &[&str]) -> Result<Body, ApiError> {
        if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(invalid(format!(
                "{key}. Unknown attribute for argument {key}: {k}"
            )));
        }
        Ok(Body { o })
    }

    pub fn has(&self, k: &str) -> bool {
        self.o.contains_key(k)
    }

    /// Whether `k` is given with a value other than `null`, `[]` or `{}`.
    pub fn has_value(&self, k: &str) -> bool {
        match self.o.get(k) {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(o)) => !o.is_empty(),
            Some(_) => true,
        }
    }

    /// The raw value, for comparisons with the stored one.
    pub fn raw(&self, k: &str) -> Option<&Value> {
        self.o.get(k)
    }

    pub fn opt_str(&self, k: &str) -> Result<Option<String>, ApiError> {
        match self.o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(invalid(format!(
                "{k}. Value: '{v}'. Value should be string"
            ))),
        }
    }

    pub fn req_str(&self, k: &str) -> Result<String, ApiError> {
        self.opt_str(k)?.ok_or_else(|| missing(k))
    }

    /// An integer in `min..=max`; fractions, strings, NaN-like and out-of-range numbers are
    /// refused.
    pub fn opt_int(&self, k: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
        match self.o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(invalid(format!(
                    "{k}. Value: '{v}'. Value should be between {min} and {max}"
                ))),
            },
        }
    }

    pub fn req_int(&self, k: &str, min: i64, max: i64) -> Result<i64, ApiError> {
        self.opt_int(k, min, max)?.ok_or_else(|| missing(k))
    }

    /// A port number, 1..=65535.
    pub fn opt_port(&self, k: &str) -> Result<Option<u16>, ApiError> {
        Ok(self
            .opt_int(k, 1, 65535)?
            .and_then(|n| u16::try_from(n).ok()))
    }

    pub fn req_port(&self, k: &str) -> Result<u16, ApiError> {
        self.opt_port(k)?.ok_or_else(|| missing(k))
    }

    pub fn opt_bool(&self, k: &str) -> Result<Option<bool>, ApiError> {
        match self.o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(invalid(format!(
                "{k}. Value: '{v}'. Value should be boolean"
            ))),
        }
    }

    /// A list of strings; `null` is absent.
    pub fn opt_str_list(&self, k: &str) -> Result<Option<Vec<String>>, ApiError> {
        match self.o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(invalid(format!(
                        "{k}. Value: '{other}'. Value should be a list of strings"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(invalid(format!(
                "{k}. Value: '{v}'. Value should be a list"
            ))),
        }
    }

    /// A JSON object; `null` is absent.
    pub fn opt_object(&self, k: &str) -> Result<Option<Map<String, Value>>, ApiError> {
        match self.o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o.clone())),
            Some(v) => Err(invalid(format!(
                "{k}. Value: '{v}'. Value should be an object"
            ))),
        }
    }

    /// An object of strings (`insert_headers`).
    pub fn opt_str_map(&self, k: &str) -> Result<Option<BTreeMap<String, String>>, ApiError> {
        let Some(o) = self.opt_object(k)? else {
            return Ok(None);
        };
        o.into_iter()
            .map(|(name, v)| match v {
                Value::String(s) => Ok((name, s)),
                other => Err(invalid(format!(
                    "{k}. Value: '{other}'. Value should be an object of strings"
                ))),
            })
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Some)
    }

    /// A string that must be one of `allowed`.
    pub fn opt_one_of(&self, k: &str, allowed: &[&str]) -> Result<Option<String>, ApiError> {
        let v = self.opt_str(k)?;
        if let Some(v) = &v {
            if !allowed.contains(&v.as_str()) {
                return Err(invalid(format!(
                    "{k}. Value: '{v}'. Value should be one of {allowed:?}"
                )));
            }
        }
        Ok(v)
    }

    pub fn req_one_of(&self, k: &str, allowed: &[&str]) -> Result<String, ApiError> {
        self.opt_one_of(k, allowed)?.ok_or_else(|| missing(k))
    }

    /// An IP address (v4 or v6).
    pub fn opt_ip(&self, k: &str) -> Result<Option<IpAddr>, ApiError> {
        let Some(s) = self.opt_str(k)? else {
            return Ok(None);
        };
        s.parse::<IpAddr>()
            .map(Some)
            .map_err(|_| invalid(format!("{k}. Value: '{s}'. Invalid IP address")))
    }

    pub fn req_ip(&self, k: &str) -> Result<IpAddr, ApiError> {
        self.opt_ip(k)?.ok_or_else(|| missing(k))
    }

    /// A list of CIDRs (`allowed_cidrs`).
    pub fn opt_cidrs(&self, k: &str) -> Result<Option<Vec<String>>, ApiError> {
        let Some(list) = self.opt_str_list(k)? else {
            return Ok(None);
        };
        for c in &list {
            let ok = c.split_once('/').is_some_and(|(a, p)| {
                match (a.parse::<IpAddr>(), p.parse::<u8>()) {
                    (Ok(IpAddr::V4(_)), Ok(p)) => p <= 32,
                    (Ok(IpAddr::V6(_)), Ok(p)) => p <= 128,
                    _ => false,
                }
            });
            if !ok {
                return Err(invalid(format!(
                    "{k}. Value: '{c}'. Value should be a CIDR"
                )));
            }
        }
        Ok(Some(list))
    }

    /// Copies the attributes every object has (`name`, `description`, `admin_state_up`,
    /// `tags`).
    pub fn apply_common(&self, c: &mut Common) -> Result<(), ApiError> {
        if self.has("name") {
            c.name = self.opt_str("name")?.unwrap_or_default();
        }
        if self.has("description") {
            c.description = self.opt_str("description")?.unwrap_or_default();
        }
        if let Some(b) = self.opt_bool("admin_state_up")? {
            c.admin_state_up = b;
        }
        if let Some(tags) = self.opt_str_list("tags")? {
            c.tags = tags;
        }
        Ok(())
    }

    /// 409 when the body changes one of `keys`, which cannot change.
    pub fn immutable(&self, current: &impl Octavia, keys: &[&str]) -> Result<(), ApiError> {
        let view = current.base_view();
        for k in keys {
            if let Some(v) = self.o.get(*k) {
                if v != &view[*k] {
                    return Err(ApiError::conflict(
                        "Conflict",
                        format!("Attribute {k} is immutable and cannot be changed."),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn missing(k: &str) -> ApiError {
    invalid(format!("{k}. Value: 'None'. Mandatory field missing."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Body {
        let Value::Object(o) = v else {
            panic!("not an object")
        };
        Body { o }
    }

    #[test]
    fn numbers_out_of_range_or_of_the_wrong_type_name_the_field() {
        for v in [
            json!(-1),
            json!(1e300),
            json!(2.5),
            json!("5"),
            json!(i64::MAX),
            json!(u64::MAX),
        ] {
            let e = body(json!({ "delay": v }))
                .opt_int("delay", 0, MAX_INT)
                .expect_err("refused");
            assert!(e.message.contains("delay"), "{}", e.message);
        }
        assert_eq!(
            body(json!({"delay": 5})).opt_int("delay", 0, MAX_INT).ok(),
            Some(Some(5))
        );
    }

    #[test]
    fn cidrs_and_lists_are_checked() {
        assert!(body(json!({"c": ["10.0.0.0/8", "::/0"]}))
            .opt_cidrs("c")
            .is_ok());
        for bad in [
            json!(["10.0.0.0/33"]),
            json!(["x"]),
            json!([1]),
            json!("10.0.0.0/8"),
        ] {
            assert!(body(json!({ "c": bad })).opt_cidrs("c").is_err());
        }
    }
}
