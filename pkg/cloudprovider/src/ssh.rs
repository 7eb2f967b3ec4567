//! SSH public keys and user names handed to a cloud (upstream kube-apiserver's `--ssh-user`
//! and `--ssh-keyfile`, `AddSSHKeyToAllInstances`), checked as the real tools check them so
//! nothing else rides along: GCE's `ssh-keys` metadata is one `user:key` entry per line, so a
//! newline in either, or a colon in the user, would add entries of the sender's choosing.
//!
//! A key is one line of `ssh-keygen`'s `.pub` format (`type base64 [comment]`, as OpenSSH's
//! `sshkey_read`): a known type, a blob that decodes and names the same type, a comment
//! without control characters. A user name is a portable one (`useradd`'s
//! `[a-z_][a-z0-9_-]*[$]`, at most 32 characters).

use base64::Engine as _;

/// Key types OpenSSH reads from a `.pub` file (certificates left out: they are not keys to
/// authorise).
pub const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
];

/// The longest key line accepted: an RSA-16384 key is under 3 KiB of base64.
pub const MAX_KEY_LINE_BYTES: usize = 8 << 10;

/// The longest user name (useradd's default `LOGIN_NAME_MAX` use, and GCE's).
pub const MAX_USER_LEN: usize = 32;

/// Why an SSH public key or user name was refused. Messages never quote the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshError {
    /// More than one line (or a carriage return).
    #[error("an SSH public key is one line; this has line breaks inside")]
    MultiLine,
    /// Not text, or over [`MAX_KEY_LINE_BYTES`].
    #[error(
        "not an OpenSSH public key line (UTF-8 text of at most {} bytes)",
        MAX_KEY_LINE_BYTES
    )]
    NotText,
    /// Fewer than two fields.
    #[error("not an OpenSSH public key (`<type> <base64> [comment]`)")]
    Format,
    /// A type OpenSSH does not know.
    #[error("unknown SSH key type (known: {})", KEY_TYPES.join(", "))]
    UnknownType,
    /// The blob is not base64 or does not start with the type named before it.
    #[error("the key data is not base64 of a {0} key")]
    BadBlob(String),
    /// A control character in the comment.
    #[error("the key's comment has a control character")]
    Comment,
    /// A user name outside the portable set.
    #[error("{user:?} is not a valid user name (lower-case letters, digits, '_' and '-', starting with a letter or '_', optionally ending in '$', at most {} characters)", MAX_USER_LEN)]
    User {
        /// The name, cut to [`MAX_USER_LEN`] characters and escaped by `{:?}`.
        user: String,
    },
}

/// A checked public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshPublicKey {
    /// `ssh-ed25519`, ...
    pub key_type: String,
    /// The base64 blob as given.
    pub blob: String,
    /// The comment, if any (single spaces between its words kept as given).
    pub comment: Option<String>,
}

