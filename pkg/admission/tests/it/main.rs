//! Integration tests of the admission webhook, as one test binary (one link instead of one
//! per file): [`webhook`] sends AdmissionReview fixtures to the router in process,
//! [`apiserver`] has the real kube-apiserver call it over HTTPS.

mod apiserver;
mod webhook;
