//! What the AWS SDK reads by itself (credential and setting variables, the shared config and
//! credentials files, token files), checked before the SDK sees it: the SDK builds HTTP headers
//! from these values and panics on a control character (a credential ending in a stray
//! newline), and it reads the files whole, so `/dev/zero` would exhaust memory and a FIFO hang
//! start-up. Refusals name the variable, file or line, never the value: it may be a secret.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use hypercloud_cloudprovider::input::{self, InputFileError, MAX_INPUT_FILE_BYTES};
use hypercloud_cloudprovider::{Error, Result};

use crate::PROVIDER_NAME;

/// Variables (and shared-file keys, lower-case) that hold credentials: printable ASCII only.
const CREDENTIALS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
];

/// Variables naming token files the SDK reads.
const TOKEN_FILES: &[&str] = &[
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
];

fn invalid(setting: impl Into<String>, message: impl Into<String>) -> Error {
    Error::InvalidSetting {
        provider: PROVIDER_NAME.into(),
        setting: setting.into(),
        message: message.into(),
        source: None,
    }
}

fn unreadable(e: InputFileError) -> Error {
    Error::unreadable_file(PROVIDER_NAME, e)
}

fn printable(value: &str) -> bool {
    value.bytes().all(|b| b.is_ascii_graphic())
}

/// Checks the process environment and the files it (or the defaults) name.
pub(crate) fn check() -> Result<()> {
    check_vars(std::env::vars_os())?;
    let home = std::env::home_dir();
    for (var, default) in [
        ("AWS_CONFIG_FILE", ".aws/config"),
        ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"),
    ] {
        let (name, path) = match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(p) => (var.to_owned(), PathBuf::from(p)),
            None => match &home {
                Some(h) => (format!("~/{default}"), h.join(default)),
                None => continue,
            },
        };
        // Absent: the SDK goes without it too.
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let text =
            input::read_named_text(&name, &path, MAX_INPUT_FILE_BYTES).map_err(unreadable)?;
        for token_file in check_shared_file(&name, &text)? {
            check_token_file(&format!("{name}: web_identity_token_file"), &token_file)?;
        }
    }
    for var in TOKEN_FILES {
        if let Some(p) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            check_token_file(var, Path::new(&p))?;
        }
    }
    Ok(())
}

/// Every `AWS_*` variable: UTF-8 without control characters; credentials printable ASCII.
fn check_vars(vars: impl Iterator<Item = (OsString, OsString)>) -> Result<()> {
    for (name, value) in vars {
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("AWS_") {
            continue;
        }
        let Some(value) = value.to_str() else {
            return Err(invalid(name, "the value is not UTF-8"));
        };
        if CREDENTIALS.contains(&name) {
            if !printable(value) {
                return Err(invalid(
                    name,
                    "a credential is printable ASCII without spaces; this value has other characters (a line break or control character?)",
                ));
            }
        } else if value.chars().any(char::is_control) {
            return Err(invalid(name, "the value has a control character"));
        }
    }
    Ok(())
}

/// A shared config or credentials file: no control characters on any line (the SDK puts
/// profile values in headers), credentials printable; returns the `web_identity_token_file`s.
fn check_shared_file(name: &str, text: &str) -> Result<Vec<PathBuf>> {
    let mut token_files = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let at = || format!("{name} line {}", i + 1);
        if line.chars().any(|c| c.is_control() && c != '\t') {
            return Err(invalid(at(), "has a control character"));
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
        if CREDENTIALS.iter().any(|c| c.eq_ignore_ascii_case(&key)) && !printable(value) {
            return Err(invalid(
                format!("{} ({key})", at()),
                "a credential is printable ASCII without spaces",
            ));
        }
        if key == "web_identity_token_file" && !value.is_empty() {
            token_files.push(PathBuf::from(value));
        }
    }
    Ok(token_files)
}

/// A token file: bounded, a regular file, a printable token.
fn check_token_file(what: &str, path: &Path) -> Result<()> {
    let token = input::read_named_text(what, path, MAX_INPUT_FILE_BYTES).map_err(unreadable)?;
    if !printable(token.trim()) {
        return Err(invalid(
            what,
            format!(
                "the token in {} has characters other than printable ASCII",
                path.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> impl Iterator<Item = (OsString, OsString)> {
        list.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn control_characters_in_aws_variables_are_refused_by_name_without_the_value() {
        check_vars(vars(&[
            ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "wJalr/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            ("AWS_REGION", "us-east-1"),
            ("PATH", "a\nb"),
        ]))
        .unwrap();
        for (name, value) in [
            ("AWS_SECRET_ACCESS_KEY", "sec\nret"),
            ("AWS_ACCESS_KEY_ID", "AKIA\t"),
            ("AWS_SESSION_TOKEN", "tok en"),
            ("AWS_REGION", "us-east-1\n"),
            ("AWS_PROFILE", "p\u{7f}"),
            ("AWS_ENDPOINT_URL", "http://x\r\n"),
        ] {
            let err = check_vars(vars(&[(name, value)])).unwrap_err().to_string();
            assert!(err.starts_with(&format!("aws: {name}: ")), "{err}");
            assert!(!err.contains(value.trim()), "{err}");
        }
    }

    #[test]
    fn shared_files_are_checked_line_by_line() {
        let ok = "[default]\nregion = us-east-1\r\naws_secret_access_key = abc/def+g\nweb_identity_token_file = /t\n";
        assert_eq!(
            check_shared_file("~/.aws/config", ok).unwrap(),
            vec![PathBuf::from("/t")]
        );
        let err = check_shared_file("~/.aws/config", "[default]\nregion = us\u{1}\n")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "aws: ~/.aws/config line 2: has a control character");
        let err = check_shared_file("F", "[p]\nAWS_SECRET_ACCESS_KEY = a b\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("aws: F line 2 (aws_secret_access_key)"),
            "{err}"
        );
    }

    #[test]
    fn token_files_are_bounded_regular_files() {
        let err =
            check_token_file("AWS_WEB_IDENTITY_TOKEN_FILE", Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            hypercloud_cloudprovider::Chain(&err).to_string(),
            "aws: AWS_WEB_IDENTITY_TOKEN_FILE: cannot read /dev/zero: not a regular file (a character device)"
        );
    }
}
