//! Long-running operations, as Microsoft's clients follow them (docs/azure-clients.md,
//! "Long-running operations"): poll `Azure-AsyncOperation` if the first answer names one,
//! else `Location`, else (PUT and PATCH) the resource's own `provisioningState`; the first poll
//! at once, then after each answer's `Retry-After` (or [`DEFAULT_POLL`]), all within the
//! client's operation timeout. An operation `Failed` or `Canceled` is
//! [`Error::OperationFailed`] with its `error`; a PUT or PATCH ends with a GET of the resource.
//! The pauses follow the server rather than [`hypercloud_cloudprovider::wait`]'s back-off:
//! ARM says when to ask again.

use std::time::Duration;

use tokio::time::Instant;

use azure_core::http::{Method, Url};
use bytes::Bytes;
use hypercloud_cloudprovider::http_body::{excerpt, excerpt_str, OBJECT_LIMIT};
use hypercloud_cloudprovider::wait::TimedOut;
use serde_json::Value;

use super::{error_of, Answer, Arm};
use crate::error::{Error, Result};

/// The pause between polls when the server names none.
pub(super) const DEFAULT_POLL: Duration = Duration::from_secs(5);
/// Bounds of a server's `Retry-After` between polls.
const MIN_POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(60);

/// What is polled.
#[derive(Debug, Clone)]
enum Poll {
    /// `Azure-AsyncOperation`: a status document.
    AsyncOperation(Url),
    /// `Location`: 202 while running, 200/204 when done.
    Location(Url),
    /// The resource itself, until its `provisioningState` is terminal.
    ProvisioningState(Url),
}

/// What a poll found.
enum Seen {
    Done,
    Running(String),
}

fn is_terminal_failure(status: &str) -> bool {
    status.eq_ignore_ascii_case("Failed") || status.eq_ignore_ascii_case("Canceled")
}

impl Arm {
    /// The poll of an initial answer, if it asks for one.
    fn poll_of(&self, op: &str, initial: &Answer) -> Result<Option<Poll>> {
        if let Some(link) = initial.header("azure-asyncoperation") {
            return Ok(Some(Poll::AsyncOperation(Self::link(
                link,
                "Azure-AsyncOperation",
                op,
            )?)));
        }
        if let Some(link) = initial.header("location") {
            return Ok(Some(Poll::Location(Self::link(link, "Location", op)?)));
        }
        Ok(None)
    }

    /// After the first answer to a PUT or PATCH: polls as it says, and returns the body of
    /// the resource once done.
    pub(super) async fn finish_change(
        &self,
        op: &str,
        url: &Url,
        initial: Answer,
    ) -> Result<Bytes> {
        let state = provisioning_state(&initial.body);
        let poll = match self.poll_of(op, &initial)? {
            Some(p) => p,
            None => match state.as_deref() {
                Some(s) if is_terminal_failure(s) => {
                    let (code, message) = error_of(&initial.body);
                    return Err(Error::OperationFailed {
                        operation: op.into(),
                        status: excerpt_str(s),
                        code,
                        message,
                    });
                }
                Some(s) if !s.eq_ignore_ascii_case("Succeeded") => {
                    Poll::ProvisioningState(url.clone())
                }
                // Done at once (a 200 or 201 without a state is taken as done, as
                // azure-core does); an empty body is read from the resource.
                _ if initial.status == 202 => Poll::ProvisioningState(url.clone()),
                _ if initial.body.iter().all(u8::is_ascii_whitespace) => {
                    return self.final_get(op, url).await
                }
                _ => return Ok(initial.body),
            },
        };
        self.wait(op, poll, initial.retry_after()).await?;
        self.final_get(op, url).await
    }

    async fn final_get(&self, op: &str, url: &Url) -> Result<Bytes> {
        Ok(self
            .send(Method::Get, url, None, op, OBJECT_LIMIT)
            .await?
            .body)
    }

    /// After the first answer to a DELETE or POST action: polls if it names a URL to.
    pub(super) async fn finish_action(&self, op: &str, initial: Answer) -> Result<()> {
        match self.poll_of(op, &initial)? {
            Some(poll) => self.wait(op, poll, initial.retry_after()).await,
            None => Ok(()),
        }
    }

    /// Polls until done, failed, or the operation timeout.
    async fn wait(&self, op: &str, poll: Poll, mut retry_after: Option<Duration>) -> Result<()> {
        let started = Instant::now();
        let deadline = started + self.operation_timeout;
        let mut state = String::new();
        let mut polls = 0u32;
        let timed_out = |state: String, polls: u32| Error::OperationTimedOut {
            operation: op.into(),
            source: TimedOut {
                state,
                waited: started.elapsed(),
                polls,
            },
        };
        loop {
            if polls > 0 {
                let pause = retry_after.map_or(DEFAULT_POLL, |d| d.clamp(MIN_POLL, MAX_POLL));
                let left = deadline.saturating_duration_since(Instant::now());
                if pause >= left {
                    tokio::time::sleep(left).await;
                    return Err(timed_out(state, polls));
                }
                tokio::time::sleep(pause).await;
            }
            polls += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let seen = match tokio::time::timeout(left, self.poll_once(op, &poll)).await {
                Ok(seen) => seen?,
                Err(_) => return Err(timed_out(state, polls)),
            };
            match seen {
                (Seen::Done, _) => return Ok(()),
                (Seen::Running(s), after) => {
                    state = s;
                    retry_after = after;
                }
            }
        }
    }

    async fn poll_once(&self, op: &str, poll: &Poll) -> Result<(Seen, Option<Duration>)> {
        let url = match poll {
            Poll::AsyncOperation(u) | Poll::Location(u) | Poll::ProvisioningState(u) => u,
        };
        let a = self.send(Method::Get, url, None, op, OBJECT_LIMIT).await?;
        let after = a.retry_after();
        let seen = match poll {
            Poll::Location(_) if a.status == 202 => Seen::Running("Accepted".into()),
            Poll::Location(_) => Seen::Done,
            Poll::AsyncOperation(_) => {
                let v: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
                let Some(status) = v["status"].as_str() else {
                    return Err(Error::Protocol {
                        operation: op.into(),
                        message: format!(
                            "the operation status has no status: {}",
                            excerpt(&a.body)
                        ),
                    });
                };
                self.status_seen(op, status, &a.body)?
            }
            Poll::ProvisioningState(_) => match provisioning_state(&a.body) {
                // No state at all is done, as azure-core takes it.
                None => Seen::Done,
                Some(s) => self.status_seen(op, &s, &a.body)?,
            },
        };
        Ok((seen, after))
    }

    fn status_seen(&self, op: &str, status: &str, body: &[u8]) -> Result<Seen> {
        if status.eq_ignore_ascii_case("Succeeded") {
            Ok(Seen::Done)
        } else if is_terminal_failure(status) {
            let (code, message) = error_of(body);
            Err(Error::OperationFailed {
                operation: op.into(),
                status: excerpt_str(status),
                code,
                message,
            })
        } else {
            Ok(Seen::Running(status.chars().take(32).collect()))
        }
    }
}

/// `properties.provisioningState` of a resource body, if it has one.
fn provisioning_state(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v["properties"]["provisioningState"]
        .as_str()
        .map(str::to_owned)
}
