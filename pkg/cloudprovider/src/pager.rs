//! Following a cloud listing's continuation tokens (EC2 `NextToken`, Compute Engine
//! `nextPageToken`, vSphere's `RetrievePropertiesEx` token, OpenStack `next` links) with a
//! bound: a server that repeats or alternates tokens, or never stops handing out new ones, is
//! an error naming the API and the call instead of thousands of requests a minute and memory
//! that grows until the process dies. Every provider's pagination loop asks one [`Pager`]
//! per listing whether to fetch another page.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

/// The most pages one listing may take: at the page sizes we ask for (500 to 1000 items)
/// that is half a million items or more, beyond any cluster's cloud; a listing that needs
/// more is a server that does not stop.
pub const MAX_PAGES: usize = 1000;

/// How much of a token an error quotes: tokens come from the network.
const TOKEN_EXCERPT: usize = 64;

/// Why a listing was abandoned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PagerError {
    /// A continuation token came back that this listing had already followed.
    #[error("{api} {call}: page {page} repeats continuation token {token}, already followed in this listing; the server's pagination does not end")]
    RepeatedToken {
        /// The cloud API (`ec2`, `compute`, `vim25`, `nova`).
        api: &'static str,
        /// The call (`DescribeInstances`, `zones.list`).
        call: String,
        /// The page that carried it (1-based).
        page: usize,
        /// A short, escaped excerpt of the token.
        token: String,
    },

    /// More pages than [`MAX_PAGES`] (or the pager's own bound).
    #[error("{api} {call}: more than {max} pages; giving up on a listing that does not end")]
    TooManyPages {
        /// The cloud API.
        api: &'static str,
        /// The call.
        call: String,
        /// The bound.
        max: usize,
    },
}

impl PagerError {
    /// The call whose listing was abandoned.
    pub fn call(&self) -> &str {
        match self {
            PagerError::RepeatedToken { call, .. } | PagerError::TooManyPages { call, .. } => call,
        }
    }
}

/// The state of one listing: the tokens followed so far (as keyed hashes, so a server cannot
/// grow our memory with huge tokens nor forge a collision) and the page count.
#[derive(Debug)]
pub struct Pager {
    api: &'static str,
    call: String,
    seen: HashSet<u64>,
    hasher: RandomState,
    pages: usize,
    max: usize,
}

impl Pager {
    /// A listing of `call` on `api`, bounded by [`MAX_PAGES`].
    pub fn new(api: &'static str, call: impl Into<String>) -> Self {
        Pager {
            api,
            call: call.into(),
            seen: HashSet::new(),
            hasher: RandomState::new(),
            pages: 0,
            max: MAX_PAGES,
        }
    }

    /// The same with another bound on pages (at least 1).
    pub fn with_max_pages(mut self, max: usize) -> Self {
        self.max = max.max(1);
        self
    }

    /// Pages read so far.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Records a page just read and its continuation token: `Ok(Some(token))` to fetch the
    /// next page with it, `Ok(None)` when the listing is complete (no token, or an empty one),
    /// an error when the token was followed before or the page bound is reached.
    pub fn next(&mut self, token: Option<&str>) -> Result<Option<String>, PagerError> {
        self.pages += 1;
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        if !self.seen.insert(self.hasher.hash_one(token)) {
            return Err(PagerError::RepeatedToken {
                api: self.api,
                call: self.call.clone(),
                page: self.pages,
                token: excerpt(token),
            });
        }
        if self.pages >= self.max {
            return Err(PagerError::TooManyPages {
                api: self.api,
                call: self.call.clone(),
                max: self.max,
            });
        }
        Ok(Some(token.to_owned()))
    }
}

