//! Names the Kubernetes API validates (apimachinery `validation.IsDNS1123Subdomain` and
//! `IsDNS1123Label`), checked where we take them from a flag or a file, so a name the
//! apiserver would refuse is refused at start naming its source instead of failing later.

const SUBDOMAIN_WHY: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_WHY: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

fn label_ok(l: &str) -> bool {
    !l.is_empty()
        && l.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !l.starts_with('-')
        && !l.ends_with('-')
}

/// A DNS-1123 subdomain (object names such as a Lease's): at most 253 characters, lower-case
/// alphanumeric labels separated by `.`, `-` inside labels. `Err` says why, as the apiserver.
pub fn dns1123_subdomain(name: &str) -> Result<(), String> {
    if name.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    if name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(SUBDOMAIN_WHY.into())
    }
}

/// A DNS-1123 label (namespace names): at most 63 characters, lower-case alphanumeric and
/// `-`, starting and ending alphanumeric.
pub fn dns1123_label(name: &str) -> Result<(), String> {
    if name.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    if label_ok(name) {
        Ok(())
    } else {
        Err(LABEL_WHY.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_and_labels_as_the_apiserver() {
        for ok in [
            "a",
            "kube-system",
            "cloud-controller-manager",
            "a.b-c.d0",
            "0",
        ] {
            dns1123_subdomain(ok).expect(ok);
        }
        for bad in [
            "", "A", "a/b", "../etc", "a..b", "-a", "a-", ".a", "a b", "a\nb", "é",
        ] {
            assert!(dns1123_subdomain(bad).is_err(), "{bad:?}");
        }
        assert!(dns1123_subdomain(&"a".repeat(254)).is_err());
        dns1123_subdomain(&["a".repeat(63), "b".repeat(63)].join(".")).expect("two labels");
        for ok in ["kube-system", "default", "a1"] {
            dns1123_label(ok).expect(ok);
        }
        for bad in ["", "a.b", "a/b", "Kube", "-a", "a-", "a_b"] {
            assert!(dns1123_label(bad).is_err(), "{bad:?}");
        }
        assert!(dns1123_label(&"a".repeat(64)).is_err());
        dns1123_label(&"a".repeat(63)).expect("63");
    }
}