impl SshPublicKey {
    /// Parses the contents of a `.pub` file: one line, an optional final newline.
    pub fn parse(bytes: &[u8]) -> Result<Self, SshError> {
        let text = std::str::from_utf8(bytes).map_err(|_| SshError::NotText)?;
        let line = text
            .strip_suffix('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .unwrap_or(text);
        if line.contains(['\n', '\r']) {
            return Err(SshError::MultiLine);
        }
        if line.len() > MAX_KEY_LINE_BYTES {
            return Err(SshError::NotText);
        }
        let line = line.trim_matches([' ', '\t']);
        let mut fields = line.splitn(3, [' ', '\t']);
        let (Some(key_type), Some(blob)) = (fields.next(), fields.next()) else {
            return Err(SshError::Format);
        };
        if blob.is_empty() {
            return Err(SshError::Format);
        }
        if !KEY_TYPES.contains(&key_type) {
            return Err(SshError::UnknownType);
        }
        let bad = || SshError::BadBlob(key_type.to_owned());
        let raw = base64::engine::general_purpose::STANDARD
            .decode(blob)
            .map_err(|_| bad())?;
        let len = raw
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
            .ok_or_else(bad)? as usize;
        let embedded = raw.get(4..4usize.saturating_add(len)).ok_or_else(bad)?;
        // The type string must be followed by the key material itself.
        if embedded != key_type.as_bytes() || raw.len() <= 4 + len {
            return Err(bad());
        }
        let comment = fields
            .next()
            .map(|c| c.trim_matches([' ', '\t']))
            .filter(|c| !c.is_empty());
        if comment.is_some_and(|c| c.chars().any(char::is_control)) {
            return Err(SshError::Comment);
        }
        Ok(Self {
            key_type: key_type.to_owned(),
            blob: blob.to_owned(),
            comment: comment.map(str::to_owned),
        })
    }

    /// Whether both are the same key (type and blob; comments do not matter to sshd).
    pub fn same_key(&self, other: &Self) -> bool {
        self.key_type == other.key_type && self.blob == other.blob
    }
}

/// Checks a user name as `useradd` does for portable names.
pub fn check_user(user: &str) -> Result<(), SshError> {
    let body = user.strip_suffix('$').unwrap_or(user);
    let mut chars = body.chars();
    let ok = user.len() <= MAX_USER_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(SshError::User {
            user: user.chars().take(MAX_USER_LEN).collect(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A real `ssh-keygen -t ed25519` public key.
    const ED25519: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEi4f6mL8jK/UVooVHPrQrgtpH7wEnDmdRlOjVSrHcW1 me@host";

    #[test]
    fn real_keys_parse() {
        let k = SshPublicKey::parse(format!("{ED25519}\n").as_bytes()).unwrap();
        assert_eq!(k.key_type, "ssh-ed25519");
        assert_eq!(k.comment.as_deref(), Some("me@host"));
        let bare = SshPublicKey::parse(ED25519.rsplit_once(' ').unwrap().0.as_bytes()).unwrap();
        assert!(bare.same_key(&k));
        assert_eq!(bare.comment, None);
    }

    #[test]
    fn injected_and_fake_keys_are_refused() {
        let two = format!("{ED25519}\nevil:ssh-ed25519 AAAA evil");
        assert_eq!(
            SshPublicKey::parse(two.as_bytes()),
            Err(SshError::MultiLine)
        );
        let cr = format!("{ED25519}\revil");
        assert_eq!(SshPublicKey::parse(cr.as_bytes()), Err(SshError::MultiLine));
        for (text, want) in [
            ("", SshError::Format),
            ("ssh-ed25519", SshError::Format),
            ("hello world", SshError::UnknownType),
            (
                "ssh-ed25519 not-base64!",
                SshError::BadBlob("ssh-ed25519".into()),
            ),
            // base64 of an RSA blob under an ed25519 label.
            (
                "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQAB",
                SshError::BadBlob("ssh-ed25519".into()),
            ),
            // The type string and nothing after it.
            (
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5",
                SshError::BadBlob("ssh-ed25519".into()),
            ),
        ] {
            assert_eq!(SshPublicKey::parse(text.as_bytes()), Err(want), "{text:?}");
        }
        let bell = format!("{ED25519} \u{7}");
        assert_eq!(SshPublicKey::parse(bell.as_bytes()), Err(SshError::Comment));
        assert_eq!(SshPublicKey::parse(&[0xff, 0x20]), Err(SshError::NotText));
    }

    #[test]
    fn users_are_portable_names() {
        for ok in ["core", "_x", "a-b_c9", "machine$", &"a".repeat(32)] {
            check_user(ok).unwrap();
        }
        for bad in [
            "",
            "Root",
            "9a",
            "a:b",
            "a\nb",
            "a b",
            "-a",
            "a$b",
            &"a".repeat(33),
            "é",
        ] {
            let err = check_user(bad).unwrap_err();
            assert!(err.to_string().contains("not a valid user name"), "{bad:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever is accepted is one line of three fields at most, and a valid user with it
        /// makes one `user:key` entry: nothing can ride along.
        #[test]
        fn accepted_keys_and_users_make_one_entry(
            key in prop_oneof![
                Just(ED25519.to_string()),
                "[ -~\n\r\t]{0,120}",
                "(ssh-ed25519|ssh-rsa) [A-Za-z0-9+/=]{0,80}( [ -~\n\r]{0,20})?",
            ],
            user in "[ -~\n]{0,40}",
        ) {
            if let Ok(k) = SshPublicKey::parse(key.as_bytes()) {
                let line = format!("{} {} {}", k.key_type, k.blob, k.comment.clone().unwrap_or_default());
                prop_assert!(!line.contains(['\n', '\r']));
                prop_assert!(KEY_TYPES.contains(&k.key_type.as_str()));
            }
            if check_user(&user).is_ok() {
                prop_assert!(!user.contains([':', '\n', ' ']));
                prop_assert!(user.len() <= MAX_USER_LEN);
            }
        }
    }
}