/// At most [`TOKEN_EXCERPT`] characters of `token`, escaped as a Rust string literal (no
/// control characters reach a log line).
fn excerpt(token: &str) -> String {
    let mut short: String = token.chars().take(TOKEN_EXCERPT).collect();
    if short.len() < token.len() {
        short.push('…');
    }
    format!("{short:?}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_listing_ends_without_a_token_or_with_an_empty_one() {
        let mut p = Pager::new("compute", "zones.list");
        assert_eq!(p.next(Some("a")).unwrap().as_deref(), Some("a"));
        assert_eq!(p.next(Some("b")).unwrap().as_deref(), Some("b"));
        assert_eq!(p.next(None).unwrap(), None);
        assert_eq!(p.pages(), 3);
        assert_eq!(Pager::new("ec2", "X").next(Some("")).unwrap(), None);
    }

    #[test]
    fn a_repeated_token_is_an_error_naming_api_and_call() {
        let mut p = Pager::new("ec2", "DescribeInstances");
        p.next(Some("same")).unwrap();
        let e = p.next(Some("same")).unwrap_err();
        assert!(
            matches!(e, PagerError::RepeatedToken { page: 2, .. }),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.starts_with("ec2 DescribeInstances: page 2 repeats"),
            "{text}"
        );
        assert!(text.contains("\"same\""), "{text}");
    }

    #[test]
    fn alternating_tokens_are_caught_on_the_third_page() {
        let mut p = Pager::new("compute", "zones.list");
        p.next(Some("a")).unwrap();
        p.next(Some("b")).unwrap();
        let e = p.next(Some("a")).unwrap_err();
        assert!(
            matches!(e, PagerError::RepeatedToken { page: 3, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn new_tokens_forever_stop_at_the_bound() {
        let mut p = Pager::new("vim25", "ContinueRetrievePropertiesEx").with_max_pages(5);
        for i in 0..4 {
            assert!(p.next(Some(&format!("t{i}"))).unwrap().is_some());
        }
        let e = p.next(Some("t4")).unwrap_err();
        assert_eq!(
            e,
            PagerError::TooManyPages {
                api: "vim25",
                call: "ContinueRetrievePropertiesEx".into(),
                max: 5
            }
        );
        // The default bound holds too.
        let mut p = Pager::new("nova", "list servers");
        let n = (0..)
            .take_while(|i| p.next(Some(&i.to_string())).is_ok())
            .count();
        assert_eq!(n, MAX_PAGES - 1);
    }

    #[test]
    fn huge_and_hostile_tokens_are_quoted_short_and_escaped() {
        let mut p = Pager::new("compute", "routes.list");
        let token = format!("\n\u{1b}[31m{}", "x".repeat(1 << 20));
        p.next(Some(&token)).unwrap();
        let text = p.next(Some(&token)).unwrap_err().to_string();
        assert!(text.len() < 300, "{}", text.len());
        assert!(!text.chars().any(char::is_control), "{text}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Whatever the server sends, a listing ends within the bound, and it ends with an
        /// error exactly when a token repeats or the bound is reached.
        #[test]
        fn any_token_sequence_ends_within_the_bound(
            tokens in proptest::collection::vec(proptest::option::of("[a-c]{0,2}"), 0..40),
            max in 1usize..30,
        ) {
            let mut p = Pager::new("ec2", "DescribeInstances").with_max_pages(max);
            let mut seen = std::collections::HashSet::new();
            for (i, t) in tokens.iter().enumerate() {
                let r = p.next(t.as_deref());
                let t = t.as_deref().filter(|t| !t.is_empty());
                match (t, r) {
                    (None, Ok(None)) => break,
                    (Some(t), Ok(Some(next))) => {
                        prop_assert_eq!(&next, t);
                        prop_assert!(seen.insert(t.to_owned()));
                        prop_assert!(i + 1 < max);
                    }
                    (Some(t), Err(PagerError::RepeatedToken { .. })) => {
                        prop_assert!(seen.contains(t));
                        break;
                    }
                    (Some(_), Err(PagerError::TooManyPages { .. })) => {
                        prop_assert_eq!(i + 1, max);
                        break;
                    }
                    (t, r) => prop_assert!(false, "token {:?} gave {:?}", t, r),
                }
                prop_assert!(p.pages() <= max);
            }
        }
    }
}
